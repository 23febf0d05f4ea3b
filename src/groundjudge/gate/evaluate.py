"""Every gate of a run, evaluated: deterministic, judge, built-in and regression gates.

What each gate reads, and when it blocks (docs/gates.md):

- A deterministic gate (``[gates.metrics]``, ``[gates.tags.X]``) reads the metric's aggregate
  over the config's cases (or the tag's); it always blocks.
- A judge gate (a metric a rubric criterion feeds: ``faithfulness``, ``correctness``,
  ``citation_support``) reads the criterion's verdicts, the quantity calibration vouches for:
  the share of judged cases labelled True for a binary criterion, their mean grade for an
  ordinal one. It blocks only when the judge is trusted for that criterion (all-or-nothing
  kappa rule, ``calibrate/trust.py``); otherwise it is ``advisory`` with the reason. Where the
  calibration record holds a guaranteed cut-off (selective trust, ``calibrate/cascade.py``),
  the same quantity is taken over the items decided by trusted verdicts, trusted escalated
  verdicts and human labels, and it blocks only when they cover at least ``min_coverage`` of
  the config's judged items; what the all-or-nothing rule would have said is reported beside it.
- Built-in gates: no ACL leak (blocks on any leak in a gated config; with no case that carries
  ACL information it has nothing to check and is ``no_data``, reported without blocking) and
  the judge_error rate (``max_judge_error_rate``, or ``[gates.metrics] judge_error_rate``;
  blocks).
- Regression gates (``[[gates.regression]]``, :mod:`.regression`).

A gate that could not be evaluated never passes: a gate whose metric has no data (n = 0) is
``no_data``; when the gate blocks, that fails the verdict with the reason, unless the gate
says ``on_missing = "skip"`` (reported, not blocking). An advisory judge gate stays advisory.
Gates with an unknown metric, an uncomputed k or a bound that is not a finite number never get
here: they are configuration errors (:mod:`.check`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.cascade import CriterionCascade, SelectiveTrust
from groundjudge.calibrate.trust import TrustRules, TrustStatus, trust_status
from groundjudge.config import GatesConfig, Threshold
from groundjudge.judge.results import CaseJudgement, CriterionInfo, JudgeRun
from groundjudge.metrics.evaluate import ConfigMetrics, MetricsRun

Status = Literal["pass", "fail", "advisory", "no_data"]
Kind = Literal["metric", "judge", "acl", "judge_health", "presence", "regression"]
DEFAULT_MAX_JUDGE_ERROR_RATE = 0.1
JUDGE_ERROR_RATE = "judge_error_rate"


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
    kind: Kind = "metric"
    baseline: str | None = None  # regression gates: the config the candidate (``config_id``) is compared with
    p_value: float | None = None  # regression gates: the paired sign-flip test's p

    @property
    def failed(self) -> bool:
        """A blocking gate that failed, or that could not be evaluated."""
        return self.blocking and self.status in ("fail", "no_data")


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


def _check(value: float, threshold: Threshold) -> bool:
    if threshold.min is not None and value < threshold.min:
        return False
    return not (threshold.max is not None and value > threshold.max)


def describe(threshold: Threshold) -> str:
    parts = []
    if threshold.min is not None:
        parts.append(f">= {threshold.min}")
    if threshold.max is not None:
        parts.append(f"<= {threshold.max}")
    return " and ".join(parts)


def gate_configs(gates: GatesConfig, config_ids: Sequence[str]) -> list[str]:
    return list(gates.configs) or list(config_ids[-1:])


def _leaks(metrics: MetricsRun, cfg: str) -> list[str]:
    return [c.case_id for c in metrics.configs[cfg].cases if c.acl_leaks]


def _f(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def no_data(common: dict[str, Any], on_missing: str, why: str) -> GateResult:
    """A gate that could not be evaluated: it blocks (and so fails the verdict) unless it says
    ``on_missing = "skip"``."""
    skip = on_missing == "skip"
    then = ('on_missing = "skip": reported, not blocking' if skip
            else 'a gate that cannot be evaluated fails (on_missing = "skip" reports it without blocking)')
    return GateResult(**{"value": None, "n": 0, **common}, status="no_data", blocking=not skip,
                      reason=f"no data: {why}; {then}")


def verdict_rate(cases: Mapping[str, CaseJudgement], crit: CriterionInfo) -> tuple[float | None, int]:
    """What a judge gate reads: the share of judged cases labelled True (binary criterion) or
    their mean grade (ordinal), over the cases with a verdict for ``crit``; and their count."""
    labels = [float(label) for c in cases.values() if c.status == "judged" and (label := c.label(crit.name)) is not None]
    return (sum(labels) / len(labels) if labels else None), len(labels)


def verdict_words(crit: CriterionInfo, over: str = "judged cases") -> str:
    """What :func:`verdict_rate` is, in words, for reasons and reports."""
    what = f"mean grade of {over}" if crit.kind == "ordinal" else f"share of {over} labelled True"
    return f"{what} ({crit.name})"


def _selective_gate(common: dict[str, Any], cascade: CriterionCascade, threshold: Threshold, rules: TrustRules,
                    today: str, crit: CriterionInfo, keeps_verdicts: bool) -> GateResult:
    c = cascade.counts
    if cascade.items == 0:
        if not keeps_verdicts:  # a record whose cut-off keeps nothing: the gate could never block
            return GateResult(**common, value=None, n=0, status="advisory", blocking=False, all_or_nothing=today,
                              reason="no data (n = 0); selective trust: the judge's record keeps no verdict")
        return no_data({**common, "all_or_nothing": today}, threshold.on_missing,
                       "no judged case has a verdict for this criterion")
    ok = cascade.rate is not None and _check(cascade.rate, threshold)
    who = (f"{c['trusted']} trusted, {c['escalated']} escalated, {c['human']} human of {cascade.items} judged items"
           f" ({c['queued']} queued for people)")
    value = f"value: {verdict_words(crit, 'decided items')}"
    if cascade.coverage is None or cascade.coverage < rules.min_coverage:
        would = "would pass" if ok else ("would fail" if cascade.rate is not None else "no decided item")
        return GateResult(**common, value=cascade.rate, n=cascade.decided, status="advisory",
                          blocking=False, all_or_nothing=today,
                          reason=f"{would}; selective trust: coverage "
                                 f"{_f(cascade.coverage)} < min_coverage {rules.min_coverage}: {who}; {value}")
    level = (f"decided items agree with people >= {cascade.guaranteed:.3f} with probability >= "
             f"{1 - (cascade.guarantee_risk or 0.0):.2f}")
    return GateResult(**common, value=cascade.rate, n=cascade.decided, status="pass" if ok else "fail",
                      blocking=True, all_or_nothing=today,
                      reason=f"selective trust ({value}): coverage {cascade.coverage:.3f}: {who}; {level}")


def _judge_gate(common: dict[str, Any], cfg: str, metric: str, threshold: Threshold, judge: JudgeRun,
                trust: Mapping[str, TrustStatus], selective: SelectiveTrust | None, rules: TrustRules) -> GateResult:
    crit = judge.criterion_for_metric(metric)
    assert crit is not None
    section = judge.per_config.get(cfg)
    value, n = verdict_rate(section.cases, crit) if section else (None, 0)
    words = verdict_words(crit)
    t = trust.get(metric) or TrustStatus(trusted=False, reason="no judge ran")
    common = {**common, "kind": "judge"}
    ok = value is not None and _check(value, threshold)
    would = "would pass" if ok else ("would fail" if value is not None else "no data (n = 0)")
    cascade = selective.per_config.get(cfg, {}).get(crit.name) if selective else None
    if cascade is not None:
        short = "mean" if crit.kind == "ordinal" else "share labelled True"
        today = f"{would} on all {n} verdicts ({short} {_f(value)}), {'blocking' if t.trusted else 'advisory'}: {t.reason}"
        assert selective is not None
        first = selective.first.get(crit.name)
        keeps = first is not None and first.cutoff is not None
        return _selective_gate(common, cascade, threshold, rules, today, crit, keeps)
    why = selective.all_or_nothing.get(crit.name) if selective else None
    note = f"; selective trust does not apply: {why}" if why else ""
    if not t.trusted:
        return GateResult(**common, value=value, n=n, status="advisory", blocking=False,
                          reason=f"{would}; {t.reason}{note}; value: {words}")
    if value is None:
        return no_data(common, threshold.on_missing, f"no judged case has a {crit.name} verdict ({t.reason})")
    return GateResult(**common, value=value, n=n, status="pass" if ok else "fail", blocking=True,
                      reason=f"{t.reason}{note}; value: {words}")


def _deterministic_gate(common: dict[str, Any], det: ConfigMetrics, tag: str | None, metric: str,
                        threshold: Threshold) -> GateResult:
    if tag is not None and tag not in det.breakdown["tag"]:
        known = ", ".join(sorted(det.breakdown["tag"])) or "none"
        return no_data(common, threshold.on_missing, f"no case of this config has tag {tag!r} (tags: {known})")
    source = det.breakdown["tag"][tag] if tag else det.aggregate
    summary = source.get(metric)
    if summary is None or summary["value"] is None:
        why = "no case of this config defines it" + (f" (tag {tag})" if tag else "")
        if summary is not None and summary.get("reason"):
            why += f": {summary['reason']}"
        return no_data({**common, "n": summary["n"] if summary else 0}, threshold.on_missing, why)
    ok = _check(summary["value"], threshold)
    return GateResult(**common, value=summary["value"], n=summary["n"], status="pass" if ok else "fail",
                      blocking=True, reason="deterministic")


def _acl_gate(metrics: MetricsRun, cfg: str) -> GateResult:
    det = metrics.configs[cfg]
    checked = (det.aggregate.get("acl_leak") or {"n": 0})["n"]
    leaks = _leaks(metrics, cfg)
    common: dict[str, Any] = {"name": f"{cfg}: no ACL leak", "config_id": cfg, "metric": "acl_leak", "tag": None,
                              "threshold": "== 0 cases", "kind": "acl"}
    if not checked and not leaks:
        # A check for findings rather than a bound someone set: with nothing to check it says so
        # and does not block. `[gates.metrics] acl_leak = { max = 0 }` requires ACL evidence.
        return GateResult(**common, value=None, n=0, status="no_data", blocking=False,
                          reason="no case carries ACL information (a user_context and a corpus with ACLs): "
                                 "nothing was checked; gate acl_leak in [gates.metrics] to require it")
    return GateResult(**common, value=float(len(leaks)), n=max(checked, len(leaks)), status="fail" if leaks else "pass",
                      blocking=True,
                      reason=("critical: leaks in " + ", ".join(leaks)) if leaks else "deterministic")


def judge_error_threshold(gates: GatesConfig) -> Threshold:
    """The judge_error-rate gate's bound: ``[gates.metrics] judge_error_rate`` when given, else
    ``max_judge_error_rate`` (default 0.1)."""
    given = gates.metrics.get(JUDGE_ERROR_RATE)
    if given is not None:
        return given
    limit = DEFAULT_MAX_JUDGE_ERROR_RATE if gates.max_judge_error_rate is None else gates.max_judge_error_rate
    return Threshold(max=limit)


def _judge_health_gate(judge: JudgeRun, cfg: str, threshold: Threshold) -> GateResult:
    common: dict[str, Any] = {"name": f"{cfg}: judge_error rate {describe(threshold)}", "config_id": cfg,
                              "metric": JUDGE_ERROR_RATE, "tag": None, "threshold": describe(threshold), "kind": "judge_health"}
    section = judge.per_config.get(cfg)
    if section is None:
        return no_data(common, threshold.on_missing, "the judge stage has no record of this config")
    rate = section.summary.judge_error_rate
    if rate.value is None:
        skipped = Counter(c.reason or "" for c in section.cases.values() if c.status == "skipped")
        why = "; ".join(f"{n} x {reason}" for reason, n in skipped.most_common(3))
        return no_data(common, threshold.on_missing,
                       "no case of this config was sent to the judge (budget, smoke sample or nothing to judge"
                       + (f"; skipped: {why}" if why else "") + "), so its judge gates have no evidence")
    ok = _check(rate.value, threshold)
    return GateResult(**common, value=rate.value, n=rate.n, status="pass" if ok else "fail", blocking=True,
                      reason="judge health" if ok else "too many cases could not be judged")


def evaluate_gates(metrics: MetricsRun, judge: JudgeRun | None, gates: GatesConfig, rules: TrustRules,
                   records: Sequence[dict[str, Any]], selective: SelectiveTrust | None = None) -> GateReport:
    """Every gate's result; ``passed`` is False when any blocking gate failed or had no data."""
    from groundjudge.gate.regression import regression_gate

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
                                      reason=f"config {cfg!r} named in [gates] has no traces", kind="presence"))
            continue
        det = metrics.configs[cfg]
        scopes: list[tuple[str | None, str, Threshold]] = [
            (None, name, th) for name, th in gates.metrics.items() if name != JUDGE_ERROR_RATE]
        scopes += [(tag, name, th) for tag, per in gates.tags.items() for name, th in per.items()]
        for tag, metric, threshold in scopes:
            label = f"{cfg}: {metric}" + (f" [tag {tag}]" if tag else "") + f" {describe(threshold)}"
            common: dict[str, Any] = {"name": label, "config_id": cfg, "metric": metric, "tag": tag,
                                      "threshold": describe(threshold)}
            if judge is not None and tag is None and judge.criterion_for_metric(metric) is not None:
                results.append(_judge_gate(common, cfg, metric, threshold, judge, trust, selective, rules))
            else:
                results.append(_deterministic_gate(common, det, tag, metric, threshold))
        if gates.acl_leaks_block:
            results.append(_acl_gate(metrics, cfg))
        if judge is not None:  # a run without a judge stage (deterministic gates only) has no judge health
            results.append(_judge_health_gate(judge, cfg, judge_error_threshold(gates)))
    for spec in gates.regression:
        results.append(regression_gate(spec, metrics, judge, trust, selective, rules))
    ungated = {cfg: leaks for cfg in configs if cfg not in gated and (leaks := _leaks(metrics, cfg))}
    failed = [r for r in results if r.failed]
    return GateReport(passed=not failed, failed=[r.name for r in failed], results=results, gated_configs=gated,
                      ungated_acl_leaks=ungated, trust=trust, rules=rules, selective=selective)
