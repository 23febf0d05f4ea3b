"""Selective trust in records and runs: the record's cut-off, who decides each item, and the
gate that counts trusted, escalated and human-decided items."""

from __future__ import annotations

import pytest

from groundjudge.calibrate.cascade import cutoffs_for, decide, to_escalate
from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.trust import TrustRules
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.config import GatesConfig, Threshold
from groundjudge.gate import evaluate_gates
from groundjudge.judge.results import (
    CaseJudgement,
    ConfigJudgement,
    CriterionInfo,
    CriterionValue,
    JudgeIdentity,
    JudgeRun,
    JudgeTotals,
    RubricRef,
    Usage,
    summarize_config,
)
from tests.test_gate import metrics

CRITERIA = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness"),
            CriterionInfo(name="correct", kind="ordinal", labels=[0, 1, 2, 3], metric="correctness")]
FIRST = {"rubric": {"id": "claim_check", "version": 1, "hash": "c" * 64}, "model": "small-judge",
         "decoding": {"temperature": 0.0, "top_logprobs": 5}}
SECOND = {**FIRST, "model": "large-judge"}


def calibration_items() -> tuple[dict, dict]:
    """60 sure and right True verdicts, 20 sure and right False ones, 20 unsure True ones of
    which people call half False."""
    judge, human = {}, {}
    for i in range(100):
        p_true, truth = (0.99, True) if i < 60 else (0.02, False) if i < 80 else (0.6, i % 2 == 0)
        judge[(f"c{i}", "cand")] = ItemLabels({"faithful": p_true >= 0.5, "correct": 3},
                                              confidence={"faithful": p_true, "correct": None})
        human[(f"c{i}", "cand")] = ItemLabels({"faithful": truth, "correct": 3})
    return judge, human


def record(prov=FIRST, *, with_confidence=True):
    judge, human = calibration_items()
    if not with_confidence:
        judge = {k: ItemLabels(v.labels) for k, v in judge.items()}
    rec = build_record(judge, prov, {"alice": human}, CRITERIA, reps=100, target_agreement=0.9, risk=0.1)
    rec["_path"] = f"records/{prov['model']}.json"
    return rec


def test_the_record_holds_reliability_the_kappa_threshold_and_the_cut_off() -> None:
    rec = record()
    block = rec["criteria"]["faithful"]["selective"]
    assert rec["selective"] == {"target_agreement": 0.9, "risk": 0.1}
    assert block["cutoff"]["cutoff"] == pytest.approx(0.61) and block["cutoff"]["kept"] == 80
    assert block["cutoff"]["coverage"] == 0.8 and block["cutoff"]["bound"] >= 0.9
    assert "1 - P(True)" in block["verdict_confidence"]
    top = block["reliability"]["bins"][9]
    assert top["n"] == 80 and top["agreement"] == 1.0  # 0.99 and 1 - 0.02 = 0.98 both fall in the top bin
    assert block["kappa_threshold"]["threshold"] > 0.6  # above the unsure items: kappa is highest there
    assert "selective" not in rec["criteria"]["correct"]  # ordinal, no confidence
    assert "selective" not in record(with_confidence=False)["criteria"]["faithful"]


def test_cut_offs_come_only_from_a_record_for_exactly_this_judge() -> None:
    records = [record()]
    assert cutoffs_for(FIRST, records)["faithful"].cutoff == pytest.approx(0.61)
    assert cutoffs_for(SECOND, records) == {}  # another model: the record is stale for it
    assert cutoffs_for({**FIRST, "decoding": {"temperature": 0.2}}, records) == {}



def test_cut_offs_come_from_the_record_with_the_most_evidence_not_the_newest() -> None:
    judge, human = calibration_items()
    few = dict(list(judge.items())[:20])  # 20 sure and right verdicts, calibrated later by one person
    small = build_record(few, FIRST, {"sam": human}, CRITERIA, reps=100, target_agreement=0.9, risk=0.1)
    small["_path"], small["created"] = "records/small.json", "2999-01-01T00:00:00+00:00"
    big = record()
    assert small["criteria"]["faithful"]["selective"]["cutoff"]["n"] == 20
    cut = cutoffs_for(FIRST, [big, small])["faithful"]
    assert cut.record == big["_path"] and cut.n == 100 and cut.cutoff == pytest.approx(0.61)

