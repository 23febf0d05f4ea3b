"""Agreement between two raters on one criterion: kappa, its bootstrap CI, confusion, prevalence.

Kappa is computed from the confusion matrix with numpy (Cohen 1960; Cohen 1968 for the
weighted forms), with scikit-learn's ``cohen_kappa_score`` conventions: weights are the
distance between label *positions* in ``labels`` (linear ``|i - j|``, quadratic
``(i - j)**2``), ratings outside ``labels`` are left out, and the expected matrix is the
outer product of the two raters' label counts. ``tests/test_calibrate.py`` checks it against
scikit-learn to 1e-12. The bootstrap builds the confusion matrices of all resamples at once
(one ``bincount`` per block of resamples), so an interval costs milliseconds, not seconds.

Undefined values (no expected disagreement: both raters used one and the same label) are
None, never NaN and never a number pulled from nowhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Label = bool | int
Weights = str | None  # None (unweighted), "linear" or "quadratic"

SKEW_WARNING = 0.15  # a class rarer than this makes kappa unstable (the kappa paradox)
_CELLS_PER_BLOCK = 4_000_000  # resampled items held in memory at once by the bootstrap


def _codes(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label]) -> tuple[np.ndarray, int]:
    """Each pair as one integer ``L * i + j`` (i, j: label positions); ``L * L`` for a pair
    with a rating outside ``labels`` (counted nowhere, as scikit-learn leaves it out)."""
    if len(a) != len(b):
        raise ValueError(f"the raters rated different numbers of items: {len(a)} and {len(b)}")
    size = len(labels)
    position = {label: i for i, label in enumerate(labels)}
    outside = size * size
    codes = [size * position[x] + position[y] if x in position and y in position else outside
             for x, y in zip(a, b)]
    return np.asarray(codes, dtype=np.int64), size


def _weight_matrix(size: int, weights: Weights) -> np.ndarray:
    i, j = np.indices((size, size))
    if weights is None:
        return np.asarray(i != j, dtype=np.int64)
    if weights == "linear":
        return np.asarray(np.abs(i - j), dtype=np.int64)
    if weights == "quadratic":
        return np.asarray((i - j) ** 2, dtype=np.int64)
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def _kappas(confusions: np.ndarray, weights: Weights) -> np.ndarray:
    """Kappa of each matrix in a stack of integer confusion matrices (..., L, L); NaN where undefined.

    kappa = 1 - n * sum(w * C) / sum(w * outer(rows, columns)): observed over expected
    weighted disagreement. Both sums are exact integers; the ratio is the only rounding step.
    """
    w = _weight_matrix(confusions.shape[-1], weights)
    rows = confusions.sum(axis=-1)
    columns = confusions.sum(axis=-2)
    n = rows.sum(axis=-1)
    observed = (confusions * w).sum(axis=(-2, -1))
    expected = np.einsum("...i,ij,...j->...", rows, w, columns)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = 1.0 - (n * observed).astype(np.float64) / expected.astype(np.float64)
    return np.where(expected > 0, values, np.nan)


def _confusion(codes: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes, minlength=size * size + 1)[: size * size].reshape(size, size)


def kappa(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label], weights: Weights = None) -> float | None:
    """Cohen's kappa of two equally long label sequences; None when it is undefined.

    >>> kappa([True, True, False, False], [True, False, False, False], [True, False])
    0.5
    >>> kappa([1, 1], [1, 1], [0, 1]) is None
    True
    """
    if len(a) == 0:
        return None
    codes, size = _codes(a, b, labels)
    value = float(_kappas(_confusion(codes, size), weights))
    return None if math.isnan(value) else value


def bootstrap_kappas(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label], weights: Weights,
                     *, seed: int = 0, reps: int = 2000) -> np.ndarray:
    """Kappa of each of ``reps`` item resamples, NaN where undefined (seeded, so repeatable).

    The resamples are the rows of ``numpy.random.default_rng(seed).integers(0, n, (reps, n))``
    (drawn in blocks, which gives the same numbers as ``reps`` successive ``integers(0, n, n)``
    calls); the confusion matrices of a block come from one bincount over
    ``row * B + pair code`` (B = L * L + 1 bins per resample, the last for pairs left out).
    """
    n = len(a)
    codes, size = _codes(a, b, labels)
    if n == 0:
        return np.full(reps, np.nan)
    rng = np.random.default_rng(seed)
    bins = size * size + 1
    block = max(1, _CELLS_PER_BLOCK // n)
    out = []
    for start in range(0, reps, block):
        count = min(block, reps - start)
        resampled = codes[rng.integers(0, n, (count, n))]
        resampled += (np.arange(count, dtype=np.int64) * bins)[:, None]
        counts = np.bincount(resampled.ravel(), minlength=count * bins).reshape(count, bins)
        out.append(_kappas(counts[:, : size * size].reshape(count, size, size), weights))
    return np.concatenate(out) if out else np.empty(0)


def bootstrap_ci(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label], weights: Weights,
                 *, seed: int = 0, reps: int = 2000, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap over items (seeded, so the same pairs give the same interval).

    Resamples in which kappa is undefined are left out; with fewer than half the resamples
    defined, the interval is (None, None).
    """
    if len(a) < 2:
        return None, None
    values = bootstrap_kappas(a, b, labels, weights, seed=seed, reps=reps)
    values = values[~np.isnan(values)]
    if len(values) < reps / 2:
        return None, None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def labels_for_width(n: int, low: float | None, high: float | None, target_width: float) -> int | None:
    """How many more labelled items would shrink the CI to ``target_width`` (width ~ 1/sqrt(n))."""
    if low is None or high is None or n == 0:
        return None
    width = high - low
    if width <= target_width:
        return 0
    return max(0, math.ceil(n * (width / target_width) ** 2) - n)


