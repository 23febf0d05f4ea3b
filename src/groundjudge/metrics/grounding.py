"""Context and citation metrics: what reached the prompt, and whether citations are scoped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from operator import attrgetter

from groundjudge.contracts import Citation, CorpusChunk, GoldenCase, Offsets, Trace

_chunk_id = attrgetter("chunk_id")


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def context_metrics(case: GoldenCase, trace: Trace, *, relevant: AbstractSet[str] | None = None,
                    ) -> dict[str, float | None]:
    """``context_recall`` and ``context_precision`` against the case's relevant chunks
    (``relevant``: their ids, when the caller has them already)."""
    relevant = case.relevant_chunk_ids if relevant is None else relevant
    if not relevant:
        # No relevance labels: nothing in the context can be right or wrong, so neither rate exists.
        return {"context_recall": None, "context_precision": None}
    context = list(map(_chunk_id, trace.context_chunks))
    return {
        "context_recall": _rate(len(relevant & set(context)), len(relevant)),
        "context_precision": _rate(sum(map(relevant.__contains__, context)), len(context)),
    }


def spans_overlap(cited: Offsets, gold: Offsets, window: int) -> bool:
    """True when the cited span touches the gold span widened by ``window`` bytes on each side."""
    return cited.start <= gold.end + window and cited.end >= max(0, gold.start - window)


def _citation_accurate(
    citation: Citation, gold_ids: Iterable[str], chunks: Mapping[str, CorpusChunk], window: int
) -> bool:
    cited_chunk = chunks.get(citation.chunk_id)
    cited_doc = cited_chunk.doc_id if cited_chunk else None
    for gold_id in gold_ids:
        gold = chunks.get(gold_id)
        if gold is None or gold.offsets is None or gold.doc_id != cited_doc:
            continue
        if citation.offsets is not None and spans_overlap(citation.offsets, gold.offsets, window):
            return True
    return False


def citation_metrics(
    case: GoldenCase, trace: Trace, chunks: Mapping[str, CorpusChunk], *, window: int = 30,
    relevant: AbstractSet[str] | None = None,
) -> dict[str, float | None]:
    """Deterministic citation checks (SPEC 4).

    ``citation_scoped``: share of citations whose id exists, was retrieved and reached the
    context. ``must_cite_coverage``: share of ``must_cite`` ids cited. ``citation_offset_accuracy``:
    share of citations carrying offsets whose span overlaps a gold chunk's span in the same
    document, within ``window`` bytes. Each is None when its denominator is empty, and
    ``citation_offset_accuracy`` also when no gold chunk (``must_cite``, else the relevant
    chunks) has a known span. ``relevant``: the case's relevant chunk ids, when the caller has
    them already.
    """
    retrieved = set(map(_chunk_id, trace.retrieved_chunks))
    context = set(map(_chunk_id, trace.context_chunks))
    cited_ids = list(map(_chunk_id, trace.citations))
    # scoped: known (to the corpus; without one, to the trace), retrieved and in the context
    in_both = [cid for cid in cited_ids if cid in retrieved and cid in context]
    scoped = sum(map(chunks.__contains__, in_both)) if chunks else len(in_both)
    with_offsets = [c for c in trace.citations if c.offsets is not None]
    accuracy = None  # no citation with offsets: no denominator
    if with_offsets:
        gold_ids = list(case.must_cite) or list(case.relevant_chunk_ids if relevant is None else relevant)
        # Without a gold span to compare with (no must_cite, no relevant chunk, or none with
        # offsets) no citation can be judged accurate or not: None, not 0.0.
        if any(chunks[g].offsets is not None for g in gold_ids if g in chunks):
            accuracy = _rate(sum(1 for c in with_offsets if _citation_accurate(c, gold_ids, chunks, window)),
                             len(with_offsets))
    must = set(case.must_cite)
    return {
        "citation_scoped": _rate(scoped, len(cited_ids)),
        "citation_in_context": _rate(sum(map(context.__contains__, cited_ids)), len(cited_ids)),
        "must_cite_coverage": _rate(len(must & set(cited_ids)), len(must)),
        "citation_offset_accuracy": accuracy,
    }
