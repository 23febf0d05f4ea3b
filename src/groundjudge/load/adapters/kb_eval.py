"""Read kb-eval's golden queries and run results, and convert them to the native contracts.

kb-eval stores one golden query per line (JSONL, or a YAML list) and, per run, one result per
query. The shapes below are kb-eval's own; fields this module does not know are kept.

Golden query::

    {"id": "q1", "query": "...", "expected_chunk_ids": ["c1"], "expected_doc_ids": ["d1"],
     "must_contain": ["..."], "forbidden": ["..."],
     "expected_chunk_spans": [{"chunk_id": "c1", "doc_id": "d1", "source_spans": [[0, 120]]}]}

``expected_doc_ids`` is required: an empty list is kb-eval's way of saying "the system should
refuse this query". ``expected_chunk_spans`` is optional; run comparison uses it when the two
runs were chunked differently (see :mod:`groundjudge.profiles.kb_eval`).

Run result (one file = one run, so ``run_id`` and ``chunker_version`` are the same on every
line; ``run_id`` defaults to the file name without its extension)::

    {"run_id": "run-a", "query_id": "q1", "chunker_version": "md-v1",
     "hits_top_k": [{"chunk_id": "c1", "doc_id": "d1", "score": 0.8, "source_spans": [[0, 120]]}],
     "answer": {"text": "...", "grounded": true,
                "citations": [{"citation": "[#1]", "chunk_id": "c1"}]},
     "error": null, "latency_ms": 840}

A run may also come from kb-eval's SQLite database instead of a results file (``--traces
kb.sqlite`` for every run in it, ``kb.sqlite#RUN_ID`` for one): see
:mod:`groundjudge.load.adapters.kb_eval_store`.

``hits_top_k`` is in rank order (first = rank 1). ``answer`` is null when the run did not
generate (retrieval only). A citation is a chunk id, or an object whose ``citation`` is the
reference as written in the answer and whose ``chunk_id`` is the chunk it resolved to (null:
it resolved to nothing). ``source_spans`` are ``[start, end)`` character offsets in the
document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_serializer, model_validator

from groundjudge.contracts import GoldenCase, NonEmptyStr, Offsets, Trace
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters.foreign import (
    ForeignRecord,
    NativeData,
    NativeTraces,
    merge_extras,
    native_trace,
    read_unique,
)
from groundjudge.load.adapters.kb_eval_store import DatabaseRun, is_database, row_record, split_run
from groundjudge.load.adapters.kb_eval_store import read_runs as read_database_runs
from groundjudge.load.adapters.registry import InputFormat
from groundjudge.load.records import convert_records, read_records

__all__ = [
    "FORMAT",
    "FORMAT_NAME",
    "KbAnswer",
    "KbChunkSpans",
    "KbCitation",
    "KbGoldenQuery",
    "KbHit",
    "KbResult",
    "KbRun",
    "SourceSpan",
    "looks_like",
    "read_golden",
    "read_run",
    "read_runs",
    "to_native",
]

FORMAT_NAME = "kb-eval"


class SourceSpan(Offsets):
    """A ``[start, end)`` character span of a document; written as ``[start, end]`` in files."""

    @model_serializer
    def _as_pair(self) -> list[int]:
        return [self.start, self.end]

    def __len__(self) -> int:
        return self.end - self.start


class KbChunkSpans(ForeignRecord):
    """Where an expected chunk lies in its document (for matching across chunker versions)."""

    chunk_id: NonEmptyStr
    doc_id: NonEmptyStr
    source_spans: list[SourceSpan] = Field(min_length=1)


class KbGoldenQuery(ForeignRecord):
    """One kb-eval golden query."""

    id: NonEmptyStr
    query: NonEmptyStr
    expected_chunk_ids: list[NonEmptyStr] = Field(default_factory=list)
    expected_doc_ids: list[NonEmptyStr]
    must_contain: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)
    expected_chunk_spans: list[KbChunkSpans] = Field(default_factory=list)

    @property
    def should_refuse(self) -> bool:
        """kb-eval's convention: no expected document means the system should refuse."""
        return not self.expected_doc_ids


class KbHit(ForeignRecord):
    chunk_id: NonEmptyStr
    doc_id: NonEmptyStr
    score: float | None = None
    source_spans: list[SourceSpan] = Field(default_factory=list)


