"""Judge verdicts and human labels, keyed by item, in one shape: criterion -> label.

Judge verdicts come from a groundjudge run (``report.json``) or, for any other judge, from a
JSONL file with ``query_id``, optional ``config_id`` and one field per criterion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from groundjudge.contracts import HumanLabel
from groundjudge.load.errors import InputError, InputProblem
from groundjudge.load.records import read_records, read_text

CRITERIA = ("faithful", "correct", "citations_supported")
ORDINAL = {"correct": [0, 1, 2, 3]}
BINARY = [True, False]

ItemKey = tuple[str, str | None]  # (query_id, config_id)


@dataclass
class ItemLabels:
    labels: dict[str, bool | int | None]
    claims: list[tuple[str, bool]] = field(default_factory=list)


class ExternalVerdict(BaseModel):
    """A verdict line from another judge."""

    model_config = ConfigDict(extra="allow", frozen=True)
    query_id: str
    config_id: str | None = None
    faithful: bool | None = None
    correct: int | None = None
    citations_supported: bool | None = None


def verdicts_from_report(path: Path) -> tuple[dict[ItemKey, ItemLabels], dict[str, Any]]:
    """Judge labels from a run's report.json, and the judge provenance they were made under."""
    try:
        doc = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError.one(path, exc.lineno, None, f"invalid JSON: {exc.msg}") from None
    judge = doc.get("judge")
    if not isinstance(judge, dict):
        raise InputError.one(path, None, "judge", "not a `groundjudge run` report (no judge section)")
    return items_from_judge_section(judge)


def items_from_judge_section(judge: dict[str, Any]) -> tuple[dict[ItemKey, ItemLabels], dict[str, Any]]:
    """Labels derived from the judge's claim verdicts (skipped and errored items have none)."""
    items: dict[ItemKey, ItemLabels] = {}
    for config_id, section in judge["per_config"].items():
        for case_id, record in section["per_case"].items():
            if record["status"] != "judged":
                continue
            scores = record["scores"]
            items[(case_id, config_id)] = ItemLabels(
                labels={
                    "faithful": None if scores["faithfulness"] is None else scores["faithfulness"] == 1.0,
                    "correct": scores["correctness"],
                    "citations_supported": None if scores["citation_support"] is None
                    else scores["citation_support"] == 1.0,
                },
                claims=[(c["claim"], c["verdict"] == "supported") for c in record.get("claims", [])],
            )
    return items, judge["provenance"]


def verdicts_from_jsonl(path: Path) -> dict[ItemKey, ItemLabels]:
    items: dict[ItemKey, ItemLabels] = {}
    problems = []
    for line, v in read_records(path, ExternalVerdict):
        key = (v.query_id, v.config_id)
        if key in items:
            problems.append(InputProblem(str(path), line, "query_id", f"duplicate verdict for {key}"))
        items[key] = ItemLabels({c: getattr(v, c) for c in CRITERIA})
    if problems:
        raise InputError(problems)
    return items


def load_labels(paths: Sequence[Path]) -> dict[str, dict[ItemKey, ItemLabels]]:
    """Human labels by rater, then by item. One rater labelling one item twice is an error."""
    by_rater: dict[str, dict[ItemKey, ItemLabels]] = {}
    problems = []
    for path in paths:
        for line, label in read_records(path, HumanLabel):
            key = (label.query_id, label.config_id)
            rater = by_rater.setdefault(label.rater, {})
            if key in rater:
                problems.append(InputProblem(str(path), line, "query_id",
                                             f"rater {label.rater!r} labelled {key} twice"))
                continue
            rater[key] = ItemLabels({c: getattr(label, c) for c in CRITERIA},
                                    [(c.text, c.supported) for c in label.claims or []])
    if problems:
        raise InputError(problems)
    return by_rater


def lookup(items: dict[ItemKey, ItemLabels], key: ItemKey) -> ItemLabels | None:
    """Find an item; a label without config_id matches the item whatever its config."""
    if key in items:
        return items[key]
    if key[1] is not None and (key[0], None) in items:
        return items[(key[0], None)]
    if key[1] is None:
        matches = [v for (q, _), v in items.items() if q == key[0]]
        return matches[0] if len(matches) == 1 else None
    return None


def primary_rater(humans: dict[str, dict[ItemKey, ItemLabels]]) -> str:
    """The rater the judge is compared with by default: the one with most labels (then by name)."""
    return sorted(humans, key=lambda r: (-len(humans[r]), r))[0]
