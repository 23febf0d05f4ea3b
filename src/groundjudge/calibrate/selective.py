"""Selective trust: how far a judge's confidence can be relied on, and where to cut it off.

Three results per criterion whose verdicts carry a confidence, from those confidences and
the human labels (the kappa threshold for binary criteria only):

* a **reliability table**: verdict confidence in ten equal bins against how often the verdict
  agrees with the human, and the expected calibration error (ECE, the item-weighted mean gap);
* the **kappa-maximising threshold** on the judge's score, chosen by cross-fitting: each fold's
  items are labelled with the threshold that maximises kappa on the *other* folds, so the kappa
  reported for it is never scored on the items that chose it;
* a **guaranteed cut-off** lambda (Jung et al. 2024, "Trust or Escalate"; the fixed-sequence
  form of Learn-then-Test, Angelopoulos et al. 2021): the cut-offs of a grid fixed in advance
  are tested from most to least confident; at each, the hypothesis "agreement among the items
  kept is below 1 - alpha" is rejected when the exact (Clopper-Pearson) one-sided lower bound
  at level 1 - delta is at least 1 - alpha. Testing stops at the first cut-off that fails, and
  lambda is the last one that passed. With probability at least 1 - delta over the calibration
  set, verdicts at or above lambda then agree with people at least 1 - alpha of the time.

The confidence of a verdict is its probability of being right as the judge sees it. Binary:
``confidence`` (the judge's P(True)) for a True verdict, ``1 - confidence`` for a False one.
Ordinal: the judge's confidence is already the probability that its grade is right (claim_check's
``correct``: the Poisson-binomial mass of the nugget counts that give that grade, see
``judge/scoring.py``), and an ordinal verdict **agrees with the human only on the exact grade**
(a grade one off is a disagreement: "within one" would make a 0..3 scale agree on 3 of 4 grades
for a middle verdict, and the judge's confidence is that of the exact grade).

Cut-offs that keep fewer than ``min_kept`` items (see there) are passed over, not failed: which
cut-offs are passed over depends on the confidences only, never on whether the judge was right,
so the sequence of tests stays fixed given the confidences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from groundjudge.calibrate.agreement import _kappas

# Fixed before any data is seen, from most to least confident: finer near 1, where a good
# judge's confidences pile up.
DEFAULT_GRID: tuple[float, ...] = tuple(sorted(
    {round(x, 4) for x in np.arange(0.0, 0.99, 0.01)} | {0.99, 0.995, 0.999, 0.9995, 0.9999}, reverse=True))
RELIABILITY_BINS = 10
THRESHOLDS: tuple[float, ...] = tuple(round(x, 2) for x in np.arange(0.01, 1.0, 0.01))  # kappa search grid
NO_LAMBDA = "no lambda: the judge keeps nothing"


ORDINAL_AGREEMENT = "the exact grade"  # what "agrees with people" means for an ordinal criterion
VERDICT_CONFIDENCE = {
    "binary": "the judge's P(True) for a True verdict, 1 - P(True) for a False one",
    "ordinal": f"the judge's probability that its grade is right; agreement means {ORDINAL_AGREEMENT}",
}


def verdict_confidence(label: bool | int | None, confidence: float | None, kind: str = "binary") -> float | None:
    """The judge's probability that its verdict is right: binary, P(True) for True and
    1 - P(True) for False; ordinal, the confidence as given. None when there is no verdict or
    no confidence."""
    if label is None or confidence is None:
        return None
    if kind == "ordinal":
        return float(confidence)
    return float(confidence) if label else 1.0 - float(confidence)


def agrees(said: bool | int, truth: bool | int, kind: str = "binary") -> bool:
    """Whether a verdict agrees with a human label: the same truth value (binary) or the same
    grade (ordinal; see the module doc)."""
    if kind == "ordinal":
        return int(said) == int(truth)
    return bool(said) == bool(truth)


def clopper_pearson_lower(agree: int, n: int, risk: float) -> float:
    """Exact one-sided lower bound at level ``1 - risk`` on a binomial proportion (0 when no
    success or no trial).

    >>> round(clopper_pearson_lower(22, 22, 0.1), 4)
    0.9006
    """
    if n <= 0 or agree <= 0:
        return 0.0
    from scipy.stats import beta  # scipy is slow to load: only where a bound is taken

    return float(beta.ppf(risk, agree, n - agree + 1))


def min_kept(target_agreement: float, risk: float) -> int:
    """Fewest kept items with which a cut-off can pass at all: the smallest n for which n
    agreements out of n reach the bound, (1 - alpha)**n <= delta (22 for 0.9 at risk 0.1).

    Testing a cut-off that keeps fewer would fail whatever the judge did and stop the sequence
    before any larger set is looked at.
    """
    if not 0 < target_agreement < 1 or not 0 < risk < 1:
        raise ValueError("target_agreement and risk must lie strictly between 0 and 1")
    return max(1, math.ceil(math.log(risk) / math.log(target_agreement) - 1e-12))


@dataclass(frozen=True)
class GridPoint:
    cutoff: float
    kept: int
    agree: int
    agreement: float | None  # agree / kept
    bound: float | None  # None where the cut-off was passed over or not reached
    status: str  # "passed", "failed", "too_few" (passed over) or "not_tested" (after the first failure)


@dataclass(frozen=True)
class SelectiveFit:
    """The guaranteed cut-off of one criterion, or the plain statement that there is none."""

    target_agreement: float  # 1 - alpha
    risk: float  # delta
    n: int  # items with a verdict and a human label
    n_confident: int  # of those, items with a confidence
    min_kept: int
    cutoff: float | None  # lambda; None: the judge keeps nothing
    kept: int
    coverage: float | None  # kept / n
    agreement: float | None  # observed agreement among the kept items
    bound: float | None  # its Clopper-Pearson lower bound at level 1 - risk
    reason: str
    curve: list[GridPoint] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_cutoff(confidence: Sequence[float | None], correct: Sequence[bool], *, target_agreement: float,
               risk: float, grid: Sequence[float] = DEFAULT_GRID) -> SelectiveFit:
    """Fixed-sequence testing over ``grid`` (tested in descending order).

    ``confidence`` is each verdict's confidence (None: the item can never be kept) and
    ``correct`` whether the verdict agrees with the human label.
    """
    if len(confidence) != len(correct):
        raise ValueError(f"confidence and correct differ in length: {len(confidence)} and {len(correct)}")
    conf = np.array([np.nan if c is None else c for c in confidence], dtype=np.float64)
    right = np.asarray(correct, dtype=bool)
    cutoffs = np.array(sorted(set(grid), reverse=True), dtype=np.float64)
    need = min_kept(target_agreement, risk)
    keep = conf[None, :] >= cutoffs[:, None]  # NaN compares False: never kept
    kept = keep.sum(axis=1)
    agree = (keep & right[None, :]).sum(axis=1)
    bounds = np.zeros(len(cutoffs))
    testable = kept >= need
    if testable.any():
        from scipy.stats import beta

        a, k = agree[testable], kept[testable]
        safe = np.where(a > 0, a, 1)
        bounds[testable] = np.where(a > 0, beta.ppf(risk, safe, k - a + 1), 0.0)
    chosen: int | None = None
    curve: list[GridPoint] = []
    stopped = False
    for i, cut in enumerate(cutoffs):
        rate = float(agree[i] / kept[i]) if kept[i] else None
        if stopped:
            status, bound = "not_tested", None
        elif not testable[i]:
            status, bound = "too_few", None
        elif bounds[i] >= target_agreement:
            status, bound, chosen = "passed", float(bounds[i]), i
        else:
            status, bound, stopped = "failed", float(bounds[i]), True
        curve.append(GridPoint(cutoff=float(cut), kept=int(kept[i]), agree=int(agree[i]), agreement=rate,
                               bound=bound, status=status))
    n = len(conf)
    confident = int(np.sum(~np.isnan(conf)))
    if chosen is None:
        failed = next((p for p in curve if p.status == "failed"), None)
        why = (f"{NO_LAMBDA}: at the first cut-off tested ({failed.cutoff:g}: {failed.agree}/{failed.kept} agree) the "
               f"{1 - risk:.0%} lower bound {failed.bound:.3f} < {target_agreement}" if failed else
               f"{NO_LAMBDA}: {confident} items with a confidence, fewer than the {need} a cut-off needs")
        return SelectiveFit(target_agreement=target_agreement, risk=risk, n=n, n_confident=confident, min_kept=need,
                            cutoff=None, kept=0, coverage=0.0 if n else None, agreement=None, bound=None, reason=why,
                            curve=curve)
    point = curve[chosen]
    return SelectiveFit(
        target_agreement=target_agreement, risk=risk, n=n, n_confident=confident, min_kept=need, cutoff=point.cutoff,
        kept=point.kept, coverage=point.kept / n, agreement=point.agreement, bound=point.bound,
        reason=(f"lambda {point.cutoff:g} keeps {point.kept}/{n} items; {point.agree} agree, {1 - risk:.0%} lower "
                f"bound {point.bound:.3f} >= {target_agreement}"), curve=curve)


# --- reliability ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    n: int
    confidence: float | None  # mean verdict confidence in the bin
    agreement: float | None  # share of the bin's verdicts that agree with the human


@dataclass(frozen=True)
class Reliability:
    n: int
    ece: float | None
    bins: list[ReliabilityBin]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reliability(confidence: Sequence[float | None], correct: Sequence[bool], *,
                bins: int = RELIABILITY_BINS) -> Reliability:
    """Equal-width bins on [0, 1] (the last one closed); items without a confidence are left out.

    ECE = sum over bins of (n_bin / n) * |agreement_bin - confidence_bin|.
    """
    pairs = [(float(c), bool(r)) for c, r in zip(confidence, correct, strict=True) if c is not None]
    conf = np.array([c for c, _ in pairs], dtype=np.float64)
    right = np.array([r for _, r in pairs], dtype=bool)
    index = np.minimum((conf * bins).astype(np.int64), bins - 1) if len(conf) else np.array([], dtype=np.int64)
    out, gap = [], 0.0
    for b in range(bins):
        mask = index == b
        count = int(mask.sum())
        mean_c = float(conf[mask].mean()) if count else None
        rate = float(right[mask].mean()) if count else None
        if count:
            gap += count * abs(rate - mean_c)  # type: ignore[operator]
        out.append(ReliabilityBin(low=b / bins, high=(b + 1) / bins, n=count, confidence=mean_c, agreement=rate))
    return Reliability(n=len(conf), ece=gap / len(conf) if len(conf) else None, bins=out)


# --- the kappa-maximising threshold, cross-fitted -------------------------------------------

def _binary_kappas(score: np.ndarray, human: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Kappa of ``score >= t`` against ``human`` for every threshold t (NaN where undefined)."""
    pred = score[None, :] >= thresholds[:, None]
    tt = (pred & human).sum(axis=1)
    tf = (pred & ~human).sum(axis=1)
    ft = (~pred & human).sum(axis=1)
    ff = (~pred & ~human).sum(axis=1)
    confusions = np.stack([np.stack([tt, tf], axis=-1), np.stack([ft, ff], axis=-1)], axis=-2)
    return _kappas(confusions, None)


