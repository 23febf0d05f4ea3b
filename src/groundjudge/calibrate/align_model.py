"""Fitting an aligned rubric's reading of the replies to human labels (``groundjudge align``).

Two claim models (``judge.alignment.ClaimModel``): ``logistic``, a small monotone logistic
regression of a claim's support on its signals (L2-regularised, each weight held to the sign
its signal allows by L-BFGS-B bounds), fitted on claim labels where the people marked spans and
otherwise on answer labels through a soft minimum over the answer's claims; and ``grounded``,
the base rule with its term factor and threshold fitted. Then how claims combine into the
answer's verdict (minimum or soft minimum, its temperature) and the answer threshold, each
chosen for the best kappa on the training answers. Deterministic: no randomness at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import minimize

from groundjudge.calibrate.align_data import AnswerItem
from groundjudge.judge.alignment import ClaimModel, combine
from groundjudge.judge.claim_signals import FEATURES, SIGNS

ModelKind = Literal["logistic", "grounded"]
L2 = 1.0  # penalty on the squared weights (not the intercept); features are of order 1
TEMPERATURES = (0.0, 0.02, 0.05, 0.1, 0.2)  # 0: the minimum
TERM_FACTORS = tuple(round(0.1 + 0.025 * i, 3) for i in range(37))  # 0.1 .. 1.0
_SOFT = 0.05  # the soft minimum's temperature while fitting on answer labels


@dataclass(frozen=True)
class Fit:
    claim_model: ClaimModel
    combine: str
    temperature: float
    threshold: float
    claim_labels: bool

    def score(self, item: AnswerItem) -> float:
        return combine([self.claim_model.support(s) for s in item.claims], self.combine, self.temperature)

    def predict(self, items: Sequence[AnswerItem]) -> tuple[list[bool], list[float]]:
        scores = [self.score(i) for i in items]
        return [s >= self.threshold for s in scores], scores


def kappa_binary(pred: np.ndarray, truth: np.ndarray) -> float | None:
    n = len(truth)
    if n == 0:
        return None
    po = float(np.mean(pred == truth))
    p1, t1 = float(np.mean(pred)), float(np.mean(truth))
    pe = p1 * t1 + (1 - p1) * (1 - t1)
    return None if pe >= 1 else (po - pe) / (1 - pe)


def best_threshold(scores: Sequence[float], truth: Sequence[bool]) -> tuple[float, float]:
    """The cut (midway between two neighbouring scores) with the highest kappa of
    ``score >= cut`` against ``truth``; the lowest such cut among equals."""
    s, t = np.asarray(scores, dtype=float), np.asarray(truth, dtype=bool)
    values = np.unique(s)
    cuts = np.concatenate([[values[0] - 1e-9], (values[:-1] + values[1:]) / 2, [values[-1] + 1e-9]])
    order = np.argsort(-s)
    sorted_s, sorted_t = s[order], t[order]
    n, positives = len(t), int(t.sum())
    best, best_kappa = float(cuts[0]), -2.0
    for cut in cuts:
        k = int(np.searchsorted(-sorted_s, -cut, side="right"))  # how many scores are >= cut
        tp = int(sorted_t[:k].sum())
        tn = n - k - (positives - tp)
        po = (tp + tn) / n
        pe = (k * positives + (n - k) * (n - positives)) / (n * n)
        kappa = -1.0 if pe >= 1 else (po - pe) / (1 - pe)
        if kappa > best_kappa + 1e-12:
            best, best_kappa = float(cut), kappa
    return min(1.0, max(0.0, best)), best_kappa


def _matrix(items: Sequence[AnswerItem]) -> tuple[np.ndarray, np.ndarray]:
    """Every claim's features, and the answer each belongs to."""
    rows = [s.features() for item in items for s in item.claims]
    owner = [i for i, item in enumerate(items) for _ in item.claims]
    return np.asarray(rows, dtype=float).reshape(-1, len(FEATURES)), np.asarray(owner, dtype=int)


def _bounds() -> list[tuple[float | None, float | None]]:
    return [(None, None)] + [(0.0, None) if SIGNS[f] > 0 else (None, 0.0) if SIGNS[f] < 0 else (None, None)
                             for f in FEATURES]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
    return out


