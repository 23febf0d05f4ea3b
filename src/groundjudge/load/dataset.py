"""Assemble golden cases, traces and corpus into one checked :class:`Dataset`.

Input errors (duplicate ids, traces naming an unknown case, unknown chunk ids in the golden set
when a corpus is given) stop the run. Gaps that are not errors (a case with no trace for a
config, a chunk whose text is nowhere to be found) are recorded and reported, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, is_
from pathlib import Path

from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.records import index_unique, read_records

Paraphrases = dict[str, dict[str, dict[int, Trace]]]  # config id -> case id -> paraphrase index -> trace


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
    # config id -> case id -> the trace of the case's own question (paraphrase 0)
    traces: dict[str, dict[str, Trace]]
    corpus: Corpus
    missing_trace: dict[str, list[str]]  # config id -> case ids without a trace
    missing_text: dict[str, list[str]]  # "config/case" -> context chunk ids with no text
    unresolved_chunks: dict[str, list[str]]  # "config/case" -> retrieved/cited ids unknown to the corpus
    sources: dict[str, str]
    # traces a format that reads traces alone could not make a case of (an OpenTelemetry trace
    # without a retriever span...): trace id -> why
    skipped_traces: dict[str, str] = field(default_factory=dict)
    # config id -> case id -> paraphrase index (1, 2, ...) -> the trace of that paraphrase
    paraphrases: Paraphrases = field(default_factory=dict)

    @property
    def config_ids(self) -> list[str]:
        return list(self.traces)

    def trace(self, config_id: str, case_id: str) -> Trace | None:
        """The trace of the case's own question (paraphrase 0), if the config has one."""
        per_case = self.traces.get(config_id)
        return None if per_case is None else per_case.get(case_id)

    def paraphrase_traces(self, config_id: str, case_id: str) -> list[Trace]:
        """The traces of the case's paraphrases under the config, in paraphrase order."""
        found = self.paraphrases.get(config_id, {}).get(case_id)
        return [trace for _, trace in sorted(found.items())] if found else []


def load_corpus(path: str | Path) -> Corpus:
    chunks, _, problems = index_unique(path, read_records(path, CorpusChunk), attrgetter("chunk_id"),
                                       "chunk_id", "chunk id")
    if problems:
        raise InputError(problems)
    return Corpus(chunks)


def load_golden(path: str | Path, corpus: Corpus | None = None) -> dict[str, GoldenCase]:
    cases, lines, problems = index_unique(path, read_records(path, GoldenCase), attrgetter("id"), "id", "case id")
    if corpus and _unknown_to(corpus, cases.values()):
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


def _unknown_to(corpus: Corpus, cases: Iterable[GoldenCase]) -> bool:
    """Whether a case names a chunk (expected, to cite, graded) the corpus does not hold: the
    distinct ids of all cases looked up once each."""
    named = chain.from_iterable(chain.from_iterable(
        (case.expected_chunk_ids, case.must_cite, case.relevance) for case in cases))
    return bool(set(named).difference(corpus.chunks))


def load_traces(
    paths: Sequence[str | Path], cases: dict[str, GoldenCase], corpus: Corpus | None = None,
) -> tuple[dict[str, dict[str, Trace]], Paraphrases]:
    """Traces by config and case (each case's own question), and the traces of paraphrases by
    config, case and paraphrase index. Every config a trace names has an entry in the first."""
    traces: dict[str, dict[str, Trace]] = {}
    paraphrases: Paraphrases = {}
    problems: list[InputProblem] = []
    read = [(path, read_records(path, Trace)) for path in paths]
    where: dict[int, tuple[str | Path, int]] = {}  # a trace's file and line, once one is repeated
    for path, records in read:
        for line, trace in records:
            if trace.query_id not in cases:
                problems.append(InputProblem(str(path), line, "query_id",
                                             f"unknown case {trace.query_id!r}: not in the golden set"))
                continue
            per_config = traces.get(trace.config_id)
            if per_config is None:
                per_config = traces[trace.config_id] = {}
            if trace.paraphrase == 0:
                first = per_config.setdefault(trace.query_id, trace)
            else:
                variants = paraphrases.setdefault(trace.config_id, {}).setdefault(trace.query_id, {})
                first = variants.setdefault(trace.paraphrase, trace)
            if first is not trace:
                if not where:
                    where = {id(seen): (at, seen_line) for at, seen_in in read for seen_line, seen in seen_in}
                problems.append(InputProblem(
                    str(path), line, "query_id",
                    f"duplicate trace for case {trace.query_id!r} config {trace.config_id!r}"
                    + (f" paraphrase {trace.paraphrase}" if trace.paraphrase else "")
                    + " (first at {}:{})".format(*where[id(first)])))
    if problems:
        raise InputError(problems)
    return traces, paraphrases