def _best(score: np.ndarray, human: np.ndarray, thresholds: np.ndarray, default: float) -> float | None:
    kappas = _binary_kappas(score, human, thresholds)
    if np.all(np.isnan(kappas)):
        return None
    top = np.nanmax(kappas)
    ties = thresholds[np.isclose(kappas, top, atol=1e-12, rtol=0)]
    return float(ties[np.argmin(np.abs(ties - default))])  # ties: the one nearest the rubric's threshold


def kappa_threshold(score: Sequence[float], human: Sequence[bool], *, default: float = 0.5, folds: int = 5,
                    seed: int = 0, thresholds: Sequence[float] = THRESHOLDS) -> dict[str, Any]:
    """The threshold on the judge's P(True) that maximises kappa, and its cross-fitted kappa.

    Items are shuffled (seeded) into ``folds`` folds; each fold is labelled with the threshold
    chosen on the others, and ``cross_fitted_kappa`` is the kappa of those out-of-fold labels.
    ``threshold`` is the one chosen on all items (the one to use next), ``kappa_at_default`` the
    kappa at the rubric's own threshold, for comparison.
    """
    s = np.asarray(score, dtype=np.float64)
    h = np.asarray(human, dtype=bool)
    if len(s) != len(h):
        raise ValueError("score and human differ in length")
    grid = np.asarray(thresholds, dtype=np.float64)
    n = len(s)
    out: dict[str, Any] = {"n": n, "folds": folds, "seed": seed, "default": default, "threshold": None,
                           "fold_thresholds": [], "cross_fitted_kappa": None, "kappa_at_default": None}
    if n < 2 * folds:
        out["reason"] = f"{n} items: too few for {folds}-fold cross-fitting"
        return out
    at_default = _binary_kappas(s, h, np.array([default]))[0]
    out["kappa_at_default"] = None if np.isnan(at_default) else float(at_default)
    out["threshold"] = _best(s, h, grid, default)
    fold_of = np.random.default_rng(seed).permutation(n) % folds
    predicted = np.zeros(n, dtype=bool)
    for k in range(folds):
        train, test = fold_of != k, fold_of == k
        t = _best(s[train], h[train], grid, default)
        t = default if t is None else t
        out["fold_thresholds"].append(t)
        predicted[test] = s[test] >= t
    cross = _binary_kappas(predicted.astype(np.float64), h, np.array([0.5]))[0]
    out["cross_fitted_kappa"] = None if np.isnan(cross) else float(cross)
    return out