def case(case_id: str, p_true: float | None, label: bool | None = None) -> CaseJudgement:
    label = (p_true >= 0.5) if label is None and p_true is not None else label
    return CaseJudgement(case_id=case_id, config_id="cand", status="judged", criteria={
        "faithful": CriterionValue(label=label, value=p_true, confidence=p_true),
        "correct": CriterionValue(label=3, value=3.0)})


def run(prov: dict, cases: list[CaseJudgement]) -> JudgeRun:
    by_id = {c.case_id: c for c in cases}
    return JudgeRun(identity=JudgeIdentity(rubric=RubricRef(**prov["rubric"]), model=prov["model"],
                                           decoding=prov["decoding"]),
                    base_url=None, criteria=CRITERIA, to_judge=len(cases), skip_reasons={},
                    totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=0, done=len(cases), stopped=None,
                                       output_mode=None), cache={},
                    per_config={"cand": ConfigJudgement(summary=summarize_config(by_id, CRITERIA), cases=by_id)})


FIRST_RUN = run(FIRST, [case(f"q{i}", 0.99) for i in range(6)]
                + [case("q6", 0.6), case("q7", 0.6), case("q8", 0.45), case("q9", 0.6),
                   CaseJudgement(case_id="q10", config_id="cand", status="judge_error", reason="timeout")])
HUMANS = {("q8", "cand"): ItemLabels({"faithful": False, "correct": 2}),
          ("q0", "cand"): ItemLabels({"faithful": True, "correct": 3})}
SECOND_RUN = run(SECOND, [case("q6", 0.95), case("q7", 0.55), case("q9", 0.03)])


def test_abstained_unlabelled_items_are_the_ones_escalated() -> None:
    cut = cutoffs_for(FIRST, [record()])
    assert to_escalate(FIRST_RUN, cut, HUMANS) == {("q6", "cand"), ("q7", "cand"), ("q9", "cand")}
    assert to_escalate(FIRST_RUN, {}, HUMANS) == set()  # no cut-off: nothing is escalated


def test_each_item_is_decided_by_the_first_source_that_can() -> None:
    records = [record(), record(SECOND)]
    trust = decide(FIRST_RUN, cutoffs_for(FIRST, records), escalation=SECOND_RUN,
                   escalation_cutoffs=cutoffs_for(SECOND, records), humans=HUMANS)
    cascade = trust.per_config["cand"]["faithful"]
    sources = {d.case_id: d.source for d in cascade.decisions}
    assert sources == {**{f"q{i}": "trusted" for i in range(6)}, "q6": "escalated", "q7": "queued", "q8": "human",
                       "q9": "escalated"}
    assert cascade.counts == {"trusted": 6, "escalated": 2, "human": 1, "queued": 1}
    assert cascade.items == 10 and cascade.decided == 9 and cascade.coverage == 0.9
    assert cascade.rate == pytest.approx(7 / 9)  # 6 trusted True, q6 True, q8 (human) False, q9 False
    assert cascade.guaranteed == pytest.approx((8 * 0.9 + 1) / 9) and cascade.guarantee_risk == pytest.approx(0.2)
    assert [(q.case_id, q.criteria) for q in trust.queue] == [("q7", ["faithful"])]
    assert cascade.ppi is not None and cascade.ppi["n_labelled"] == 1  # q0: trusted and labelled
    assert "correct" not in trust.per_config["cand"]  # no cut-off: today's rule


GATES = GatesConfig(metrics={"faithfulness": Threshold(min=0.7), "correctness": Threshold(min=2.0)})


def test_the_gate_counts_decided_items_and_says_what_the_old_rule_would_have() -> None:
    records = [record(), record(SECOND)]
    trust = decide(FIRST_RUN, cutoffs_for(FIRST, records), escalation=SECOND_RUN,
                   escalation_cutoffs=cutoffs_for(SECOND, records), humans=HUMANS)
    report = evaluate_gates(metrics(), FIRST_RUN, GATES, TrustRules(min_coverage=0.8), records, trust)
    gate = next(r for r in report.results if r.metric == "faithfulness")
    assert (gate.status, gate.blocking, gate.value, gate.n) == ("pass", True, pytest.approx(7 / 9), 9)
    assert "6 trusted, 2 escalated, 1 human of 10" in gate.reason and "1 queued" in gate.reason
    assert ">= 0.911 with probability >= 0.80" in gate.reason
    assert gate.all_or_nothing is not None and "on all 10 verdicts" in gate.all_or_nothing
    assert report.selective == trust
    # a criterion without a cut-off keeps the all-or-nothing rule
    assert next(r for r in report.results if r.metric == "correctness").all_or_nothing is None

    strict = evaluate_gates(metrics(), FIRST_RUN, GATES, TrustRules(min_coverage=0.95), records, trust)
    gate = next(r for r in strict.results if r.metric == "faithfulness")
    assert (gate.status, gate.blocking) == ("advisory", False)
    assert "coverage 0.900 < min_coverage 0.95" in gate.reason and gate.reason.startswith("would pass")