class KbCitation(ForeignRecord):
    citation: NonEmptyStr
    chunk_id: NonEmptyStr | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_id(cls, value: Any) -> Any:
        # A bare string is a chunk id cited directly: it is both the reference and the target.
        if isinstance(value, str):
            return {"citation": value, "chunk_id": value}
        return value


class KbAnswer(ForeignRecord):
    # kb-eval's Answer names its text ``answer``; ``text`` is accepted too
    text: str = Field(default="", validation_alias=AliasChoices("text", "answer"))
    citations: list[KbCitation] = Field(default_factory=list)
    grounded: bool


class KbResult(ForeignRecord):
    """What one run did for one golden query."""

    query_id: NonEmptyStr
    run_id: NonEmptyStr | None = None
    chunker_version: NonEmptyStr
    hits_top_k: list[KbHit]
    answer: KbAnswer | None = None
    error: str | None = None
    # kb-eval's runner records the wall-clock time as ``elapsed_ms``
    latency_ms: float | None = Field(default=None, ge=0, validation_alias=AliasChoices("latency_ms", "elapsed_ms"))


@dataclass(frozen=True)
class KbRun:
    """One kb-eval run: its id, its chunker version and its results by query id (file order).

    ``source`` names where it was read (a results file, or ``kb.sqlite#RUN_ID``); ``database``
    is kb-eval's SQLite file when the run came from one."""

    run_id: str
    chunker_version: str
    results: dict[str, KbResult]
    source: str = ""
    database: Path | None = None


# where each result was read: file and line, or database and row (line None)
Place = tuple[str, int | None]


def read_golden(path: str | Path) -> dict[str, KbGoldenQuery]:
    """Golden queries by id, in file order. Raises :class:`InputError` on a bad line or a duplicate id."""
    return _read_golden_lines(path)[0]


def _read_golden_lines(path: str | Path) -> tuple[dict[str, KbGoldenQuery], dict[str, int]]:
    def spans_of_expected_chunks(query: KbGoldenQuery, line: int) -> list[InputProblem]:
        return [InputProblem(str(path), line, f"expected_chunk_spans[{i}].chunk_id",
                             f"{spans.chunk_id!r} is not one of expected_chunk_ids; list it there or remove its spans")
                for i, spans in enumerate(query.expected_chunk_spans) if spans.chunk_id not in query.expected_chunk_ids]

    return read_unique(path, KbGoldenQuery, "id", "query id", check=spans_of_expected_chunks)


def _collect(records: Sequence[tuple[Place, KbResult]], run_id: str, version: str,
             golden: Mapping[str, KbGoldenQuery] | None, problems: list[InputProblem],
             ) -> tuple[dict[str, KbResult], dict[str, Place]]:
    """The results of one run by query id; a result of another run or chunker version, for a
    query the golden set does not have, or repeating a query is a problem."""
    first_place = records[0][0] if records else ("", None)
    first = f"line {first_place[1]}" if first_place[1] is not None else "the first row"
    results: dict[str, KbResult] = {}
    places: dict[str, Place] = {}
    for place, result in records:
        file, line = place
        if (result.run_id or run_id) != run_id:
            problems.append(InputProblem(file, line, "run_id", f"{result.run_id!r} differs from {run_id!r} on "
                                                               f"{first}; put each run in its own file"))
        if result.chunker_version != version:
            problems.append(InputProblem(file, line, "chunker_version",
                                         f"{result.chunker_version!r} differs from {version!r} on {first}; "
                                         "one results file holds one run, chunked one way"))
        if golden is not None and result.query_id not in golden:
            problems.append(InputProblem(file, line, "query_id",
                                         f"unknown query {result.query_id!r}: not in the golden set"))
        elif result.query_id in results:
            earlier = places[result.query_id][1]
            problems.append(InputProblem(file, line, "query_id",
                                         f"duplicate result for query {result.query_id!r} (first on line {earlier})"))
        else:
            results[result.query_id] = result
            places[result.query_id] = place
    return results, places


def _read_file_run(path: Path, golden: Mapping[str, KbGoldenQuery] | None) -> tuple[KbRun, dict[str, Place]]:
    records = read_records(path, KbResult)
    problems: list[InputProblem] = []
    first = records[0][1]
    run_id = first.run_id or path.stem
    results, places = _collect([((str(path), line), r) for line, r in records], run_id, first.chunker_version,
                               golden, problems)
    if problems:
        raise InputError(problems)
    return KbRun(run_id, first.chunker_version, results, str(path)), places


