"""The trust rule (SPEC 6): a judge metric may gate a release only on proven agreement.

Trusted needs a calibration record for exactly this rubric hash, judge model and decoding
settings, with at least ``min_items`` items, kappa >= ``min_kappa`` and the CI's lower bound
>= ``min_kappa_lower``. Anything else leaves the metric advisory, with the reason. Of several
records for the judge, the one with the most evidence decides (``evidence.RULE``), and the
reason names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.evidence import (
    RULE,
    criterion_n,
    deciding_record,
    describe,
    record_file,
    record_labels_hash,
    reference,
)
from groundjudge.calibrate.record import identity, identity_hash

if TYPE_CHECKING:
    from groundjudge.judge.results import JudgeRun

DECIDED_BY = "; decided by "  # joins a trust reason and the record that decided it


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
    record: str | None = None  # the record that decided, by the rule in docs/calibration.md
    labels_hash: str | None = None  # its labels hash (None: a legacy record, labels unrecorded)
    n: int | None = None  # its labelled items for this criterion
    raters: dict[str, int] | None = None  # its raters and their item counts


def exact_records(run_provenance: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records built for exactly this judge: rubric (id, version, hash), model, decoding."""
    key = identity_hash(identity(dict(run_provenance)))
    return [r for r in records if r.get("identity_hash") == key]


def in_sample(record: Mapping[str, Any]) -> bool:
    """A record whose verdicts come from a fitted rubric scoring the labels it was fitted on
    (``groundjudge align``; ``fitting.predictions``): its agreement is optimistic, so it never gates."""
    return (record.get("fitting") or {}).get("predictions") == "in_sample"


_MISSING = object()


def _value(value: Any) -> str:
    return "not set" if value is _MISSING else json.dumps(value, ensure_ascii=True)


def stale_differences(have: Mapping[str, Any], want: Mapping[str, Any]) -> list[str]:
    """What differs between a record's judge and the run's, field by field, both values named."""
    diffs = []
    hr, wr = have["rubric"], want["rubric"]
    if hr["version"] != wr["version"]:
        diffs.append(f"rubric version: {hr['version']} in the record, {wr['version']} in this run")
    if hr["hash"] != wr["hash"]:
        diffs.append(f"rubric hash: {hr['hash'][:12]} in the record, {wr['hash'][:12]} in this run")
    if have["model"] != want["model"]:
        diffs.append(f"model: {have['model']} in the record, {want['model']} in this run")
    hd, wd = have.get("decoding") or {}, want.get("decoding") or {}
    for key in sorted(set(hd) | set(wd)):
        a, b = hd.get(key, _MISSING), wd.get(key, _MISSING)
        if a != b:  # a key set on one side only differs too
            diffs.append(f"decoding {key}: {_value(a)} in the record, {_value(b)} in this run")
    return diffs


def _stale_reason(criterion: str, records: Sequence[Mapping[str, Any]], want: dict[str, Any]) -> str:
    """The closest record of the same rubric family (fewest differing fields, then the most
    evidence for the criterion, then newest) and what differs; "" when there is none."""
    candidates = [(stale_differences(r["judge"], want), r) for r in records
                  if r.get("judge", {}).get("rubric", {}).get("id") == want["rubric"]["id"]]
    candidates = sorted(((d, r) for d, r in candidates if d), key=lambda dr: dr[1].get("created", ""), reverse=True)
    if not candidates:
        return ""
    # min keeps the first of equals: the newest
    diffs, record = min(candidates, key=lambda dr: (len(dr[0]), -(criterion_n(dr[1], criterion) or 0)))
    where = f" (closest record {record_file(record)})" if record.get("_path") else ""
    return "; ".join(diffs) + where


