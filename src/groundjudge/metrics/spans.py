"""Chunk matching by document and span, for runs whose chunk ids differ (another chunker).

A retrieved chunk matches a gold chunk when both name the same document and their byte spans
overlap by at least half of the shorter one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
from groundjudge.metrics.retrieval import at_k

SPAN_OVERLAP = 0.5
SPAN_METRIC_PREFIXES = ("hit_span", "recall_span")


def span_overlap(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Overlap length over the shorter span's length (0 when either is empty)."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    shorter = min(a[1] - a[0], b[1] - b[0])
    return inter / shorter if shorter > 0 else 0.0


def span_metrics(case: GoldenCase, trace: Trace, ranking: Sequence[str], chunks: Mapping[str, CorpusChunk],
                 ks: Sequence[int], *, relevant: AbstractSet[str] | None = None) -> dict[str, float | None]:
    """``hit_span@k`` and ``recall_span@k``; None when spans are missing on either side.
    ``relevant``: the case's relevant chunk ids, when the caller has them already."""
    relevant = case.relevant_chunk_ids if relevant is None else relevant
    gold = [chunk for cid in relevant if (chunk := chunks.get(cid)) is not None and chunk.offsets is not None]
    if not gold:
        return dict.fromkeys(_none_names(tuple(ks)))
    by_id = {c.chunk_id: c for c in trace.retrieved_chunks}
    retrieved: list[tuple[str, tuple[int, int]]] = []
    for cid in ranking:
        r = by_id[cid]
        known = chunks.get(cid)
        doc = r.doc_id or (known.doc_id if known else None)
        offsets = r.offsets or (known.offsets if known else None)
        if doc is None or offsets is None:
            return dict.fromkeys(_none_names(tuple(ks)))
        retrieved.append((doc, (offsets.start, offsets.end)))
    spans = [(g.doc_id, (g.offsets.start, g.offsets.end)) for g in gold if g.offsets is not None]
    out: dict[str, float | None] = {}
    for k in ks:
        top = retrieved[:k]
        matched = sum(1 for gold_doc, gold_span in spans
                      if any(doc == gold_doc and span_overlap(span, gold_span) >= SPAN_OVERLAP for doc, span in top))
        out[at_k("hit_span", k)] = float(matched > 0)
        out[at_k("recall_span", k)] = matched / len(gold)
    return out


@lru_cache(maxsize=64)
def _none_names(ks: tuple[int, ...]) -> tuple[str, ...]:
    """The metrics' names in the order a case without spans lists them (each None)."""
    return tuple(at_k(name, k) for name in SPAN_METRIC_PREFIXES for k in ks)
