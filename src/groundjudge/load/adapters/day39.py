"""Read the day-39 eval runner's golden set and RAG outputs, and convert them to native contracts.

The day-39 contract (a production RAG-evaluation lesson) is close to groundjudge's own, so the
field names stay as they are. Golden line::

    {"id": "api_002", "question": "...", "expected_answer": "...",
     "expected_chunk_ids": ["product_api_docs:v2026-03:chunk_004"],
     "relevance": {"product_api_docs:v2026-03:chunk_004": 3},
     "must_cite": ["product_api_docs:v2026-03:chunk_004"], "difficulty": "easy",
     "tags": ["api", "no-diacritic"], "expected_behavior": "answer",
     "user_context": {"tenant_id": "company_a", "roles": ["developer"]}}

Output line (one per query per config)::

    {"query_id": "api_002", "config_id": "hybrid-rerank-v3", "question": "...",
     "retrieved_chunks": [{"chunk_id": "...", "score": 0.91, "rank": 1}],
     "context_chunks": [{"chunk_id": "...", "text_hash": "sha256:..."}],
     "answer": "...", "citations": ["..."], "expected_behavior_observed": "answer",
     "latency_ms": {"retrieve": 38, "end_to_end": 1548}, "tokens": {"prompt": 1840},
     "cost_usd": 0.0028, "versions": {"index": "...", "prompt": "..."}}

Document store line (``--corpus``; the chunk metadata the lesson asks every chunk to carry,
plus its text)::

    {"chunk_id": "hr_leave_policy:v2026-01:chunk_003", "document_id": "hr_leave_policy",
     "document_version": "v2026-01", "section_path": "Nghỉ phép > Phép năm", "page_start": 2,
     "page_end": 2, "acl_roles": ["employee"], "text_hash": "sha256:...",
     "chunking_strategy": "markdown_v2_800_120", "index_version": "rag-index-2026-05-10",
     "text": "..."}

``document_id`` and ``document_version`` may be left out when the chunk id names them
(``document:version:chunk``, as every id in the lesson does); ``doc_id`` is read as
``document_id``. ``acl_roles`` become the chunk's ACL roles; the other fields are kept.

Defaults follow the runner: a missing (or null) list is empty, a missing ``relevance`` gives
each expected chunk grade 3 (applied by the profile), ``difficulty`` defaults to ``unknown``,
``expected_behavior`` to ``answer`` and ``config_id`` to ``unknown``. Stricter than the runner,
and reported as input errors naming file, line and field: a chunk object without
``chunk_id``, an ``expected_behavior`` outside the four the lesson defines, a grade outside
0..3, a duplicate golden id, a duplicate (config, query) output and an output naming an
unknown query (the runner double-counts the first two and stops on the third).

For the native metrics, an output line that leaves out ``context_chunks``, ``citations`` or
``answer`` did not record it (``not_recorded``): the metrics that read it are null for that
line with the reason, where the runner's own scores read it as empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator

from groundjudge.contracts import Behavior, CorpusChunk, GoldenCase, NonEmptyStr
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters.foreign import (
    ForeignRecord,
    NativeData,
    NativeTraces,
    merge_extras,
    native_trace,
    null_as_default,
    read_unique,
)
from groundjudge.load.adapters.registry import InputFormat
from groundjudge.load.dataset import Corpus
from groundjudge.load.records import convert_records, read_records, validation_problems

__all__ = [
    "FORMAT",
    "FORMAT_NAME",
    "ChunkRef",
    "Day39Chunk",
    "Day39Golden",
    "Day39Output",
    "looks_like",
    "read_corpus",
    "read_golden",
    "read_outputs",
    "to_native",
]

FORMAT_NAME = "day39"

Grade = Annotated[int, Field(ge=0, le=3)]


class Day39Golden(ForeignRecord):
    """One golden case as the day-39 runner reads it."""

    id: NonEmptyStr
    question: NonEmptyStr
    expected_answer: str = ""
    expected_chunk_ids: list[NonEmptyStr] = Field(default_factory=list)
    relevance: dict[str, Grade] = Field(default_factory=dict)
    must_cite: list[NonEmptyStr] = Field(default_factory=list)
    difficulty: str = "unknown"
    tags: list[str] = Field(default_factory=list)
    expected_behavior: Behavior = "answer"
    user_context: dict[str, Any] = Field(default_factory=dict)

    _nulls = null_as_default("expected_answer", "expected_chunk_ids", "relevance", "must_cite", "difficulty", "tags",
                             "user_context")

    @property
    def grades(self) -> dict[str, int]:
        """The runner's NDCG grades: ``relevance`` as given, or 3 for each expected chunk when empty."""
        return dict(self.relevance) if self.relevance else {cid: 3 for cid in self.expected_chunk_ids}


