"""Honest figures for a fitted rubric: k-fold cross-fitting grouped by question, bootstrap
confidence intervals that resample questions, and a learning curve.

No answer is scored by a fit that saw its question: the folds split the questions (query ids),
so the several answers to one question always sit on the same side. The in-sample figure (fit
and score on every label) is shown beside the out-of-fold one only to show the gap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from groundjudge.calibrate.align_data import AnswerItem
from groundjudge.calibrate.align_model import Fit, kappa_binary

FRACTIONS = (0.25, 0.5, 0.75, 1.0)
METRICS = ("kappa", "balanced_accuracy", "auroc")


def question_folds(items: Sequence[AnswerItem], k: int, seed: int) -> list[int]:
    """Each item's fold: the questions shuffled by ``seed`` and dealt round-robin into ``k``
    folds, so one question's answers share a fold."""
    questions = sorted({item.query_id for item in items})
    if len(questions) < k:
        raise ValueError(f"{len(questions)} labelled questions cannot fill {k} folds")
    random.Random(seed).shuffle(questions)
    fold_of = {q: i % k for i, q in enumerate(questions)}
    return [fold_of[item.query_id] for item in items]


def _subset(items: Sequence[AnswerItem], fraction: float, seed: int) -> list[AnswerItem]:
    """The answers of a seeded ``fraction`` of the questions (at least one)."""
    if fraction >= 1:
        return list(items)
    questions = sorted({item.query_id for item in items})
    random.Random(seed).shuffle(questions)
    keep = set(questions[: max(1, round(fraction * len(questions)))])
    return [item for item in items if item.query_id in keep]


@dataclass
class Predictions:
    labels: list[bool]
    scores: list[float]


def cross_fit(items: Sequence[AnswerItem], fitter: Callable[[Sequence[AnswerItem]], Fit], folds: list[int],
              fraction: float = 1.0, seed: int = 0) -> tuple[Predictions, list[Fit]]:
    """Out-of-fold predictions: each fold scored by a fit on (``fraction`` of the questions of)
    the other folds."""
    labels: list[bool] = [False] * len(items)
    scores: list[float] = [0.0] * len(items)
    fits = []
    for k in sorted(set(folds)):
        train = [item for item, f in zip(items, folds) if f != k]
        fitted = fitter(_subset(train, fraction, seed + k))
        fits.append(fitted)
        held = [i for i, f in enumerate(folds) if f == k]
        predicted, s = fitted.predict([items[i] for i in held])
        for i, p, v in zip(held, predicted, s):
            labels[i], scores[i] = p, v
    return Predictions(labels, scores), fits


def balanced_accuracy(pred: np.ndarray, truth: np.ndarray) -> float | None:
    rates = [float(np.mean(pred[truth == c] == c)) for c in (True, False) if np.any(truth == c)]
    return sum(rates) / len(rates) if rates else None


def auroc(scores: np.ndarray, truth: np.ndarray) -> float | None:
    """Probability that a true item scores above a false one (ties count half)."""
    pos, neg = scores[truth], scores[~truth]
    if len(pos) == 0 or len(neg) == 0:
        return None
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    combined = np.concatenate([pos, neg])[order]
    # average ranks of ties
    i = 0
    while i < len(combined):
        j = i
        while j + 1 < len(combined) and combined[j + 1] == combined[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _figures(pred: np.ndarray, scores: np.ndarray, truth: np.ndarray) -> dict[str, float | None]:
    return {"kappa": kappa_binary(pred, truth), "balanced_accuracy": balanced_accuracy(pred, truth),
            "auroc": auroc(scores, truth)}


@dataclass
class Figure:
    value: float | None
    ci_low: float | None
    ci_high: float | None

    def as_list(self) -> list[float | None]:
        return [self.value, self.ci_low, self.ci_high]


@dataclass
class Figures:
    n: int
    by_metric: dict[str, Figure] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"n": self.n, **{m: f.as_list() for m, f in self.by_metric.items()}}


def figures(items: Sequence[AnswerItem], labels: Sequence[bool], scores: Sequence[float], *, seed: int,
            reps: int = 1000) -> Figures:
    """Kappa, balanced accuracy and AUROC of ``scores``, each with a 95% bootstrap CI that
    resamples questions (an answer's neighbours to the same question are not independent)."""
    truth = np.asarray([item.truth for item in items], dtype=bool)
    pred = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    point = _figures(pred, s, truth)
    by_question: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_question.setdefault(item.query_id, []).append(i)
    groups = [np.asarray(v) for _, v in sorted(by_question.items())]
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {m: [] for m in METRICS}
    for _ in range(reps):
        idx = np.concatenate([groups[g] for g in rng.integers(0, len(groups), len(groups))])
        for m, v in _figures(pred[idx], s[idx], truth[idx]).items():
            if v is not None:
                draws[m].append(v)
    out = Figures(n=len(items))
    for m in METRICS:
        d = draws[m]
        low, high = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) if len(d) >= reps // 2 else (None, None)
        out.by_metric[m] = Figure(point[m], low, high)
    return out


def learning_curve(items: Sequence[AnswerItem], fitter: Callable[[Sequence[AnswerItem]], Fit], folds: list[int],
                   seed: int, fractions: Sequence[float] = FRACTIONS) -> list[tuple[float, float | None]]:
    """Out-of-fold kappa when each fold's fit sees only ``fraction`` of its training questions."""
    truth = np.asarray([item.truth for item in items], dtype=bool)
    curve = []
    for fraction in fractions:
        predictions, _ = cross_fit(items, fitter, folds, fraction, seed)
        curve.append((fraction, kappa_binary(np.asarray(predictions.labels, dtype=bool), truth)))
    return curve
