"""Gates: deterministic gates always apply, judge gates only when trusted, leaks block."""

from __future__ import annotations

from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.trust import TrustRules
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.config import GatesConfig, Threshold
from groundjudge.gate import evaluate_gates
from groundjudge.judge.results import (ConfigJudgement, ConfigJudgeSummary, CriterionInfo, JudgeIdentity, JudgeRun,
                                       JudgeTotals, MetricValue, RubricRef, Usage)
from groundjudge.metrics.acl import AclLeak
from groundjudge.metrics.case import CaseMetrics
from groundjudge.metrics.evaluate import ConfigMetrics, MetricsRun

PROV = {"rubric": {"id": "grounded_answer", "version": 1, "hash": "a" * 64}, "model": "judge-1",
        "decoding": {"temperature": 0.0}}
RULES = TrustRules(min_items=50, min_kappa=0.6, min_kappa_lower=0.4)
CRITERIA = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness"),
            CriterionInfo(name="correct", kind="ordinal", labels=[0, 1, 2, 3], metric="correctness"),
            CriterionInfo(name="citations_supported", kind="binary", labels=[True, False], metric="citation_support")]
CONFIGS = ("base", "cand")


def metrics(recall=0.95, leaks=(), leak_configs=CONFIGS) -> MetricsRun:
    def cases(cfg):
        return [CaseMetrics(f"q{i}", cfg, {"recall@10": recall}, "answer",
                            [AclLeak("x", "retrieved", "tenant")] if f"q{i}" in leaks and cfg in leak_configs else [],
                            []) for i in range(5)]

    return MetricsRun(configs={cfg: ConfigMetrics(
        cfg, cases(cfg), {"recall@10": {"value": recall, "n": 5}},
        {"tag": {"acl": {"behavior_correct": {"value": 1.0, "n": 2}}}, "difficulty": {}, "content_type": {}})
        for cfg in CONFIGS}, overall={})


def judge(faithfulness=0.8, error_rate=0.0) -> JudgeRun:
    summary = ConfigJudgeSummary(
        metrics={"faithfulness": MetricValue(value=faithfulness, n=5), "correctness": MetricValue(value=2.8, n=5),
                 "citation_support": MetricValue(value=1.0, n=5)},
        labels={}, claims=0, claim_classes={}, status_counts={},
        judge_error_rate=MetricValue(value=error_rate, n=5))
    return JudgeRun(identity=JudgeIdentity(rubric=RubricRef(**PROV["rubric"]), model=PROV["model"],
                                           decoding=PROV["decoding"]),
                    base_url=None, criteria=CRITERIA, to_judge=5, skip_reasons={},
                    totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=0, done=5, stopped=None,
                                       output_mode=None),
                    cache={}, per_config={cfg: ConfigJudgement(summary=summary, cases={}) for cfg in CONFIGS})


GATES = GatesConfig(metrics={"recall@10": Threshold(min=0.9), "faithfulness": Threshold(min=0.9)},
                    tags={"acl": {"behavior_correct": Threshold(min=1.0)}})


def trusted_record():
    items = {(f"q{i}", "cand"): ItemLabels({"faithful": i % 3 != 0, "correct": 3, "citations_supported": True})
             for i in range(90)}
    return build_record(items, PROV, {"alice": items}, CRITERIA, reps=100)


def by_metric(result, metric):
    return next(r for r in result.results if r.metric == metric)


def test_deterministic_gates_apply_and_only_the_last_config_is_gated_by_default():
    result = evaluate_gates(metrics(recall=0.95), judge(), GATES, RULES, [])
    assert result.passed and result.gated_configs == ["cand"]
    assert {r.config_id for r in result.results} == {"cand"}
    failed = evaluate_gates(metrics(recall=0.5), judge(), GATES, RULES, [])
    assert not failed.passed and failed.failed == ["cand: recall@10 >= 0.9"]


def test_untrusted_judge_gate_is_advisory_and_does_not_block():
    result = evaluate_gates(metrics(), judge(faithfulness=0.5), GATES, RULES, [])
    gate = by_metric(result, "faithfulness")
    assert gate.status == "advisory" and not gate.blocking
    assert "would fail" in gate.reason and "no calibration record" in gate.reason
    assert result.passed


def test_trusted_judge_gate_blocks():
    result = evaluate_gates(metrics(), judge(faithfulness=0.5), GATES, RULES, [trusted_record()])
    gate = by_metric(result, "faithfulness")
    assert gate.status == "fail" and gate.blocking and not result.passed
    assert result.trust["faithfulness"].trusted


def test_acl_leak_and_judge_errors_block_whatever_the_averages():
    result = evaluate_gates(metrics(leaks=("q2",)), judge(), GATES, RULES, [])
    assert not result.passed and "critical: leaks in q2" in by_metric(result, "acl_leak").reason
    result = evaluate_gates(metrics(), judge(error_rate=0.5), GATES, RULES, [])
    assert not result.passed and by_metric(result, "judge_error_rate").status == "fail"


def test_leaks_in_an_ungated_config_are_reported_and_do_not_change_the_verdict():
    result = evaluate_gates(metrics(leaks=("q1", "q3"), leak_configs=("base",)), judge(), GATES, RULES, [])
    assert result.passed and result.gated_configs == ["cand"]
    assert result.ungated_acl_leaks == {"base": ["q1", "q3"]}
    assert by_metric(result, "acl_leak").status == "pass"


def test_tag_gates_and_missing_configs():
    gates = GatesConfig(configs=["cand", "nope"], tags={"acl": {"behavior_correct": Threshold(min=1.0)}})
    result = evaluate_gates(metrics(), judge(), gates, RULES, [])
    assert by_metric(result, "behavior_correct").status == "pass"
    assert "cand" in result.results[0].name and not result.passed  # "nope" has no traces
