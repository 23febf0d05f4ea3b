"""Metrics whose inputs were not recorded: null for that case, with the source's reason.

A foreign format may not record what a metric reads: WFGY's traces name no context chunks,
WFGY chunking's carry no answer text and its gold set no expected behaviour, kb-eval records no
prompt context. Its adapter says so (``not_recorded`` on the native case or trace: field ->
why). Computed from the empty default, such a metric would read as a finding ("context
dropped", "wrong behaviour") that nothing supports; instead it is None for that case, left out
of means like any empty denominator, and the aggregate carries the reason.

:data:`READS` names, per metric family, the inputs it reads that a source can leave unrecorded;
``tests/test_metrics_unrecorded.py`` holds it complete against the metrics a run computes, so a
new metric has to say what it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from groundjudge.contracts import GoldenCase, Trace

__all__ = ["OBSERVED_BEHAVIOR", "READS", "family", "unknown_inputs", "unknown_metrics"]

# The behaviour a trace showed: known from its own field, else from its answer's text.
OBSERVED_BEHAVIOR = "observed_behavior"

_RETRIEVAL = frozenset({"retrieved_chunks"})
# a case with no expected chunks recorded (a trace export without a golden set) has no relevant
# chunk to find: the rates against relevance are unknown, not zero
_RANKED = frozenset({"retrieved_chunks", "expected_chunk_ids"})
_BEHAVIOUR = frozenset({OBSERVED_BEHAVIOR, "expected_behavior"})
_ANSWER = frozenset({"answer"})
_NOTHING: frozenset[str] = frozenset()

# metric family (the name before "@k" and before a "."-separated part) -> unrecordable inputs
READS: Mapping[str, frozenset[str]] = MappingProxyType({
    **dict.fromkeys(("hit", "recall", "precision", "mrr", "ndcg", "ndcg_exp", "map", "r_precision",
                     "recall_doc", "hit_span", "recall_span"), _RANKED),
    **dict.fromkeys(("empty_result", "paraphrase_stability"), _RETRIEVAL),
    "context_recall": frozenset({"context_chunks", "expected_chunk_ids"}),
    "context_precision": frozenset({"context_chunks", "expected_chunk_ids"}),
    "citation_scoped": frozenset({"citations", "retrieved_chunks", "context_chunks"}),
    "citation_in_context": frozenset({"citations", "context_chunks"}),
    "must_cite_coverage": frozenset({"citations"}),
    "citation_offset_accuracy": frozenset({"citations"}),
    **dict.fromkeys(("behavior_correct", "under_refusal", "over_refusal", "abstention_accuracy"), _BEHAVIOUR),
    **dict.fromkeys(("must_contain", "forbidden_absent", "gold_claim_hit", "constraint_integrity"), _ANSWER),
    # checked on the chunks a trace records (a leak found there is a leak whatever was not recorded)
    "acl_leak": _NOTHING,
    # what a trace lacks here simply gives no value
    **dict.fromkeys(("trace_error", "latency_ms", "tokens", "cost_usd"), _NOTHING),
})

_NONE: Mapping[str, str] = MappingProxyType({})


def family(metric: str) -> str:
    """``recall@10`` -> ``recall``; ``latency_ms.generate`` -> ``latency_ms``."""
    return metric.partition("@")[0].partition(".")[0]


def unknown_inputs(case: GoldenCase, trace: Trace) -> Mapping[str, str]:
    """The inputs of this (case, trace) that were not recorded -> why. The observed behaviour is
    unknown when the trace has no behaviour of its own and its answer was not recorded."""
    if not case.not_recorded and not trace.not_recorded:
        return _NONE
    unknown = {**case.not_recorded, **trace.not_recorded}
    if "answer" in trace.not_recorded and trace.behavior is None:
        unknown[OBSERVED_BEHAVIOR] = trace.not_recorded["answer"]
    return unknown


def unknown_metrics(metrics: Mapping[str, object], unknown: Mapping[str, str]) -> dict[str, str]:
    """Of ``metrics`` (names), those that read an input in ``unknown`` -> that input's reason.

    Raises KeyError for a metric family :data:`READS` does not name (a metric added without
    saying what it reads)."""
    out = {}
    for name in metrics:
        missing = [field for field in READS[family(name)] if field in unknown]
        if missing:
            out[name] = unknown[min(missing)]
    return out