def test_without_escalation_abstained_items_wait_for_people() -> None:
    trust = decide(FIRST_RUN, cutoffs_for(FIRST, [record()]), humans=None)
    cascade = trust.per_config["cand"]["faithful"]
    assert cascade.counts == {"trusted": 6, "escalated": 0, "human": 0, "queued": 4}
    assert cascade.coverage == 0.6 and trust.escalation_model is None
    report = evaluate_gates(metrics(), FIRST_RUN, GATES, TrustRules(), [record()], trust)
    assert next(r for r in report.results if r.metric == "faithfulness").status == "advisory"


# --- an ordinal criterion (correct, 0..3): confidence of the exact grade --------------------------

def ordinal_record(prov=FIRST):
    """`correct` with a confidence per grade: 50 sure grade-3 and 30 sure grade-1 verdicts that
    people confirm, 20 unsure grade-2 ones of which people put half a grade lower (exact match
    only: one grade off disagrees); `faithful` without confidences."""
    judge, human = {}, {}
    for i in range(100):
        grade, conf, truth = (3, 0.97, 3) if i < 50 else (1, 0.9, 1) if i < 80 else (2, 0.4, 2 if i % 2 else 1)
        judge[(f"c{i}", "cand")] = ItemLabels({"faithful": True, "correct": grade},
                                              confidence={"faithful": None, "correct": conf})
        human[(f"c{i}", "cand")] = ItemLabels({"faithful": True, "correct": truth})
    rec = build_record(judge, prov, {"alice": human}, CRITERIA, reps=100, target_agreement=0.9, risk=0.1)
    rec["_path"] = f"records/{prov['model']}-ordinal.json"
    return rec


def graded(case_id: str, grade: int, confidence: float | None) -> CaseJudgement:
    return CaseJudgement(case_id=case_id, config_id="cand", status="judged", criteria={
        "faithful": CriterionValue(label=True, value=1.0),
        "correct": CriterionValue(label=grade, value=float(grade), confidence=confidence)})


ORDINAL_FIRST = run(FIRST, [graded(f"q{i}", 3, 0.97) for i in range(6)]
                    + [graded("q6", 2, 0.4), graded("q7", 1, 0.3), graded("q8", 0, 0.2)])
ORDINAL_SECOND = run(SECOND, [graded("q7", 2, 0.95), graded("q8", 1, 0.3)])
ORDINAL_HUMANS = {("q6", "cand"): ItemLabels({"faithful": True, "correct": 2}),
                  ("q0", "cand"): ItemLabels({"faithful": True, "correct": 3})}


def test_an_ordinal_record_holds_a_cut_off_on_the_exact_grade() -> None:
    block = ordinal_record()["criteria"]["correct"]["selective"]
    assert block["kind"] == "ordinal" and "exact grade" in block["verdict_confidence"]
    assert block["kappa_threshold"] is None  # no P(True) to threshold
    fit = block["cutoff"]
    # 80 sure verdicts all right; adding the 20 unsure ones (10 exactly right) fails the bound
    assert fit["cutoff"] == pytest.approx(0.41) and fit["kept"] == 80 and fit["agreement"] == 1.0
    assert next(p for p in fit["curve"] if p["cutoff"] == 0.4)["status"] == "failed"
    assert block["reliability"]["n"] == 100
    assert "selective" not in ordinal_record()["criteria"]["faithful"]  # no confidences