def _from_database(run: DatabaseRun, golden: Mapping[str, KbGoldenQuery] | None,
                   problems: list[InputProblem]) -> tuple[KbRun, dict[str, Place]]:
    records: list[tuple[Place, KbResult]] = []
    for row in run.rows:
        result = row_record(row, run, KbResult, problems)
        if result is not None:
            records.append(((row.where, None), result))
    version = records[0][1].chunker_version if records else (run.chunker_version or "unknown")
    results, places = _collect(records, run.run_id, version, golden, problems)
    return KbRun(run.run_id, version, results, f"{run.database}#{run.run_id}", run.database), places


def _read_runs_placed(path: str | Path, golden: Mapping[str, KbGoldenQuery] | None,
                      ) -> list[tuple[KbRun, dict[str, Place]]]:
    database, run_id = split_run(path)
    if not is_database(database):
        return [_read_file_run(Path(path), golden)]
    problems: list[InputProblem] = []
    runs = [_from_database(run, golden, problems) for run in read_database_runs(database, run_id)]
    if problems:
        raise InputError(problems)
    return runs


def read_runs(path: str | Path, golden: Mapping[str, KbGoldenQuery] | None = None) -> list[KbRun]:
    """The runs ``path`` holds: one for a results file; for kb-eval's SQLite database every run
    in it (oldest first), or the one ``kb.sqlite#RUN_ID`` names. With ``golden``, a result
    naming an unknown query is an input error.

    Raises :class:`InputError` on a bad line or row, a duplicate query, or a result whose
    ``run_id`` or ``chunker_version`` differs from the run's.
    """
    return [run for run, _ in _read_runs_placed(path, golden)]


def read_run(path: str | Path, golden: Mapping[str, KbGoldenQuery] | None = None) -> KbRun:
    """One run's results (:func:`read_runs`); a database that holds several runs is an input
    error naming them (name one as ``kb.sqlite#RUN_ID``)."""
    runs = read_runs(path, golden)
    if len(runs) != 1:
        names = ", ".join(repr(r.run_id) for r in runs) or "none"
        raise InputError.one(path, None, "run_id", f"holds {len(runs)} runs ({names}); name one as {path}#RUN_ID")
    return runs[0]


_GOLD_KEYS = frozenset({"id", "query", "expected_doc_ids"})
_TRACE_KEYS = frozenset({"query_id", "hits_top_k", "chunker_version"})


def looks_like(first_object: dict[str, Any], role: Literal["gold", "trace"]) -> bool:
    """True when ``first_object`` (a file's first record) is in kb-eval's shape for ``role``.

    Golden queries carry ``id``, ``query`` and ``expected_doc_ids`` and no native ``question``;
    results carry ``query_id``, ``hits_top_k`` and ``chunker_version``.
    """
    if not isinstance(first_object, dict):
        return False
    if role == "gold":
        return _GOLD_KEYS <= first_object.keys() and "question" not in first_object
    if role == "trace":
        return _TRACE_KEYS <= first_object.keys()
    return False


def _golden_to_native(query: KbGoldenQuery) -> dict[str, Any]:
    mapped: dict[str, Any] = {
        "id": query.id,
        "question": query.query,
        "expected_chunk_ids": list(query.expected_chunk_ids),
        "expected_doc_ids": list(query.expected_doc_ids),
        "must_contain": list(query.must_contain),
        "forbidden": list(query.forbidden),
        "expected_behavior": "abstain" if query.should_refuse else "answer",
    }
    if query.expected_chunk_spans:
        mapped["expected_chunk_spans"] = [s.model_dump() for s in query.expected_chunk_spans]
    return merge_extras(mapped, query.model_extra, "kb_")


# What kb-eval does not record: the metrics that read it are null with the reason, never 0.
NO_CONTEXT = "the kb-eval format records no context chunks (hits_top_k is what was retrieved, not the prompt)"
NO_ANSWER = "this kb-eval result has no answer (a retrieval-only run)"


