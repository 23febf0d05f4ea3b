"""Gates: deterministic gates always apply, judge gates only when trusted, leaks block."""

from __future__ import annotations

from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.trust import TrustRules
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.config import GatesConfig, Threshold
from groundjudge.gate import evaluate_gates

PROV = {"rubric": {"id": "grounded_answer", "version": 1, "hash": "a" * 64}, "model": "judge-1",
        "decoding": {"temperature": 0.0}}
RULES = TrustRules(min_items=50, min_kappa=0.6, min_kappa_lower=0.4)


def doc(recall=0.95, faithfulness=0.8, leaks=(), error_rate=0.0):
    details = {f"q{i}": {"acl_leaks": [{"chunk_id": "x"}] if f"q{i}" in leaks else []} for i in range(5)}
    return {
        "configs": ["base", "cand"],
        "per_config": {cfg: {"aggregate": {"recall@10": {"value": recall, "n": 5}},
                             "by_tag": {"acl": {"behavior_correct": {"value": 1.0, "n": 2}}},
                             "case_details": details} for cfg in ("base", "cand")},
        "judge": {"provenance": PROV, "per_config": {cfg: {"aggregate": {
            "faithfulness": {"value": faithfulness, "n": 5}, "correctness": {"value": 2.8, "n": 5},
            "citation_support": {"value": 1.0, "n": 5}, "judge_error_rate": {"value": error_rate, "n": 5}}}
            for cfg in ("base", "cand")}},
    }


GATES = GatesConfig(metrics={"recall@10": Threshold(min=0.9), "faithfulness": Threshold(min=0.9)},
                    tags={"acl": {"behavior_correct": Threshold(min=1.0)}})


def trusted_record():
    items = {(f"q{i}", "cand"): ItemLabels({"faithful": i % 3 != 0, "correct": 3, "citations_supported": True})
             for i in range(90)}
    return build_record(items, PROV, {"alice": items}, reps=100)


def by_metric(result, metric):
    return next(r for r in result["results"] if r["metric"] == metric)


def test_deterministic_gates_apply_and_only_the_last_config_is_gated_by_default():
    result = evaluate_gates(doc(recall=0.95), GATES, RULES, [])
    assert result["passed"]
    assert {r["config_id"] for r in result["results"]} == {"cand"}
    failed = evaluate_gates(doc(recall=0.5), GATES, RULES, [])
    assert not failed["passed"] and failed["failed"] == ["cand: recall@10 >= 0.9"]


def test_untrusted_judge_gate_is_advisory_and_does_not_block():
    result = evaluate_gates(doc(faithfulness=0.5), GATES, RULES, [])
    gate = by_metric(result, "faithfulness")
    assert gate["status"] == "advisory" and not gate["blocking"]
    assert "would fail" in gate["reason"] and "no calibration record" in gate["reason"]
    assert result["passed"]


def test_trusted_judge_gate_blocks():
    result = evaluate_gates(doc(faithfulness=0.5), GATES, RULES, [trusted_record()])
    gate = by_metric(result, "faithfulness")
    assert gate["status"] == "fail" and gate["blocking"] and not result["passed"]
    assert result["trust"]["faithfulness"]["trusted"]


def test_acl_leak_and_judge_errors_block_whatever_the_averages():
    result = evaluate_gates(doc(leaks=("q2",)), GATES, RULES, [])
    assert not result["passed"] and "critical: leaks in q2" in by_metric(result, "acl_leak")["reason"]
    result = evaluate_gates(doc(error_rate=0.5), GATES, RULES, [])
    assert not result["passed"] and by_metric(result, "judge_error_rate")["status"] == "fail"


def test_tag_gates_and_missing_configs():
    gates = GatesConfig(configs=["cand", "nope"], tags={"acl": {"behavior_correct": Threshold(min=1.0)}})
    result = evaluate_gates(doc(), gates, RULES, [])
    assert by_metric(result, "behavior_correct")["status"] == "pass"
    assert "cand" in result["results"][0]["name"] and not result["passed"]  # "nope" has no traces
