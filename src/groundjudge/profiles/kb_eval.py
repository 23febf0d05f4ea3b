"""The kb-eval profile: kb-eval's aggregate metrics and run comparison, in its own terms.

Pure functions over records read by :mod:`groundjudge.load.adapters.kb_eval`. Definitions,
per run (each rate is rounded to 4 decimals, half away from zero; a rate whose denominator is
empty is None, written ``null``):

- ``hit_at_k[k]`` for k in 1, 3, 5, 10: a query hits when one of its ``expected_chunk_ids``
  is among the first k of ``hits_top_k``; mean over the run's queries with a non-empty
  ``expected_chunk_ids`` (a query that errored has no hits, so it counts as a miss).
- ``mrr``: 1 / rank of the first expected chunk, 0 when it is not in the top 10; mean over the
  same queries as hit@k.
- ``recall_at_k_doc[k]``: share of the query's ``expected_doc_ids`` found among the doc ids of
  the first k hits; mean over the queries with a non-empty ``expected_doc_ids``.
- ``citation_coverage``: share of grounded RAG answers (an answer, no error, ``grounded``
  true) whose every citation resolves to a real chunk: it names a ``chunk_id`` and that id is
  in the chunk store (kb-eval's "a real chunk in the DB": its database's ``chunks`` table, or a
  corpus file). A citation the run resolved to nothing (``chunk_id`` null) never resolves, and
  an answer without citations has nothing unresolved. Without a chunk store an answer citing
  chunk ids cannot be decided, so the rate is None (:func:`citation_coverage_reason` says why)
  unless every grounded answer is decided without one.
- ``groundedness``: share of RAG answers (an answer, no error) in which every ``must_contain``
  string appears and no ``forbidden`` one does, as written (case counts, as in kb-eval).
- ``empty_result_rate``: share of the run's queries with no hit at all.
- ``refusal_correctness``: share of the run's "should refuse" queries (empty
  ``expected_doc_ids``) that the system refused: its answer has ``grounded`` false (kb-eval's
  test; a query with no answer was not refused).
- ``total_queries``: results in the run; ``failed_queries``: results with an ``error``.

Comparison (:func:`compare_runs`) gives the per-metric delta ``b - a`` and, per query with
expected chunks, the rank of the first correct chunk in each run's top 10 and a kind:
``Regression`` (a found one, b found none), ``Win`` (b found one and a none, or b ranks it
higher), ``Loss`` (both found one, b ranks it lower), ``Draw`` (same rank, or both found none).
When the runs' chunker versions differ, chunk ids are not comparable, so a hit is a chunk
of an expected document whose spans cover at least 50% of a span of an expected chunk
(:func:`span_match`); ``deltas["chunker_version_match"]`` says which mode was used, and with
``strict_chunker_version=True`` differing versions raise :class:`~groundjudge.errors.ChunkerMismatch`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from groundjudge.errors import ChunkerMismatch, InputError
from groundjudge.inert import markdown, markdown_code
from groundjudge.load.adapters.kb_eval import (
    FORMAT_NAME,
    KbGoldenQuery,
    KbHit,
    KbResult,
    KbRun,
    SourceSpan,
    read_golden,
    read_runs,
)
from groundjudge.load.adapters.kb_eval_store import chunk_ids as database_chunk_ids
from groundjudge.load.adapters.kb_eval_store import store_aggregates
from groundjudge.load.dataset import load_corpus
from groundjudge.profiles.registry import CaseOutcomes, Profile, ProfileResult, ProfileSettings

__all__ = [
    "DEFAULT_KS",
    "MIN_SPAN_OVERLAP",
    "MRR_CUTOFF",
    "PROFILE",
    "KbEvalSettings",
    "aggregate",
    "citation_coverage_reason",
    "compare_runs",
    "expected_spans",
    "first_hit_rank",
    "from_files",
    "render_markdown",
    "report",
    "round4",
    "span_match",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
MRR_CUTOFF = 10
MIN_SPAN_OVERLAP = 0.5

MatchMode = Literal["exact", "fallback_doc_span"]
Kind = Literal["Win", "Loss", "Draw", "Regression"]
# (doc_id, spans) of each expected chunk, by chunk id
SpanIndex = Mapping[str, tuple[str, Sequence[SourceSpan]]]
HitTest = Callable[[KbHit], bool]


def round4(value: float | None) -> float | None:
    """Round to 4 decimals, half away from zero; None stays None.

    The shortest decimal form of the float is rounded, so ``0.03125`` gives ``0.0313`` (Python's
    ``round`` gives ``0.0312``: it rounds half to even).

    >>> round4(1 / 3), round4(0.03125), round4(None)
    (0.3333, 0.0313, None)
    """
    if value is None:
        return None
    return float(Decimal(repr(value)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def _rate(hits: int, total: int) -> float | None:
    return round4(hits / total) if total else None


def _mean(values: Sequence[float]) -> float | None:
    return round4(sum(values) / len(values)) if values else None


# --- matching a hit against the expected chunks -------------------------------------------


def _covered(span: SourceSpan, others: Sequence[SourceSpan]) -> int:
    """Characters of ``span`` covered by the union of ``others``."""
    pieces = sorted((max(o.start, span.start), min(o.end, span.end)) for o in others)
    covered, reach = 0, span.start
    for start, end in pieces:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered


def span_match(hit: KbHit, query: KbGoldenQuery, spans: SpanIndex) -> bool:
    """The fallback criterion: is ``hit`` one of ``query``'s expected chunks, chunked anew?

    True when the hit is an expected chunk by id, or when its ``doc_id`` is one of the query's
    ``expected_doc_ids`` and its ``source_spans`` cover at least half (``>= 0.5``) of one span
    of an expected chunk of that same document. Spans of zero length cover nothing.
    """
    if hit.chunk_id in query.expected_chunk_ids:
        return True
    if hit.doc_id not in query.expected_doc_ids or not hit.source_spans:
        return False
    for chunk_id in query.expected_chunk_ids:
        doc_id, expected = spans.get(chunk_id, (None, ()))
        if doc_id != hit.doc_id:
            continue
        for span in expected:
            if len(span) and _covered(span, hit.source_spans) >= MIN_SPAN_OVERLAP * len(span):
                return True
    return False


def expected_spans(query: KbGoldenQuery, runs: Sequence[KbRun]) -> dict[str, tuple[str, Sequence[SourceSpan]]]:
    """Where each expected chunk of ``query`` lies: from the golden set, else from a run's hit of it."""
    found: dict[str, tuple[str, Sequence[SourceSpan]]] = {}
    for run in runs:
        result = run.results.get(query.id)
        for hit in result.hits_top_k if result else ():
            if hit.chunk_id in query.expected_chunk_ids and hit.source_spans and hit.chunk_id not in found:
                found[hit.chunk_id] = (hit.doc_id, hit.source_spans)
    for given in query.expected_chunk_spans:
        found[given.chunk_id] = (given.doc_id, given.source_spans)
    return found


