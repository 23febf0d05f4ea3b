"""All deterministic metrics of one case under one config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import gt
from types import MappingProxyType

from groundjudge.contracts import Behavior, GoldenCase, Trace
from groundjudge.load.dataset import Corpus
from groundjudge.metrics.acl import AclLeak, acl_leaks
from groundjudge.metrics.behavior import BehaviorRules, behavior_metrics, observed_behavior
from groundjudge.metrics.containment import constraint_metrics, containment_metrics
from groundjudge.metrics.grounding import citation_metrics, context_metrics
from groundjudge.metrics.operations import operation_values
from groundjudge.metrics.retrieval import at_k, retrieval_metrics, trec_order
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
_COUNTS = ("num_rel", "num_ret", "num_rel_ret")  # the last keys of ``retrieval_metrics``


@dataclass(frozen=True, slots=True)
class CaseMetrics:
    case_id: str
    config_id: str
    # a dict from ``compute_case``; in a ``MetricsRun``, a read-only view of the case's row
    # of its config's table (``metrics.table.MetricValues``)
    values: Mapping[str, float | None]
    behavior: Behavior | None  # None: not recorded (no behaviour field, no answer text)
    acl_leaks: list[AclLeak]
    content_types: list[str]
    # metric -> why it is None here: an input it reads was not recorded (``metrics.unrecorded``)
    unknown: Mapping[str, str] = field(default_factory=lambda: _NOTHING_UNKNOWN)  # one shared empty mapping


def ranking_of(trace: Trace) -> list[str]:
    """The trace's ranking: trec_eval order when every chunk has a score, else the trace's order.

    A chunk retrieved twice (hybrid retrievers do this) counts once, at its best position.
    """
    chunks = trace.retrieved_chunks
    ids = [c.chunk_id for c in chunks]
    given = [c.score for c in chunks]
    scores = [x for x in given if x is not None]
    if chunks and len(scores) == len(given):
        # Already in trec_eval's order (scores strictly falling, so no ties to break, and each
        # id once): that order itself, as most retrievers write it. A NaN fails the test and
        # goes the general way. (map over the scores and their successors: no Python frame per pair)
        if all(map(gt, scores, scores[1:])) and len(set(ids)) == len(ids):
            return list(ids)
        best: dict[str, float] = {}
        for cid, score in zip(ids, scores, strict=True):
            best[cid] = max(best.get(cid, float("-inf")), score)
        return trec_order(list(best.items()))
    return list(dict.fromkeys(ids))


def doc_recall(case: GoldenCase, trace: Trace, ranking: list[str], corpus: Corpus, ks: Sequence[int]) -> dict[str, float | None]:
    expected = case.expected_doc_ids
    if expected is None:
        expected = tuple(sorted({d for cid in case.relevant_chunk_ids if (d := corpus.doc_of(cid))}))
    if not expected:
        return {at_k("recall_doc", k): None for k in ks}
    chunks = trace.retrieved_chunks
    doc_by_chunk = {c.chunk_id: c.doc_id for c in chunks if c.doc_id}
    docs = [doc_by_chunk.get(cid) or corpus.doc_of(cid) for cid in ranking]
    wanted = set(expected)
    return {at_k("recall_doc", k): len(wanted & set(docs[:k])) / len(wanted) for k in ks}


def case_content_types(case: GoldenCase, trace: Trace, corpus: Corpus) -> list[str]:
    relevant = case.relevant_chunk_ids  # made on each read: once here, not once per chunk
    types = {corpus.chunks[cid].type for cid in relevant if cid in corpus.chunks}
    if not types:
        types = {c.type for c in trace.retrieved_chunks if c.chunk_id in relevant and c.type}
    return sorted(types)


def compute_case(
    case: GoldenCase, trace: Trace, corpus: Corpus, settings: MetricSettings,
    paraphrase_traces: Sequence[Trace] = (),
) -> CaseMetrics:
    ranking = ranking_of(trace)
    # A case without relevant chunks has no precision (trec_eval would say 0): None, left out of means.
    values = retrieval_metrics(ranking, case.relevance, settings.ks, precision_without_relevant=None)
    for count in _COUNTS:  # counts, not rates: not a case's metrics
        del values[count]
    values.update(doc_recall(case, trace, ranking, corpus, settings.ks))
    values.update(span_metrics(case, trace, ranking, corpus.chunks, settings.ks))
    values.update(context_metrics(case, trace))
    values.update(citation_metrics(case, trace, corpus.chunks, window=settings.offset_window))
    behavior = observed_behavior(trace, settings.rules)
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
    types = case_content_types(case, trace, corpus)
    unknown = unknown_inputs(case, trace)
    missing = unknown_metrics(values, unknown) if unknown else _NOTHING_UNKNOWN
    for name in missing:  # computed from an empty default, it would be a finding nothing supports
        values[name] = None
    return CaseMetrics(case.id, trace.config_id, values, None if OBSERVED_BEHAVIOR in unknown else behavior,
                       leaks or [], types, missing)

