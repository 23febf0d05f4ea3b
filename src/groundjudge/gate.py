"""Gate stage (SPEC 7): decide whether a release may ship.

Deterministic gates always apply. Judge gates (faithfulness, correctness, citation support)
apply only when the judge is trusted for that criterion; otherwise they are reported as
advisory with the reason. ACL leaks and too many judge errors block whatever the averages say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from groundjudge.calibrate.trust import METRIC_CRITERION, TrustRules, trust_status
from groundjudge.config import GatesConfig, Threshold

Status = Literal["pass", "fail", "advisory", "no_data"]


@dataclass(frozen=True)
class GateResult:
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


def evaluate_gates(doc: dict[str, Any], gates: GatesConfig, rules: TrustRules,
                   records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Gate results for the report; ``passed`` is False when any blocking gate failed."""
    judge = doc.get("judge")
    results: list[GateResult] = []
    trust: dict[str, dict[str, Any]] = {}
    if judge is not None:
        for metric, criterion in METRIC_CRITERION.items():
            status = trust_status(criterion, judge["provenance"], records, rules)
            trust[metric] = {"trusted": status.trusted, "reason": status.reason, "record": status.record}
    for cfg in gate_configs(gates, doc["configs"]):
        if cfg not in doc["per_config"]:
            results.append(GateResult(f"{cfg}: config present", cfg, "-", None, "present", None, 0, "fail", True,
                                      f"config {cfg!r} named in [gates] has no traces"))
            continue
        det = doc["per_config"][cfg]
        jud = judge["per_config"].get(cfg) if judge else None
        scopes = [(None, name, th) for name, th in gates.metrics.items()]
        scopes += [(tag, name, th) for tag, per in gates.tags.items() for name, th in per.items()]
        for tag, metric, threshold in scopes:
            label = f"{cfg}: {metric}" + (f" [tag {tag}]" if tag else "") + f" {_describe(threshold)}"
            if metric in METRIC_CRITERION:
                if tag is not None:
                    results.append(GateResult(label, cfg, metric, tag, _describe(threshold), None, 0, "no_data",
                                              False, "judge gates per tag are not supported"))
                    continue
                summary = jud["aggregate"][metric] if jud else {"value": None, "n": 0}
                value, n = summary["value"], summary["n"]
                t = trust.get(metric, {"trusted": False, "reason": "no judge ran"})
                ok = _check(value, threshold)
                if not t["trusted"]:
                    results.append(GateResult(label, cfg, metric, None, _describe(threshold), value, n, "advisory",
                                              False, f"{'would pass' if ok else 'would fail'}; {t['reason']}"))
                    continue
                status: Status = "pass" if ok else "fail"
                results.append(GateResult(label, cfg, metric, None, _describe(threshold), value, n, status,
                                          True, t["reason"]))
                continue
            source = det["by_tag"].get(tag, {}) if tag else det["aggregate"]
            summary = source.get(metric)
            if summary is None or summary["value"] is None:
                results.append(GateResult(label, cfg, metric, tag, _describe(threshold), None,
                                          summary["n"] if summary else 0, "no_data", False,
                                          "no case defines this metric"))
                continue
            ok = _check(summary["value"], threshold)
            results.append(GateResult(label, cfg, metric, tag, _describe(threshold), summary["value"], summary["n"],
                                      "pass" if ok else "fail", True, "deterministic"))
        if gates.acl_leaks_block:
            leaks = [cid for cid, d in det.get("case_details", {}).items() if d["acl_leaks"]]
            results.append(GateResult(f"{cfg}: no ACL leak", cfg, "acl_leak", None, "== 0 cases", float(len(leaks)),
                                      len(det.get("case_details", {})), "fail" if leaks else "pass", True,
                                      ("critical: leaks in " + ", ".join(leaks)) if leaks else "deterministic"))
        if jud is not None:
            rate = jud["aggregate"]["judge_error_rate"]
            ok = rate["value"] is None or rate["value"] <= gates.max_judge_error_rate
            results.append(GateResult(f"{cfg}: judge_error rate <= {gates.max_judge_error_rate}", cfg,
                                      "judge_error_rate", None, f"<= {gates.max_judge_error_rate}", rate["value"],
                                      rate["n"], "pass" if ok else "fail", True,
                                      "too many cases could not be judged" if not ok else "judge health"))
    failed = [r for r in results if r.status == "fail" and r.blocking]
    return {"passed": not failed, "failed": [r.name for r in failed], "results": [asdict(r) for r in results],
            "trust": trust, "rules": asdict(rules)}
