"""WFGY chunking's thresholds and its per-question definitions: block ids, spans, P@k, R@k."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from groundjudge.contracts import Offsets
from groundjudge.metrics.operations import percentile as linear_percentile

KS: tuple[int, ...] = (1, 3, 5, 10)
OFFSET_WINDOW = 30
BAD_DELTA_S = 0.60  # WFGY's "risk" zone: a cited snippet above it flags the question
CONVERGENT_STATES = frozenset({"→", "->", "convergent"})
PARAPHRASES = 3  # "λ remains convergent on three paraphrases": distinct queries of a triplet
LIVE_RECALL_K = 5  # "Recall@5 does not drop more than 2 points absolute vs live"
DEFAULT_GATES: dict[str, float] = {
    "coverage": 0.70,
    "citation_accuracy": 0.95,
    "ΔS_med": 0.40,
    "ΔS_p90": 0.55,
    "recall@5_drop_points": 2.0,
    "λ_convergent": 0.95,
    "cited_ΔS": 0.45,  # acceptance target: "ΔS <= 0.45 for the cited snippet of each answered item"
}
# WFGY's zones of ΔS(question, retrieved), as the page writes them: "Stable <= 0.45, transitional
# 0.40-0.60, risk >= 0.60". Bounds are inclusive (None: open); the ranges overlap, so a value
# of 0.40 to 0.45 is both stable and transitional, and 0.60 both transitional and risk.
ZoneBounds = tuple[float | None, float | None]
DELTA_S_ZONES: dict[str, ZoneBounds] = {
    "stable": (None, 0.45),
    "transitional": (0.40, 0.60),
    "risk": (0.60, None),
}

CitationPolicy = Literal["any", "first"]


def zones_of(value: float, zones: Mapping[str, ZoneBounds] = DELTA_S_ZONES) -> list[str]:
    """The zones whose inclusive bounds hold ``value`` (one or two: the page's ranges overlap).

    >>> zones_of(0.31), zones_of(0.42), zones_of(0.59), zones_of(0.60)
    (['stable'], ['stable', 'transitional'], ['transitional'], ['transitional', 'risk'])
    """
    return [name for name, (low, high) in zones.items()
            if (low is None or value >= low) and (high is None or value <= high)]


def zone_counts(values: Sequence[float], zones: Mapping[str, ZoneBounds] = DELTA_S_ZONES) -> dict[str, int]:
    """How many of ``values`` lie in each zone (a value in two overlapping zones counts in both)."""
    counts = dict.fromkeys(zones, 0)
    for value in values:
        for name in zones_of(value, zones):
            counts[name] += 1
    return counts


def section_of(block_id: str) -> str | None:
    """The section id of a canonical block id: the prefix before ``.p.``; None without one.

    >>> section_of("S.4.2.p.Bk011a"), section_of("S.4.2")
    ('S.4.2', None)
    """
    head, sep, _ = block_id.partition(".p.")
    return head if sep and head else None


def title_distance(a: str, b: str) -> int:
    """Path distance between two sections in the dot-numbered title tree.

    >>> title_distance("S.4.2", "S.4.2"), title_distance("S.4.2", "S.4"), title_distance("S.4.2", "S.4.3")
    (0, 1, 2)
    """
    pa, pb = a.split("."), b.split(".")
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    return len(pa) + len(pb) - 2 * common


def span_gap(a: Offsets, b: Offsets) -> int:
    """Bytes between two ``[start, end)`` spans; 0 when they overlap or touch."""
    return max(0, max(a.start, b.start) - min(a.end, b.end))


def spans_match(cited: Offsets, gold: Offsets, *, window: int = OFFSET_WINDOW) -> bool:
    """Whether ``cited`` overlaps ``gold`` within ``window`` bytes (a gap of exactly ``window`` matches)."""
    return span_gap(cited, gold) <= window


def precision_at(ids: Sequence[str], relevant: Sequence[str] | frozenset[str], k: int) -> float:
    """WFGY's P@k: relevant ids in the first k / number of ids in the first k (0 if none)."""
    top = ids[:k]
    return len(set(top) & set(relevant)) / max(1, len(top))


def recall_at(ids: Sequence[str], relevant: Sequence[str] | frozenset[str], k: int) -> float:
    """WFGY's R@k: relevant ids in the first k / relevant ids (0 if there are none)."""
    rel = set(relevant)
    return len(set(ids[:k]) & rel) / max(1, len(rel))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    value = linear_percentile(values, q)
    if value is None:
        raise ValueError("percentile of no values")
    return value


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
