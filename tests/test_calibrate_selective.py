"""Selective trust: the Clopper-Pearson bound, fixed-sequence testing, reliability, the
cross-fitted kappa threshold, and a simulation of the guarantee itself."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from groundjudge.calibrate.selective import (
    NO_LAMBDA,
    agrees,
    clopper_pearson_lower,
    fit_cutoff,
    kappa_threshold,
    min_kept,
    reliability,
    verdict_confidence,
)


def test_the_confidence_of_a_verdict_is_its_probability_of_being_right() -> None:
    assert verdict_confidence(True, 0.8) == 0.8
    assert verdict_confidence(False, 0.2) == pytest.approx(0.8)
    assert verdict_confidence(False, None) is None and verdict_confidence(None, 0.4) is None


@pytest.mark.parametrize(("agree", "n", "risk"), [(22, 22, 0.1), (90, 100, 0.05), (7, 30, 0.2), (1, 1, 0.5)])
def test_the_lower_bound_is_exact(agree: int, n: int, risk: float) -> None:
    low = clopper_pearson_lower(agree, n, risk)
    # at the bound, seeing `agree` or more successes has probability exactly `risk`
    assert binom.sf(agree - 1, n, low) == pytest.approx(risk, rel=1e-9)
    assert clopper_pearson_lower(0, 10, 0.1) == 0.0 and clopper_pearson_lower(0, 0, 0.1) == 0.0


def test_min_kept_is_the_fewest_items_a_perfect_record_needs() -> None:
    assert min_kept(0.9, 0.1) == 22  # 0.9**22 = 0.098 <= 0.1 < 0.9**21
    assert clopper_pearson_lower(22, 22, 0.1) >= 0.9 > clopper_pearson_lower(21, 21, 0.1)
    with pytest.raises(ValueError):
        min_kept(1.0, 0.1)


def test_the_cut_off_stops_where_agreement_among_kept_items_drops() -> None:
    # 100 sure and right, then 100 at 0.6 of which half are right
    conf = [0.995] * 100 + [0.6] * 100
    correct = [True] * 100 + [True, False] * 50
    fit = fit_cutoff(conf, correct, target_agreement=0.9, risk=0.1)
    assert fit.cutoff == pytest.approx(0.61) and fit.kept == 100 and fit.coverage == 0.5
    assert fit.agreement == 1.0 and fit.bound == pytest.approx(0.1 ** (1 / 100))
    statuses = {p.cutoff: p.status for p in fit.curve}
    assert statuses[0.9999] == "too_few" and statuses[0.995] == "passed" and statuses[0.6] == "failed"
    assert statuses[0.59] == "not_tested" and statuses[0.0] == "not_tested"


def test_a_judge_that_is_often_wrong_keeps_nothing_and_says_so() -> None:
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.5, 1.0, 300).tolist()
    correct = (rng.uniform(size=300) < 0.7).tolist()  # 70% right whatever its confidence
    fit = fit_cutoff(conf, correct, target_agreement=0.9, risk=0.1)
    assert fit.cutoff is None and fit.kept == 0 and fit.coverage == 0.0
    assert fit.reason.startswith(NO_LAMBDA) and "lower bound" in fit.reason


def test_too_few_items_keep_nothing_and_items_without_confidence_are_never_kept() -> None:
    fit = fit_cutoff([0.99] * 20, [True] * 20, target_agreement=0.9, risk=0.1)
    assert fit.cutoff is None and "fewer than the 22" in fit.reason
    fit = fit_cutoff([None] * 50 + [0.99] * 50, [True] * 100, target_agreement=0.9, risk=0.1)
    assert fit.n == 100 and fit.n_confident == 50 and fit.kept == 50 and fit.coverage == 0.5


def test_reliability_table_and_expected_calibration_error() -> None:
    conf = [0.95, 0.95, 0.95, 0.95, 0.55, 0.55, None]
    correct = [True, True, True, False, True, False, True]
    table = reliability(conf, correct)
    assert table.n == 6 and len(table.bins) == 10
    top, mid = table.bins[9], table.bins[5]
    assert (top.n, top.agreement, top.confidence) == (4, 0.75, pytest.approx(0.95))
    assert (mid.n, mid.agreement) == (2, 0.5) and table.bins[0].n == 0 and table.bins[0].agreement is None
    assert table.ece == pytest.approx((4 * 0.2 + 2 * 0.05) / 6)
    assert reliability([1.0], [True]).bins[9].n == 1  # 1.0 falls in the last bin
    assert reliability([], []).ece is None


def test_the_kappa_threshold_is_chosen_away_from_the_items_it_is_scored_on() -> None:
    rng = np.random.default_rng(0)
    score = rng.uniform(size=400)
    human = score >= 0.7  # people say True above 0.7: the rubric's 0.5 over-calls True
    flip = rng.uniform(size=400) < 0.05
    human = np.where(flip, ~human, human)
    out = kappa_threshold(score.tolist(), human.tolist(), folds=5, seed=3)
    assert out["threshold"] == pytest.approx(0.7, abs=0.03)
    assert all(abs(t - 0.7) < 0.05 for t in out["fold_thresholds"]) and len(out["fold_thresholds"]) == 5
    assert out["cross_fitted_kappa"] > out["kappa_at_default"] + 0.2
    again = kappa_threshold(score.tolist(), human.tolist(), folds=5, seed=3)
    assert again == out  # seeded
    assert kappa_threshold([0.9] * 4, [True] * 4)["threshold"] is None  # too few to cross-fit


# --- the guarantee, simulated ----------------------------------------------------------------

def accuracy_curve(conf: np.ndarray) -> np.ndarray:
    """The synthetic judge's true P(right | confidence): overconfident, 0.6 at 0.5, 1.0 at 1."""
    return 0.2 + 0.8 * conf


