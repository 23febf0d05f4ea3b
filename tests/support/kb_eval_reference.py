"""A reference scorer for kb-eval, written from the seed's definitions alone (seed 002, "Behavior
contract"), on plain dicts, sharing no code with groundjudge: what groundjudge's kb-eval profile
must equal.

- hit@k, k in {1, 3, 5, 10}: a hit when one of ``expected_chunk_ids`` is in the run's top k;
  mean over queries with a non-empty ``expected_chunk_ids``.
- MRR: 1 / rank of the first correct chunk, 0 when it is not in the top 10; same queries.
- recall@k_doc: share of ``expected_doc_ids`` among the top k hits' ``doc_id``s; mean over
  queries with a non-empty ``expected_doc_ids``.
- citation_coverage: share of grounded RAG answers whose every citation resolves to a real
  chunk in the DB (``chunk_store``); null for no grounded answer.
- groundedness: share of RAG answers (errors excluded) in which all ``must_contain`` strings
  appear and no ``forbidden`` string appears.
- empty_result_rate: share of queries with zero ``hits_top_k``.
- refusal_correctness: share of "should refuse" queries (``expected_doc_ids: []``) whose answer
  has ``grounded == false``; null when there are none.
- every metric rounded to 4 decimals; an empty denominator is null.
- compare: delta b - a per metric; per query Win (b found the correct chunk, a did not, or
  ranks it higher), Loss (the opposite), Draw (same rank), Regression (a hit, b miss). With
  different chunker versions a hit is a chunk of an expected document whose span overlaps one
  of the expected chunks' spans by at least 50% (of that span); ``deltas`` carries
  ``chunker_version_match``: ``exact`` or ``fallback_doc_span``; strict mode refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

KS = (1, 3, 5, 10)
MRR_TOP = 10

Hit = Mapping[str, Any]
Matcher = Callable[[Hit], bool]


class StrictRefusal(Exception):
    pass


def r4(value: float | None) -> float | None:
    """4 decimal places of the number as written, half away from zero."""
    if value is None:
        return None
    return float(Decimal(str(value)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def mean(values: Sequence[float]) -> float | None:
    return r4(sum(values) / len(values)) if values else None


def share(count: int, total: int) -> float | None:
    return r4(count / total) if total else None


def rank_of(hits: Sequence[Hit], correct: Matcher, top: int | None = None) -> int | None:
    for position, hit in enumerate(hits[:top] if top else hits, start=1):
        if correct(hit):
            return position
    return None


def chunk_matcher(query: Mapping[str, Any]) -> Matcher:
    return lambda hit: hit["chunk_id"] in query["expected_chunk_ids"]


def citation_target(citation: Any) -> str | None:
    return citation if isinstance(citation, str) else citation.get("chunk_id")


def aggregate(golden: Mapping[str, Mapping[str, Any]], results: Sequence[Mapping[str, Any]],
              chunk_store: Collection[str], matchers: Mapping[str, Matcher] | None = None) -> dict[str, Any]:
    matchers = matchers or {qid: chunk_matcher(q) for qid, q in golden.items()}
    hit_lists: dict[int, list[float]] = {k: [] for k in KS}
    reciprocal: list[float] = []
    recall_lists: dict[int, list[float]] = {k: [] for k in KS}
    covered = grounded_total = contained = rag_total = refused = should_refuse = 0
    for result in results:
        query = golden[result["query_id"]]
        hits = result.get("hits_top_k") or []
        if query["expected_chunk_ids"]:
            rank = rank_of(hits, matchers[result["query_id"]])
            for k in KS:
                hit_lists[k].append(1.0 if rank is not None and rank <= k else 0.0)
            reciprocal.append(1 / rank if rank is not None and rank <= MRR_TOP else 0.0)
        if query["expected_doc_ids"]:
            for k in KS:
                docs = {h["doc_id"] for h in hits[:k]}
                wanted = query["expected_doc_ids"]
                recall_lists[k].append(sum(d in docs for d in wanted) / len(wanted))
        else:
            should_refuse += 1
            if result.get("answer") is not None and result["answer"]["grounded"] is False:
                refused += 1
        answer = result.get("answer")
        if answer is not None and not result.get("error"):
            rag_total += 1
            text = answer.get("text", answer.get("answer", ""))
            if all(s in text for s in query["must_contain"]) and not any(s in text for s in query["forbidden"]):
                contained += 1
            if answer["grounded"]:
                grounded_total += 1
                if all(citation_target(c) in chunk_store for c in answer["citations"]):
                    covered += 1
    return {
        "hit_at_k": {str(k): mean(hit_lists[k]) for k in KS},
        "mrr": mean(reciprocal),
        "recall_at_k_doc": {str(k): mean(recall_lists[k]) for k in KS},
        "citation_coverage": share(covered, grounded_total),
        "groundedness": share(contained, rag_total),
        "empty_result_rate": share(sum(1 for r in results if not r.get("hits_top_k")), len(results)),
        "refusal_correctness": share(refused, should_refuse),
        "total_queries": len(results),
        "failed_queries": sum(1 for r in results if r.get("error")),
    }


def _span_share(hit_span: Sequence[int], expected: Sequence[int]) -> float:
    length = expected[1] - expected[0]
    if length <= 0:
        return 0.0
    return max(0, min(hit_span[1], expected[1]) - max(hit_span[0], expected[0])) / length


def fallback_matcher(query: Mapping[str, Any],
                     known_spans: Mapping[str, tuple[str, Sequence[Sequence[int]]]]) -> Matcher:
    """doc_id of an expected document and >= 50% of one expected chunk's span covered."""
    def matches(hit: Hit) -> bool:
        if hit["chunk_id"] in query["expected_chunk_ids"]:
            return True
        if hit["doc_id"] not in query["expected_doc_ids"]:
            return False
        for chunk_id in query["expected_chunk_ids"]:
            doc_id, spans = known_spans.get(chunk_id, (None, ()))
            if doc_id == hit["doc_id"] and any(_span_share(h, e) >= 0.5 for h in hit.get("source_spans") or []
                                               for e in spans):
                return True
        return False
    return matches


