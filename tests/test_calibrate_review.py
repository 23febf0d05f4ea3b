"""Disagreement review (calibrate/review.py): labelled answers built to hit each cause, judged
by claim_check through a scripted server, calibrated, and shown in the record, the printed
output and the run's HTML."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.calibrate.review import CAUSE_KEYS, STRICT, HumanSpan, classify, numbers_and_names
from groundjudge.cli import main
from groundjudge.judge.claim_result import ClaimResult
from tests.support.openai_server import Reply, ScriptedOpenAIServer

PASSAGE = "Full-time staff get 18 days of annual leave after three years. Leave requests go to the line manager."
QUESTION = "How much leave do staff get?"
HOSTILE = "<script>alert(1)</script> Leave | goes to Initech in 2030 via ACME."

# case id -> (answer, people say faithful, marked span text or None). Case ids sort in the
# order the review lists its examples.
CASES: dict[str, tuple[str, bool, str | None]] = {
    "a1-paraphrase": ("Workers receive their holiday allowance once employed.", True, None),
    "a2-paraphrase-asked": ("Workers receive holiday leave after three years.", True, None),
    "a3-paraphrase-agreed": ("Workers obtain generous vacation entitlements.", False,
                             "Workers obtain generous vacation entitlements."),
    "b1-number-name": ("Full-time staff get 20 days of annual leave at Globex from HMRC.", True, None),
    "b2-number-agreed": ("Full-time staff get 25 days of annual leave at Initech from IBM.", False, "25 days"),
    "b0-hostile": (HOSTILE, True, None),
    "c1-accepted": ("Full-time staff get 18 days of annual leave. Leave requests go to the regional director.",
                    False, "regional director"),
    "d1-refusal": ("Full-time staff get 18 days of annual leave. The passages do not mention part-time staff.",
                   False, "The passages do not mention part-time staff."),
    "e1-rejected": ("Full-time staff get annual leave swiftly.", True, None),
    "f1-unchecked-heading": ("Leave policy for contractors:\nFull-time staff get 18 days of annual leave.", False,
                             "Leave policy for contractors:"),
    "g1-agree": ("Full-time staff get 18 days of annual leave.", True, None),
}
# The scripted judge's P(yes) per statement asked; 0.9 for any other.
P_YES = {
    "Workers receive holiday leave after three years.": 0.6,  # 3 unfound terms: 0.6 x 0.343 < 0.25
    "Full-time staff get 20 days of annual leave at Globex from HMRC.": 0.6,
    "Full-time staff get 25 days of annual leave at Initech from IBM.": 0.6,
    "Full-time staff get annual leave swiftly.": 0.2,  # 1 unfound term, and the model says no
    "Leave requests go to the regional director.": 0.9,  # 2 unfound terms: 0.9 x 0.49 >= 0.25, accepted
}


def script(body: dict[str, Any], index: int) -> Reply:
    from tests.support.judge_replies import claim_statement

    p = P_YES.get(claim_statement(body), 0.9)
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=((("Yes", math.log(p)), ("No", math.log(1 - p))),))


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> dict[str, Any]:
    """The cases judged by claim_check v4, calibrated against their labels, then run again so the
    run's report reads the new record."""
    tmp = tmp_path_factory.mktemp("review")
    golden = _write(tmp / "golden.jsonl", [{"id": c, "question": QUESTION} for c in CASES])
    corpus = _write(tmp / "corpus.jsonl", [{"chunk_id": f"{c}#p1", "doc_id": c, "text": PASSAGE} for c in CASES])
    traces = _write(tmp / "traces.jsonl", [
        {"query_id": c, "config_id": "sys", "question": QUESTION, "answer": answer,
         "retrieved_chunks": [{"chunk_id": f"{c}#p1", "rank": 1}], "context_chunks": [{"chunk_id": f"{c}#p1"}],
         "citations": []} for c, (answer, _, _) in CASES.items()])
    labels = []
    for c, (answer, faithful, span) in CASES.items():
        spans = [] if span is None else [{"start": answer.index(span), "end": answer.index(span) + len(span),
                                          "text": span, "label_type": "Evident Baseless Info"}]
        labels.append({"query_id": c, "config_id": "sys", "rater": "ann", "faithful": faithful, "spans": spans})
    label_file = _write(tmp / "labels.jsonl", labels)
    config = tmp / "gj.toml"
    config.write_text(f'[inputs]\ngolden = "{golden}"\ntraces = ["{traces}"]\ncorpus = "{corpus}"\n'
                      f'labels = ["{label_file}"]\n[judge]\nrubric = "claim_check"\nrubric_version = 4\n'
                      f'[cache]\ndir = "{tmp / "cache"}"\n[trust]\nrecords_dir = "{tmp / "records"}"\n',
                      encoding="utf-8")
    with ScriptedOpenAIServer(script) as srv:
        judge = ["--config", str(config), "--judge-base-url", srv.base_url, "--judge-model", srv.model]
        first = CliRunner().invoke(main, ["run", *judge, "--out", str(tmp / "run"), "--no-history", "--quiet"])
        assert first.exit_code in (0, 1), first.output
        asked = len(srv.requests)
        printed = CliRunner().invoke(main, ["calibrate", "--config", str(config),
                                            "--report", str(tmp / "run" / "report.json")])
        assert printed.exit_code == 0, printed.output
        again = CliRunner().invoke(main, ["run", *judge, "--out", str(tmp / "run2"), "--no-history", "--quiet"])
        assert again.exit_code in (0, 1), again.output
        calls = len(srv.requests) - asked
    (record_path,) = (tmp / "records").glob("*.json")
    record = json.loads(record_path.read_text())
    return {"record": record, "printed": printed.output, "tmp": tmp, "calls": calls,
            "html": (tmp / "run2" / "report.html").read_text(encoding="utf-8"),
            "markdown": (tmp / "run2" / "report.md").read_text(encoding="utf-8"),
            "report": json.loads((tmp / "run" / "report.json").read_text())}


