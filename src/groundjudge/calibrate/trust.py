"""The trust rule (SPEC 6): a judge metric may gate a release only on proven agreement.

Trusted needs a calibration record for exactly this rubric hash, judge model and decoding
settings, with at least ``min_items`` items, kappa >= ``min_kappa`` and the CI's lower bound
>= ``min_kappa_lower``. Anything else leaves the metric advisory, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.record import identity, identity_hash


class TrustRules(BaseModel):
    model_config = ConfigDict(frozen=True)
    min_items: int = 50
    min_kappa: float = 0.6
    min_kappa_lower: float = 0.4
    min_coverage: float = 0.8  # selective trust: decided share of a config's judged items


class TrustStatus(BaseModel):
    model_config = ConfigDict(frozen=True)
    trusted: bool
    reason: str
    record: str | None = None


def _stale_reason(record: dict[str, Any], want: dict[str, Any]) -> str:
    have = record["judge"]
    if have["rubric"]["id"] != want["rubric"]["id"]:
        return ""
    diffs = []
    if have["rubric"]["hash"] != want["rubric"]["hash"] or have["rubric"]["version"] != want["rubric"]["version"]:
        diffs.append(f"rubric v{have['rubric']['version']} hash {have['rubric']['hash'][:12]} "
                     f"(run: v{want['rubric']['version']} {want['rubric']['hash'][:12]})")
    if have["model"] != want["model"]:
        diffs.append(f"model {have['model']} (run: {want['model']})")
    if have["decoding"] != want["decoding"]:
        diffs.append(f"decoding {have['decoding']} (run: {want['decoding']})")
    return "; ".join(diffs)


def trust_status(criterion: str, run_provenance: dict[str, Any], records: Sequence[dict[str, Any]],
                 rules: TrustRules) -> TrustStatus:
    want = identity(run_provenance)
    key = identity_hash(want)
    exact = [r for r in records if r.get("identity_hash") == key]
    if not exact:
        stale = [s for r in records if (s := _stale_reason(r, want))]
        if stale:
            return TrustStatus(trusted=False, reason="untrusted: the calibration record is stale: " + stale[0])
        return TrustStatus(trusted=False, reason="untrusted: no calibration record for this rubric, model and decoding")
    record = max(exact, key=lambda r: r.get("created", ""))
    stats = record["criteria"].get(criterion, {}).get("judge_vs_human")
    where = record.get("_path")
    if not stats:
        return TrustStatus(trusted=False, reason=f"untrusted: the record has no `{criterion}` agreement", record=where)
    n, k, low = stats["n"], stats["kappa"], stats["ci_low"]
    if n < rules.min_items:
        return TrustStatus(trusted=False, reason=f"untrusted: {n} labelled items < min_items {rules.min_items}",
                           record=where)
    if k is None or k < rules.min_kappa:
        return TrustStatus(trusted=False, reason=f"untrusted: kappa {_f(k)} < min_kappa {rules.min_kappa}", record=where)
    if low is None or low < rules.min_kappa_lower:
        return TrustStatus(trusted=False, reason=f"untrusted: kappa CI lower bound {_f(low)} < min_kappa_lower "
                                                f"{rules.min_kappa_lower}", record=where)
    return TrustStatus(trusted=True, reason=f"trusted: n={n}, kappa {k:.3f}, 95% CI [{low:.3f}, "
                                            f"{stats['ci_high']:.3f}]", record=where)


def _f(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"  # kappa: undefined, not missing