def _exact(query: KbGoldenQuery) -> HitTest:
    expected = set(query.expected_chunk_ids)
    return lambda hit: hit.chunk_id in expected


def first_hit_rank(hits: Sequence[KbHit], is_correct: HitTest, *, cutoff: int = MRR_CUTOFF) -> int | None:
    """1-based rank of the first correct hit within the first ``cutoff``, else None."""
    for rank, hit in enumerate(hits[:cutoff], start=1):
        if is_correct(hit):
            return rank
    return None


# --- one run ---------------------------------------------------------------------------


def _check_known(golden: Mapping[str, KbGoldenQuery], run: KbRun) -> None:
    unknown = [qid for qid in run.results if qid not in golden]
    if unknown:
        raise ValueError(f"run {run.run_id!r} has results for queries not in the golden set: {', '.join(unknown)}")


def _citations_resolve(result: KbResult, known_chunk_ids: Collection[str] | None) -> bool | None:
    """Every citation resolves to a chunk of the store: True, False, or None when only a store
    could tell (a citation names a chunk id and no store was given)."""
    assert result.answer is not None
    citations = result.answer.citations
    if any(c.chunk_id is None for c in citations):
        return False  # the run itself found no chunk behind it
    if known_chunk_ids is None:
        return None if citations else True
    return all(c.chunk_id in known_chunk_ids for c in citations)