def fit_claims_on_claim_labels(x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Monotone L2 logistic regression of claim labels on claim features: (intercept, weights)."""

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = theta[0] + x @ theta[1:]
        p = _sigmoid(z)
        eps = 1e-12
        value = -float(np.sum(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))) + L2 / 2 * float(theta[1:] @ theta[1:])
        residual = p - y
        grad = np.concatenate([[residual.sum()], x.T @ residual + L2 * theta[1:]])
        return value, grad

    result = minimize(loss, np.zeros(len(FEATURES) + 1), jac=True, method="L-BFGS-B", bounds=_bounds())
    return float(result.x[0]), np.asarray(result.x[1:])


def fit_claims_on_answer_labels(x: np.ndarray, owner: np.ndarray, truth: np.ndarray, n_answers: int
                                ) -> tuple[float, np.ndarray]:
    """The same model fitted so that the soft minimum of an answer's claim supports predicts
    the answer's label (answers without claims carry no information about claims)."""
    has = np.zeros(n_answers, dtype=bool)
    has[owner] = True

    def loss(theta: np.ndarray) -> float:
        s = _sigmoid(theta[0] + x @ theta[1:])
        low = np.full(n_answers, np.inf)
        np.minimum.at(low, owner, s)
        acc = np.zeros(n_answers)
        np.add.at(acc, owner, np.exp(-(s - low[owner]) / _SOFT))
        counts = np.bincount(owner, minlength=n_answers)
        p = (low - _SOFT * np.log(np.where(has, acc, 1.0) / np.maximum(counts, 1)))[has]
        p = np.clip(p, 1e-9, 1 - 1e-9)
        t = truth[has]
        return -float(np.sum(t * np.log(p) + (1 - t) * np.log(1 - p))) + L2 / 2 * float(theta[1:] @ theta[1:])

    result = minimize(loss, np.zeros(len(FEATURES) + 1), method="L-BFGS-B", bounds=_bounds())
    return float(result.x[0]), np.asarray(result.x[1:])


def _combination(items: Sequence[AnswerItem], model: ClaimModel, claim_labels: bool,
                 temperatures: Sequence[float] = TEMPERATURES) -> Fit:
    supports = [[model.support(s) for s in item.claims] for item in items]
    truth = [item.truth for item in items]
    best: Fit | None = None
    best_kappa = -2.0
    for t in temperatures:
        how = "min" if t == 0 else "softmin"
        scores = [combine(s, how, t) for s in supports]
        cut, kappa = best_threshold(scores, truth)
        if kappa > best_kappa + 1e-12:
            best, best_kappa = Fit(model, how, t, round(cut, 6), claim_labels), kappa
    assert best is not None
    return best


def fit(items: Sequence[AnswerItem], kind: ModelKind = "logistic") -> Fit:
    """Fit the claim model, the combination and the threshold on ``items``."""
    if kind == "grounded":
        return _fit_grounded(items)
    x, owner = _matrix(items)
    claim_labelled = [i for i, item in enumerate(items) if item.claim_truth is not None]
    if claim_labelled:
        keep = np.isin(owner, claim_labelled)
        y = np.asarray([t for item in items if item.claim_truth is not None for t in item.claim_truth], dtype=float)
        intercept, w = fit_claims_on_claim_labels(x[keep], y)
    else:
        truth = np.asarray([item.truth for item in items], dtype=float)
        intercept, w = fit_claims_on_answer_labels(x, owner, truth, len(items))
    # rounded so the rubric file states exactly what is applied; clamped to its sign again
    weights = {f: round(float(v), 6) for f, v in zip(FEATURES, w)}
    weights = {f: (max(0.0, v) if SIGNS[f] > 0 else min(0.0, v) if SIGNS[f] < 0 else v) for f, v in weights.items()}
    model = ClaimModel(kind="logistic", intercept=round(intercept, 6), weights=weights)
    return _combination(items, model, bool(claim_labelled))


def _fit_grounded(items: Sequence[AnswerItem]) -> Fit:
    best: Fit | None = None
    best_kappa = -2.0
    truth = [item.truth for item in items]
    for factor in TERM_FACTORS:
        model = ClaimModel(kind="grounded", term_factor=factor)
        scores = [combine([model.support(s) for s in item.claims], "min", 0.0) for item in items]
        cut, kappa = best_threshold(scores, truth)
        if kappa > best_kappa + 1e-12:
            best, best_kappa = Fit(model, "min", 0.0, round(cut, 6), False), kappa
    assert best is not None
    return best
