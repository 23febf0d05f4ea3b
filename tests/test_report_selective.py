"""Selective trust in the reports: the markdown section, the human queue in triage, and the
reliability and coverage charts (well-formed SVG, one mark per non-empty bin)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from groundjudge.calibrate.cascade import cutoffs_for, decide
from groundjudge.calibrate.trust import TrustRules
from groundjudge.gate import GateReport, evaluate_gates
from groundjudge.judge.results import JudgeRun
from groundjudge.provenance import provenance
from groundjudge.report.charts import coverage_curve, reliability_diagram
from groundjudge.report.document import (
    Accounting,
    CalibrationSummary,
    CriterionAgreement,
    MetricsSettings,
    Provenance,
    ReportDocument,
)
from groundjudge.report.selective_section import queue_lines, render_selective_markdown
from groundjudge.report.triage import render_triage_markdown
from tests.test_calibrate_cascade import FIRST, FIRST_RUN, GATES, HUMANS, record
from tests.test_gate import metrics

SVG = "{http://www.w3.org/2000/svg}"


def report(judge: JudgeRun, gates: GateReport, calibration: CalibrationSummary | None) -> ReportDocument:
    """The typed report of a run with this judge, these gates and this calibration (no metrics)."""
    return ReportDocument(
        provenance=Provenance.model_validate(provenance()), inputs={}, settings=MetricsSettings(ks=[]),
        configs=list(judge.per_config),
        accounting=Accounting(cases=0, scored={}, missing_trace={}, missing_text={}, unresolved_chunk_ids={}),
        aggregate={}, per_config={}, judge=judge, gates=gates, calibration=calibration, escalation=None)


def document() -> ReportDocument:
    rec = record()
    trust = decide(FIRST_RUN, cutoffs_for(FIRST, [rec]), humans=HUMANS)
    gates = evaluate_gates(metrics(), FIRST_RUN, GATES, TrustRules(min_coverage=0.8), [rec], trust)
    criteria = {name: {"judge_vs_human": st["judge_vs_human"], "inter_rater": st["inter_rater"],
                       **({"selective": st["selective"]} if "selective" in st else {})}
                for name, st in rec["criteria"].items()}
    return report(FIRST_RUN, gates, CalibrationSummary.model_validate(
        {"path": rec["_path"], "primary_rater": "alice", "raters": {}, "criteria": criteria, "claims": {}}))


def test_report_md_states_sources_level_old_rule_queue_and_figures() -> None:
    doc = document()
    text = render_selective_markdown(doc)
    assert "## Selective trust" in text
    assert "| `small-judge` | faithful | 0.61 | 0.9 | 0.1 | 0.800 (n=100) |" in text
    # q0-q5 trusted, q8 human, q6 q7 q9 queued (no escalation judge)
    assert "| cand | faithful | 10 | 6 | 0 | 1 | 3 | 0.700 | 0.857 | >= 0.914 (prob. >= 0.90) |" in text
    assert "under the all-or-nothing rule" in text and "on all 10 verdicts" in text
    assert "### Human queue (3 item(s))" in text and "- `q7` (cand): faithful" in text
    assert "#### `faithful`: calibration figures" in text and "Expected calibration error" in text
    assert "| 0.61 | 80 | 0.800 | 1.000 |" in text and "| 0.6 | 100 | 1.000 | 0.900 |" in text
    triage = render_triage_markdown([], doc)
    assert "### Human queue (3 item(s))" in triage
    without = doc.model_copy(update={"gates": doc.gates.model_copy(update={"selective": None})})
    assert render_selective_markdown(without) == "" and queue_lines(without.gates.selective) == []


def test_reliability_and_coverage_charts_are_well_formed_svg() -> None:
    block = record()["criteria"]["faithful"]["selective"]
    svg = ET.fromstring(reliability_diagram("faithful <reliability>", block["reliability"]["bins"],
                                            ece=block["reliability"]["ece"]))
    non_empty = [b for b in block["reliability"]["bins"] if b["n"]]
    assert len(svg.findall(f"{SVG}circle")) == len(non_empty) == 2
    assert svg.find(f"{SVG}title").text.startswith("faithful <reliability> (ECE")  # escaped, then parsed back
    fit = block["cutoff"]
    curve = ET.fromstring(coverage_curve("coverage", fit["curve"], fit["n"], target=0.9, cutoff=fit["cutoff"]))
    lines = curve.findall(f"{SVG}polyline")
    assert len(lines) == 2  # agreement among kept items, and the lower bound where tested
    assert len(lines[0].get("points").split()) == len({p["kept"] for p in fit["curve"] if p["kept"]})
    assert len(curve.findall(f"{SVG}circle")) == 1  # the chosen cut-off
    none = ET.fromstring(coverage_curve("coverage", fit["curve"], fit["n"], target=0.9, cutoff=None))
    assert not none.findall(f"{SVG}circle") and "no lambda" in ET.tostring(none, encoding="unicode")


def test_the_queue_says_why_and_ordinal_criteria_read_as_grades() -> None:
    from groundjudge.cli import triage as triage_command
    from groundjudge.report.triage import KINDS
    from tests.test_calibrate_cascade import (
        ORDINAL_FIRST,
        ORDINAL_HUMANS,
        ORDINAL_SECOND,
        SECOND,
        ordinal_record,
    )

    text = "\n".join(queue_lines(document().gates.selective))
    assert "- `q7` (cand): faithful — faithful: `small-judge` (first): verdict confidence 0.600 < lambda 0.61" in text

    records = [ordinal_record(), ordinal_record(SECOND)]
    trust = decide(ORDINAL_FIRST, cutoffs_for(FIRST, records), escalation=ORDINAL_SECOND,
                   escalation_cutoffs=cutoffs_for(SECOND, records), humans=ORDINAL_HUMANS)
    gates = evaluate_gates(metrics(), ORDINAL_FIRST, GATES, TrustRules(min_coverage=0.8), records, trust)
    selective = ordinal_record()["criteria"]["correct"]["selective"]
    doc = report(ORDINAL_FIRST, gates, CalibrationSummary(
        path="", primary_rater="", raters={}, claims={},
        criteria={"correct": CriterionAgreement(judge_vs_human={}, inter_rater={}, selective=selective)}))
    text = render_selective_markdown(doc)
    assert "| `small-judge` | faithful | – | all-or-nothing rule: no confidence per verdict" in text
    assert "agrees with people only on the exact grade" in text
    assert "| cand | correct | 9 | 6 | 1 | 1 | 1 | 0.889 | 2.750 |" in text
    assert ("`large-judge` (escalation): verdict confidence 0.300 < lambda 0.41" in text
            and "#### `correct`: calibration figures" in text and "Kappa-maximising" not in text)

    row = {"config_id": "cand", "case_id": "q8", "question": "Q?", "answer": "A.", "tags": [],
           "kind": "awaits_person", "awaits": "a person's label", "criteria": ["correct"], "why": "correct: x",
           "reasons": [], "retrieval": {"gold_chunks": []}}
    triage = render_triage_markdown([row])
    assert "- **awaits a person** (correct): no trusted judge settled it — correct: x" in triage
    assert "0 finding(s)" in triage and "1 item(s) await a person's label" in triage
    kind_option = next(p for p in triage_command.params if p.name == "kinds")
    assert tuple(kind_option.type.choices) == KINDS  # the CLI offers every kind triage writes