@dataclass(frozen=True)
class Agreement:
    n: int
    observed: float | None
    kappa: float | None  # the headline: unweighted for binary, quadratic-weighted for ordinal
    kappa_unweighted: float | None
    kappa_linear: float | None
    kappa_quadratic: float | None
    ci_low: float | None
    ci_high: float | None
    confusion: list[list[int]]  # rows: first rater (judge), columns: second rater (human)
    labels: list[Label]
    prevalence: dict[str, float]  # second rater's label shares
    warnings: list[str]
    disagreements: list[str]
    more_labels_for_target: int | None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def agreement(first: Sequence[Label], second: Sequence[Label], item_ids: Sequence[str], labels: Sequence[Label],
              *, ordinal: bool, seed: int = 0, target_width: float = 0.2, reps: int = 2000) -> Agreement:
    """Agreement of ``first`` (say, the judge) with ``second`` (say, a human) on the same items."""
    n = len(first)
    weights = "quadratic" if ordinal else None
    k = kappa(first, second, labels)
    quadratic = kappa(first, second, labels, "quadratic") if ordinal else None
    headline = quadratic if ordinal else k
    lo, hi = bootstrap_ci(first, second, labels, weights, seed=seed, reps=reps)
    notes = []
    prevalence = {str(lab): (sum(1 for v in second if v == lab) / n if n else 0.0) for lab in labels}
    present = [share for share in prevalence.values() if share > 0]
    if n and (len(present) < 2 or min(present) < SKEW_WARNING):
        notes.append("skewed prevalence: one label is rare, so kappa is unstable and can be low "
                     "even when raw agreement is high")
    if n < 30:
        notes.append(f"only {n} items: the confidence interval is wide")
    if headline is None and n:
        notes.append("kappa undefined: both raters used a single label")
    return Agreement(
        n=n,
        observed=sum(1 for x, y in zip(first, second) if x == y) / n if n else None,
        kappa=headline,
        kappa_unweighted=k,
        kappa_linear=kappa(first, second, labels, "linear") if ordinal else None,
        kappa_quadratic=quadratic,
        ci_low=lo, ci_high=hi,
        confusion=_confusion(*_codes(first, second, labels)).tolist() if n else [],
        labels=list(labels),
        prevalence=prevalence,
        warnings=notes,
        disagreements=[i for i, x, y in zip(item_ids, first, second) if x != y],
        more_labels_for_target=labels_for_width(n, lo, hi, target_width),
    )
