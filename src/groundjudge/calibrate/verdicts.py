"""Judge verdicts and human labels, keyed by item, in one shape: criterion -> label.

Judge verdicts come from a run (its typed ``JudgeRun``, or a ``report.json`` read back into
one) or, for any other judge, from a JSONL file with ``query_id``, optional ``config_id`` and
one field per criterion of the rubric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from groundjudge.contracts import HumanLabel
from groundjudge.errors import InputError, InputProblem
from groundjudge.judge.results import CriterionInfo, JudgeRun
from groundjudge.load.records import json_document, read_records
from groundjudge.versions import READABLE_VERSIONS, SCHEMA_VERSION

ItemKey = tuple[str, str | None]  # (query_id, config_id)


@dataclass
class ItemLabels:
    labels: dict[str, bool | int | None]
    claims: list[tuple[str, bool | None]] = field(default_factory=list)  # (text, supported; None: unchecked)
    confidence: dict[str, float | None] = field(default_factory=dict)


class ExternalVerdict(BaseModel):
    """A verdict line from another judge: one field per criterion of the rubric."""

    model_config = ConfigDict(extra="allow", frozen=True)
    query_id: str
    config_id: str | None = None


def _field(record: BaseModel, name: str) -> Any:
    if name in type(record).model_fields:
        return getattr(record, name)
    return (record.model_extra or {}).get(name)


def verdicts_from_report(path: Path) -> JudgeRun:
    """The judge section of a run's report.json, as the typed record it was written from."""
    doc = json_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("judge"), dict):
        raise InputError.one(path, None, "judge", "not a `groundjudge run` report (no judge section)")
    version = doc.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise InputError.one(path, None, "schema_version",
                             f"report schema version {version} is not readable here (this groundjudge reads "
                             f"version {SCHEMA_VERSION}); run `groundjudge run` again with the same inputs "
                             "to rewrite it: its verdicts come from the cache, at no cost")
    try:
        return JudgeRun.model_validate(doc["judge"])
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "judge." + ".".join(str(p) for p in first["loc"])
        raise InputError.one(path, None, where, first["msg"]) from None


def items_from_judge(judge: JudgeRun) -> dict[ItemKey, ItemLabels]:
    """Labels of every judged case (skipped and errored cases have none)."""
    items: dict[ItemKey, ItemLabels] = {}
    for config_id, section in judge.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            items[(case_id, config_id)] = ItemLabels(
                labels={c.name: case.label(c.name) for c in judge.criteria},
                # an unchecked claim has no verdict to agree or disagree with (None)
                claims=[(c.claim, None if c.verdict == "unchecked" else c.verdict == "supported")
                        for c in case.claims],
                confidence={name: v.confidence for name, v in case.criteria.items()},
            )
    return items


def verdicts_from_jsonl(path: Path, criteria: Sequence[CriterionInfo]) -> dict[ItemKey, ItemLabels]:
    items: dict[ItemKey, ItemLabels] = {}
    problems = []
    for line, v in read_records(path, ExternalVerdict):
        key = (v.query_id, v.config_id)
        if key in items:
            problems.append(InputProblem(str(path), line, "query_id", f"duplicate verdict for {key}"))
        labels = {c.name: _field(v, c.name) for c in criteria}
        for c in criteria:
            if not _is_label(labels[c.name], c):
                shown = json.dumps(labels[c.name])
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                problems.append(InputProblem(str(path), line, c.name, f"{shown} is not a label of {c.name}: one of "
                                                                      f"{json.dumps(c.labels)}, or null for none"))
        items[key] = ItemLabels(labels)
    if problems:
        raise InputError(problems)
    return items


def _is_label(value: Any, criterion: CriterionInfo) -> bool:
    """Whether ``value`` is one of the criterion's labels (or None): True is not the grade 1."""
    return value is None or (type(value) is (bool if criterion.kind == "binary" else int) and value in criterion.labels)


def load_labels(paths: Sequence[Path], criteria: Sequence[CriterionInfo] | Sequence[str],
                ) -> dict[str, dict[ItemKey, ItemLabels]]:
    """Human labels by rater, then by item, for the criteria named (a label file may carry any
    criterion a rubric declares). One rater labelling one item twice is an error."""
    names = [c if isinstance(c, str) else c.name for c in criteria]
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
            rater[key] = ItemLabels({name: _field(label, name) for name in names},
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
    return min(humans, key=lambda r: (-len(humans[r]), r))