def expected_chunk_spans(query: Mapping[str, Any], *runs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, list]]:
    """Where the expected chunks lie: from the golden set, else from a run's hit of the chunk."""
    spans: dict[str, tuple[str, list]] = {}
    for results in runs:
        for result in results:
            if result["query_id"] != query["id"]:
                continue
            for hit in result.get("hits_top_k") or []:
                if hit["chunk_id"] in query["expected_chunk_ids"] and hit.get("source_spans"):
                    spans.setdefault(hit["chunk_id"], (hit["doc_id"], hit["source_spans"]))
    for given in query.get("expected_chunk_spans") or []:
        spans[given["chunk_id"]] = (given["doc_id"], given["source_spans"])
    return spans


def _delta(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _delta(a[k], b[k]) for k in a}
    if a is None or b is None:
        return None
    return b - a if isinstance(a, int) else r4(b - a)


def _kind(a: int | None, b: int | None) -> str:
    if a == b:
        return "Draw"
    if a is not None and b is None:
        return "Regression"
    if a is None or b < a:
        return "Win"
    return "Loss"


def compare(golden: Mapping[str, Mapping[str, Any]], run_a: Mapping[str, Any], run_b: Mapping[str, Any],
            chunk_store: Collection[str], *, strict: bool = False) -> dict[str, Any]:
    """The CompareReport of ``run_b`` against ``run_a`` (each ``{"run_id", "chunker_version",
    "results"}``)."""
    same = run_a["chunker_version"] == run_b["chunker_version"]
    if not same and strict:
        raise StrictRefusal(f"{run_a['chunker_version']} != {run_b['chunker_version']}")
    if same:
        matchers = {qid: chunk_matcher(q) for qid, q in golden.items()}
    else:
        matchers = {qid: fallback_matcher(q, expected_chunk_spans(q, run_a["results"], run_b["results"]))
                    for qid, q in golden.items()}
    agg_a = aggregate(golden, run_a["results"], chunk_store, matchers)
    agg_b = aggregate(golden, run_b["results"], chunk_store, matchers)
    deltas = {name: _delta(agg_a[name], agg_b[name]) for name in agg_a}
    deltas["chunker_version_match"] = "exact" if same else "fallback_doc_span"
    by_id_a = {r["query_id"]: r for r in run_a["results"]}
    by_id_b = {r["query_id"]: r for r in run_b["results"]}
    per_query = []
    for qid, query in golden.items():
        if not query["expected_chunk_ids"] or (qid not in by_id_a and qid not in by_id_b):
            continue
        ranks = [rank_of((side.get(qid) or {}).get("hits_top_k") or [], matchers[qid], MRR_TOP)
                 for side in (by_id_a, by_id_b)]
        per_query.append({"query_id": qid, "kind": _kind(*ranks), "a_hit_rank": ranks[0], "b_hit_rank": ranks[1]})
    return {"run_a": run_a["run_id"], "run_b": run_b["run_id"], "aggregate_a": agg_a, "aggregate_b": agg_b,
            "deltas": deltas, "per_query": per_query}