def _grounded_answers(run: KbRun) -> list[KbResult]:
    return [r for r in run.results.values() if r.answer is not None and r.error is None and r.answer.grounded]


def _coverage(grounded: Sequence[KbResult], known_chunk_ids: Collection[str] | None) -> float | None:
    verdicts = [_citations_resolve(r, known_chunk_ids) for r in grounded]
    if any(v is None for v in verdicts):
        return None  # undecided answers: a rate over the decided ones would be a guess
    return _rate(sum(1 for v in verdicts if v), len(verdicts))


def citation_coverage_reason(run: KbRun, known_chunk_ids: Collection[str] | None) -> str | None:
    """Why ``citation_coverage`` of ``run`` is null, or None when it is not (or is null only
    because the run has no grounded answer, kb-eval's own empty denominator)."""
    undecided = [r.query_id for r in _grounded_answers(run) if _citations_resolve(r, known_chunk_ids) is None]
    if not undecided:
        return None
    return (f"citation_coverage of run {run.run_id!r} is null: a citation counts only when it resolves to a real "
            f"chunk of kb-eval's chunk store, and no store was given, so {len(undecided)} grounded "
            f"answer(s) ({', '.join(undecided[:5])}{', ...' if len(undecided) > 5 else ''}) cannot be decided. "
            "Read the runs from kb-eval's database (its chunks table is the store) or give the chunks with --corpus")


def _grounded_text(query: KbGoldenQuery, text: str) -> bool:
    # kb-eval's own test: the strings "appear" in the answer, as written (groundjudge's native
    # must_contain folds case; this profile reports kb-eval's number). An empty forbidden string
    # would appear in every answer: it forbids nothing.
    return all(s in text for s in query.must_contain) and not any(s in text for s in query.forbidden if s)


def _aggregate(
    golden: Mapping[str, KbGoldenQuery],
    run: KbRun,
    tests: Mapping[str, HitTest],
    ks: Sequence[int],
    known_chunk_ids: Collection[str] | None,
) -> dict[str, Any]:
    _check_known(golden, run)
    results = list(run.results.values())
    hits: dict[int, list[float]] = {k: [] for k in ks}
    reciprocal: list[float] = []
    doc_recall: dict[int, list[float]] = {k: [] for k in ks}
    for result in results:
        query = golden[result.query_id]
        if query.expected_chunk_ids:
            rank = first_hit_rank(result.hits_top_k, tests[query.id], cutoff=max(max(ks), MRR_CUTOFF))
            for k in ks:
                hits[k].append(1.0 if rank is not None and rank <= k else 0.0)
            reciprocal.append(1.0 / rank if rank is not None and rank <= MRR_CUTOFF else 0.0)
        if query.expected_doc_ids:
            wanted = set(query.expected_doc_ids)
            for k in ks:
                found = {hit.doc_id for hit in result.hits_top_k[:k]}
                doc_recall[k].append(len(wanted & found) / len(wanted))
    answered = [r for r in results if r.answer is not None and r.error is None]
    should_refuse = [r for r in results if golden[r.query_id].should_refuse]
    return {
        "hit_at_k": {str(k): _mean(hits[k]) for k in ks},
        "mrr": _mean(reciprocal),
        "recall_at_k_doc": {str(k): _mean(doc_recall[k]) for k in ks},
        "citation_coverage": _coverage(_grounded_answers(run), known_chunk_ids),
        "groundedness": _rate(
            sum(_grounded_text(golden[r.query_id], r.answer.text) for r in answered),  # type: ignore[union-attr]
            len(answered)),
        "empty_result_rate": _rate(sum(1 for r in results if not r.hits_top_k), len(results)),
        "refusal_correctness": _rate(
            sum(1 for r in should_refuse if r.answer is not None and not r.answer.grounded),
            len(should_refuse)),
        "total_queries": len(results),
        "failed_queries": sum(1 for r in results if r.error is not None),
    }


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {list(ks)!r}")
    return tuple(sorted(set(ks)))