def trust_status(criterion: str, run_provenance: dict[str, Any], records: Sequence[Mapping[str, Any]],
                 rules: TrustRules) -> TrustStatus:
    want = identity(run_provenance)
    exact = exact_records(run_provenance, records)
    if not exact:
        stale = _stale_reason(criterion, records, want)
        if stale:
            return TrustStatus(trusted=False, reason="untrusted: the calibration record is stale: " + stale)
        return TrustStatus(trusted=False, reason="untrusted: no calibration record for this rubric, model and decoding")
    fitted_on = [r for r in exact if in_sample(r)]
    exact = [r for r in exact if not in_sample(r)]
    if not exact:
        why = (fitted_on[0].get("fitting") or {}).get("reason") or "its labels were used to fit the rubric"
        return TrustStatus(trusted=False, reason=f"untrusted: every calibration record of this judge is in-sample ({why}); "
                                                 "calibrate on labels of questions the rubric was not fitted on, or "
                                                 "keep the out-of-fold record `groundjudge align` wrote",
                           record=fitted_on[0].get("_path"))
    record = deciding_record(criterion, exact)
    if record is None:
        newest = max(exact, key=lambda r: r.get("created", ""))
        return TrustStatus(trusted=False, reason=f"untrusted: no record of this judge has `{criterion}` agreement "
                                                 f"({record_file(newest)} and {len(exact) - 1} other(s))",
                           record=newest.get("_path"))
    stats = record["criteria"][criterion]["judge_vs_human"]
    decided = {"record": record.get("_path"), "labels_hash": record_labels_hash(record), "n": stats["n"],
               "raters": dict(record.get("raters") or {})}
    by = f"{DECIDED_BY}{describe(record, criterion)}"
    n, k, low = stats["n"], stats["kappa"], stats["ci_low"]
    if n < rules.min_items:
        return TrustStatus(trusted=False, reason=f"untrusted: {n} labelled items < min_items {rules.min_items}{by}",
                           **decided)
    if k is None or k < rules.min_kappa:
        return TrustStatus(trusted=False, reason=f"untrusted: kappa {_f(k)} < min_kappa {rules.min_kappa}{by}",
                           **decided)
    if low is None or low < rules.min_kappa_lower:
        return TrustStatus(trusted=False, reason=f"untrusted: kappa CI lower bound {_f(low)} < min_kappa_lower "
                                                f"{rules.min_kappa_lower}{by}", **decided)
    return TrustStatus(trusted=True, reason=f"trusted: n={n}, kappa {k:.3f}, 95% CI [{low:.3f}, "
                                            f"{stats['ci_high']:.3f}]{by}", **decided)


def _f(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"  # kappa: undefined, not missing


def calibration_summary(judge: JudgeRun, records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What report.json states about the calibration records this run's judge is held to: per
    criterion, the figures of the record that decides it and that record (file, labels hash, n,
    raters); every record of this judge, with the criteria it decides. The top-level path,
    raters and claims are those of the record that decides the most criteria. None when no
    record is for exactly this judge."""
    exact = [r for r in exact_records(judge.identity.model_dump(), records) if not in_sample(r)]
    criteria = [c.name for c in judge.criteria]
    deciding = {c: r for c in criteria if (r := deciding_record(c, exact)) is not None}
    if not deciding:
        return None
    paths = [r.get("_path") for r in deciding.values()]
    main = max(deciding.values(), key=lambda r: paths.count(r.get("_path")))  # first of equals: criterion order
    return {
        "path": main.get("_path"), "primary_rater": main["primary_rater"], "raters": dict(main["raters"]),
        "criteria": {name: {"judge_vs_human": st["judge_vs_human"], "inter_rater": st["inter_rater"],
                            **({"selective": st["selective"]} if "selective" in st else {}),
                            **({"review": st["review"]} if "review" in st else {})}
                     for name, r in deciding.items() for st in [r["criteria"][name]]},
        "claims": main["claims"],
        "rule": RULE,
        "decided_by": {name: reference(r, name) for name, r in deciding.items()},
        "records": [{"path": r.get("_path"), "labels_hash": record_labels_hash(r),
                     "raters": dict(r.get("raters") or {}), "n": {c: criterion_n(r, c) for c in r.get("criteria", {})},
                     "created": r.get("created"), "decides": [c for c, d in deciding.items() if d is r]}
                    for r in sorted(exact, key=lambda r: r.get("created", ""), reverse=True)],
    }
