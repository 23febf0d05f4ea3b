"""Assemble golden cases, traces and corpus into one checked :class:`Dataset`.

Input errors (duplicate ids, traces naming an unknown case, unknown chunk ids in the golden set
when a corpus is given) stop the run. Gaps that are not errors (a case with no trace for a
config, a chunk whose text is nowhere to be found) are recorded and reported, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.items import IdColumns, RetrievedColumns, chunk_ids, chunk_texts
from groundjudge.load.records import index_unique, read_records


@dataclass(frozen=True)
class Corpus:
    """Chunks by id, with the chunk-to-document map."""

    chunks: dict[str, CorpusChunk] = field(default_factory=dict)

    def doc_of(self, chunk_id: str) -> str | None:
        chunk = self.chunks.get(chunk_id)
        return chunk.doc_id if chunk else None

    def text_of(self, chunk_id: str) -> str | None:
        chunk = self.chunks.get(chunk_id)
        return chunk.text if chunk else None

    def __bool__(self) -> bool:
        return bool(self.chunks)


@dataclass(frozen=True)
class Dataset:
    cases: dict[str, GoldenCase]
    # config id -> case id -> paraphrase index -> trace
    traces: dict[str, dict[str, dict[int, Trace]]]
    corpus: Corpus
    missing_trace: dict[str, list[str]]  # config id -> case ids without a trace
    missing_text: dict[str, list[str]]  # "config/case" -> context chunk ids with no text
    unresolved_chunks: dict[str, list[str]]  # "config/case" -> retrieved/cited ids unknown to the corpus
    sources: dict[str, str]
    # traces a format that reads traces alone could not make a case of (an OpenTelemetry trace
    # without a retriever span...): trace id -> why
    skipped_traces: dict[str, str] = field(default_factory=dict)

    @property
    def config_ids(self) -> list[str]:
        return list(self.traces)

    def trace(self, config_id: str, case_id: str) -> Trace | None:
        return self.traces.get(config_id, {}).get(case_id, {}).get(0)


def load_corpus(path: str | Path) -> Corpus:
    chunks, _, problems = index_unique(path, read_records(path, CorpusChunk), lambda c: c.chunk_id,
                                       "chunk_id", "chunk id")
    if problems:
        raise InputError(problems)
    return Corpus(chunks)


def load_golden(path: str | Path, corpus: Corpus | None = None) -> dict[str, GoldenCase]:
    cases, lines, problems = index_unique(path, read_records(path, GoldenCase), lambda c: c.id, "id", "case id")
    if corpus:
        for case in cases.values():
            for fname, ids in (("expected_chunk_ids", case.expected_chunk_ids), ("must_cite", case.must_cite),
                               ("relevance", list(case.relevance))):
                unknown = [cid for cid in ids if cid not in corpus.chunks]
                if unknown:
                    problems.append(InputProblem(str(path), lines[case.id], fname,
                                                 f"chunk ids not in the corpus: {', '.join(unknown)}"))
    if problems:
        raise InputError(sorted(problems, key=lambda p: p.line or 0))
    return cases


def load_traces(
    paths: Sequence[str | Path], cases: dict[str, GoldenCase], corpus: Corpus | None = None,
) -> dict[str, dict[str, dict[int, Trace]]]:
    """Traces by config, case and paraphrase, each held compactly (``compact_trace``): its
    chunk lists as columns where they fit, and with a corpus, its chunk ids the corpus's own
    strings."""
    prepare = partial(compact_trace, chunks=corpus.chunks if corpus else {})
    traces: dict[str, dict[str, dict[int, Trace]]] = {}
    seen: dict[tuple[str, str, int], str] = {}
    problems: list[InputProblem] = []
    for path in paths:
        for line, trace in read_records(path, Trace, prepare=prepare):
            key = (trace.config_id, trace.query_id, trace.paraphrase)
            where = f"{path}:{line}"
            if trace.query_id not in cases:
                problems.append(InputProblem(str(path), line, "query_id",
                                             f"unknown case {trace.query_id!r}: not in the golden set"))
            elif key in seen:
                problems.append(InputProblem(
                    str(path), line, "query_id",
                    f"duplicate trace for case {trace.query_id!r} config {trace.config_id!r}"
                    + (f" paraphrase {trace.paraphrase}" if trace.paraphrase else "")
                    + f" (first at {seen[key]})"))
            else:
                seen[key] = where
                traces.setdefault(trace.config_id, {}).setdefault(trace.query_id, {})[trace.paraphrase] = trace
    if problems:
        raise InputError(problems)
    return traces


def load_dataset(
    golden: str | Path, traces: Sequence[str | Path], corpus: str | Path | None = None
) -> Dataset:
    """Load and cross-check everything; raise :class:`InputError` before any output is written."""
    the_corpus = load_corpus(corpus) if corpus else Corpus()
    cases = load_golden(golden, the_corpus)
    by_config = load_traces(traces, cases, the_corpus)
    sources = {"golden": str(golden), "traces": ", ".join(str(t) for t in traces), "corpus": str(corpus or "")}
    return assemble_dataset(cases, by_config, the_corpus, sources)


def assemble_dataset(
    cases: dict[str, GoldenCase], by_config: dict[str, dict[str, dict[int, Trace]]], corpus: Corpus,
    sources: dict[str, str], *, skipped: dict[str, str] | None = None,
) -> Dataset:
    """Record the gaps (cases without a trace, chunks without text or unknown to the corpus,
    and ``skipped``: the traces the format could not make a case of, with why)."""
    missing_trace = {
        cfg: [cid for cid in cases if 0 not in per_case.get(cid, {})] for cfg, per_case in by_config.items()
    }
    missing_text: dict[str, list[str]] = {}
    unresolved: dict[str, list[str]] = {}
    for cfg, per_case in by_config.items():
        for cid, variants in per_case.items():
            for trace in variants.values():
                key = f"{cfg}/{cid}" + (f"#p{trace.paraphrase}" if trace.paraphrase else "")
                no_text = [cid for cid, text in zip(chunk_ids(trace.context_chunks), chunk_texts(trace.context_chunks),
                                                    strict=True)
                           if text is None and corpus.text_of(cid) is None]
                if no_text:
                    missing_text[key] = no_text
                if corpus:
                    ids = [*chunk_ids(trace.retrieved_chunks), *chunk_ids(trace.citations)]
                    unknown = sorted({i for i in ids if i not in corpus.chunks})
                    if unknown:
                        unresolved[key] = unknown
    return Dataset(cases, by_config, corpus, missing_trace, missing_text, unresolved, sources, skipped or {})


def compact_trace(trace: Trace, chunks: dict[str, CorpusChunk]) -> None:
    """Hold ``trace`` in less memory, reading the same: its chunk lists as columns
    (``load.items``) where nothing but ids, documents, scores and ranks are in them, and its
    chunk ids, and the document ids equal to the corpus's, the corpus's own strings.

    Every trace names a dozen or more chunks, each parsed into new strings: on a nightly set
    that is a large share of memory spent on copies of ids the corpus already holds, and the
    item objects as much again. The values are equal, so nothing that reads them changes (the
    trace and its items are frozen; this is the only place that sets their fields after
    validation)."""
    put = object.__setattr__
    for item in trace.retrieved_chunks:
        known = chunks.get(item.chunk_id)
        if known is not None:
            put(item, "chunk_id", known.chunk_id)
            if item.doc_id == known.doc_id:
                put(item, "doc_id", known.doc_id)
    for items in (trace.context_chunks, trace.citations):
        for cited in items:
            known = chunks.get(cited.chunk_id)
            if known is not None:
                put(cited, "chunk_id", known.chunk_id)
    columns = RetrievedColumns.of(trace.retrieved_chunks)
    if columns is not None:
        put(trace, "retrieved_chunks", columns)
    for name in ("context_chunks", "citations"):
        ids = IdColumns.of(getattr(trace, name))
        if ids is not None:
            put(trace, name, ids)
