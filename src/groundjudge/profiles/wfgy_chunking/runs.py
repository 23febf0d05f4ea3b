"""WFGY's checks for one run (one trace line) of one question."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groundjudge.contracts import Offsets
from groundjudge.load.adapters.wfgy_chunking import AnswerCitation, ChunkingGold, ChunkingTrace
from groundjudge.profiles.wfgy_chunking.definitions import (
    KS,
    OFFSET_WINDOW,
    CitationPolicy,
    precision_at,
    recall_at,
    section_of,
    spans_match,
    title_distance,
)


@dataclass(frozen=True)
class RunScore:
    """WFGY's checks for one run (one trace line) of one question."""

    qid: str
    has_trace: bool
    query: str | None
    precision: dict[int, float]
    recall: dict[int, float]
    covered: bool
    citation_accurate: bool
    gold_offsets_missing: bool
    cited: bool  # the answer has a citation this policy considers (with "first": its first)
    anchor_hit: bool | None
    anchor_distance: int | None
    delta_s: tuple[float | None, ...] | None
    delta_s_source: str | None
    cited_delta_s: float | None  # ΔS of the answer's first citation; None: no answer, or unknown
    lambda_state: str | None
    seed: object | None  # the trace's ``seed``, when it logs one
    top_ids: tuple[str, ...] = field(default=())
    typed_top_k: tuple[tuple[str | None, bool], ...] = field(default=())

    def top_k_delta_s(self) -> list[tuple[str | None, float]]:
        """(content type, ΔS) of the top-k items that have a ΔS value."""
        values = self.delta_s or ()
        return [(kind, d) for (kind, _), d in zip(self.typed_top_k, values) if d is not None]


def _considered(citations: Sequence[AnswerCitation], policy: CitationPolicy) -> list[AnswerCitation]:
    return list(citations[:1]) if policy == "first" else list(citations)


def score_run(
    gold: ChunkingGold,
    trace: ChunkingTrace | None,
    *,
    k: int = 5,
    ks: Sequence[int] = KS,
    window: int = OFFSET_WINDOW,
    citation_policy: CitationPolicy = "any",
    gold_offsets: Mapping[str, Offsets] | None = None,
    delta_s: Sequence[float | None] | None = None,
    delta_s_source: str | None = None,
) -> RunScore:
    """Score one run; ``trace=None`` is a question with no run (nothing retrieved or cited).

    ``gold_offsets`` are the canonical offsets of blocks by id (the gold line's own
    ``gold_offsets`` win). ``delta_s`` overrides the trace's own ΔS (one value per topk item).
    """
    relevant = frozenset(gold.relevant)
    ids = trace.ids if trace else []
    citations = _considered(trace.answer_citations if trace else [], citation_policy)
    anchor = gold.anchor_section
    offsets = {**(gold_offsets or {}), **gold.gold_offsets}

    covered = any(c.id in relevant or (anchor is not None and section_of(c.id) == anchor) for c in citations)
    accurate = offsets_missing = False
    for cite in citations:
        cited_section = section_of(cite.id)
        for block in relevant:
            same_section = cite.id == block or (cited_section is not None and cited_section == section_of(block))
            if not same_section:
                continue
            if block not in offsets:
                offsets_missing = True
                continue
            if cite.offsets is not None and spans_match(cite.offsets, offsets[block], window=window):
                accurate = True
    distances = [title_distance(s, anchor) for c in citations if anchor and (s := section_of(c.id))]

    if delta_s is None and trace is not None and trace.delta_s is not None:
        delta_s, delta_s_source = trace.delta_s, "trace"
    # "The cited snippet" is the answer's first citation, whatever the citation policy: the
    # page logs "ΔS for the chosen citation" and its evaluator reads the first. Its ΔS is known
    # when that block was retrieved (ΔS is per retrieved item) and has a value.
    first = trace.answer_citations[0].id if trace and trace.answer_citations else None
    cited_ds = None
    if delta_s is not None and first is not None and first in ids:
        cited_ds = delta_s[ids.index(first)]
    typed = tuple((item.type, item.id in relevant) for item in (trace.topk[:k] if trace else []))
    return RunScore(
        qid=gold.qid,
        has_trace=trace is not None,
        query=trace.query if trace else None,
        precision={n: precision_at(ids, relevant, n) for n in ks},
        recall={n: recall_at(ids, relevant, n) for n in ks},
        covered=covered,
        citation_accurate=accurate,
        gold_offsets_missing=offsets_missing and not accurate,
        cited=bool(citations),
        anchor_hit=None if anchor is None else any(section_of(i) == anchor for i in ids),
        anchor_distance=min(distances) if distances else None,
        delta_s=None if delta_s is None else tuple(delta_s),
        delta_s_source=delta_s_source if delta_s is not None else None,
        cited_delta_s=cited_ds,
        lambda_state=trace.lambda_state if trace else None,
        seed=(trace.model_extra or {}).get("seed") if trace else None,
        top_ids=tuple(ids),
        typed_top_k=typed,
    )
