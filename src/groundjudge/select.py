"""Select stage (SPEC 5.1): which (case, config) pairs go to the judge, and why the others do not.

Every pair with a trace gets a decision: ``judge`` or ``skip`` with a reason (a trace whose
answer or context chunks its source did not record is skipped: the judge would have no answer
or no passages). Pairs to judge are
ordered by how much a verdict would tell: first the configs the gates cover (their gates need
the evidence; the others are only reported), then the rest. Within a config the order is by
priority: deterministic failures first, then cases whose answer or context changed against the
baseline config, then the rest (golden-set order within a priority). Several gated configs
take turns, one pair each, so that each gets its share of a budget; the other configs' pairs
follow by priority. A budget cuts from the end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from groundjudge.contracts import Trace
from groundjudge.judge.item import JudgeItem
from groundjudge.load.dataset import Dataset
from groundjudge.metrics.evaluate import MetricsRun
from groundjudge.metrics.failures import deterministic_failures


class Selection(msgspec.Struct, frozen=True, gc=False):
    """The decision on one (case, config) pair; ``item``: what the judge sees, for a pair to judge.
    A frozen msgspec struct, as :class:`JudgeItem` is: one per pair, cheap to build and to hold."""

    case_id: str
    config_id: str
    judge: bool
    reason: str | None  # why skipped; for judged pairs, why it was given priority
    priority: int  # 0 = deterministic failure, 1 = changed since baseline, 2 = the rest
    item: JudgeItem | None


@dataclass(frozen=True)
class SelectSettings:
    smoke: bool = False
    smoke_per_tag: int = 2
    seed: int = 0
    max_cases: int | None = None
    baseline_config: str | None = None  # default: the first config
    gated_configs: tuple[str, ...] = ()  # judged first: the configs whose gates need the verdicts


def judge_item(dataset: Dataset, trace: Trace, shared: dict[str, tuple[str, str]] | None = None,
               ) -> tuple[JudgeItem | None, list[str]]:
    """The judge's view of a trace, or the context ids whose text is nowhere to be found.
    ``shared``: (chunk id, corpus text) pairs already made, by chunk id, for items to share (a
    nightly run's 200,000 items name the same chunks again and again)."""
    contexts, missing = [], []
    pairs = {} if shared is None else shared
    for chunk in trace.context_chunks:
        chunk_id, given = chunk.chunk_id, chunk.text
        if given is not None:
            contexts.append((chunk_id, given))
            continue
        pair = pairs.get(chunk_id)
        if pair is None:
            text = dataset.corpus.text_of(chunk_id)
            if text is None:
                missing.append(chunk_id)
                continue
            pair = pairs[chunk_id] = (chunk_id, text)
        contexts.append(pair)
    if missing:
        return None, missing
    case = dataset.cases[trace.query_id]
    item = JudgeItem(case_id=case.id, config_id=trace.config_id, question=trace.question or case.question,
                     contexts=tuple(contexts), answer=trace.answer or "",
                     citations=tuple(c.chunk_id for c in trace.citations), expected_answer=case.expected_answer)
    return item, []


def _text_hint(dataset: Dataset) -> str:
    """How to give the judge the text it lacks: a corpus (in the inputs' own format, whose
    adapter may read the system's own chunk store), or the text in the trace itself."""
    corpus = dataset.sources.get("corpus")
    where = f"they are not in the corpus {corpus}" if corpus else "no corpus was given"
    fmt = dataset.sources.get("format")
    store = f" (for {fmt} files, the system's own chunk store is read as the corpus)" if fmt and fmt != "native" else ""
    return (f"; {where}: give the chunks' text with --corpus FILE (one JSON line per chunk: chunk_id and text)"
            f"{store}, or inline as context_chunks[].text")


def _smoke_sample(dataset: Dataset, per_tag: int, seed: int) -> set[str]:
    def order(case_id: str) -> str:
        return hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest()

    by_tag: dict[str, list[str]] = {}
    for case in dataset.cases.values():
        for tag in case.tags or ["(untagged)"]:
            by_tag.setdefault(tag, []).append(case.id)
    return {cid for ids in by_tag.values() for cid in sorted(ids, key=order)[:per_tag]}


def _changed(trace: Trace, base: Trace | None) -> bool:
    if base is None:
        return False
    return trace.answer != base.answer or [c.chunk_id for c in trace.context_chunks] != [c.chunk_id for c in base.context_chunks]


def select_cases(dataset: Dataset, metrics: MetricsRun, settings: SelectSettings | None = None) -> list[Selection]:
    """One decision per (case, config) pair with a trace; judged pairs first, in priority order."""
    settings = settings or SelectSettings()
    configs = dataset.config_ids
    baseline = settings.baseline_config or (configs[0] if configs else None)
    sample = _smoke_sample(dataset, settings.smoke_per_tag, settings.seed) if settings.smoke else None
    chosen: list[Selection] = []
    skipped: list[Selection] = []
    pairs: dict[str, tuple[str, str]] = {}
    # one reason text per distinct set of failed checks, and one for every changed case: the
    # pairs that share a reason hold the same (immutable) string
    failed_because: dict[tuple[str, ...], str] = {}
    changed_because = f"answer or context changed since {baseline}"
    for config_id in configs:
        compare = bool(baseline) and config_id != baseline
        for case_id in dataset.cases:
            trace = dataset.trace(config_id, case_id)
            if trace is None:
                continue
            scored = metrics.case(config_id, case_id)
            unrecorded = trace.not_recorded
            item: JudgeItem | None = None
            reason: str | None = None
            if trace.error is not None:
                reason = f"trace_error: {trace.error}"
            elif "answer" in unrecorded:
                reason = f"not recorded: {unrecorded['answer']}"
            elif scored is not None and scored.behavior != "answer":
                reason = f"decided deterministically: {scored.behavior} has no claims to judge"
            elif not (trace.answer or "").strip():
                reason = "empty answer"
            elif "context_chunks" in unrecorded:
                # every claim would be judged against nothing: a verdict about the format, not the answer
                reason = f"no passages: {unrecorded['context_chunks']}"
            else:
                item, missing = judge_item(dataset, trace, pairs)
                if item is None:
                    reason = f"missing_text: no text for context chunk(s) {', '.join(missing)}{_text_hint(dataset)}"
                elif sample is not None and case_id not in sample:
                    item, reason = None, "smoke: outside the stratified sample"
            if item is None:
                skipped.append(Selection(case_id, config_id, False, reason, 3, None))
                continue
            failures = tuple(deterministic_failures(scored.values)) if scored else ()
            base = dataset.trace(baseline, case_id) if compare and baseline else None
            if failures:
                if failures not in failed_because:
                    failed_because[failures] = "deterministic failure: " + ", ".join(failures)
                priority, why = 0, failed_because[failures]
            elif _changed(trace, base):
                priority, why = 1, changed_because
            else:
                priority, why = 2, None
            chosen.append(Selection(case_id, config_id, True, why, priority, item))
    chosen = _budget_order(chosen, set(settings.gated_configs))
    if settings.max_cases is not None and len(chosen) > settings.max_cases:
        over = chosen[settings.max_cases:]
        chosen = chosen[: settings.max_cases]
        skipped += [Selection(s.case_id, s.config_id, False, f"budget: max_cases {settings.max_cases}", s.priority, None)
                    for s in over]
    return chosen + skipped


def _budget_order(chosen: list[Selection], gated: set[str]) -> list[Selection]:
    """The gated configs' pairs first, the gated configs taking turns, each in its own priority
    order; then the other configs' pairs by priority (see the module doc). Stable: golden-set
    order within a config and priority."""
    def by_priority(pairs: list[Selection]) -> list[Selection]:
        return sorted(pairs, key=lambda s: s.priority)  # stable

    first = [s for s in chosen if s.config_id in gated]
    turns: dict[str, int] = {}
    keyed = []
    for s in by_priority(first):
        turns[s.config_id] = turns.get(s.config_id, -1) + 1
        keyed.append((turns[s.config_id], s))
    keyed.sort(key=lambda pair: pair[0])  # stable: configs keep their order within a turn
    return [s for _, s in keyed] + by_priority([s for s in chosen if s.config_id not in gated])


def skip_counts(selections: Sequence[Selection]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in selections:
        if not s.judge:
            key = (s.reason or "").split(":")[0]
            counts[key] = counts.get(key, 0) + 1
    return counts
