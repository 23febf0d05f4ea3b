"""All deterministic metrics of one case under one config."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import attrgetter, gt
from types import MappingProxyType

import msgspec

from groundjudge.contracts import Behavior, GoldenCase, Trace
from groundjudge.load.dataset import Corpus
from groundjudge.metrics.acl import AclLeak, acl_leaks
from groundjudge.metrics.behavior import BehaviorRules, behavior_metrics, observed_behavior
from groundjudge.metrics.containment import constraint_metrics, containment_metrics
from groundjudge.metrics.grounding import citation_metrics, context_metrics
from groundjudge.metrics.operations import operation_values
from groundjudge.metrics.retrieval import at_k, case_rates, trec_order
from groundjudge.metrics.spans import span_metrics
from groundjudge.metrics.stability import topk_agreement
from groundjudge.metrics.unrecorded import OBSERVED_BEHAVIOR, unknown_inputs, unknown_metrics


@dataclass(frozen=True)
class MetricSettings:
    ks: Sequence[int] = (1, 3, 5, 10)
    offset_window: int = 30
    stability_k: int = 5
    rules: BehaviorRules = field(default_factory=BehaviorRules)


_NOTHING_UNKNOWN: Mapping[str, str] = MappingProxyType({})


class CaseMetrics(msgspec.Struct, frozen=True, gc=False):
    """One case's metrics under one config. A run holds one per (config, case): a frozen
    struct the garbage collector does not track (nothing it holds refers back to it), so that a
    large run's collections (a notebook's, under Python's default settings) do not walk them."""

    case_id: str
    config_id: str
    # a dict from ``compute_case``; in a ``MetricsRun``, a read-only view of the case's row
    # of its config's table (``metrics.table.MetricValues``)
    values: Mapping[str, float | None]
    behavior: Behavior | None  # None: not recorded (no behaviour field, no answer text)
    acl_leaks: tuple[AclLeak, ...]
    content_types: tuple[str, ...]
    # metric -> why it is None here: an input it reads was not recorded (``metrics.unrecorded``)
    unknown: Mapping[str, str] = _NOTHING_UNKNOWN  # one shared empty mapping


_chunk_id = attrgetter("chunk_id")
_score = attrgetter("score")


def ranking_of(trace: Trace) -> list[str]:
    """The trace's ranking: trec_eval order when every chunk has a score, else the trace's order.

    A chunk retrieved twice (hybrid retrievers do this) counts once, at its best position.
    """
    chunks = trace.retrieved_chunks
    ids = list(map(_chunk_id, chunks))
    scores = list(map(_score, chunks))
    if chunks and None not in scores:
        # Already in trec_eval's order (scores strictly falling, so no ties to break, and each
        # id once): that order itself, as most retrievers write it. A NaN fails the test and
        # goes the general way. (map over the scores and their successors: no Python frame per pair)
        if all(map(gt, scores, scores[1:])) and len(set(ids)) == len(ids):
            return ids
        best: dict[str, float] = {}
        for cid, score in zip(ids, scores, strict=True):
            best[cid] = max(best.get(cid, float("-inf")), score)
        return trec_order(list(best.items()))
    return list(dict.fromkeys(ids))


def doc_recall(case: GoldenCase, trace: Trace, ranking: list[str], corpus: Corpus, ks: Sequence[int],
               *, relevant: AbstractSet[str] | None = None) -> dict[str, float | None]:
    """``recall_doc@k``: the expected documents (else those of the relevant chunks) in the
    documents of the top k, over all of them. ``relevant``: the case's relevant chunk ids, when
    the caller has them already."""
    expected = case.expected_doc_ids
    if expected is None:
        relevant = case.relevant_chunk_ids if relevant is None else relevant
        wanted = {d for cid in relevant if (d := corpus.doc_of(cid))}
    else:
        wanted = set(expected)
    if not wanted:
        return {at_k("recall_doc", k): None for k in ks}
    doc_by_chunk = {c.chunk_id: c.doc_id for c in trace.retrieved_chunks if c.doc_id}
    doc_of = corpus.doc_of
    docs = [doc_by_chunk.get(cid) or doc_of(cid) for cid in ranking]
    # where each wanted document first appears in the ranking: those before k are in the top k
    ranks = sorted(docs.index(doc) for doc in wanted if doc in docs)
    return {at_k("recall_doc", k): bisect_left(ranks, k) / len(wanted) for k in ks}


def case_content_types(case: GoldenCase, trace: Trace, corpus: Corpus,
                       *, relevant: AbstractSet[str] | None = None) -> tuple[str, ...]:
    relevant = case.relevant_chunk_ids if relevant is None else relevant  # made on each read: once, not once per chunk
    known = corpus.chunks
    types = {known[cid].type for cid in relevant if cid in known}
    if not types:
        types = {c.type for c in trace.retrieved_chunks if c.chunk_id in relevant and c.type}
    return tuple(sorted(types))


def compute_case(
    case: GoldenCase, trace: Trace, corpus: Corpus, settings: MetricSettings,
    paraphrase_traces: Sequence[Trace] = (), *, observed: Behavior | None = None,
) -> CaseMetrics:
    """Every deterministic metric of ``case`` under ``trace``. ``observed``: the behaviour the
    trace showed, when the caller found it already (``BehaviorRules.detect_all`` over a batch
    of answers does so for many at once); else it is found here."""
    relevant = case.relevant_chunk_ids  # made on each read: once here for every metric
    ranking = ranking_of(trace)
    # A case without relevant chunks has no precision (trec_eval would say 0): None, left out of means.
    values = case_rates(ranking, case.relevance, settings.ks, distinct=True)  # ranking_of lists each id once
    values.update(doc_recall(case, trace, ranking, corpus, settings.ks, relevant=relevant))
    values.update(span_metrics(case, trace, ranking, corpus.chunks, settings.ks, relevant=relevant))
    values.update(context_metrics(case, trace, relevant=relevant))
    values.update(citation_metrics(case, trace, corpus.chunks, window=settings.offset_window, relevant=relevant))
    behavior = observed if observed is not None else observed_behavior(trace, settings.rules)
    values.update(behavior_metrics(case, behavior))
    values["empty_result"] = float(not trace.retrieved_chunks)
    values["trace_error"] = float(trace.error is not None)
    # Containment is judged on whatever text was shipped: a refusal of an answerable case fails
    # must_contain, and a refusal can still leak a forbidden string.
    values.update(containment_metrics(case, trace.answer))
    echo = (trace.model_extra or {}).get("constraints_echo")
    values.update(constraint_metrics(case, trace.answer, list(echo) if isinstance(echo, (list, tuple)) else None)
                  if behavior == "answer" else {"constraint_integrity": None})
    leaks = acl_leaks(case, trace, corpus.chunks)
    values["acl_leak"] = None if leaks is None else float(bool(leaks))
    if paraphrase_traces:
        rankings = [ranking] + [ranking_of(t) for t in paraphrase_traces]
        values[at_k("paraphrase_stability", settings.stability_k)] = topk_agreement(rankings, settings.stability_k)
    values.update(operation_values(trace))
    types = case_content_types(case, trace, corpus, relevant=relevant)
    unknown = unknown_inputs(case, trace)
    missing = unknown_metrics(values, unknown) if unknown else _NOTHING_UNKNOWN
    for name in missing:  # computed from an empty default, it would be a finding nothing supports
        values[name] = None
    return CaseMetrics(case.id, trace.config_id, values, None if OBSERVED_BEHAVIOR in unknown else behavior,
                       tuple(leaks) if leaks else (), types, missing)
