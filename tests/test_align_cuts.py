"""Other criteria an aligned rubric fits: a threshold or cut points, measured out of fold."""

from __future__ import annotations

import random

from groundjudge.calibrate.align_cuts import CriterionItems, fit_criterion


def items(ordinal: bool, n_questions: int = 30, seed: int = 1) -> CriterionItems:
    """Shares of nuggets stated, graded by the rule 0.3 / 0.6 / 0.9 (ordinal), or true at 0.5."""
    rng = random.Random(seed)
    query_ids, scores, truth = [], [], []
    for q in range(n_questions):
        for _ in range(3):
            share = rng.choice([0.0, 0.2, 0.25, 0.4, 0.5, 0.55, 0.75, 0.8, 1.0])
            query_ids.append(f"q{q}")
            scores.append(share)
            truth.append(sum(share >= c for c in (0.3, 0.6, 0.9)) if ordinal else share >= 0.5)
    return CriterionItems(name="correct" if ordinal else "relevant", ordinal=ordinal,
                          labels=[0, 1, 2, 3] if ordinal else [True, False], query_ids=query_ids,
                          keys=[(q, "c") for q in query_ids], scores=scores, truth=truth)


def folds(data: CriterionItems, k: int = 5) -> dict[str, int]:
    return {q: i % k for i, q in enumerate(sorted(set(data.query_ids)))}


def test_ordinal_cut_points_are_recovered_out_of_fold() -> None:
    data = items(ordinal=True)
    fitted, figures = fit_criterion(data, folds(data), seed=0, reps=100)
    assert fitted.threshold is None and fitted.cut_points is not None
    low, mid, high = fitted.cut_points
    assert 0.25 < low <= 0.4 and 0.55 < mid <= 0.75 and 0.8 < high <= 1.0
    assert figures["oof"][0] == 1.0 and figures["in_sample"] == 1.0
    assert fitted.out_of_fold["n"] == len(data.scores)


def test_a_binary_threshold_is_recovered_and_noise_shows_out_of_fold() -> None:
    data = items(ordinal=False)
    fitted, figures = fit_criterion(data, folds(data), seed=0, reps=100)
    assert fitted.threshold is not None and 0.4 < fitted.threshold <= 0.5
    assert figures["oof"][0] == 1.0
    flipped = [not t if i % 7 == 0 else t for i, t in enumerate(data.truth)]  # people who disagree sometimes
    noisy = CriterionItems(**{**data.__dict__, "truth": flipped})
    _, noisy_figures = fit_criterion(noisy, folds(noisy), seed=0, reps=100)
    kappa, low, high = noisy_figures["oof"]
    assert kappa is not None and low is not None and high is not None
    assert kappa < 1.0 and low <= kappa <= high