def aggregate(
    golden: Mapping[str, KbGoldenQuery],
    run: KbRun,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    known_chunk_ids: Collection[str] | None = None,
) -> dict[str, Any]:
    """kb-eval's ``AggregateMetrics`` of one run (the module docstring gives every definition).

    Parameters
    ----------
    golden : mapping of query id to KbGoldenQuery
    run : KbRun
    ks : sequence of int, keyword-only, default (1, 3, 5, 10)
        Cutoffs of ``hit_at_k`` and ``recall_at_k_doc`` (keys are the k's as strings).
    known_chunk_ids : collection of str, keyword-only, optional
        The chunk store: the chunk ids that exist (kb-eval's ``chunks`` table). Without it,
        ``citation_coverage`` is None as soon as one grounded answer cites a chunk id.

    Raises
    ------
    ValueError
        If the run has results for queries not in ``golden``, or a k is not a positive integer.

    Examples
    --------
    >>> from groundjudge.load.adapters.kb_eval import KbGoldenQuery, KbResult, KbRun
    >>> q = KbGoldenQuery(id="q", query="?", expected_chunk_ids=["c"], expected_doc_ids=["d"])
    >>> r = KbResult(query_id="q", chunker_version="v1", hits_top_k=[{"chunk_id": "x", "doc_id": "d"},
    ...                                                                {"chunk_id": "c", "doc_id": "d"}])
    >>> agg = aggregate({"q": q}, KbRun("a", "v1", {"q": r}))
    >>> agg["hit_at_k"], agg["mrr"], agg["refusal_correctness"]
    ({'1': 0.0, '3': 1.0, '5': 1.0, '10': 1.0}, 0.5, None)
    """
    ks = _check_ks(ks)
    return _aggregate(golden, run, {qid: _exact(q) for qid, q in golden.items()}, ks, known_chunk_ids)


def report(
    golden: Mapping[str, KbGoldenQuery],
    run: KbRun,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    known_chunk_ids: Collection[str] | None = None,
) -> dict[str, Any]:
    """One run's report: its id, chunker version, ``aggregate_json`` and golden queries it lacks."""
    return {
        "run_id": run.run_id,
        "chunker_version": run.chunker_version,
        "aggregate_json": aggregate(golden, run, ks=ks, known_chunk_ids=known_chunk_ids),
        "missing_results": [qid for qid in golden if qid not in run.results],
    }


# --- two runs --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    name: str
    run: KbRun


