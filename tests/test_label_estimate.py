"""Weighted kappa: equal to scikit-learn's on plain counts, unbiased under unequal-probability
picking (a seeded simulation), with a CI that covers; and the session's sequential batches."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from groundjudge.contracts import HumanLabel
from groundjudge.label.estimate import WeightedItem, agreement_weights, estimate_kappa, influence, kappa_from_matrix
from groundjudge.label.picker import capped_probabilities, systematic_sample
from groundjudge.label.session import agreement_estimates, expected_after, plan_next_batch
from tests.test_label_picker import example_session


@pytest.mark.parametrize("kind, size", [(None, 2), ("linear", 4), ("quadratic", 4)])
def test_kappa_matches_scikit_learn(kind, size):
    rng = np.random.default_rng(2)
    a = rng.integers(0, size, 200)
    b = np.where(rng.uniform(size=200) < 0.6, a, rng.integers(0, size, 200))
    matrix = np.zeros((size, size))
    for x, y in zip(a, b):
        matrix[x, y] += 1
    expected = cohen_kappa_score(a, b, labels=list(range(size)), weights=kind)
    assert kappa_from_matrix(matrix, agreement_weights(size, kind)) == pytest.approx(expected, abs=1e-12)


def test_a_weight_of_two_counts_like_a_duplicate():
    cells = [(0, 0), (0, 1), (1, 1), (1, 0), (1, 1)]
    agree = agreement_weights(2, None)
    doubled = estimate_kappa([WeightedItem(j, k, 2.0 if i == 1 else 1.0) for i, (j, k) in enumerate(cells)], 2,
                             agree, None)
    copied = estimate_kappa([WeightedItem(j, k, 1.0) for j, k in cells + [cells[1]]], 2, agree, None)
    assert doubled.kappa == pytest.approx(copied.kappa)


def test_influence_is_the_derivative_of_kappa():
    p = np.array([[0.5, 0.1], [0.15, 0.25]])
    agree = agreement_weights(2, None)
    z = influence([(0, 1)], p, agree)[0]
    eps = 1e-6
    moved = (1 - eps) * p
    moved[0, 1] += eps  # add a sliver of one item in cell (0, 1)
    numeric = (kappa_from_matrix(moved, agree) - kappa_from_matrix(p, agree)) / eps
    assert z == pytest.approx(numeric, rel=1e-4)


def population(rng: np.random.Generator, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judge and human labels where the judge's low-confidence items disagree more."""
    human = rng.uniform(size=n) < 0.7
    confidence = 0.5 + 0.5 * rng.beta(2, 1, n)
    judge = np.where(rng.uniform(size=n) < confidence, human, ~human)
    return judge.astype(int), human.astype(int), confidence


def test_weighted_kappa_is_unbiased_where_the_plain_one_is_not():
    rng = np.random.default_rng(20)
    judge, human, confidence = population(rng)
    agree = agreement_weights(2, None)
    full = np.zeros((2, 2))
    for j, h in zip(judge, human):
        full[j, h] += 1
    truth = kappa_from_matrix(full, agree)
    pi = capped_probabilities(0.1 + (1 - confidence), 120)  # favour the items the judge is unsure of
    weighted, plain, covered = [], [], 0
    reps = 600
    for rep in range(reps):
        picked = systematic_sample(pi, np.random.default_rng(1000 + rep))
        items = [WeightedItem(judge[i], human[i], 1 / pi[i], 1, pi[i]) for i in picked]
        est = estimate_kappa(items, 2, agree, {1: 1.0})
        weighted.append(est.kappa)
        covered += est.ci_low <= truth <= est.ci_high
        plain.append(estimate_kappa([WeightedItem(judge[i], human[i], 1.0) for i in picked], 2, agree, None).kappa)
    se = np.std(weighted, ddof=1) / np.sqrt(reps)
    assert abs(np.mean(weighted) - truth) < max(0.01, 3 * se)
    assert np.mean(plain) < truth - 0.1  # the picked items disagree more: unweighted kappa is far too low
    assert 0.9 <= covered / reps <= 0.99


def simulated_people(session, *, seed: int) -> tuple[dict, float]:
    """People's faithful labels for every judged item (each agreeing with the judge with the
    judge's own confidence, seeded) and the judge's true kappa against them over all items."""
    rng = np.random.default_rng(seed)
    human = {k: (item.labels["faithful"] if rng.uniform() < item.confidence else not item.labels["faithful"])
             for k, item in session.judged.items()}
    full = np.zeros((2, 2))
    for k, item in session.judged.items():
        full[0 if item.labels["faithful"] else 1, 0 if human[k] else 1] += 1
    return human, kappa_from_matrix(full, agreement_weights(2, None))


def test_sequential_batches_stay_unbiased():
    """Three uncertain batches through the session, each weighted by its recorded design."""
    truth_session = example_session(True)
    human, truth = simulated_people(truth_session, seed=4)
    estimates = []
    for rep in range(300):
        session = example_session(True)
        for step in range(3):
            batch = plan_next_batch(session, strategy="uncertain", size=6, double_share=0.0, seed=rep * 10 + step)
            session.batches.append(batch)
            session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=human[(q, c)])
                             for q, c, _, _ in batch.picks]
        estimates.append(agreement_estimates(session)["faithful"])
    values = np.array([e.kappa for e in estimates if e.kappa is not None])
    assert len(values) > 280
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert all(e.weighted for e in estimates)
    assert abs(values.mean() - truth) < max(0.02, 3 * se), (values.mean(), truth, se)