def _cause_of(review: dict[str, Any]) -> dict[str, str]:
    return {item.split("/", 1)[1]: key for key, c in review["causes"].items() for item in c["items"]}


def test_each_built_case_lands_in_its_cause(calibrated) -> None:
    review = calibrated["record"]["criteria"]["faithful"]["review"]
    assert _cause_of(review) == {
        "a1-paraphrase": "paraphrase_terms", "a2-paraphrase-asked": "paraphrase_terms",
        "b1-number-name": "number_or_name", "b0-hostile": "number_or_name",
        "c1-accepted": "accepted_unsupported", "d1-refusal": "no_checkable_claim",
        "e1-rejected": "model_rejected", "f1-unchecked-heading": "span_not_checked",
    }
    counts = {k: (c["too_strict"], c["too_lenient"]) for k, c in review["causes"].items()}
    assert counts == {"no_checkable_claim": (0, 1), "number_or_name": (2, 0), "paraphrase_terms": (2, 0),
                      "model_rejected": (1, 0), "accepted_unsupported": (0, 1), "span_not_checked": (0, 1),
                      "other": (0, 0)}
    assert "citations_supported" not in {n for n, s in calibrated["record"]["criteria"].items() if "review" in s}


def test_every_disagreement_is_counted_exactly_once(calibrated) -> None:
    faithful = calibrated["record"]["criteria"]["faithful"]
    review = faithful["review"]
    items = [i for c in review["causes"].values() for i in c["items"]]
    assert sorted(items) == sorted(faithful["judge_vs_human"]["disagreements"])
    assert len(items) == len(set(items)) == review["disagreements"] == 8
    assert sum(c["n"] for c in review["causes"].values()) == 8
    assert list(review["causes"]) == list(CAUSE_KEYS) == review["order"]


def test_examples_name_the_claim_its_terms_support_and_the_human_span(calibrated) -> None:
    causes = calibrated["record"]["criteria"]["faithful"]["review"]["causes"]
    first, asked = causes["paraphrase_terms"]["examples"]
    assert first["claim"] == CASES["a1-paraphrase"][0] and first["p_yes"] is None  # its terms alone sank it
    assert first["unfound_terms"] == ["workers", "receive", "holiday", "allowance", "employed"]
    assert first["support"] == pytest.approx(0.7 ** 5) and first["numbers_or_names"] == []
    assert asked["p_yes"] == pytest.approx(0.6) and asked["support"] == pytest.approx(0.6 * 0.7 ** 3)
    hostile, named = causes["number_or_name"]["examples"]
    assert hostile["claim"] == HOSTILE and hostile["numbers_or_names"] == ["1", "initech", "2030", "acme"]
    assert named["item"] == "sys/b1-number-name" and named["numbers_or_names"] == ["20", "globex", "hmrc"]
    assert named["direction"] == "too_strict" and named["human_span"] is None
    rejected = causes["model_rejected"]["examples"][0]
    assert rejected["unfound_terms"] == ["swiftly"] and rejected["p_yes"] == pytest.approx(0.2)
    accepted = causes["accepted_unsupported"]["examples"][0]
    assert accepted["claim"] == "Leave requests go to the regional director."  # the claim under the span
    assert accepted["human_span"] == "regional director" and accepted["direction"] == "too_lenient"
    assert accepted["p_yes"] == pytest.approx(0.9) and accepted["support"] == pytest.approx(0.9 * 0.49)
    refusal = causes["no_checkable_claim"]["examples"][0]
    assert refusal["claim"] is None and refusal["human_span"] == "The passages do not mention part-time staff."
    assert causes["span_not_checked"]["examples"][0]["human_span"] == "Leave policy for contractors:"