def _delta(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {key: _delta(a[key], b.get(key)) for key in a}
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return b - a
    return round4(b - a)


def _kind(a_rank: int | None, b_rank: int | None) -> Kind:
    if a_rank == b_rank:
        return "Draw"
    if b_rank is None:
        return "Regression"
    if a_rank is None or b_rank < a_rank:
        return "Win"
    return "Loss"


_SETTING_FIELDS = ("chunker_version", "embedding_model", "prompt_version")


def _run_settings(run: KbRun) -> dict[str, Any]:
    first = next(iter(run.results.values()), None)
    settings: dict[str, Any] = {"chunker_version": run.chunker_version}
    extra = (first.model_extra or {}) if first else {}
    settings.update({name: extra[name] for name in _SETTING_FIELDS[1:] if name in extra})
    return settings


def _known_causes(run_a: KbRun, run_b: KbRun) -> list[str]:
    a, b = _run_settings(run_a), _run_settings(run_b)
    return [f"{name} differs ({a[name]} -> {b[name]})" for name in _SETTING_FIELDS
            if name in a and name in b and a[name] != b[name]]


def compare_runs(
    golden: Mapping[str, KbGoldenQuery],
    run_a: KbRun,
    run_b: KbRun,
    *,
    strict_chunker_version: bool = False,
    ks: Sequence[int] = DEFAULT_KS,
    known_chunk_ids: Collection[str] | None = None,
) -> dict[str, Any]:
    """kb-eval's ``CompareReport`` of run b against run a.

    Returns ``run_a``, ``run_b``, ``aggregate_a``, ``aggregate_b``, ``deltas`` (``b - a`` per
    metric, None where either side is None, plus ``chunker_version_match``) and ``per_query``
    (``query_id``, ``kind``, ``a_hit_rank``, ``b_hit_rank``, ``note``) for each golden query
    with expected chunks that either run answered, in golden order. A query missing from a run has no hits there.

    In ``fallback_doc_span`` mode (chunker versions differ) the chunk-level aggregates (hit@k,
    MRR) of *both* runs use the fallback criterion, so their deltas compare like with like.

    Raises
    ------
    groundjudge.errors.ChunkerMismatch
        If the chunker versions differ and ``strict_chunker_version`` is True.
    ValueError
        If a run has results for queries not in ``golden``.
    """
    ks = _check_ks(ks)
    same_version = run_a.chunker_version == run_b.chunker_version
    if not same_version and strict_chunker_version:
        raise ChunkerMismatch(f"run {run_a.run_id!r}", run_a.chunker_version, f"run {run_b.run_id!r}",
                              run_b.chunker_version)
    mode: MatchMode = "exact" if same_version else "fallback_doc_span"
    if mode == "exact":
        tests = {qid: _exact(q) for qid, q in golden.items()}
    else:
        tests = {}
        for qid, query in golden.items():
            spans = expected_spans(query, [run_a, run_b])
            tests[qid] = lambda hit, q=query, s=spans: span_match(hit, q, s)  # type: ignore[misc]
    agg_a = _aggregate(golden, run_a, tests, ks, known_chunk_ids)
    agg_b = _aggregate(golden, run_b, tests, ks, known_chunk_ids)
    deltas: dict[str, Any] = {"chunker_version_match": mode}
    deltas.update({name: _delta(agg_a[name], agg_b[name]) for name in agg_a})

    causes = _known_causes(run_a, run_b)
    if mode == "fallback_doc_span":
        causes = [c + "; matched by doc_id + span overlap" if c.startswith("chunker_version") else c for c in causes]
    per_query = []
    for qid, query in golden.items():
        if not query.expected_chunk_ids or (qid not in run_a.results and qid not in run_b.results):
            continue
        ranks = []
        notes = []
        for side in (_Side("a", run_a), _Side("b", run_b)):
            result = side.run.results.get(qid)
            if result is None:
                notes.append(f"no result in run {side.name} ({side.run.run_id})")
            hits = result.hits_top_k if result else []
            ranks.append(first_hit_rank(hits, tests[qid]))
        kind = _kind(ranks[0], ranks[1])
        if kind != "Draw":
            notes.extend(causes)
        per_query.append({"query_id": qid, "kind": kind, "a_hit_rank": ranks[0], "b_hit_rank": ranks[1],
                          "note": "; ".join(notes) or None})
    return {
        "run_a": run_a.run_id,
        "run_b": run_b.run_id,
        "aggregate_a": agg_a,
        "aggregate_b": agg_b,
        "deltas": deltas,
        "per_query": per_query,
    }


# --- Markdown --------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.4f}"
    return markdown(value)  # ids and notes from the files: inert, pipes included


def _metric_rows(agg: Mapping[str, Any]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for name, value in agg.items():
        if isinstance(value, dict):
            rows.extend((f"{name}[{k}]", v) for k, v in value.items())
        else:
            rows.append((name, value))
    return rows


def _render_run(doc: Mapping[str, Any]) -> str:
    lines = [f"# kb-eval run {_cell(doc['run_id'])}", "",
             f"Chunker version: {markdown_code(doc['chunker_version'])}", "",
             "| metric | value |", "|---|---:|"]
    lines += [f"| {name} | {_cell(value)} |" for name, value in _metric_rows(doc["aggregate_json"])]
    if doc.get("missing_results"):
        lines += ["", f"Golden queries with no result: {', '.join(map(markdown, doc['missing_results']))}"]
    return "\n".join(lines) + "\n"


def _render_compare(doc: Mapping[str, Any], versions: tuple[str, str] | None) -> str:
    deltas = doc["deltas"]
    chunkers = f" (chunker {markdown(versions[0])} -> {markdown(versions[1])})" if versions else ""
    lines = [f"# kb-eval compare: {_cell(doc['run_a'])} -> {_cell(doc['run_b'])}", "",
             f"Chunk matching: {markdown_code(deltas['chunker_version_match'])}{chunkers}", "",
             "## Aggregate deltas", "", "| metric | a | b | delta (b - a) |", "|---|---:|---:|---:|"]
    b_rows = dict(_metric_rows(doc["aggregate_b"]))
    d_rows = dict(_metric_rows({k: v for k, v in deltas.items()
                                if k != "chunker_version_match"}))
    for name, value in _metric_rows(doc["aggregate_a"]):
        lines.append(f"| {name} | {_cell(value)} | {_cell(b_rows.get(name))} | {_cell(d_rows.get(name))} |")
    counts = {kind: sum(1 for q in doc["per_query"] if q["kind"] == kind)
              for kind in ("Win", "Loss", "Regression", "Draw")}
    lines += ["", "## Per query", "",
              ", ".join(f"{kind}: {n}" for kind, n in counts.items()), "",
              "| query | kind | a rank | b rank | note |", "|---|---|---:|---:|---|"]
    for kind in ("Regression", "Loss", "Win"):
        for q in doc["per_query"]:
            if q["kind"] == kind:
                lines.append(f"| {_cell(q['query_id'])} | {kind} | {_cell(q['a_hit_rank'] or '-')} | "
                             f"{_cell(q['b_hit_rank'] or '-')} | {_cell(q['note'] or '')} |")
    return "\n".join(lines) + "\n"


def render_markdown(report: Mapping[str, Any], notes: Sequence[str] = (),
                    chunker_versions: tuple[str, str] | None = None) -> str:
    """Markdown for a :func:`report` (one run), a :func:`compare_runs` report (two runs, whose
    ``chunker_versions`` are named when given) or ``{"runs": [report, ...]}``, then ``notes``
    (why a metric is null, what was written).

    A comparison shows the aggregate deltas and a Regressions / Losses / Wins table (draws are
    counted, not listed). For people, not a wire format.
    """
    if "per_query" in report:
        text = _render_compare(report, chunker_versions)
    elif "runs" in report:
        text = "\n".join(_render_run(one) for one in report["runs"])
    else:
        text = _render_run(report)
    if notes:
        text += "\n## Notes\n\n" + "".join(f"- {markdown(note)}\n" for note in notes)
    return text


class KbEvalSettings(ProfileSettings):
    """The kb-eval profile's knobs: ``[profile.kb-eval]`` in the config file, or the flags."""

    strict_chunker_version: bool = Field(
        False, description="Refuse to compare two runs chunked with different chunker versions (kb-eval's "
                           "--strict-chunker-version; default: match chunks by doc_id + span overlap).")
    keep_aggregate_json: bool = Field(
        False, description="Leave eval_runs.aggregate_json of runs read from kb-eval's database as it is "
                           "(default: written back, as kb-eval's metrics step does).")


def _chunk_store(runs: Sequence[KbRun], corpus: Path | None) -> frozenset[str] | None:
    """The chunk ids that exist: the corpus's and the ``chunks`` table of every database read;
    None when there is neither."""
    stores: list[frozenset[str]] = []
    if corpus is not None:
        stores.append(frozenset(load_corpus(corpus).chunks))
    for database in dict.fromkeys(r.database for r in runs if r.database is not None):
        found = database_chunk_ids(database)
        if found is not None:
            stores.append(found)
    return frozenset().union(*stores) if stores else None


def _reasons(runs: Sequence[KbRun], store: Collection[str] | None) -> tuple[str, ...]:
    return tuple(reason for run in runs if (reason := citation_coverage_reason(run, store)) is not None)


def from_files(golden: Path, traces: Sequence[Path], live: Sequence[Path] = (), *, corpus: Path | None = None,
               settings: KbEvalSettings | None = None) -> ProfileResult:
    """kb-eval's report of its runs: one run's aggregate, the comparison of two (the second
    against the first), or with more runs each one's aggregate. ``traces`` are results files or
    kb-eval's database (every run in it, or ``kb.sqlite#RUN_ID``); ``corpus`` is a chunk store
    besides the database's. Runs read from a database get their ``aggregate_json`` written back
    (unless ``settings.keep_aggregate_json``) once every run has been scored, in one transaction
    per database."""
    settings = settings or KbEvalSettings()
    queries = read_golden(golden)
    runs = [run for path in traces for run in read_runs(path, queries)]
    if not runs:
        raise InputError.one(golden, None, "traces", "the kb-eval profile takes one run, or two to compare")
    store = _chunk_store(runs, corpus)
    if len(runs) == 2:
        try:
            result = compare_runs(queries, runs[0], runs[1], strict_chunker_version=settings.strict_chunker_version,
                                  known_chunk_ids=store)
        except ChunkerMismatch as exc:
            raise InputError.one(runs[1].source, None, "chunker_version",
                                 f"{exc} (--strict-chunker-version, or strict_chunker_version = true, is set)"
                                 ) from None
    elif len(runs) == 1:
        result = report(queries, runs[0], known_chunk_ids=store)
    else:
        result = {"runs": [report(queries, run, known_chunk_ids=store) for run in runs]}
    notes = _reasons(runs, store)
    stored = [run for run in runs if run.database is not None]
    if stored and not settings.keep_aggregate_json:
        for database in dict.fromkeys(r.database for r in stored if r.database is not None):
            store_aggregates(database, {r.run_id: aggregate(queries, r, known_chunk_ids=store)
                                        for r in stored if r.database == database})
        notes += ((f"aggregate_json written back to {len(stored)} run(s) of "
                  f"{', '.join(str(d) for d in dict.fromkeys(r.database for r in stored))}"),)
    versions = (runs[0].chunker_version, runs[1].chunker_version) if len(runs) == 2 else None
    return ProfileResult(FORMAT_NAME, result, render_markdown(result, notes, versions), None,  # kb-eval has no gate
                         notes=notes)


def case_outcomes(report: Mapping[str, Any]) -> CaseOutcomes | None:
    """The per-query kinds of a :func:`compare_runs` report (as written in profile-kb-eval.json)
    in groundjudge compare's words; None for any other report."""
    if not isinstance(report, Mapping) or not isinstance(report.get("per_query"), list):
        return None
    def found(rank: Any, side: str) -> str:
        return f"at rank {rank} in {side}" if rank is not None else f"not in {side}'s top 10"
    rows = [q for q in report["per_query"]
            if isinstance(q, Mapping) and isinstance(q.get("kind"), str) and isinstance(q.get("query_id"), str)]
    mode = (report.get("deltas") or {}).get("chunker_version_match")
    how = "matched by doc_id + span overlap" if mode == "fallback_doc_span" else "matched by chunk id"
    return CaseOutcomes(
        (str(report.get("run_a")), str(report.get("run_b"))),
        {str(q["query_id"]): q["kind"].lower() for q in rows},
        {str(q["query_id"]): f"first correct chunk {found(q.get('a_hit_rank'), 'A')}, "
                             f"{found(q.get('b_hit_rank'), 'B')} ({how})" for q in rows},
        "kb-eval ranks the first correct chunk of each run and nothing else")


PROFILE = Profile(FORMAT_NAME, from_files, KbEvalSettings, uses_corpus=True, case_outcomes=case_outcomes)