def test_expected_ci_after_a_batch_is_narrower_than_now():
    session = example_session(True)
    rng = np.random.default_rng(8)
    batch = plan_next_batch(session, strategy="random", size=35, double_share=0.0, seed=1)
    session.batches.append(batch)
    session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=bool(rng.uniform() < 0.6))
                     for q, c, _, _ in batch.picks]
    now = agreement_estimates(session)
    nxt = plan_next_batch(session, strategy="random", size=10, double_share=0.0, seed=2)
    session.batches.append(nxt)
    after = expected_after(session, nxt, now)
    assert now["faithful"].half_width is not None and after["faithful"] is not None
    assert after["faithful"] < now["faithful"].half_width
    assert after["citations_supported"] is None  # the judge gave no such labels


def test_hand_labels_chosen_badly_before_the_first_batch_do_not_bias_it():
    """Labels typed by hand for the items where the judge is wrong, then two random batches:
    the hand labels count as known values, so the estimate stays unbiased."""
    base = example_session(True)
    human, truth = simulated_people(base, seed=6)
    wrong = [k for k, item in base.judged.items() if item.labels["faithful"] != human[k]][:6]
    assert len(wrong) == 6
    plain, weighted = [], []
    for rep in range(250):
        session = example_session(True)
        session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=human[(q, c)]) for q, c in wrong]
        for step in range(2):
            batch = plan_next_batch(session, strategy="random", size=8, double_share=0.0, seed=rep * 10 + step)
            session.batches.append(batch)
            session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=human[(q, c)])
                             for q, c, _, _ in batch.picks]
        weighted.append(agreement_estimates(session)["faithful"].kappa)
        labelled = session.labelled
        matrix = np.zeros((2, 2))
        for k, label in labelled.items():
            matrix[0 if session.judged[k].labels["faithful"] else 1, 0 if label.faithful else 1] += 1
        plain.append(kappa_from_matrix(matrix, agreement_weights(2, None)))
    values = np.array([v for v in weighted if v is not None])
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean() - truth) < max(0.02, 3 * se), (values.mean(), truth, se)
    assert np.mean([v for v in plain if v is not None]) < truth - 0.15  # counting them plainly is biased


def test_no_interval_from_too_few_items_or_from_perfect_agreement_alone():
    agree = agreement_weights(2, None)
    few = [WeightedItem(j, k, 1.0) for j, k in [(0, 0), (1, 1), (0, 1)] * 5]
    assert estimate_kappa(few, 2, agree, None).ci_low is None  # 15 items: no interval
    perfect = [WeightedItem(j, j, 1.0) for j in [0, 1] * 20]
    est = estimate_kappa(perfect, 2, agree, None)
    assert est.kappa == 1.0 and est.ci_low is not None and est.ci_low < 0.95  # not a zero-width claim


def test_a_queue_batch_labelled_first_does_not_bias_the_sampled_batches_after_it():
    """The human queue holds the items the judge is least sure of (often wrong): labelled first
    as a queue batch (chosen, not sampled), they count as known items in the random batches that
    follow, so the weighted estimate stays unbiased; counted as a design they would not be."""
    from dataclasses import replace

    from groundjudge.label.run_source import QueuedItem
    from groundjudge.label.session import QUEUE_STRATEGY, design_weights, plan_queue_batch

    base = example_session(True)
    human, truth = simulated_people(base, seed=11)
    least_sure = sorted(base.judged, key=lambda k: base.judged[k].confidence)[:8]
    queue = [QueuedItem(k, ["faithful"], "test") for k in least_sure]
    estimates = []
    for rep in range(250):
        session = example_session(True)
        session.run = replace(session.run, queue=queue)
        first = plan_queue_batch(session, size=20)
        assert first is not None and first.strategy == QUEUE_STRATEGY
        assert [(q, c) for q, c, _, _ in first.picks] == least_sure  # queue order, all of it
        session.batches.append(first)
        session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=human[(q, c)])
                         for q, c, _, _ in first.picks]
        if rep == 0:  # before any sampled batch: plain counts, no design behind them
            assert design_weights(session)[1] is None and not agreement_estimates(session)["faithful"].weighted
            assert plan_queue_batch(session, size=20) is None  # the queue is done
        for step in range(2):
            batch = plan_next_batch(session, strategy="random", size=8, double_share=0.0, seed=rep * 10 + step)
            assert not {(q, c) for q, c, _, _ in batch.pool} & set(least_sure)
            session.batches.append(batch)
            session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=human[(q, c)])
                             for q, c, _, _ in batch.picks]
        weights, lambdas = design_weights(session)
        assert lambdas is not None and first.batch not in lambdas
        assert all(weights[k].weight == pytest.approx(1.0) for k in least_sure)  # known: counted once
        estimates.append(agreement_estimates(session)["faithful"].kappa)
    values = np.array([v for v in estimates if v is not None])
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean() - truth) < max(0.02, 3 * se), (values.mean(), truth, se)
