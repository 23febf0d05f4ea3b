"""Gates: deterministic gates always apply, judge gates only when trusted, leaks block."""

from __future__ import annotations

import pytest

from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.trust import TrustRules
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.config import GatesConfig, RegressionGate, Threshold
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
        cfg, cases(cfg), {"recall@10": {"value": recall, "n": 5},
                          "acl_leak": {"value": sum(f"q{i}" in leaks and cfg in leak_configs for i in range(5)) / 5,
                                       "n": 5}},
        {"tag": {"acl": {"behavior_correct": {"value": 1.0, "n": 2}}}, "difficulty": {}, "content_type": {}})
        for cfg in CONFIGS}, overall={})


def judge(faithful=(True, True, True, True, False), errors=0, configs=CONFIGS) -> JudgeRun:
    """Judged cases q0.. labelled ``faithful`` (support 0.7 when true, 0.2 when false; a dict
    gives each config its own labels), then ``errors`` judge_error cases, in every config."""
    def cases(cfg):
        labels = faithful[cfg] if isinstance(faithful, dict) else faithful
        out = {f"q{i}": CaseJudgement(case_id=f"q{i}", config_id=cfg, status="judged", criteria={
            "faithful": CriterionValue(label=label, value=0.7 if label else 0.2),
            "correct": CriterionValue(label=3, value=3.0),
            "citations_supported": CriterionValue(label=True, value=1.0)}) for i, label in enumerate(labels)}
        for j in range(errors):
            cid = f"e{j}"
            out[cid] = CaseJudgement(case_id=cid, config_id=cfg, status="judge_error", reason="invalid verdict")
        return out

    per_config = {}
    for cfg in configs:
        mine = cases(cfg)
        per_config[cfg] = ConfigJudgement(summary=summarize_config(mine, CRITERIA), cases=mine)
    return JudgeRun(identity=JudgeIdentity(rubric=RubricRef(**PROV["rubric"]), model=PROV["model"],
                                           decoding=PROV["decoding"]),
                    base_url=None, criteria=CRITERIA, to_judge=5, skip_reasons={},
                    totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=0, done=5, stopped=None,
                                       output_mode=None),
                    cache={}, per_config=per_config)


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
    result = evaluate_gates(metrics(), judge(faithful=(True, False, False, True, False)), GATES, RULES, [])
    gate = by_metric(result, "faithfulness")
    assert gate.status == "advisory" and not gate.blocking
    assert "would fail" in gate.reason and "no calibration record" in gate.reason
    assert result.passed


def test_trusted_judge_gate_blocks():
    result = evaluate_gates(metrics(), judge(faithful=(True, False, False, True, False)), GATES, RULES, [trusted_record()])
    gate = by_metric(result, "faithfulness")
    assert gate.status == "fail" and gate.blocking and not result.passed
    assert result.trust["faithfulness"].trusted


def test_acl_leak_and_judge_errors_block_whatever_the_averages():
    result = evaluate_gates(metrics(leaks=("q2",)), judge(), GATES, RULES, [])
    assert not result.passed and "critical: leaks in q2" in by_metric(result, "acl_leak").reason
    result = evaluate_gates(metrics(), judge(faithful=(True, True), errors=2), GATES, RULES, [])
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


# --- what a judge gate reads: the same quantity whether advisory or trusted ------------------------

def test_a_judge_gate_reads_the_share_of_true_verdicts_whether_advisory_or_trusted():
    run = judge(faithful=(True, True, True, False, False))  # mean support 0.5, three of five faithful
    assert run.per_config["cand"].summary.metrics["faithfulness"].value == pytest.approx(0.5)
    advisory = by_metric(evaluate_gates(metrics(), run, GATES, RULES, []), "faithfulness")
    trusted = by_metric(evaluate_gates(metrics(), run, GATES, RULES, [trusted_record()]), "faithfulness")
    assert (advisory.status, advisory.blocking, trusted.status, trusted.blocking) == ("advisory", False, "fail", True)
    assert advisory.value == trusted.value == pytest.approx(0.6) and advisory.n == trusted.n == 5
    for gate in (advisory, trusted):
        assert "value: share of judged cases labelled True (faithful)" in gate.reason


def test_a_trusted_judge_gate_with_no_verdict_fails_unless_it_says_skip():
    nothing = judge(faithful=())
    gate = by_metric(evaluate_gates(metrics(), nothing, GATES, RULES, [trusted_record()]), "faithfulness")
    assert (gate.status, gate.blocking, gate.n, gate.failed) == ("no_data", True, 0, True)
    skip = GatesConfig(metrics={"faithfulness": Threshold(min=0.9, on_missing="skip")})
    result = evaluate_gates(metrics(), nothing, skip, RULES, [trusted_record()])
    gate = by_metric(result, "faithfulness")
    assert (gate.status, gate.blocking, gate.failed) == ("no_data", False, False)
    # the judge_error-rate gate of a config nothing was sent for has no data either
    assert by_metric(result, "judge_error_rate").failed and result.failed == ["cand: judge_error rate <= 0.1"]