class ChunkRef(ForeignRecord):
    """A chunk named in an output: ``chunk_id`` plus whatever the pipeline logged about it."""

    chunk_id: NonEmptyStr


def _refs(value: Any) -> Any:
    if isinstance(value, list):
        return [{"chunk_id": item} if isinstance(item, str) else item for item in value]
    return value


class Day39Output(ForeignRecord):
    """One RAG output line: what one config did for one golden case."""

    query_id: NonEmptyStr
    config_id: NonEmptyStr = "unknown"
    question: str | None = None
    retrieved_chunks: list[ChunkRef] = Field(default_factory=list)
    context_chunks: list[ChunkRef] = Field(default_factory=list)
    answer: str | None = None
    citations: list[ChunkRef] = Field(default_factory=list)
    expected_behavior_observed: Behavior | None = None
    latency_ms: dict[str, float] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = Field(default=None, ge=0)
    versions: dict[str, str] = Field(default_factory=dict)

    _nulls = null_as_default("config_id", "retrieved_chunks", "context_chunks", "citations", "latency_ms", "tokens",
                             "versions")

    @field_validator("retrieved_chunks", "context_chunks", "citations", mode="before")
    @classmethod
    def _ids_as_refs(cls, value: Any) -> Any:
        return _refs(value)

    @property
    def retrieved_ids(self) -> list[str]:
        return [c.chunk_id for c in self.retrieved_chunks]

    @property
    def context_ids(self) -> list[str]:
        return [c.chunk_id for c in self.context_chunks]

    @property
    def citation_ids(self) -> list[str]:
        return [c.chunk_id for c in self.citations]


def _read_golden_lines(path: str | Path) -> tuple[dict[str, Day39Golden], dict[str, int]]:
    return read_unique(path, Day39Golden, "id", "case id")


def read_golden(path: str | Path) -> dict[str, Day39Golden]:
    """Golden cases by id, in file order. Raises :class:`InputError` on a bad line or a duplicate id."""
    return _read_golden_lines(path)[0]


def _read_output_lines(
    paths: Sequence[str | Path], golden: Mapping[str, Day39Golden]
) -> list[tuple[Path, int, Day39Output]]:
    rows: list[tuple[Path, int, Day39Output]] = []
    seen: dict[tuple[str, str], str] = {}
    problems: list[InputProblem] = []
    for raw_path in paths:
        path = Path(raw_path)
        for line, output in read_records(path, Day39Output):
            key = (output.config_id, output.query_id)
            if output.query_id not in golden:
                problems.append(InputProblem(str(path), line, "query_id",
                                             f"unknown case {output.query_id!r}: not in the golden set"))
            elif key in seen:
                problems.append(InputProblem(str(path), line, "query_id",
                                             f"duplicate output for case {output.query_id!r} config "
                                             f"{output.config_id!r} (first at {seen[key]})"))
            else:
                seen[key] = f"{path}:{line}"
                rows.append((path, line, output))
    if problems:
        raise InputError(problems)
    return rows


