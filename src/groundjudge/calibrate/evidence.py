"""What a calibration record was built from, and which record of a judge decides its trust.

A record carries its evidence: the label files (path and sha256), a hash of the labels as read,
a hash of the judge's verdicts as read, the rater the judge was compared with, each rater's
item count and, per criterion, n. Several records may exist for one judge identity (other
labels, other verdicts); none replaces another. Per criterion, the record that decides trust is
the one with the most labelled items (n), then the most raters, then the newest: trust follows
the most evidence, so a smaller or one-rater record never outranks a larger one, whatever its
kappa. Records written before evidence was kept ("legacy") have no labels hash; they take part
in the rule with their n, raters and date.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundjudge.calibrate.verdicts import ItemKey, ItemLabels

RULE = "most labelled items (n), then most raters, then newest"
HASH_SHOWN = 12  # hex digits of a labels hash shown in messages and reports
SHOWN_BESIDE = 3  # other records named after `calibrate` writes one (those with most evidence first)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(items: Mapping[ItemKey, ItemLabels]) -> list[Any]:
    return [[key[0], key[1], sorted(item.labels.items()), [list(c) for c in item.claims]]
            for key, item in sorted(items.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]


def labels_hash(humans: Mapping[str, Mapping[ItemKey, ItemLabels]]) -> str:
    """A hash of the human labels as read (rater, item, each criterion's label, claims):
    the same labels give the same hash whatever the files' order, names or formatting."""
    rows = [[rater, _canonical(items)] for rater, items in sorted(humans.items())]
    return _sha256(json.dumps(rows, sort_keys=True, ensure_ascii=True).encode())


def verdicts_hash(judge: Mapping[ItemKey, ItemLabels]) -> str:
    """A hash of the judge's verdicts as read: a report written again from the cache hashes the same."""
    return _sha256(json.dumps(_canonical(judge), sort_keys=True, ensure_ascii=True).encode())


def _shown_path(path: Path) -> str:
    """The path relative to the working folder when it lies inside it (records are committed;
    a home folder in them says nothing useful), else as it is."""
    relative = os.path.relpath(Path(path).resolve(), Path.cwd())
    return relative if not relative.startswith("..") else str(path)


def file_entry(path: Path) -> dict[str, str]:
    return {"path": _shown_path(path), "sha256": _sha256(Path(path).read_bytes())}


def build_evidence(judge: Mapping[ItemKey, ItemLabels], humans: Mapping[str, Mapping[ItemKey, ItemLabels]],
                   primary: str, *, label_files: Sequence[Path] = (), verdicts_file: Path | None = None,
                   ) -> dict[str, Any]:
    labels = labels_hash(humans)
    verdicts = verdicts_hash(judge)
    return {
        "label_files": [file_entry(p) for p in label_files],
        "labels_hash": labels,
        "verdicts": {**(file_entry(verdicts_file) if verdicts_file is not None else {}), "items_hash": verdicts},
        "primary_rater": primary,
        # names the record's file: the same labels, verdicts and rater replace only their own record
        "hash": _sha256(json.dumps([labels, verdicts, primary]).encode()),
    }


# --- which record decides ---------------------------------------------------------------------

def criterion_n(record: Mapping[str, Any], criterion: str) -> int | None:
    stats = record.get("criteria", {}).get(criterion, {}).get("judge_vs_human")
    return stats.get("n") if stats else None


def record_labels_hash(record: Mapping[str, Any]) -> str | None:
    """None for a legacy record, written before label provenance was kept."""
    return (record.get("evidence") or {}).get("labels_hash")


def _rank(record: Mapping[str, Any], criterion: str) -> tuple[int, int, str]:
    return criterion_n(record, criterion) or 0, len(record.get("raters") or {}), record.get("created", "")


def deciding_record(criterion: str, records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Of records for one judge identity, the one that decides ``criterion`` (see RULE)."""
    holding = [r for r in records if criterion_n(r, criterion) is not None]
    return max(holding, key=lambda r: _rank(r, criterion)) if holding else None


def why_not(criterion: str, loser: Mapping[str, Any], winner: Mapping[str, Any]) -> tuple[str, str]:
    """Why ``winner`` outranks ``loser`` for ``criterion``, in the rule's terms: (why, figures)."""
    (n1, r1, c1), (n2, r2, c2) = _rank(loser, criterion), _rank(winner, criterion)
    if n1 != n2:
        return "more labelled items than this record", f"{criterion} {n2} > {n1}"
    if r1 != r2:
        return "as many items as this record, from more raters", f"{criterion} {r2} > {r1} raters"
    return "as much evidence as this record, and newer" if c1 != c2 else "as much evidence, same date", criterion


# --- how a record is named in messages and reports -----------------------------------------------

def record_file(record: Mapping[str, Any]) -> str:
    path = record.get("_path")
    return Path(path).name if path else "(unwritten record)"


def raters_text(raters: Mapping[str, int] | None) -> str:
    if not raters:
        return "no raters"
    return ", ".join(f"{name} {count}" for name, count in raters.items())


def labels_text(record: Mapping[str, Any]) -> str:
    h = record_labels_hash(record)
    return f"labels {h[:HASH_SHOWN]}" if h else "labels unrecorded (legacy record)"


def evidence_text(record: Mapping[str, Any], criterion: str | None = None) -> str:
    """``labels 1a2b3c4d5e6f, n=81, raters rater_a 81, rater_b 30``; without a criterion, n of
    every criterion."""
    if criterion is not None:
        n = f"n={criterion_n(record, criterion)}"
    else:
        n = "n " + ", ".join(f"{name} {criterion_n(record, name)}" for name in record.get("criteria", {}))
    return f"{labels_text(record)}, {n}, raters {raters_text(record.get('raters'))}"


def describe(record: Mapping[str, Any], criterion: str | None = None) -> str:
    return f"{record_file(record)} ({evidence_text(record, criterion)})"


def reference(record: Mapping[str, Any], criterion: str) -> dict[str, Any]:
    """The deciding record as report.json states it."""
    return {"path": record.get("_path"), "labels_hash": record_labels_hash(record),
            "n": criterion_n(record, criterion), "raters": dict(record.get("raters") or {}),
            "created": record.get("created")}


def write_notes(written: Mapping[str, Any], replaced: bool, exact: Sequence[Mapping[str, Any]]) -> list[str]:
    """Two lines after `calibrate` writes a record: what it wrote and what else exists for this
    judge; which record decides trust now, and why the new one does not where it does not."""
    others = [r for r in exact if r.get("_path") != written.get("_path")]
    others.sort(key=lambda r: max((_rank(r, c) for c in r.get("criteria", {})), default=(0, 0, "")), reverse=True)
    first = f"wrote {written.get('_path')} ({evidence_text(written)})"
    if replaced:
        first += "; it replaces the earlier record of exactly the same labels, verdicts and rater"
    shown = "; ".join(describe(r) for r in others[:SHOWN_BESIDE])
    more = f"; and {len(others) - SHOWN_BESIDE} more" if len(others) > SHOWN_BESIDE else ""
    first += f"; beside it for this judge: {shown}{more}" if others else "; no other record for this judge"
    criteria = list(written.get("criteria", {}))
    deciding = {c: deciding_record(c, exact) for c in criteria}
    head = f"deciding trust now ({RULE}): "
    if all(d is written for d in deciding.values()):
        return [first, head + "this record, for every criterion"]
    parts = []
    mine = [c for c, d in deciding.items() if d is written]
    if mine:
        parts.append(f"this record for {', '.join(mine)}")
    beaten: dict[tuple[str, str], list[str]] = {}  # (winner's file, why) -> figures
    for c, d in deciding.items():
        if d is not None and d is not written:
            why, figures = why_not(c, written, d)
            beaten.setdefault((record_file(d), why), []).append(figures)
    parts += [f"{name}, {why} ({', '.join(figures)})" for (name, why), figures in beaten.items()]
    return [first, head + "; ".join(parts)]