def test_a_deterministic_gate_with_no_data_fails_unless_it_says_skip():
    gates = GatesConfig(metrics={"citation_scoped": Threshold(min=0.9)})
    result = evaluate_gates(metrics(), judge(), gates, RULES, [])
    gate = by_metric(result, "citation_scoped")
    assert (gate.status, gate.blocking, result.passed) == ("no_data", True, False)
    assert gate.reason.startswith("no data: no case of this config defines it")
    skipped = GatesConfig(metrics={"citation_scoped": Threshold(min=0.9, on_missing="skip")})
    assert evaluate_gates(metrics(), judge(), skipped, RULES, []).passed


def test_thresholds_need_a_finite_bound():
    for bad in ({}, {"min": float("nan")}, {"max": float("inf")}, {"min": 0.9, "max": 0.5}):
        with pytest.raises(ValueError):
            Threshold(**bad)
    with pytest.raises(ValueError):
        Threshold(min=0.5, on_missing="pass")


# --- regression gates --------------------------------------------------------------------------------

def recall_run(base, cand, metric="recall@10") -> MetricsRun:
    """``metric`` per case in each config (None: the case does not define it)."""
    def config(cfg, values):
        kept = [v for v in values if v is not None]
        return ConfigMetrics(cfg, [CaseMetrics(f"q{i}", cfg, {metric: v}, "answer", [], []) for i, v in enumerate(values)],
                             {metric: {"value": sum(kept) / len(kept) if kept else None, "n": len(kept)}},
                             {"tag": {}, "difficulty": {}, "content_type": {}})

    return MetricsRun(configs={"base": config("base", base), "cand": config("cand", cand)}, overall={})


def regression(metric="recall@10", max_drop=0.05, **extra) -> GatesConfig:
    return GatesConfig(configs=["cand"], acl_leaks_block=False, regression=[
        RegressionGate(metric=metric, baseline="base", candidate="cand", max_drop=max_drop, **extra)])


def test_a_regression_gate_fails_on_a_real_drop_beyond_the_allowed_one():
    run = recall_run([1.0] * 10, [0.8] * 10)  # every case drops by 0.2: real
    gate = by_metric(evaluate_gates(run, None, regression(), RULES, []), "recall@10")
    assert (gate.kind, gate.status, gate.blocking, gate.n, gate.baseline) == ("regression", "fail", True, 10, "base")
    assert gate.value == pytest.approx(0.2) and gate.p_value < 0.05
    assert "(change -0.2000), p = " in gate.reason and "a real drop of 0.2000 > 0.05" in gate.reason
    assert gate.name == "cand vs base: recall@10 drop <= 0.05"
    assert by_metric(evaluate_gates(run, None, regression(max_drop=0.25), RULES, []), "recall@10").status == "pass"


def test_a_regression_gate_passes_a_drop_the_test_cannot_tell_from_noise():
    run = recall_run([1.0, 0.0] * 5, [0.0, 1.0] * 4 + [0.0, 0.0])  # one case in ten worse on balance
    gate = by_metric(evaluate_gates(run, None, regression(), RULES, []), "recall@10")
    assert gate.status == "pass" and gate.value == pytest.approx(0.1) and gate.p_value >= 0.05
    assert "a drop of 0.1000 > 0.05, but not shown to be real" in gate.reason


def test_a_regression_gate_with_no_paired_case_fails_unless_it_says_skip():
    run = recall_run([1.0, None], [None, 1.0])
    gate = by_metric(evaluate_gates(run, None, regression(), RULES, []), "recall@10")
    assert (gate.status, gate.blocking, gate.n) == ("no_data", True, 0)
    skipped = by_metric(evaluate_gates(run, None, regression(on_missing="skip"), RULES, []), "recall@10")
    assert (skipped.status, skipped.blocking) == ("no_data", False)


def test_a_judge_regression_gate_is_advisory_until_the_judge_is_trusted():
    run = judge(faithful={"base": (True,) * 10, "cand": (False,) * 10})
    gates = regression(metric="faithfulness", max_drop=0.1)
    advisory = by_metric(evaluate_gates(metrics(), run, gates, RULES, []), "faithfulness")
    assert (advisory.status, advisory.blocking) == ("advisory", False)
    assert advisory.reason.startswith("would fail: 10 paired cases: base 1.0000 -> cand 0.0000")
    assert "value: share of judged cases labelled True (faithful)" in advisory.reason
    trusted = by_metric(evaluate_gates(metrics(), run, gates, RULES, [trusted_record()]), "faithfulness")
    assert (trusted.status, trusted.blocking, trusted.value) == ("fail", True, 1.0)


def test_a_rise_is_the_regression_of_a_metric_where_lower_is_better():
    run = recall_run([0.0] * 10, [1.0] * 10, metric="over_refusal")
    gate = by_metric(evaluate_gates(run, None, regression(metric="over_refusal"), RULES, []), "over_refusal")
    assert gate.status == "fail" and gate.value == pytest.approx(1.0) and gate.name == "cand vs base: over_refusal rise <= 0.05"
    better = recall_run([1.0] * 10, [0.0] * 10, metric="over_refusal")
    assert by_metric(evaluate_gates(better, None, regression(metric="over_refusal"), RULES, []), "over_refusal").status == "pass"