def by_paraphrase(native: dict[str, dict[str, dict[int, Trace]]],
                  ) -> tuple[dict[str, dict[str, Trace]], Paraphrases]:
    """Traces a format's adapter gives by config, case and paraphrase index, as a
    :class:`Dataset` holds them: each case's own trace, and its paraphrases' apart."""
    traces: dict[str, dict[str, Trace]] = {}
    paraphrases: Paraphrases = {}
    for cfg, per_case in native.items():
        own = traces[cfg] = {}
        for cid, variants in per_case.items():
            for i, trace in variants.items():
                if i == 0:
                    own[cid] = trace
                else:
                    paraphrases.setdefault(cfg, {}).setdefault(cid, {})[i] = trace
    return traces, paraphrases


def load_dataset(
    golden: str | Path, traces: Sequence[str | Path], corpus: str | Path | None = None
) -> Dataset:
    """Load and cross-check everything; raise :class:`InputError` before any output is written."""
    the_corpus = load_corpus(corpus) if corpus else Corpus()
    cases = load_golden(golden, the_corpus)
    by_config, paraphrases = load_traces(traces, cases, the_corpus)
    sources = {"golden": str(golden), "traces": ", ".join(str(t) for t in traces), "corpus": str(corpus or "")}
    return assemble_dataset(cases, by_config, the_corpus, sources, paraphrases=paraphrases)


def assemble_dataset(
    cases: dict[str, GoldenCase], by_config: dict[str, dict[str, Trace]], corpus: Corpus,
    sources: dict[str, str], *, paraphrases: Paraphrases | None = None, skipped: dict[str, str] | None = None,
) -> Dataset:
    """Record the gaps (cases without a trace, chunks without text or unknown to the corpus,
    and ``skipped``: the traces the format could not make a case of, with why)."""
    paraphrases = paraphrases or {}
    missing_trace = {cfg: [cid for cid in cases if cid not in per_case] for cfg, per_case in by_config.items()}
    missing_text: dict[str, list[str]] = {}
    unresolved: dict[str, list[str]] = {}
    known = corpus.chunks  # every chunk of the corpus has its text
    every = [trace for per_case in by_config.values() for trace in per_case.values()]
    every += [trace for per_case in paraphrases.values() for variants in per_case.values() for trace in variants.values()]
    if _any_gap(every, known):
        for cfg, cid, trace in _in_case_order(by_config, paraphrases):
            no_text = [c.chunk_id for c in trace.context_chunks if c.text is None and c.chunk_id not in known]
            unknown = ([c.chunk_id for c in trace.retrieved_chunks if c.chunk_id not in known]
                       + [c.chunk_id for c in trace.citations if c.chunk_id not in known]) if known else []
            if no_text or unknown:
                key = f"{cfg}/{cid}" + (f"#p{trace.paraphrase}" if trace.paraphrase else "")
                if no_text:
                    missing_text[key] = no_text
                if unknown:
                    unresolved[key] = sorted(set(unknown))
    return Dataset(cases, by_config, corpus, missing_trace, missing_text, unresolved, sources, skipped or {},
                   paraphrases)


def _in_case_order(by_config: dict[str, dict[str, Trace]], paraphrases: Paraphrases,
                   ) -> Iterator[tuple[str, str, Trace]]:
    """(config id, case id, trace) of every trace: a config's cases in order, each case's own
    trace before its paraphrases' (by index)."""
    for cfg, per_case in by_config.items():
        others = paraphrases.get(cfg, {})
        for cid in chain(per_case, (cid for cid in others if cid not in per_case)):
            own = per_case.get(cid)
            if own is not None:
                yield cfg, cid, own
            for _, trace in sorted(others.get(cid, {}).items()):
                yield cfg, cid, trace


def _any_gap(traces: list[Trace], known: dict[str, CorpusChunk]) -> bool:
    """Whether some trace has a context chunk without text that the corpus does not know, or
    (with a corpus) a retrieved or cited chunk unknown to it: the distinct ids of all traces
    looked up once each, so that a run without gaps looks at no trace one by one."""
    context = list(chain.from_iterable(map(attrgetter("context_chunks"), traces)))
    textless = compress(map(attrgetter("chunk_id"), context), map(is_, map(attrgetter("text"), context), repeat(None)))
    if set(textless).difference(known):
        return True
    if not known:
        return False
    named = chain.from_iterable(chain(map(attrgetter("retrieved_chunks"), traces), map(attrgetter("citations"), traces)))
    return bool(set(map(attrgetter("chunk_id"), named)).difference(known))
