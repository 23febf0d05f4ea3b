"""ΔS(question, retrieved) = 1 - cosine similarity of sentence embeddings: computed for the runs
whose trace carries none, then summarised per run set, per question and per content type (median,
p90, values above the flag value and per zone), and for the cited snippets.

A run's question is its ``query`` (else the gold's first paraphrase); a retrieved block's text is
its inline ``topk[].text``, else ``texts[id]``. All texts of all runs are embedded in one batch,
each distinct string once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from groundjudge.load.adapters.wfgy_chunking import ChunkingGold, ChunkingTrace, TopkItem
from groundjudge.profiles.wfgy_chunking.definitions import (
    BAD_DELTA_S,
    DELTA_S_ZONES,
    ZoneBounds,
    median,
    percentile,
    zone_counts,
)
from groundjudge.profiles.wfgy_chunking.embedder import Embedder, cosine, embedder_provenance, load_embedder
from groundjudge.profiles.wfgy_chunking.runs import RunScore

DISABLED = "ΔS computation disabled (embedder=None)"
NO_TEXT = "no text for the retrieved ids (give topk[].text or texts)"
NOTHING_RETRIEVED = "nothing retrieved"


@dataclass(frozen=True)
class ComputedDeltaS:
    """ΔS filled in for runs without their own, by position of the run in the trace list."""

    values: dict[int, list[float | None]] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)  # why a run without ΔS still has none
    unavailable: str | None = None  # runs needed an embedder and none could be had
    model: dict[str, Any] | None = None  # provenance of the embedder that computed ``values``


def block_text(item: TopkItem, texts: Mapping[str, str]) -> str | None:
    inline = (item.model_extra or {}).get("text")
    return inline if isinstance(inline, str) else texts.get(item.id)


def compute_missing(
    gold: Mapping[str, ChunkingGold], traces: Sequence[ChunkingTrace], *,
    texts: Mapping[str, str], embedder: Embedder | Literal["auto"] | None,
) -> ComputedDeltaS:
    """ΔS for every run of a gold question whose trace has none and whose blocks have text.

    ``embedder="auto"`` loads the installed sentence-embedding model (only when there is text to
    embed), ``None`` computes nothing. When runs need ΔS and no embedder can be had,
    ``unavailable`` gives the reason (with the install command when the extra is missing).
    """
    jobs: list[tuple[int, str, list[str | None]]] = []
    missing: dict[int, str] = {}
    for i, trace in enumerate(traces):
        if trace.qid not in gold or trace.delta_s is not None:
            continue
        block_texts = [block_text(item, texts) for item in trace.topk]
        if not trace.topk:
            missing[i] = NOTHING_RETRIEVED
        elif all(t is None for t in block_texts):
            missing[i] = NO_TEXT
        else:
            jobs.append((i, trace.query or gold[trace.qid].paraphrases[0], block_texts))
    if not jobs:  # the model is loaded only when there is something to embed
        return ComputedDeltaS(missing=missing)
    model, why = (None, DISABLED) if embedder is None else load_embedder() if embedder == "auto" else (embedder, None)
    if model is None:
        reason = why or DISABLED
        return ComputedDeltaS(missing={**missing, **{i: reason for i, _, _ in jobs}}, unavailable=reason)
    strings = list(dict.fromkeys(s for _, question, block_texts in jobs
                                 for s in (question, *block_texts) if s is not None))
    vectors = dict(zip(strings, model(strings)))
    values = {i: [None if t is None else 1.0 - cosine(vectors[question], vectors[t]) for t in block_texts]
              for i, question, block_texts in jobs}
    return ComputedDeltaS(values=values, missing=missing, model=embedder_provenance(model))


@dataclass(frozen=True)
class Limits:
    """What a spread of ΔS values is judged against: the canary thresholds for median and p90,
    the value above which a cited snippet flags its question, and the page's zones."""

    max_median: float
    max_p90: float
    flag_above: float = BAD_DELTA_S
    zones: Mapping[str, ZoneBounds] = field(default_factory=lambda: dict(DELTA_S_ZONES))

    @property
    def above_key(self) -> str:
        return f"above_{self.flag_above:.2f}"


def spread(values: Sequence[float], limits: Limits) -> dict[str, Any]:
    """n, median, 90th percentile, items above the flag value and items per zone of some ΔS
    values, and whether median and p90 are within the thresholds (None for no values)."""
    zones = zone_counts(values, limits.zones)
    if not values:
        return {"n": 0, "median": None, "p90": None, limits.above_key: 0, "zones": zones, "within_thresholds": None}
    med, p90 = median(values), percentile(values, 90)
    return {"n": len(values), "median": med, "p90": p90,
            limits.above_key: sum(v > limits.flag_above for v in values), "zones": zones,
            "within_thresholds": med <= limits.max_median and p90 <= limits.max_p90}


def cited_spread(scores: Sequence[RunScore], limits: Limits) -> dict[str, Any]:
    """The cited snippet's ΔS over some runs: how many runs answered with a citation, how many of
    those have a ΔS for it (``unknown``: the rest), their median, p90, maximum and zones."""
    answered = [s for s in scores if s.has_trace and s.cited]
    values = [s.cited_delta_s for s in answered if s.cited_delta_s is not None]
    row = {"answered": len(answered), "unknown": len(answered) - len(values), **spread(values, limits)}
    row["max"] = max(values) if values else None
    row.pop("within_thresholds")
    return row


def per_question(per_qid: Mapping[str, Sequence[RunScore]], limits: Limits) -> dict[str, dict[str, Any]]:
    """ΔS spread per question over the top-k items of all its runs, and of its cited snippets."""
    result = {}
    for qid, scores in per_qid.items():
        runs = [s for s in scores if s.has_trace]
        values = [d for s in runs for _, d in s.top_k_delta_s()]
        row = spread(values, limits)
        row["runs"] = sum(bool(s.top_k_delta_s()) for s in runs)
        row["cited"] = cited_spread(runs, limits)
        result[qid] = row
    return result


def per_type(runs: Sequence[RunScore], kinds: Sequence[str], limits: Limits) -> dict[str, dict[str, Any]]:
    """ΔS spread per content type over the top-k items of every run."""
    pooled: dict[str, list[float]] = {kind: [] for kind in kinds}
    for s in runs:
        for kind, d in s.top_k_delta_s():
            pooled.setdefault(kind or "untyped", []).append(d)
    return {kind: spread(values, limits) for kind, values in pooled.items()}
