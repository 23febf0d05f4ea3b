"""Calibration records: judge-human agreement per criterion for one exact judge identity.

A record is written per (rubric id, version, hash, judge model, decoding settings) and per
evidence (the labels, the judge's verdicts, the rater compared with; see ``evidence``): the file
name carries the identity, the labels hash and the evidence hash, so a record can never be
mistaken for another judge's, and a record built from other evidence is written beside an
earlier one instead of over it. Only the same evidence replaces its own record.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from groundjudge.calibrate.evidence import build_evidence
from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, lookup
from groundjudge.calibrate.verdicts import primary_rater as default_primary
from groundjudge.errors import InputError
from groundjudge.files import write_json_atomic
from groundjudge.judge.results import CriterionInfo
from groundjudge.provenance import provenance

SCHEMA_VERSION = 2  # 2: the record names its evidence; version-1 records are read as legacy (labels unrecorded)
CLAIM_MATCH = 0.6  # difflib ratio above which a judge claim and a human claim are the same claim


def identity(provenance_: dict[str, Any]) -> dict[str, Any]:
    """The part of a judge's provenance a record is bound to."""
    return {"rubric": provenance_["rubric"], "model": provenance_["model"], "decoding": provenance_["decoding"]}


def identity_hash(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def record_name(ident: dict[str, Any], evidence: dict[str, Any] | None = None, *, digits: int = 8) -> str:
    """``<rubric>-v<version>-<hash>__<model>__<identity>__labels-<labels hash>-<evidence hash>.json``;
    without evidence, the name legacy records have."""
    rubric = ident["rubric"]
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", ident["model"])[:60]
    base = f"{rubric['id']}-v{rubric['version']}-{rubric['hash'][:12]}__{model}__{identity_hash(ident)[:10]}"
    if evidence is None:
        return base + ".json"
    return f"{base}__labels-{evidence['labels_hash'][:12]}-{evidence['hash'][:digits]}.json"


def _pairs(first: dict[ItemKey, ItemLabels], second: dict[ItemKey, ItemLabels], criterion: str,
           ) -> tuple[list[bool | int], list[bool | int], list[str]]:
    a: list[bool | int] = []
    b: list[bool | int] = []
    ids: list[str] = []
    for key, item in sorted(first.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        other = lookup(second, key)
        if other is None:
            continue
        x, y = item.labels.get(criterion), other.labels.get(criterion)
        if x is None or y is None:
            continue
        a.append(x)
        b.append(y)
        ids.append(f"{key[1]}/{key[0]}" if key[1] else key[0])
    return a, b, ids


def _agree(first: dict[ItemKey, ItemLabels], second: dict[ItemKey, ItemLabels], criterion: CriterionInfo,
           seed: int, target_width: float, reps: int) -> dict[str, Any]:
    from groundjudge.calibrate.agreement import agreement  # numpy and scikit-learn: only when calibrating

    a, b, ids = _pairs(first, second, criterion.name)
    return agreement(a, b, ids, criterion.labels, ordinal=criterion.kind == "ordinal", seed=seed,
                     target_width=target_width, reps=reps).as_dict()


def claim_agreement(judge: dict[ItemKey, ItemLabels], human: dict[ItemKey, ItemLabels]) -> dict[str, Any]:
    """Match judge claims to human claims by text, then compare their supported flags."""
    matched = agree = 0
    for key, item in judge.items():
        other = lookup(human, key)
        if other is None or not other.claims:
            continue
        free = list(item.claims)
        for text, supported in other.claims:
            scored = [(difflib.SequenceMatcher(None, text.casefold(), jt.casefold()).ratio(), i)
                      for i, (jt, _) in enumerate(free)]
            if not scored:
                break
            ratio, i = max(scored)
            if ratio >= CLAIM_MATCH:
                judged = free.pop(i)[1]
                if judged is not None:  # None: the judge left the claim unchecked
                    matched += 1
                    agree += int(judged == supported)
    return {"matched_claims": matched, "agreement": agree / matched if matched else None}


def selective_trust(judge: dict[ItemKey, ItemLabels], human: dict[ItemKey, ItemLabels], criterion: CriterionInfo,
                    *, target_agreement: float, risk: float, seed: int) -> dict[str, Any] | None:
    """Reliability, the guaranteed cut-off and (binary criteria) the cross-fitted kappa
    threshold of a criterion whose verdicts carry a confidence; None where none does (that
    criterion stays on the all-or-nothing rule). Ordinal verdicts agree only on the exact grade."""
    from groundjudge.calibrate.selective import (
        VERDICT_CONFIDENCE,
        agrees,
        fit_cutoff,
        kappa_threshold,
        reliability,
        verdict_confidence,
    )

    rows = []
    for key, item in sorted(judge.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        other = lookup(human, key)
        said, truth = item.labels.get(criterion.name), other.labels.get(criterion.name) if other else None
        if said is None or truth is None:
            continue
        rows.append((said, item.confidence.get(criterion.name), truth))
    if not any(conf is not None for _, conf, _ in rows):
        return None
    kind = criterion.kind
    confidence = [verdict_confidence(said, conf, kind) for said, conf, _ in rows]
    correct = [agrees(said, truth, kind) for said, _, truth in rows]
    scored = [(conf, bool(truth)) for _, conf, truth in rows if conf is not None]
    return {
        "target_agreement": target_agreement, "risk": risk, "kind": kind,
        "verdict_confidence": VERDICT_CONFIDENCE[kind],
        "reliability": reliability(confidence, correct).as_dict(),
        # a threshold on P(True) exists only for a binary verdict
        "kappa_threshold": kappa_threshold([c for c, _ in scored], [t for _, t in scored], seed=seed)
        if kind == "binary" else None,
        "cutoff": fit_cutoff(confidence, correct, target_agreement=target_agreement, risk=risk).as_dict(),
    }


def build_record(judge: dict[ItemKey, ItemLabels], judge_provenance: dict[str, Any],
                 humans: dict[str, dict[ItemKey, ItemLabels]], criteria: Sequence[CriterionInfo], *,
                 primary_rater: str | None = None, label_files: Sequence[Path] = (),
                 verdicts_file: Path | None = None, seed: int = 0, target_width: float = 0.2, reps: int = 2000,
                 target_agreement: float = 0.9, risk: float = 0.1) -> dict[str, Any]:
    if not humans:
        raise ValueError("no human labels")
    primary = primary_rater or default_primary(humans)
    if primary not in humans:
        raise ValueError(f"no labels from rater {primary!r}; raters: {sorted(humans)}")
    stats: dict[str, Any] = {}
    for criterion in criteria:
        each_rater = {r: _agree(judge, labels, criterion, seed, target_width, reps)
                      for r, labels in sorted(humans.items())}
        stats[criterion.name] = {
            "judge_vs_human": dict(each_rater[primary]),  # the primary rater's figures, computed once
            "judge_vs_each_rater": each_rater,
            "inter_rater": {f"{r1}~{r2}": _agree(humans[r1], humans[r2], criterion, seed, target_width, reps)
                            for r1, r2 in combinations(sorted(humans), 2)},
        }
        selective = selective_trust(judge, humans[primary], criterion, target_agreement=target_agreement,
                                    risk=risk, seed=seed)
        if selective is not None:
            stats[criterion.name]["selective"] = selective
    ident = identity(judge_provenance)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "groundjudge.calibration",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "judge": ident,
        "identity_hash": identity_hash(ident),
        "primary_rater": primary,
        "raters": {r: len(v) for r, v in sorted(humans.items())},
        "judged_items": len(judge),
        "evidence": build_evidence(judge, humans, primary, label_files=label_files, verdicts_file=verdicts_file),
        "bootstrap": {"seed": seed, "reps": reps, "level": 0.95, "target_width": target_width},
        "selective": {"target_agreement": target_agreement, "risk": risk},
        "criteria": stats,
        "claims": claim_agreement(judge, humans[primary]),
        "tool": provenance(),
    }


def write_record(record: dict[str, Any], records_dir: Path) -> tuple[Path, bool]:
    """Write the record beside the others; (its path, whether it replaced the earlier record of
    exactly the same evidence). A record never replaces one built from other evidence."""
    evidence = record["evidence"]
    path = records_dir / record_name(record["judge"], evidence)
    if path.exists() and _evidence_hash(path) != evidence["hash"]:
        path = records_dir / record_name(record["judge"], evidence, digits=64)  # a short-hash collision
    replaced = path.exists()
    write_json_atomic(path, record)
    return path, replaced


def _evidence_hash(path: Path) -> str | None:
    try:
        return (json.loads(path.read_text(encoding="utf-8")).get("evidence") or {}).get("hash")
    except (OSError, ValueError, AttributeError):
        return None


def find_records(records_dir: Path) -> Sequence[dict[str, Any]]:
    """Every calibration record in the folder. One that cannot be read is an input error, not
    skipped: a record dropped in silence could hand trust to a record with less evidence."""
    if not records_dir.is_dir():
        return []
    out = []
    for path in sorted(records_dir.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InputError.one(path, getattr(exc, "lineno", None), None,
                                 f"unreadable calibration record ({type(exc).__name__}); restore it from version "
                                 "control, or move it out of the records folder") from None
        if isinstance(data, dict) and data.get("kind") == "groundjudge.calibration":
            data["_path"] = str(path)
            out.append(data)
    return out
