"""Agreement estimated from items picked with known probabilities.

The population is a run's judged items; each picked item carries a weight built from its
inclusion probability, so the weighted confusion matrix estimates the confusion matrix of the
whole population without bias (Horvitz-Thompson), however unevenly items were picked. Kappa
is a smooth function of that matrix; its variance comes from the linearisation (delta method)
of kappa in the cell shares, fed into the design variance of each batch.

Sequential batches: batch t is drawn from the items the rater had not labelled yet (U_t). Its
estimate of any population total T is ``T_t = sum(y over items labelled before t) +
sum(y / pi over batch t)``, unbiased given the past. A fixed mix ``sum(lambda_t * T_t)`` with
``lambda_t`` proportional to the batch's labelled count is unbiased too, and because the
``T_t - T`` are martingale differences its variance is ``sum(lambda_t^2 * Var_t)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
MIN_ITEMS_FOR_CI = 30  # below this the delta-method interval is not trusted (None, not a number)


def agreement_weights(size: int, kind: str | None) -> np.ndarray:
    """Agreement weights between label indices: identity, or linear/quadratic credit for near misses."""
    idx = np.arange(size)
    if kind is None or size < 2:
        return np.eye(size)
    dist = np.abs(idx[:, None] - idx[None, :]) / (size - 1)
    if kind == "linear":
        return np.asarray(1.0 - dist, dtype=np.float64)
    if kind == "quadratic":
        return np.asarray(1.0 - dist ** 2, dtype=np.float64)
    raise ValueError(f"unknown kappa weighting {kind!r}")


def kappa_from_matrix(p: np.ndarray, agree: np.ndarray) -> float | None:
    """Cohen's kappa of a (weighted) confusion matrix; None when chance agreement is 1."""
    total = p.sum()
    if total <= 0:
        return None
    p = p / total
    p_o = float((agree * p).sum())
    p_e = float((agree * np.outer(p.sum(axis=1), p.sum(axis=0))).sum())
    if 1.0 - p_e <= 1e-12:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def kappa_gradient(p: np.ndarray, agree: np.ndarray) -> np.ndarray | None:
    """d kappa / d p_jk at the shares ``p`` (which sum to 1): the influence of one item per cell."""
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o = float((agree * p).sum())
    p_e = float((agree * np.outer(rows, cols)).sum())
    if 1.0 - p_e <= 1e-12:
        return None
    d_pe = (agree @ cols)[:, None] + (rows @ agree)[None, :]
    return np.asarray(((agree - d_pe) * (1.0 - p_e) + (p_o - p_e) * d_pe) / (1.0 - p_e) ** 2, dtype=np.float64)


def influence(cells: Sequence[tuple[int, int]], p: np.ndarray, agree: np.ndarray) -> np.ndarray | None:
    """Centred linearised influence z_i of each item on kappa at the shares ``p``."""
    grad = kappa_gradient(p, agree)
    if grad is None:
        return None
    centre = float((grad * p).sum())
    return np.array([grad[j, k] - centre for j, k in cells], dtype=float)


@dataclass(frozen=True)
class WeightedItem:
    """One labelled item: its cell (judge label index, human label index), its weight, and the
    batch it was drawn in with its effective inclusion probability (None: not drawn by design)."""

    first: int
    second: int
    weight: float
    batch: int | None = None
    pi: float | None = None


@dataclass(frozen=True)
class KappaEstimate:
    n: int  # labelled items used
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    weighted: bool  # False: no selection records, plain kappa over the labelled items
    population: float  # estimated number of population items (sum of weights)
    batch_variance: dict[int, float]  # per batch: sum((1 - pi) / pi^2 * z^2), before mixing

    @property
    def half_width(self) -> float | None:
        return None if self.ci_low is None or self.ci_high is None else (self.ci_high - self.ci_low) / 2


def weighted_matrix(items: Sequence[WeightedItem], size: int) -> np.ndarray:
    matrix = np.zeros((size, size))
    for item in items:
        matrix[item.first, item.second] += item.weight
    return matrix


