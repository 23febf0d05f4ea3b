"""The labelled items ``groundjudge align`` fits on: each judged answer with its claims' signals,
the people's verdict and, where their labels mark hallucination spans, each claim's own label.

A claim whose span in the answer overlaps a span the people marked is unsupported; every other
claim of a labelled answer is supported (an answer labelled unfaithful without spans gives no
claim labels). Everything comes from a run's report.json and the label files: no judge call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.calibrate.verdicts import verdicts_from_report
from groundjudge.contracts import HumanLabel
from groundjudge.errors import InputError, InputProblem
from groundjudge.judge.claim_signals import ClaimSignals, claim_signals
from groundjudge.judge.results import JudgeRun
from groundjudge.load.records import read_records


@dataclass(frozen=True)
class AnswerItem:
    query_id: str
    config_id: str | None
    truth: bool  # the people's verdict
    claims: list[ClaimSignals]
    claim_truth: list[bool] | None  # per claim, from the people's spans; None: the labels carry none
    base_label: bool  # the base rubric's verdict
    base_confidence: float | None  # its confidence that the answer is true


@dataclass(frozen=True)
class Labelled:
    items: list[AnswerItem]
    judge: JudgeRun
    labels_sha256: list[str]
    rater: str


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _spans(label: HumanLabel, path: Path, line: int) -> list[tuple[int, int]] | None:
    raw = (label.model_extra or {}).get("spans")
    if raw is None:
        return None
    if not isinstance(raw, (list, tuple)):  # a record's unknown fields hold their arrays as tuples
        raise InputError.one(path, line, "spans", "must be a list of {start, end} objects")
    out = []
    for i, span in enumerate(raw):
        start, end = (span.get("start"), span.get("end")) if isinstance(span, Mapping) else (None, None)
        if type(start) is not int or type(end) is not int or not 0 <= start <= end:
            raise InputError.one(path, line, f"spans[{i}]", "needs integer start <= end, both >= 0")
        out.append((start, end))
    return out


def read_labels(paths: Sequence[Path], criterion: str, rater: str | None, *, ordinal: bool = False,
                required: bool = True) -> tuple[dict[tuple[str, str | None], tuple[Any, list[tuple[int, int]] | None]], str]:
    """Per item, the rater's label of ``criterion`` (true/false, or a grade when ``ordinal``) and
    their spans (None: none recorded). Without ``required``, no label of it gives nothing."""
    by_rater: dict[str, dict[tuple[str, str | None], tuple[Any, list[tuple[int, int]] | None]]] = {}
    problems = []
    for path in paths:
        for line, label in read_records(path, HumanLabel):
            value: Any = getattr(label, criterion, None)
            if value is None:
                value = (label.model_extra or {}).get(criterion)
            if value is None:
                continue
            if ordinal and (isinstance(value, bool) or not isinstance(value, int)):
                problems.append(InputProblem(str(path), line, criterion, "must be a grade (an integer) or null"))
                continue
            if not ordinal and not isinstance(value, bool):
                problems.append(InputProblem(str(path), line, criterion, "must be true, false or null"))
                continue
            items = by_rater.setdefault(label.rater, {})
            key = (label.query_id, label.config_id)
            if key in items:
                problems.append(InputProblem(str(path), line, "query_id", f"rater {label.rater!r} labelled {key} twice"))
                continue
            items[key] = (value, _spans(label, path, line))
    if problems:
        raise InputError(problems)
    if not by_rater and not required:
        return {}, rater or ""
    if not by_rater:
        raise InputError.one(paths[0] if paths else "labels", None, criterion, f"no labels of {criterion}")
    chosen = rater or min(by_rater, key=lambda r: (-len(by_rater[r]), r))
    if chosen not in by_rater and not required:
        return {}, chosen
    if chosen not in by_rater:
        raise InputError.one(paths[0], None, "rater", f"no labels from {chosen!r}; raters: {sorted(by_rater)}")
    return by_rater[chosen], chosen


def overlaps(start: int | None, end: int | None, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the claim at [start, end) shares a character with any of ``spans``."""
    if start is None or end is None:
        return False
    return any(s < end and start < e for s, e in spans)


def labelled_items(report: Path, labels: Sequence[Path], criterion: str = "faithful",
                   rater: str | None = None) -> Labelled:
    """The judged, labelled answers of ``report`` for ``criterion`` (InputError when the report's
    rubric has no grounding, the criterion is not one it scores by claim support, or nothing
    is labelled)."""
    judge = verdicts_from_report(report)
    info = judge.criterion(criterion)
    if info is None:
        raise InputError.one(report, None, "criterion", f"the report's rubric has no criterion {criterion!r}")
    if info.kind != "binary":
        raise InputError.one(report, None, "criterion", f"{criterion} is not a binary criterion")
    human, chosen = read_labels(labels, criterion, rater)
    items = []
    for config_id, section in sorted(judge.per_config.items()):
        for case_id, case in sorted(section.cases.items()):
            if case.status != "judged":
                continue
            truth = human.get((case_id, config_id), human.get((case_id, None)))
            value = case.criteria.get(criterion)
            if truth is None or value is None or value.label is None:
                continue
            verdict, spans = truth
            try:
                signals = [claim_signals(c) for c in case.claims]
            except ValueError as exc:
                raise InputError.one(report, None, f"judge.per_config.{config_id}.cases.{case_id}.claims",
                                     f"{exc}; align needs a claim_check rubric with grounding") from None
            claim_truth = None
            if spans is not None and (spans or verdict):
                claim_truth = [not overlaps(c.start, c.end, spans) for c in case.claims]
            items.append(AnswerItem(query_id=case_id, config_id=config_id, truth=verdict, claims=signals,
                                    claim_truth=claim_truth, base_label=bool(value.label),
                                    base_confidence=value.confidence))
    if not items:
        raise InputError.one(labels[0], None, criterion, f"no judged answer of {report} carries a {criterion} label")
    return Labelled(items=items, judge=judge, labels_sha256=[sha256_file(p) for p in labels], rater=chosen)