def read_outputs(paths: Sequence[str | Path], golden: Mapping[str, Day39Golden]) -> list[Day39Output]:
    """Every output line of ``paths``, in order. Raises :class:`InputError` naming file, line and field."""
    return [output for _, _, output in _read_output_lines(paths, golden)]


class Day39Chunk(ForeignRecord):
    """One chunk of the document store: its text and the metadata the lesson asks for."""

    chunk_id: NonEmptyStr
    text: str
    document_id: NonEmptyStr | None = Field(default=None, validation_alias=AliasChoices("document_id", "doc_id"))
    document_version: str | None = None
    section_path: list[str] | str = Field(default_factory=list)
    page_start: int | None = Field(default=None, ge=0)
    page_end: int | None = Field(default=None, ge=0)
    acl_roles: list[str] = Field(default_factory=list)

    _nulls = null_as_default("section_path", "acl_roles")

    @property
    def id_parts(self) -> tuple[str, str] | None:
        """(document, version) as the lesson's chunk ids name them: ``document:version:chunk``."""
        parts = self.chunk_id.split(":")
        return (parts[0], parts[1]) if len(parts) >= 3 and parts[0] and parts[1] else None


def _chunk_to_native(chunk: Day39Chunk, path: Path, line: int, problems: list[InputProblem]) -> CorpusChunk | None:
    named = chunk.id_parts
    document = chunk.document_id or (named[0] if named else None)
    if document is None:
        problems.append(InputProblem(str(path), line, "document_id",
                                     f"required: chunk id {chunk.chunk_id!r} does not name its document "
                                     "(document:version:chunk); give document_id"))
        return None
    mapped: dict[str, Any] = {
        "chunk_id": chunk.chunk_id,
        "doc_id": document,
        "doc_version": chunk.document_version or (named[1] if named and not chunk.document_id else None),
        "text": chunk.text,
        "section_path": chunk.section_path,
        "acl": {"roles": list(chunk.acl_roles)} if chunk.acl_roles else None,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
    }
    try:
        return CorpusChunk.model_validate(merge_extras(mapped, chunk.model_extra, "day39_"))
    except ValidationError as exc:
        problems.extend(validation_problems(path, line, exc))
        return None


def read_corpus(path: str | Path) -> Corpus:
    """The document store at ``path`` as the corpus: the text the judge reads behind the chunk
    ids of the outputs. Raises :class:`InputError` naming file, line and field for a bad line,
    a repeated chunk id or a chunk whose document cannot be told."""
    path = Path(path)
    chunks, lines = read_unique(path, Day39Chunk, "chunk_id", "chunk id")
    problems: list[InputProblem] = []
    out: dict[str, CorpusChunk] = {}
    for cid, chunk in chunks.items():
        native = _chunk_to_native(chunk, path, lines[cid], problems)
        if native is not None:
            out[cid] = native
    if problems:
        raise InputError(problems)
    return Corpus(out)


_GOLD_KEYS = frozenset({"id", "question", "expected_chunk_ids"})
_TRACE_KEYS = frozenset({"query_id", "retrieved_chunks"})
# Fields only the day-39 contract uses; without one of them a line is indistinguishable from a
# native one, and reading it as native loses nothing.
_TRACE_MARKERS = frozenset({"expected_behavior_observed", "query_rewrite", "reranked_chunks"})


def looks_like(first_object: dict[str, Any], role: Literal["gold", "trace"]) -> bool:
    """True when ``first_object`` carries a day-39-only marker for ``role``.

    The day-39 contract shares its field names with the native one, so only its own markers
    decide: a golden case whose ``user_context`` names ``tenant_id`` (native: ``tenant``); an
    output with ``expected_behavior_observed``, ``query_rewrite`` or ``reranked_chunks``, or
    without ``config_id`` (the native contract requires one; the runner reads it as
    ``unknown``). A golden file whose first case has no ``tenant_id`` (it is optional) is
    then told by its outputs.
    """
    if not isinstance(first_object, dict):
        return False
    if role == "gold":
        context = first_object.get("user_context")
        return _GOLD_KEYS <= first_object.keys() and isinstance(context, dict) and "tenant_id" in context
    if role == "trace":
        return _TRACE_KEYS <= first_object.keys() and (
            bool(_TRACE_MARKERS & first_object.keys()) or "config_id" not in first_object)
    return False