def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    conf = rng.uniform(0.5, 1.0, n)
    return conf, rng.uniform(size=n) < accuracy_curve(conf)


@pytest.mark.parametrize(("alpha", "delta"), [(0.1, 0.1), (0.05, 0.2)])
def test_kept_test_items_agree_at_least_one_minus_alpha_in_one_minus_delta_of_draws(alpha: float,
                                                                                     delta: float) -> None:
    rng = np.random.default_rng(20241113)
    draws, held, none, coverage = 1000, 0, 0, []
    for _ in range(draws):
        cal_conf, cal_right = draw(rng, 1000)
        fit = fit_cutoff(cal_conf.tolist(), cal_right.tolist(), target_agreement=1 - alpha, risk=delta)
        if fit.cutoff is None:
            none += 1
            coverage.append(0.0)
            held += 1  # kept nothing: nothing kept disagrees
            continue
        test_conf, test_right = draw(rng, 4000)
        kept = test_conf >= fit.cutoff
        coverage.append(kept.mean())
        held += int(test_right[kept].mean() >= 1 - alpha) if kept.any() else 1
    rate = held / draws
    # the best coverage an oracle could reach: keep conf >= c* where mean accuracy above c* is 1 - alpha
    oracle = (1 - (2 * (1 - alpha - 0.2) / 0.8 - 1)) / 0.5
    print(f"\nalpha={alpha} delta={delta}: agreement >= {1 - alpha} on kept test items in {rate:.3f} of {draws} draws "
          f"(required >= {1 - delta}); no lambda in {none}; mean coverage {np.mean(coverage):.3f} "
          f"(oracle {oracle:.3f}); among the {draws - none} draws that kept something: "
          f"{(held - none) / (draws - none):.3f}")
    assert rate >= 1 - delta
    # and it is not vacuous: most draws keep something, a fair share of what an oracle would
    assert none < 0.3 * draws and np.mean(coverage) > 0.3 * oracle


# --- the guarantee for an ordinal criterion (0..3), simulated ----------------------------------

def test_ordinal_verdicts_take_their_confidence_as_given_and_agree_only_on_the_exact_grade() -> None:
    assert verdict_confidence(0, 0.8, "ordinal") == 0.8 and verdict_confidence(3, 0.3, "ordinal") == 0.3
    assert verdict_confidence(2, None, "ordinal") is None
    assert agrees(2, 2, "ordinal") and not agrees(2, 3, "ordinal") and not agrees(0, 1, "ordinal")
    assert agrees(True, True) and not agrees(True, False)


def draw_ordinal(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human grades 0..3; the judge's confidences in [0.25, 1] (denser near 1) and its grades:
    the exact grade with probability equal to its confidence (a calibrated judge, as the nugget
    confidence is when the nugget probabilities are), else one grade off, inside the scale."""
    truth = rng.integers(0, 4, n)
    conf = 1.0 - 0.75 * rng.uniform(size=n) ** 2
    right = rng.uniform(size=n) < conf
    step = np.where(rng.uniform(size=n) < 0.5, -1, 1)
    step = np.where(truth + step < 0, 1, np.where(truth + step > 3, -1, step))
    return truth, np.where(right, truth, truth + step), conf


def oracle_coverage(alpha: float) -> float:
    """The largest share of items, most confident first, whose mean accuracy is >= 1 - alpha."""
    conf = np.sort(1.0 - 0.75 * np.random.default_rng(0).uniform(size=1_000_000) ** 2)[::-1]
    running = np.cumsum(conf) / np.arange(1, conf.size + 1)
    return float(np.nonzero(running >= 1 - alpha)[0][-1] + 1) / conf.size


@pytest.mark.parametrize(("alpha", "delta"), [(0.1, 0.1), (0.05, 0.2)])
def test_kept_ordinal_test_items_match_the_human_grade_at_least_one_minus_alpha_of_the_time(
        alpha: float, delta: float) -> None:
    rng = np.random.default_rng(20261122)
    draws, held, none, coverage, realised = 1000, 0, 0, [], []
    for _ in range(draws):
        truth, said, conf = draw_ordinal(rng, 1000)
        fit = fit_cutoff([verdict_confidence(int(s), float(c), "ordinal") for s, c in zip(said, conf)],
                         [agrees(int(s), int(t), "ordinal") for s, t in zip(said, truth)],
                         target_agreement=1 - alpha, risk=delta)
        if fit.cutoff is None:
            none += 1
            coverage.append(0.0)
            held += 1
            continue
        truth, said, conf = draw_ordinal(rng, 4000)
        kept = conf >= fit.cutoff
        coverage.append(kept.mean())
        if kept.any():
            realised.append(float((said[kept] == truth[kept]).mean()))
        held += int(realised[-1] >= 1 - alpha) if kept.any() else 1
    rate = held / draws
    oracle = oracle_coverage(alpha)
    print(f"\nordinal, alpha={alpha} delta={delta}: exact-grade agreement >= {1 - alpha} on kept test items in "
          f"{rate:.3f} of {draws} draws (required >= {1 - delta}); no lambda in {none}; mean coverage "
          f"{np.mean(coverage):.3f} (oracle {oracle:.3f}); mean realised agreement where kept "
          f"{np.mean(realised):.3f}")
    assert rate >= 1 - delta
    assert none < 0.3 * draws and np.mean(coverage) > 0.3 * oracle
