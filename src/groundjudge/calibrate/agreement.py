"""Agreement between two raters on one criterion: kappa, its bootstrap CI, confusion, prevalence.

Kappa comes from scikit-learn. Undefined values (every rating the same label on both sides)
are None, never NaN and never a number pulled from nowhere.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score, confusion_matrix

Label = bool | int

SKEW_WARNING = 0.15  # a class rarer than this makes kappa unstable (the kappa paradox)


def kappa(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label], weights: str | None = None) -> float | None:
    """Cohen's kappa of two equally long label sequences; None when it is undefined."""
    if len(a) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(list(a), list(b), labels=list(labels), weights=weights)
    return None if value is None or math.isnan(value) else float(value)


def bootstrap_ci(a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label], weights: str | None,
                 *, seed: int = 0, reps: int = 2000, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap over items (seeded, so the same pairs give the same interval).

    Resamples in which kappa is undefined are left out; with fewer than half the resamples
    defined, the interval is (None, None).
    """
    n = len(a)
    if n < 2:
        return None, None
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    values = []
    for _ in range(reps):
        idx = rng.integers(0, n, n)
        k = kappa(xa[idx].tolist(), xb[idx].tolist(), labels, weights)
        if k is not None:
            values.append(k)
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
    headline = kappa(first, second, labels, weights) if ordinal else k
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
        kappa_quadratic=kappa(first, second, labels, "quadratic") if ordinal else None,
        ci_low=lo, ci_high=hi,
        confusion=confusion_matrix(list(first), list(second), labels=list(labels)).tolist() if n else [],
        labels=list(labels),
        prevalence=prevalence,
        warnings=notes,
        disagreements=[i for i, x, y in zip(item_ids, first, second) if x != y],
        more_labels_for_target=labels_for_width(n, lo, hi, target_width),
    )