def _result_to_native(result: KbResult, config_id: str) -> dict[str, Any]:
    extras = dict(result.model_extra or {})
    question = extras.pop("query", None)  # kb-eval may echo the query; it becomes the question
    answer = result.answer
    retrieved = []
    for rank, hit in enumerate(result.hits_top_k, start=1):
        chunk: dict[str, Any] = {"chunk_id": hit.chunk_id, "doc_id": hit.doc_id, "score": hit.score, "rank": rank}
        if hit.source_spans:
            chunk["source_spans"] = [span.model_dump() for span in hit.source_spans]
        retrieved.append(merge_extras(chunk, hit.model_extra, "kb_"))
    mapped: dict[str, Any] = {
        "query_id": result.query_id,
        "config_id": config_id,
        "question": question,
        "retrieved_chunks": retrieved,
        "context_chunks": [],
        "not_recorded": {"context_chunks": NO_CONTEXT} if answer is not None else
                        {"context_chunks": NO_CONTEXT, "answer": NO_ANSWER, "citations": NO_ANSWER},
        "answer": answer.text if answer else None,
        "citations": [{"chunk_id": c.chunk_id, "citation": c.citation}
                      for c in (answer.citations if answer else []) if c.chunk_id is not None],
        "behavior": None if answer is None else ("answer" if answer.grounded else "abstain"),
        "grounded": None if answer is None else answer.grounded,
        "error": result.error,
        "versions": {"chunking": result.chunker_version},
        "run_id": result.run_id,
        "chunker_version": result.chunker_version,
    }
    unresolved = [c.citation for c in (answer.citations if answer else []) if c.chunk_id is None]
    if unresolved:
        mapped["unresolved_citations"] = unresolved
    if result.latency_ms is not None:
        mapped["latency_ms"] = {"end_to_end": result.latency_ms}
    return merge_extras(mapped, extras, "kb_")


def to_native(gold_path: str | Path, trace_paths: Sequence[str | Path], *, config_id: str | None = None) -> NativeData:
    """Convert a kb-eval golden file and run results into native golden cases and traces.

    Each results file is one run, and kb-eval's database one run per ``eval_runs`` row (or the
    one ``kb.sqlite#RUN_ID`` names); a run's config id is ``config_id`` when given, else its
    ``run_id``. Mapping: ``query`` -> ``question``; empty ``expected_doc_ids`` ->
    ``expected_behavior: "abstain"``; ``hits_top_k`` -> ``retrieved_chunks`` (rank = position);
    resolved answer citations -> ``citations`` (unresolved ones are kept in
    ``unresolved_citations``); ``grounded`` -> ``behavior`` (``answer`` / ``abstain``, and kept
    as ``grounded``); ``chunker_version`` -> ``versions["chunking"]``. Unknown fields are kept.

    Raises :class:`InputError` naming file, line and field for any bad line, a duplicate id,
    a result for an unknown query, or two files that map to the same config.
    """
    golden, gold_lines = _read_golden_lines(gold_path)
    cases, problems = convert_records(gold_path, golden, gold_lines, _golden_to_native, GoldenCase)
    if problems:
        raise InputError(problems)

    traces: NativeTraces = {}
    config_source: dict[str, str] = {}
    for path in trace_paths:
        for run, places in _read_runs_placed(path, golden):
            cfg = config_id or run.run_id
            if cfg in config_source:
                raise InputError.one(path, None, "run_id",
                                     f"config {cfg!r} is already used by {config_source[cfg]}; "
                                     "give each run its own run_id (or convert it separately)")
            config_source[cfg] = run.source
            per_case: dict[str, dict[int, Trace]] = {}
            for qid, result in run.results.items():
                file, line = places[qid]
                found: list[InputProblem] = []
                trace = native_trace(_result_to_native(result, cfg), file, line or 0, found)
                problems.extend(InputProblem(file, line, p.field, p.problem) for p in found)
                if trace is not None:
                    per_case[qid] = {0: trace}
            traces[cfg] = per_case
    if problems:
        raise InputError(problems)
    return cases, traces


def claims_file(path: Path, role: Literal["gold", "trace"]) -> bool:
    """True for kb-eval's SQLite database given as traces (``kb.sqlite`` or ``kb.sqlite#RUN_ID``)."""
    return role == "trace" and is_database(split_run(path)[0])


FORMAT = InputFormat(FORMAT_NAME, looks_like, to_native, claims_file=claims_file)
