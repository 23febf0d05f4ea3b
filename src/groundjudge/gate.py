"""Gate stage (SPEC 7): decide whether a release may ship.

Deterministic gates always apply. A judge gate (any metric a rubric criterion feeds) applies
only when the judge is trusted for that criterion; otherwise it is reported as advisory with
the reason. ACL leaks and too many judge errors block whatever the averages say, in the configs
the gates cover; leaks in other configs are reported beside the verdict and do not change it.

Where the calibration record holds a guaranteed cut-off for the criterion (selective trust,
``calibrate/cascade.py``), a judge gate instead takes the share of True labels among the items
decided by trusted verdicts, trusted escalated verdicts and human labels (an ordinal criterion:
their mean grade), and applies only when they cover at least ``min_coverage`` of the config's
judged items; what the all-or-nothing rule would have said is reported beside it. A criterion
with no cut-off keeps the all-or-nothing rule, and its reason says why selective trust does not
apply to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.cascade import CriterionCascade, SelectiveTrust
from groundjudge.calibrate.trust import TrustRules, TrustStatus, trust_status
from groundjudge.config import GatesConfig, Threshold
from groundjudge.judge.results import JudgeRun
from groundjudge.metrics.evaluate import MetricsRun

Status = Literal["pass", "fail", "advisory", "no_data"]


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    config_id: str
    metric: str
    tag: str | None
    threshold: str
    value: float | None
    n: int
    status: Status
    blocking: bool
    reason: str
    all_or_nothing: str | None = None  # selective gates: what the all-or-nothing rule would have said


class GateReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    passed: bool
    failed: list[str]
    results: list[GateResult]
    gated_configs: list[str]
    ungated_acl_leaks: dict[str, list[str]]  # config not covered by the gates -> cases that leak
    trust: dict[str, TrustStatus]  # judge metric -> trust of the criterion that feeds it
    rules: TrustRules
    selective: SelectiveTrust | None = None


def _check(value: float | None, threshold: Threshold) -> bool:
    if threshold.min is not None and (value is None or value < threshold.min):
        return False
    return not (threshold.max is not None and (value is None or value > threshold.max))


def _describe(threshold: Threshold) -> str:
    parts = []
    if threshold.min is not None:
        parts.append(f">= {threshold.min}")
    if threshold.max is not None:
        parts.append(f"<= {threshold.max}")
    return " and ".join(parts) or "(no bound)"


def gate_configs(gates: GatesConfig, config_ids: Sequence[str]) -> list[str]:
    return list(gates.configs) or list(config_ids[-1:])


def _leaks(metrics: MetricsRun, cfg: str) -> list[str]:
    return [c.case_id for c in metrics.configs[cfg].cases if c.acl_leaks]


def _f(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def _selective_gate(common: dict[str, Any], cascade: CriterionCascade, threshold: Threshold, rules: TrustRules,
                    today: str) -> GateResult:
    c = cascade.counts
    ok = _check(cascade.rate, threshold)
    who = (f"{c['trusted']} trusted, {c['escalated']} escalated, {c['human']} human of {cascade.items} judged items"
           f" ({c['queued']} queued for people)")
    if cascade.coverage is None or cascade.coverage < rules.min_coverage:
        return GateResult(**common, tag=None, value=cascade.rate, n=cascade.decided, status="advisory",
                          blocking=False, all_or_nothing=today,
                          reason=f"{'would pass' if ok else 'would fail'}; selective trust: coverage "
                                 f"{_f(cascade.coverage)} < min_coverage {rules.min_coverage}: {who}")
    level = (f"decided items agree with people >= {cascade.guaranteed:.3f} with probability >= "
             f"{1 - (cascade.guarantee_risk or 0.0):.2f}")
    value = "mean grade of decided items" if cascade.kind == "ordinal" else "share of decided items labelled True"
    return GateResult(**common, tag=None, value=cascade.rate, n=cascade.decided, status="pass" if ok else "fail",
                      blocking=True, all_or_nothing=today,
                      reason=f"selective trust (value: {value}): coverage {cascade.coverage:.3f}: {who}; {level}")


def evaluate_gates(metrics: MetricsRun, judge: JudgeRun | None, gates: GatesConfig, rules: TrustRules,
                   records: Sequence[dict[str, Any]], selective: SelectiveTrust | None = None) -> GateReport:
    """Every gate's result; ``passed`` is False when any blocking gate failed."""
    results: list[GateResult] = []
    trust: dict[str, TrustStatus] = {}
    if judge is not None:
        for crit in judge.criteria:
            trust[crit.metric] = trust_status(crit.name, judge.identity.model_dump(), records, rules)
    configs = list(metrics.configs)
    gated = gate_configs(gates, configs)
    for cfg in gated:
        if cfg not in metrics.configs:
            results.append(GateResult(name=f"{cfg}: config present", config_id=cfg, metric="-", tag=None,
                                      threshold="present", value=None, n=0, status="fail", blocking=True,
                                      reason=f"config {cfg!r} named in [gates] has no traces"))
            continue
        det = metrics.configs[cfg]
        jud = judge.per_config.get(cfg) if judge else None
        scopes = [(None, name, th) for name, th in gates.metrics.items()]
        scopes += [(tag, name, th) for tag, per in gates.tags.items() for name, th in per.items()]
        for tag, metric, threshold in scopes:
            label = f"{cfg}: {metric}" + (f" [tag {tag}]" if tag else "") + f" {_describe(threshold)}"
            common = dict(name=label, config_id=cfg, metric=metric, threshold=_describe(threshold))
            if metric in trust:
                if tag is not None:
                    results.append(GateResult(**common, tag=tag, value=None, n=0, status="no_data", blocking=False,
                                              reason="judge gates per tag are not supported"))
                    continue
                summary = jud.summary.metrics.get(metric) if jud else None
                value, n = (summary.value, summary.n) if summary else (None, 0)
                t = trust.get(metric) or TrustStatus(trusted=False, reason="no judge ran")
                ok = _check(value, threshold)
                crit = judge.criterion_for_metric(metric) if judge else None
                cascade = selective.per_config.get(cfg, {}).get(crit.name) if selective and crit else None
                if cascade is not None:
                    today = (f"{'would pass' if ok else 'would fail'} on all {n} verdicts (mean {_f(value)}), "
                             f"{'blocking' if t.trusted else 'advisory'}: {t.reason}")
                    results.append(_selective_gate(common, cascade, threshold, rules, today))
                    continue
                why = selective.all_or_nothing.get(crit.name) if selective and crit else None
                note = f"; selective trust does not apply: {why}" if why else ""
                if not t.trusted:
                    results.append(GateResult(**common, tag=None, value=value, n=n, status="advisory", blocking=False,
                                              reason=f"{'would pass' if ok else 'would fail'}; {t.reason}{note}"))
                else:
                    results.append(GateResult(**common, tag=None, value=value, n=n, status="pass" if ok else "fail",
                                              blocking=True, reason=t.reason + note))
                continue
            source = det.breakdown["tag"].get(tag, {}) if tag else det.aggregate
            summary_d = source.get(metric)
            if summary_d is None or summary_d["value"] is None:
                results.append(GateResult(**common, tag=tag, value=None, n=summary_d["n"] if summary_d else 0,
                                          status="no_data", blocking=False, reason="no case defines this metric"))
                continue
            ok = _check(summary_d["value"], threshold)
            results.append(GateResult(**common, tag=tag, value=summary_d["value"], n=summary_d["n"],
                                      status="pass" if ok else "fail", blocking=True, reason="deterministic"))
        if gates.acl_leaks_block:
            leaks = _leaks(metrics, cfg)
            results.append(GateResult(name=f"{cfg}: no ACL leak", config_id=cfg, metric="acl_leak", tag=None,
                                      threshold="== 0 cases", value=float(len(leaks)), n=len(det.cases),
                                      status="fail" if leaks else "pass", blocking=True,
                                      reason=("critical: leaks in " + ", ".join(leaks)) if leaks else "deterministic"))
        if jud is not None:
            rate = jud.summary.judge_error_rate
            ok = rate.value is None or rate.value <= gates.max_judge_error_rate
            results.append(GateResult(name=f"{cfg}: judge_error rate <= {gates.max_judge_error_rate}", config_id=cfg,
                                      metric="judge_error_rate", tag=None, threshold=f"<= {gates.max_judge_error_rate}",
                                      value=rate.value, n=rate.n, status="pass" if ok else "fail", blocking=True,
                                      reason="too many cases could not be judged" if not ok else "judge health"))
    ungated = {cfg: leaks for cfg in configs if cfg not in gated and (leaks := _leaks(metrics, cfg))}
    failed = [r for r in results if r.status == "fail" and r.blocking]
    return GateReport(passed=not failed, failed=[r.name for r in failed], results=results, gated_configs=gated,
                      ungated_acl_leaks=ungated, trust=trust, rules=rules, selective=selective)