def test_an_ordinal_gate_counts_decided_grades_and_the_queue_says_why() -> None:
    records = [ordinal_record(), ordinal_record(SECOND)]
    first, second = cutoffs_for(FIRST, records), cutoffs_for(SECOND, records)
    assert set(first) == {"correct"}
    assert to_escalate(ORDINAL_FIRST, first, ORDINAL_HUMANS) == {("q7", "cand"), ("q8", "cand")}
    trust = decide(ORDINAL_FIRST, first, escalation=ORDINAL_SECOND, escalation_cutoffs=second, humans=ORDINAL_HUMANS)
    cascade = trust.per_config["cand"]["correct"]
    assert cascade.kind == "ordinal"
    assert {d.case_id: (d.source, d.label) for d in cascade.decisions if d.case_id in ("q0", "q6", "q7", "q8")} == {
        "q0": ("trusted", 3), "q6": ("human", 2), "q7": ("escalated", 2), "q8": ("queued", None)}
    assert cascade.counts == {"trusted": 6, "escalated": 1, "human": 1, "queued": 1}
    assert cascade.rate == pytest.approx((6 * 3 + 2 + 2) / 8)  # mean grade of the decided items
    assert type(cascade.decisions[0].label) is int
    assert cascade.ppi is not None and cascade.ppi["n_labelled"] == 1  # q0: trusted, labelled 3
    assert trust.all_or_nothing.keys() == {"faithful"}

    (item,) = trust.queue
    assert (item.case_id, item.criteria) == ("q8", ["correct"])
    (why,) = item.reasons
    assert [(a.judge, a.role, a.label, a.cutoff) for a in why.abstained] == [
        ("small-judge", "first", 0, pytest.approx(0.41)), ("large-judge", "escalation", 1, pytest.approx(0.41))]
    assert why.abstained[0].reason == "verdict confidence 0.200 < lambda 0.41"
    assert why.abstained[1].reason == "verdict confidence 0.300 < lambda 0.41"

    report = evaluate_gates(metrics(), ORDINAL_FIRST, GATES, TrustRules(min_coverage=0.8), records, trust)
    gate = next(r for r in report.results if r.metric == "correctness")
    assert (gate.status, gate.blocking, gate.value, gate.n) == ("pass", True, pytest.approx(2.75), 8)
    assert "value: mean grade of decided items" in gate.reason and "6 trusted, 1 escalated, 1 human of 9" in gate.reason
    assert gate.all_or_nothing is not None and "on all 9 verdicts (mean 2.333)" in gate.all_or_nothing
    # faithful has no confidence: today's rule, and the gate says plainly why
    faithful = next(r for r in report.results if r.metric == "faithfulness")
    assert faithful.all_or_nothing is None and "selective trust does not apply: no confidence per verdict" in \
        faithful.reason

    high = GatesConfig(metrics={"correctness": Threshold(min=2.8)})
    gate = next(r for r in evaluate_gates(metrics(), ORDINAL_FIRST, high, TrustRules(min_coverage=0.8), records,
                                          trust).results if r.metric == "correctness")
    assert (gate.status, gate.blocking) == ("fail", True)


def test_an_escalation_judge_without_a_verdict_or_a_record_is_named_in_the_queue() -> None:
    records = [ordinal_record()]  # no record for the second judge
    trust = decide(ORDINAL_FIRST, cutoffs_for(FIRST, records), escalation=ORDINAL_SECOND,
                   escalation_cutoffs=cutoffs_for(SECOND, records), humans=None)
    reasons = {q.case_id: q.reasons[0].abstained for q in trust.queue}
    assert set(reasons) == {"q6", "q7", "q8"}
    assert reasons["q7"][1].reason.startswith("no calibration record") and reasons["q7"][1].cutoff is None
    assert reasons["q6"][1].reason == "not sent to it" and reasons["q6"][1].label is None


def test_a_selective_gate_with_no_judged_item_fails_unless_it_says_skip() -> None:
    """A record with a cut-off, and no judged item in the config (a budget spent elsewhere):
    the gate has no evidence. It used to be advisory (coverage undefined), so the run passed."""
    records = [record()]
    nothing = run(FIRST, [])
    trust = decide(nothing, cutoffs_for(FIRST, records))
    gate = next(r for r in evaluate_gates(metrics(), nothing, GATES, TrustRules(), records, trust).results
                if r.metric == "faithfulness")
    assert (gate.status, gate.blocking, gate.n) == ("no_data", True, 0)
    skip = GatesConfig(metrics={"faithfulness": Threshold(min=0.7, on_missing="skip")})
    gate = next(r for r in evaluate_gates(metrics(), nothing, skip, TrustRules(), records, trust).results
                if r.metric == "faithfulness")
    assert (gate.status, gate.blocking) == ("no_data", False)
