"""Pick a batch of items to label, each with a known inclusion probability.

Two strata: items another rater already labelled (a ``double`` share of the batch, for
human-human agreement) and the rest. Within a stratum a strategy gives every item a positive
score; the inclusion probabilities are proportional to the scores, capped at 1, and sum to the
stratum's sample size. The sample is drawn by systematic sampling over a random order, which
includes every item with exactly its probability.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

STRATEGIES = ("random", "stratified", "uncertain")
UNIFORM_SHARE = 0.3  # "uncertain": share of the batch spread evenly, so every item keeps a real chance


def capped_probabilities(scores: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    """Inclusion probabilities proportional to ``scores`` (all > 0), summing to ``n``, each <= 1.

    Items whose share would exceed 1 are taken for sure and the rest is re-spread. ``n`` at or
    above the number of items gives every item probability 1.
    """
    s = np.asarray(scores, dtype=float)
    if s.size == 0 or n <= 0:
        return np.zeros(s.size)
    if np.any(s <= 0) or not np.all(np.isfinite(s)):
        raise ValueError("scores must be positive and finite")
    if n >= s.size:
        return np.ones(s.size)
    pi = np.zeros(s.size)
    certain = np.zeros(s.size, dtype=bool)
    while True:
        rest = n - certain.sum()
        free = ~certain
        pi[free] = rest * s[free] / s[free].sum()
        pi[certain] = 1.0
        over = free & (pi >= 1.0 - 1e-9)  # float noise: a share of 0.9999999999 is a certain item
        if not over.any():
            return pi
        certain |= over


def systematic_sample(pi: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Indices drawn with exactly the inclusion probabilities ``pi`` (which sum to an integer):
    shuffle, lay the probabilities end to end, and take the items under u, u+1, u+2, ..."""
    n = round(float(pi.sum()))
    if n == 0:
        return []
    order = rng.permutation(pi.size)
    edges = np.cumsum(pi[order])
    edges[-1] = n  # absorb rounding so that the last point always lands inside
    points = rng.uniform(0.0, 1.0) + np.arange(n)
    hits = np.searchsorted(edges, points, side="right")
    return sorted({int(order[h]) for h in hits})


def stratified_scores(strata: Sequence[Hashable], n: int) -> np.ndarray:
    """Scores that give each stratum an equal share of ``n`` (capped by its size, the surplus
    re-spread), as probabilities n_h / N_h for the items of stratum h."""
    keys = list(dict.fromkeys(strata))
    sizes = {k: sum(1 for s in strata if s == k) for k in keys}
    want = {k: 0.0 for k in keys}
    left, open_keys = float(min(n, len(strata))), list(keys)
    while left > 1e-9 and open_keys:
        share = left / len(open_keys)
        for k in list(open_keys):
            take = min(share, sizes[k] - want[k])
            want[k] += take
            left -= take
            if sizes[k] - want[k] <= 1e-9:
                open_keys.remove(k)
    return np.array([max(want[s] / sizes[s], 1e-9) for s in strata])


@dataclass(frozen=True)
class PoolItem:
    key: tuple[str, str]  # (query_id, config_id)
    stratum: Hashable  # for "stratified": (judge verdict, tag)
    spread_score: float  # for "uncertain": sqrt(E[z^2]) or another positive score of how much it would teach


@dataclass(frozen=True)
class Pick:
    key: tuple[str, str]
    pi: float
    double: bool


@dataclass(frozen=True)
class BatchPlan:
    picks: list[Pick]  # in the order the rater will see them (random)
    pool: list[tuple[tuple[str, str], float, bool]]  # every pool item: key, pi, double stratum


def stratum_probabilities(items: Sequence[PoolItem], n: int, strategy: str) -> np.ndarray:
    if not items or n <= 0:
        return np.zeros(len(items))
    if strategy == "random":
        return capped_probabilities([1.0] * len(items), n)
    if strategy == "stratified":
        return capped_probabilities(stratified_scores([i.stratum for i in items], n), n)
    if strategy == "uncertain":
        raw = np.array([max(i.spread_score, 0.0) for i in items])
        if raw.sum() <= 0:
            raw = np.ones(len(items))
        mixed = (1 - UNIFORM_SHARE) * raw / raw.sum() + UNIFORM_SHARE / len(items)
        return capped_probabilities(mixed, n)
    raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


def plan_batch(fresh: Sequence[PoolItem], doubles: Sequence[PoolItem], size: int, double_share: float,
               strategy: str, seed: int) -> BatchPlan:
    """Draw ``size`` items: ``round(double_share * size)`` from ``doubles`` (items another rater
    labelled, that this rater has not), the rest from ``fresh``; a stratum too small to give
    its share gives all it has and the other stratum makes up the difference."""
    if not 0.0 <= double_share <= 1.0:
        raise ValueError("the double share must be in [0, 1]")
    size = min(size, len(fresh) + len(doubles))
    n_double = min(len(doubles), round(double_share * size))
    n_fresh = min(len(fresh), size - n_double)
    n_double = min(len(doubles), size - n_fresh)
    rng = np.random.default_rng(seed)
    picks: list[Pick] = []
    pool: list[tuple[tuple[str, str], float, bool]] = []
    for items, n, is_double in ((fresh, n_fresh, False), (doubles, n_double, True)):
        pi = stratum_probabilities(items, n, strategy)
        pool += [(item.key, float(p), is_double) for item, p in zip(items, pi)]
        picks += [Pick(items[i].key, float(pi[i]), is_double) for i in systematic_sample(pi, rng)]
    order = rng.permutation(len(picks))
    return BatchPlan([picks[i] for i in order], pool)