def test_the_term_rules_say_how_often_people_agreed_where_they_failed_an_answer(calibrated) -> None:
    flags = calibrated["record"]["criteria"]["faithful"]["review"]["flag_agreement"]
    assert flags["number_or_name"] == {"judge_false": 3, "human_false": 1, "human_true": 2}
    assert flags["paraphrase_terms"] == {"judge_false": 3, "human_false": 1, "human_true": 2}


def test_calibrate_prints_a_short_count_table(calibrated) -> None:
    out = calibrated["printed"]
    assert "faithful: 8 disagreements by cause" in out
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:4]]
            for line in out.splitlines() if line.startswith("│") and "_" in line.split("│")[1]}
    assert rows["paraphrase_terms"] == ["2", "0"] and rows["span_not_checked"] == ["0", "1"]
    assert "other" not in rows  # empty causes are left out of the table
    assert "\x1b" not in out


def test_the_run_html_shows_the_review_and_escapes_claim_text(calibrated) -> None:
    html = calibrated["html"]
    section = html[html.index('id="review-faithful"'):html.index("</section>", html.index('id="review-faithful"'))]
    assert "why the judge and people disagree (8)" in section
    assert "unfound terms in a paraphrase" in section and "sys/a1-paraphrase" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Leave | goes" in section
    assert "<code>number_or_name</code> 3, people agreed on 1" in section
    assert "<script>alert" not in html


def test_report_md_shows_the_counts_with_inert_examples(calibrated) -> None:
    md = calibrated["markdown"]
    section = md[md.index("### faithful: disagreements by cause (8)"):].split("\n\n#")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == 6  # the causes with a disagreement
    named = next(line for line in rows if "(`number_or_name`)" in line)
    # inert: escaped, never markup, and the pipe does not split the cell
    assert "`sys/b0-hostile`; “\\<script>alert(1)\\</script> Leave \\| goes to Initech" in named
    assert "not in the passages: script, alert, 1, goes, initech, 2030, acme" in named
    assert re.search(r"(?<!\\)<script>", md) is None


def test_the_review_costs_no_call(calibrated) -> None:
    # the first run asked; calibrate reads its report, the second run the cache
    asked = sum(1 for cfg in calibrated["report"]["judge"]["per_config"].values() for c in cfg["cases"].values()
                if c["source"] == "call")
    assert asked > 0 and calibrated["calls"] == 0


def claim(text: str, verdict: str, support: float | None, unfound: list[str] | None, p: float | None,
          start: int | None = None, end: int | None = None) -> ClaimResult:
    klass = "uncited" if verdict == "supported" else verdict
    return ClaimResult(claim=text, verdict=verdict, klass=klass, confidence=support, unfound_terms=unfound,
                       model_confidence=p, start=start, end=end)


def test_a_flagged_claim_no_rule_explains_goes_to_other() -> None:
    # grounding found every term, yet the claim is flagged with a P(yes) that leans yes
    odd = claim("Staff get leave.", "unsupported", 0.2, [], 0.8)
    assert classify(STRICT, [odd], ()).cause == "other"
    # without grounding, a claim the model answered no about is the model's doing
    plain = claim("Staff get leave.", "unsupported", None, None, None)
    assert classify(STRICT, [plain], ()).cause == "model_rejected"


def test_a_lenient_verdict_names_the_claim_sharing_most_text_with_the_span() -> None:
    a = claim("Staff get 18 days.", "supported", 0.9, [], None, 0, 18)
    b = claim("Requests go to the director.", "supported", 0.7, ["director"], 0.9, 19, 47)
    found = classify("too_lenient", [a, b], (HumanSpan(start=15, end=40, text="days. Requests go to the"),))
    assert found.cause == "accepted_unsupported" and found.claim == b


@pytest.mark.parametrize(("text", "terms", "expected"), [
    ("Paris is lovely.", ["paris"], []),  # a capital at the start says nothing
    ("1. Purpose: A P60 is sent.", ["purpose", "p60"], ["p60"]),
    ("The form, sent by Acme's office, is late.", ["acme's", "office"], ["acme's"]),
    ("It costs about twelve pounds.", ["twelve", "pounds"], []),
])
def test_numbers_and_names(text: str, terms: list[str], expected: list[str]) -> None:
    assert numbers_and_names(text, terms) == expected


def test_claims_without_offsets_are_placed_by_their_text() -> None:
    a = claim("Staff get 18 days.", "supported", None, None, None)
    b = claim("Requests go to the director.", "supported", None, None, None)
    found = classify("too_lenient", [a, b], (HumanSpan(start=30, end=38, text="the director"),))
    assert found.cause == "accepted_unsupported" and found.claim == b and found.span is not None
    # no claim holds the marked text and none has offsets: the span cannot be placed
    found = classify("too_lenient", [a, b], (HumanSpan(start=0, end=5, text="Elsewhere"),))
    assert found.cause == "accepted_unsupported" and found.claim is not None
