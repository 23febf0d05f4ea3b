"""Regression gates: a metric of one config of the run against another (SPEC 7).

``[[gates.regression]]`` names a metric, a baseline config, a candidate config and the largest
allowed drop. Over the cases both configs define, the gate takes the mean change from baseline
to candidate and the paired sign-flip test of ``groundjudge compare`` (``metrics.change``, seed
0). The rule:

- it **fails** when the candidate is worse by more than ``max_drop`` (a drop for metrics where
  higher is better, a rise for latency, cost, tokens, error and refusal rates and ACL leaks)
  *and* the test says the change is real (p < 0.05);
- it **passes** otherwise: worse by at most ``max_drop``, better, or a change the test cannot
  tell from noise (the reason says which);
- it is ``no_data`` (failing unless ``on_missing = "skip"``) when no case has a value in both.

Deterministic metrics compare per-case values. Judge metrics compare per-case verdicts (a
binary criterion's label as 1 or 0, an ordinal one's grade: what the judge's absolute gates
read), and follow the trust rule: blocking only when the judge is trusted for the criterion
(under selective trust: over the items decided in both configs, when both configs reach
``min_coverage``); otherwise advisory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from groundjudge.calibrate.cascade import SelectiveTrust
from groundjudge.calibrate.trust import TrustRules, TrustStatus
from groundjudge.config import RegressionGate
from groundjudge.gate.evaluate import GateResult, no_data, verdict_words
from groundjudge.judge.results import CriterionInfo, JudgeRun
from groundjudge.metrics.change import ALPHA, lower_is_better, paired_change
from groundjudge.metrics.evaluate import MetricsRun

SEED = 0  # the seed `groundjudge compare` uses by default: the gate and the comparison agree


def _deterministic(metrics: MetricsRun, cfg: str, metric: str) -> dict[str, float]:
    return {c.case_id: v for c in metrics.configs[cfg].cases if (v := c.values.get(metric)) is not None}


def _verdicts(judge: JudgeRun, cfg: str, crit: CriterionInfo) -> dict[str, float]:
    section = judge.per_config.get(cfg)
    if section is None:
        return {}
    return {cid: float(label) for cid, c in section.cases.items()
            if c.status == "judged" and (label := c.label(crit.name)) is not None}


def _decided(selective: SelectiveTrust, cfg: str, crit: CriterionInfo) -> dict[str, float] | None:
    cascade = selective.per_config.get(cfg, {}).get(crit.name)
    if cascade is None:
        return None
    return {d.case_id: float(d.label) for d in cascade.decisions if d.source != "queued" and d.label is not None}


def _judge_side(spec: RegressionGate, judge: JudgeRun, crit: CriterionInfo, trust: Mapping[str, TrustStatus],
                selective: SelectiveTrust | None, rules: TrustRules,
                ) -> tuple[dict[str, float], dict[str, float], bool, str]:
    """Per-case values of both configs, whether the gate blocks, and why."""
    t = trust.get(spec.metric) or TrustStatus(trusted=False, reason="no judge ran")
    cascades = [selective.per_config.get(c, {}).get(crit.name) if selective else None
                for c in (spec.baseline, spec.candidate)]
    if all(c is not None for c in cascades):
        assert selective is not None
        low = [cfg for cfg, c in zip((spec.baseline, spec.candidate), cascades, strict=True)
               if c is not None and (c.coverage is None or c.coverage < rules.min_coverage)]
        a, b = _decided(selective, spec.baseline, crit) or {}, _decided(selective, spec.candidate, crit) or {}
        if low:
            return a, b, False, (f"advisory: selective trust coverage below min_coverage {rules.min_coverage} "
                                 f"in {', '.join(low)}")
        return a, b, True, "selective trust: items decided in both configs"
    a, b = _verdicts(judge, spec.baseline, crit), _verdicts(judge, spec.candidate, crit)
    return a, b, t.trusted, t.reason if t.trusted else f"advisory: {t.reason}"


def regression_gate(spec: RegressionGate, metrics: MetricsRun, judge: JudgeRun | None,
                    trust: Mapping[str, TrustStatus], selective: SelectiveTrust | None, rules: TrustRules,
                    ) -> GateResult:
    direction = "rise" if lower_is_better(spec.metric) else "drop"
    common: dict[str, Any] = {
        "name": f"{spec.candidate} vs {spec.baseline}: {spec.metric} {direction} <= {spec.max_drop}",
        "config_id": spec.candidate, "baseline": spec.baseline, "metric": spec.metric, "tag": None,
        "threshold": f"{direction} <= {spec.max_drop}, or not real (p >= {ALPHA})", "kind": "regression"}
    crit = judge.criterion_for_metric(spec.metric) if judge is not None else None
    missing = [c for c in (spec.baseline, spec.candidate) if c not in metrics.configs]
    if missing:
        return no_data(common, spec.on_missing, f"no traces for config {', '.join(missing)}")
    if crit is not None:
        assert judge is not None
        a, b, blocking, why = _judge_side(spec, judge, crit, trust, selective, rules)
        what = f"value: {verdict_words(crit)}; {why}"
    else:
        a, b = _deterministic(metrics, spec.baseline, spec.metric), _deterministic(metrics, spec.candidate, spec.metric)
        blocking, what = True, "deterministic"
    pairs = [(a[c], b[c]) for c in a if c in b]
    change = paired_change(spec.metric, pairs, seed=SEED)
    if change.n == 0:
        why_none = f"no case has a value of {spec.metric} in both configs"
        if not blocking:
            return GateResult(**common, value=None, n=0, status="advisory", blocking=False, reason=f"{why_none}; {what}")
        return no_data(common, spec.on_missing, why_none)
    assert change.worsening is not None and change.p_value is not None and change.delta is not None
    over = change.worsening > spec.max_drop
    failed = over and change.real
    summary = (f"{change.n} paired cases: {spec.baseline} {change.mean_a:.4f} -> {spec.candidate} "
               f"{change.mean_b:.4f} (change {change.delta:+.4f}), p = {change.p_value:.4f}")
    if failed:
        verdict = f"a real {direction} of {change.worsening:.4f} > {spec.max_drop}"
    elif over:
        verdict = f"a {direction} of {change.worsening:.4f} > {spec.max_drop}, but not shown to be real (p >= {ALPHA})"
    elif change.worsening <= 0:
        verdict = f"no {direction}" + (" (a real improvement)" if change.real and change.worsening < 0 else "")
    else:
        verdict = f"a {direction} of {change.worsening:.4f} within {spec.max_drop}"
    status: Literal["fail", "pass"] = "fail" if failed else "pass"
    if not blocking:
        return GateResult(**common, value=change.worsening, n=change.n, p_value=change.p_value, status="advisory",
                          blocking=False, reason=f"would {status}: {summary}: {verdict}; {what}")
    return GateResult(**common, value=change.worsening, n=change.n, p_value=change.p_value, status=status,
                      blocking=True, reason=f"{summary}: {verdict}; {what}")
