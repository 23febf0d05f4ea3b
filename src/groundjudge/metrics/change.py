"""Whether a change between paired per-case values is real, and whether it is for the worse.

One test for every place that compares two sets of values case by case (``groundjudge
compare``, regression gates, the run history): the seeded paired sign-flip test of the mean
difference. Cases whose values are equal add nothing to its statistic and are dropped first;
with up to ``EXACT_MAX`` differing cases the signs are flipped ``REPS`` times (seeded, so a
verdict is reproducible), above that the test's normal approximation
(z = |sum d| / sqrt(sum d^2)), accurate at that size and milliseconds instead of minutes for
100,000 cases. A change is ``real`` when p < ``ALPHA``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05
EXACT_MAX = 100
REPS = 10000

# metrics where a rise is the bad direction (by name or name prefix); every other metric,
# judge metrics included, is better higher
LOWER_IS_BETTER = ("under_refusal", "over_refusal", "acl_leak", "empty_result", "trace_error", "latency_ms",
                   "tokens", "cost_usd", "judge_error_rate")


def lower_is_better(metric: str) -> bool:
    return metric.split("@")[0].startswith(LOWER_IS_BETTER)


def paired_permutation_p(diffs: Sequence[float], *, reps: int = REPS, seed: int = 0) -> float | None:
    """Two-sided p-value of the mean paired difference under ``reps`` random sign flips."""
    n = len(diffs)
    if n == 0:
        return None
    observed = abs(sum(diffs))
    if observed == 0:
        return 1.0
    rng = random.Random(seed)
    hits = 0
    for _ in range(reps):
        total = sum(d if rng.random() < 0.5 else -d for d in diffs)
        hits += abs(total) >= observed - 1e-12
    return (hits + 1) / (reps + 1)


def sign_flip_p(diffs: Sequence[float], *, seed: int = 0) -> float | None:
    """Two-sided p of the mean paired difference (see the module doc); None for no pairs."""
    moved = [d for d in diffs if d != 0]
    if not diffs:
        return None
    if not moved:
        return 1.0
    if len(moved) <= EXACT_MAX:
        return paired_permutation_p(moved, reps=REPS, seed=seed)
    z = abs(math.fsum(moved)) / math.sqrt(math.fsum(d * d for d in moved))
    return math.erfc(z / math.sqrt(2))


@dataclass(frozen=True)
class PairedChange:
    """``b`` against ``a`` over the cases both define: means, ``delta`` = mean(b) - mean(a),
    ``worsening`` = the delta in the metric's bad direction (positive: b is worse)."""

    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    worsening: float | None
    p_value: float | None

    @property
    def real(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    @property
    def verdict(self) -> str:
        return "real" if self.real else "noise"

    @property
    def regressed(self) -> bool:
        """A real change for the worse."""
        return self.real and self.worsening is not None and self.worsening > 0


def paired_change(metric: str, pairs: Sequence[tuple[float, float]], *, seed: int = 0) -> PairedChange:
    """The change from ``a`` to ``b`` in ``pairs`` of (a, b) values of ``metric``, one pair per case."""
    if not pairs:
        return PairedChange(0, None, None, None, None, None)
    mean_a = math.fsum(a for a, _ in pairs) / len(pairs)
    mean_b = math.fsum(b for _, b in pairs) / len(pairs)
    delta = mean_b - mean_a
    return PairedChange(len(pairs), mean_a, mean_b, delta, delta if lower_is_better(metric) else -delta,
                        sign_flip_p([b - a for a, b in pairs], seed=seed))