def _golden_to_native(case: Day39Golden) -> dict[str, Any]:
    user = dict(case.user_context)
    if "tenant_id" in user and "tenant" not in user:
        user["tenant"] = user["tenant_id"]
    mapped: dict[str, Any] = {
        "id": case.id,
        "question": case.question,
        "expected_answer": case.expected_answer or None,
        "expected_chunk_ids": list(case.expected_chunk_ids),
        "relevance": dict(case.relevance),
        "must_cite": list(case.must_cite),
        "difficulty": None if case.difficulty == "unknown" else case.difficulty,
        "tags": list(case.tags),
        "expected_behavior": case.expected_behavior,
        "user_context": user or None,
    }
    return merge_extras(mapped, case.model_extra, "day39_")


def _output_to_native(output: Day39Output, config_id: str) -> dict[str, Any]:
    def dump(refs: list[ChunkRef]) -> list[dict[str, Any]]:
        return [ref.model_dump() for ref in refs]

    unrecorded = {name: f"this day39 output line has no {name}"
                  for name in ("context_chunks", "citations", "answer") if name not in output.model_fields_set}

    mapped: dict[str, Any] = {
        "query_id": output.query_id,
        "config_id": config_id,
        "question": output.question,
        "retrieved_chunks": dump(output.retrieved_chunks),
        "context_chunks": dump(output.context_chunks),
        "answer": output.answer,
        "citations": dump(output.citations),
        "behavior": output.expected_behavior_observed,
        "expected_behavior_observed": output.expected_behavior_observed,
        "latency_ms": dict(output.latency_ms),
        "tokens": dict(output.tokens),
        "cost_usd": output.cost_usd,
        "versions": dict(output.versions),
        "not_recorded": unrecorded,
    }
    return merge_extras(mapped, output.model_extra, "day39_")


def to_native(gold_path: str | Path, trace_paths: Sequence[str | Path], *, config_id: str | None = None) -> NativeData:
    """Convert a day-39 golden file and output files into native golden cases and traces.

    Field names are kept; ``user_context.tenant_id`` also becomes ``tenant``, an empty
    ``expected_answer`` becomes null, ``expected_behavior_observed`` becomes ``behavior``
    (and is kept). ``config_id``, when given, replaces every output's own config id.
    Raises :class:`InputError` naming file, line and field.
    """
    golden, gold_lines = _read_golden_lines(gold_path)
    cases, problems = convert_records(gold_path, golden, gold_lines, _golden_to_native, GoldenCase)
    if problems:
        raise InputError(problems)

    traces: NativeTraces = {}
    seen: dict[tuple[str, str], str] = {}
    for path, line, output in _read_output_lines(trace_paths, golden):
        cfg = config_id or output.config_id
        key = (cfg, output.query_id)
        if key in seen:
            problems.append(InputProblem(str(path), line, "query_id",
                                         f"duplicate output for case {output.query_id!r} config {cfg!r} "
                                         f"(first at {seen[key]})"))
            continue
        seen[key] = f"{path}:{line}"
        trace = native_trace(_output_to_native(output, cfg), path, line, problems)
        if trace is not None:
            traces.setdefault(cfg, {})[output.query_id] = {0: trace}
    if problems:
        raise InputError(problems)
    return cases, traces


FORMAT = InputFormat(FORMAT_NAME, looks_like, to_native, read_corpus=read_corpus)