def batch_variances(z: np.ndarray, items: Sequence[WeightedItem]) -> dict[int, float]:
    """Per batch, the Horvitz-Thompson variance estimate of the total of ``z`` over its pool:
    sum((1 - pi) / pi^2 * z^2) over the batch's labelled items (Poisson-design form)."""
    out: dict[int, float] = {}
    for value, item in zip(z, items):
        if item.batch is None or item.pi is None:
            continue
        out[item.batch] = out.get(item.batch, 0.0) + (1.0 - item.pi) / item.pi ** 2 * value ** 2
    return out


def estimate_kappa(items: Sequence[WeightedItem], size: int, agree: np.ndarray,
                   lambdas: dict[int, float] | None) -> KappaEstimate:
    """Weighted kappa and its 95% CI.

    ``lambdas`` maps each batch to its mixing weight (they sum to 1). ``None`` means the items
    were not drawn by a recorded design: the kappa is the plain one and the CI treats them as a
    simple random sample of a large population (a delta-method interval).
    """
    n = len(items)
    matrix = weighted_matrix(items, size)
    population = float(matrix.sum())
    value = kappa_from_matrix(matrix, agree)
    weighted = lambdas is not None
    if value is None or n < MIN_ITEMS_FOR_CI:
        return KappaEstimate(n, value, None, None, None, weighted, population, {})
    # Half an average item is added to every cell, both where the influence is taken and as
    # pseudo-items in the variance: at the boundary (no disagreement seen yet) the plain delta
    # method claims a zero-width interval, as if unseen disagreements were impossible.
    smoothed = matrix + 0.5 * population / n
    shares = smoothed / smoothed.sum()
    grad = kappa_gradient(shares, agree)
    if grad is None:
        return KappaEstimate(n, value, None, None, None, weighted, population, {})
    cell_z = grad - float((grad * shares).sum())
    z = np.array([cell_z[i.first, i.second] for i in items])
    if lambdas is None:
        coef = np.full(n, 1.0 / (n * (n - 1)))
        per_batch: dict[int, float] = {}
    else:
        coef = np.array([lambdas[i.batch] ** 2 * (1.0 - i.pi) / i.pi ** 2 / population ** 2
                         if i.batch is not None and i.pi else 0.0 for i in items])
        per_batch = batch_variances(z, items)
    designed = coef[coef > 0]
    pseudo = 0.5 * float(designed.mean()) * float((cell_z ** 2).sum()) if designed.size else 0.0
    variance = float((coef * z ** 2).sum()) + pseudo
    se = math.sqrt(max(variance, 0.0))
    return KappaEstimate(n, value, se, max(-1.0, value - Z95 * se), min(1.0, value + Z95 * se),
                         weighted, population, per_batch)


def expected_half_width(current: KappaEstimate | None, precisions: dict[int, float], new_precision: float,
                        planned_pi: Sequence[float], planned_z2: Sequence[float],
                        population: float) -> float | None:
    """95% CI half-width expected once a planned batch is labelled.

    ``precisions``: each past batch's unnormalised mixing weight; ``new_precision`` the new
    batch's (the mix is re-normalised with it). ``planned_pi`` and ``planned_z2``: for every item
    of the new batch's pool, its inclusion probability and E[z_i^2] under the current model of
    what the human will say (the Poisson-design variance of the new batch's total is
    sum((1 - pi) / pi * E[z^2]) over the pool).
    """
    total = sum(precisions.values()) + new_precision
    if total <= 0 or population <= 0:
        return None
    variance = 0.0
    if current is not None:
        for b, v in current.batch_variance.items():
            variance += (precisions.get(b, 0.0) / total) ** 2 * v
    new = sum((1.0 - pi) / pi * z2 for pi, z2 in zip(planned_pi, planned_z2) if pi > 0)
    variance += (new_precision / total) ** 2 * new
    return Z95 * math.sqrt(max(variance, 0.0)) / population
