"""What labelling needs from a run: its judged items, their judge verdicts and confidences, and
the text a rater reads (question, expected answer, context chunks, answer).

``judged_items`` is the only function that reads the report's judge section; when the report
becomes typed, only it changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundjudge.errors import InputError
from groundjudge.load.adapters import load_any
from groundjudge.load.dataset import Dataset
from groundjudge.load.records import json_document, read_text

Key = tuple[str, str]  # (query_id, config_id)


@dataclass(frozen=True)
class JudgedItem:
    key: Key
    labels: dict[str, bool | int | None]  # the judge's label per criterion, as calibrate reads them
    confidence: float | None  # probability that the judge's faithful verdict is right; None: not given
    confidence_source: str  # "faithful_confidence", "claim support" or "none"
    spread: float  # 0..1, how split the judge's claim verdicts are (1: half supported, half not)
    claims: list[dict[str, Any]] = field(default_factory=list)  # claim, verdict, support probability


def judged_items(doc: dict[str, Any]) -> list[JudgedItem]:
    """The judged (case, config) items of a report, with confidences where the judge gave them.

    The judge section is read back into the typed record it was written from. Confidence of the
    faithful verdict: the criterion's ``confidence`` (claim_check: the lowest claim support,
    i.e. P(faithful)), turned into the probability that the verdict given is right; None where
    the judge gives no probabilities (grounded_answer).
    """
    from pydantic import ValidationError

    from groundjudge.calibrate.verdicts import items_from_judge
    from groundjudge.judge.results import JudgeRun
    from groundjudge.versions import READABLE_VERSIONS

    judge = doc.get("judge")
    if not isinstance(judge, dict) or "per_config" not in judge:
        raise InputError.one("report.json", None, "judge", "not a `groundjudge run` report (no judge section)")
    if doc.get("schema_version") not in READABLE_VERSIONS:
        raise InputError.one("report.json", None, "schema_version",
                             f"report schema version {doc.get('schema_version')} is not readable here; run "
                             "`groundjudge run` again with the same inputs to rewrite it (from the cache, at no cost)")
    try:
        run = JudgeRun.model_validate(judge)
    except ValidationError as exc:
        raise InputError.one("report.json", None, "judge", str(exc.errors(include_url=False)[0]["msg"])) from None
    labels = items_from_judge(run)
    out = []
    for config_id, section in run.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            verdict = labels[(case_id, config_id)].labels.get("faithful")
            value = case.criteria.get("faithful")
            confidence, source = None, "none"
            if value is not None and value.confidence is not None and verdict is not None:
                p_faithful = value.confidence
                confidence, source = (p_faithful if verdict else 1.0 - p_faithful), "claim support"
            votes = [1.0 if c.verdict == "supported" else 0.5 if c.verdict == "partially_supported" else 0.0
                     for c in case.claims if c.verdict != "unchecked"]
            share = sum(votes) / len(votes) if votes else 1.0
            out.append(JudgedItem(
                key=(case_id, config_id), labels=dict(labels[(case_id, config_id)].labels),
                confidence=confidence, confidence_source=source, spread=1.0 - abs(2.0 * share - 1.0),
                claims=[{"claim": c.claim, "verdict": c.verdict, "support": c.confidence} for c in case.claims]))
    return out


@dataclass(frozen=True)
class QueuedItem:
    """An item of the run's human queue: no trusted judge settled these criteria."""

    key: Key
    criteria: list[str]
    why: str  # per criterion, which judges abstained: verdict confidence against lambda


def queued_items(doc: dict[str, Any], judged: list[JudgedItem]) -> list[QueuedItem]:
    """The report's human queue (``gates.selective.queue``), in its order, limited to judged
    items; [] when the run had no selective trust."""
    from pydantic import ValidationError

    from groundjudge.calibrate.cascade import QueueItem
    from groundjudge.report.triage import queue_why

    known = {item.key for item in judged}
    selective = (doc.get("gates") or {}).get("selective") or {}
    out = []
    for i, raw in enumerate(selective.get("queue") or []):
        try:
            q = QueueItem.model_validate(raw)
        except ValidationError as exc:
            raise InputError.one("report.json", None, f"gates.selective.queue[{i}]",
                                 str(exc.errors(include_url=False)[0]["msg"])) from None
        if (q.case_id, q.config_id) in known:
            reasons = [r.model_dump(mode="json") for r in q.reasons]
            out.append(QueuedItem((q.case_id, q.config_id), list(q.criteria), queue_why(reasons)))
    return out


@dataclass(frozen=True)
class LabelRun:
    run_dir: Path
    report_path: Path
    report_digest: str  # sha256 of report.json: the population a batch was drawn from
    items: list[JudgedItem]
    dataset: Dataset
    queue: list[QueuedItem] = field(default_factory=list)  # the human queue, offered first


def read_run(run_dir: Path) -> LabelRun:
    """Read a run folder's report.json and load the inputs it names (golden, traces, corpus)."""
    path = run_dir / "report.json" if run_dir.is_dir() else run_dir
    if not path.exists():
        raise InputError.one(path, None, None, "no report.json: give the --out folder of `groundjudge run`")
    raw = read_text(path)
    doc = json_document(path, raw)
    try:
        items = judged_items(doc)
        queue = queued_items(doc, items)
    except InputError as exc:
        raise InputError.one(path, None, exc.problems[0].field or "judge", exc.problems[0].problem) from None
    inputs = doc.get("inputs") or {}
    if not inputs.get("golden") or not inputs.get("traces"):
        raise InputError.one(path, None, "inputs", "the report does not name its golden and traces files")
    traces = [t for t in str(inputs["traces"]).split(", ") if t]
    dataset, _ = load_any(inputs["golden"], traces, inputs.get("corpus") or None, inputs.get("format") or "auto")
    return LabelRun(path.parent, path, hashlib.sha256(raw.encode("utf-8")).hexdigest(), items, dataset,
                    queue)


def item_view(run: LabelRun, key: Key) -> dict[str, Any]:
    """The text a rater reads for one item (never the judge's verdict)."""
    case_id, config_id = key
    case = run.dataset.cases[case_id]
    trace = run.dataset.trace(config_id, case_id)
    chunks = []
    for chunk in trace.context_chunks if trace else []:
        text = chunk.text if chunk.text is not None else run.dataset.corpus.text_of(chunk.chunk_id)
        chunks.append({"id": chunk.chunk_id, "text": text})
    return {
        "query_id": case_id, "config_id": config_id, "question": case.question,
        "expected_answer": case.expected_answer, "tags": list(case.tags),
        "answer": trace.answer if trace else None,
        "citations": [c.chunk_id for c in trace.citations] if trace else [],
        "chunks": chunks,
    }
