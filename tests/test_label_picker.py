"""Picking with known probabilities: bounds and sums, exact inclusion, the double share,
determinism by seed, and never an item the rater already labelled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.contracts import HumanLabel
from groundjudge.label.picker import (
    PoolItem,
    capped_probabilities,
    plan_batch,
    stratified_scores,
    stratum_probabilities,
    systematic_sample,
)
from groundjudge.label.run_source import JudgedItem, LabelRun
from groundjudge.label.session import LabelSession, plan_next_batch, pool_items
from groundjudge.load.adapters import load_any

ROOT = Path(__file__).resolve().parent.parent


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=60), st.integers(0, 70))
def test_probabilities_sum_to_the_batch_and_stay_in_bounds(scores, n):
    pi = capped_probabilities(scores, n)
    assert np.all(pi >= 0) and np.all(pi <= 1 + 1e-12)
    assert pi.sum() == pytest.approx(min(n, len(scores)), abs=1e-9)
    free = pi < 1 - 1e-12
    if free.sum() >= 2:  # below the cap, probabilities stay proportional to the scores
        ratio = pi[free] / np.asarray(scores)[free]
        assert ratio.max() == pytest.approx(ratio.min(), rel=1e-9)


def test_systematic_sampling_includes_each_item_with_its_probability():
    rng = np.random.default_rng(11)
    pi = capped_probabilities(np.r_[rng.uniform(0.05, 1.0, 37), 30.0, 40.0, 50.0], 9)
    assert pi.max() == 1.0  # some items are certain
    reps = 6000
    counts = np.zeros(pi.size)
    for rep in range(reps):
        picked = systematic_sample(pi, np.random.default_rng(rep))
        assert len(picked) == 9 and len(set(picked)) == 9
        counts[picked] += 1
    se = np.sqrt(pi * (1 - pi) / reps)
    assert np.all(np.abs(counts / reps - pi) <= 4.5 * se + 1e-12)


def _pool(n: int, prefix: str) -> list[PoolItem]:
    return [PoolItem((f"{prefix}{i}", "cfg"), (i % 2 == 0, "tag"), 0.1 + (i % 5)) for i in range(n)]


@pytest.mark.parametrize("strategy", ["random", "stratified", "uncertain"])
def test_double_share_and_seed(strategy):
    fresh, doubles = _pool(50, "f"), _pool(12, "d")
    plan = plan_batch(fresh, doubles, 20, 0.2, strategy, seed=5)
    assert len(plan.picks) == 20
    assert sum(p.double for p in plan.picks) == 4
    assert all(p.key[0].startswith("d") == p.double for p in plan.picks)
    by_stratum = {True: 0.0, False: 0.0}
    for _, pi, double in plan.pool:
        by_stratum[double] += pi
    assert by_stratum == pytest.approx({True: 4.0, False: 16.0})
    assert plan_batch(fresh, doubles, 20, 0.2, strategy, seed=5) == plan
    assert plan_batch(fresh, doubles, 20, 0.2, strategy, seed=6).picks != plan.picks


def test_a_short_stratum_gives_what_it_has():
    plan = plan_batch(_pool(30, "f"), _pool(2, "d"), 20, 0.5, "random", seed=1)
    assert sum(p.double for p in plan.picks) == 2 and len(plan.picks) == 20
    plan = plan_batch(_pool(3, "f"), _pool(40, "d"), 10, 0.0, "random", seed=1)
    assert sum(not p.double for p in plan.picks) == 3 and len(plan.picks) == 10


def test_stratified_gives_each_stratum_an_equal_share():
    strata = ["a"] * 90 + ["b"] * 10
    pi = capped_probabilities(stratified_scores(strata, 20), 20)
    assert pi[:90].sum() == pytest.approx(10.0) and pi[90:].sum() == pytest.approx(10.0)
    strata = ["a"] * 95 + ["b"] * 5  # b is too small for half: all of it, a takes the rest
    pi = capped_probabilities(stratified_scores(strata, 20), 20)
    assert pi[95:].tolist() == [1.0] * 5 and pi[:95].sum() == pytest.approx(15.0)


def test_uncertain_favours_low_confidence_but_keeps_every_item_possible():
    items = [PoolItem((f"q{i}", "c"), None, 5.0 if i < 5 else 0.5) for i in range(50)]
    pi = stratum_probabilities(items, 10, "uncertain")
    assert pi[:5].min() > 3 * pi[5:].max()
    assert pi.min() > 0.03  # the uniform share: no item is left out by design


def example_session(confidence: bool) -> LabelSession:
    dataset, _ = load_any(ROOT / "examples" / "golden.jsonl",
                          [ROOT / "examples" / "traces" / "baseline.jsonl"], ROOT / "examples" / "corpus.jsonl")
    rng = np.random.default_rng(3)
    items = [JudgedItem((cid, "baseline"), {"faithful": bool(rng.uniform() < 0.7), "correct": int(rng.integers(0, 4)),
                                            "citations_supported": None},
                        float(rng.uniform(0.5, 1.0)) if confidence else None,
                        "test" if confidence else "none", float(rng.uniform()))
             for cid in dataset.cases]
    run = LabelRun(ROOT, ROOT / "report.json", "digest", items, dataset)
    return LabelSession(run, "r", Path("/nonexistent/r.jsonl"), [], {}, [], {i.key: i for i in items})


@pytest.mark.parametrize("confidence", [True, False])
@pytest.mark.parametrize("strategy", ["random", "stratified", "uncertain"])
def test_batches_never_repick_a_labelled_item(strategy, confidence):
    session = example_session(confidence)
    already = list(session.judged)[:7]
    session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=True) for q, c in already]
    seen = set(already)
    while len(session.labelled) < len(session.judged):
        batch = plan_next_batch(session, strategy=strategy, size=8, double_share=0.2, seed=len(session.batches))
        session.batches.append(batch)
        keys = [(q, c) for q, c, _, _ in batch.picks]
        assert not seen & set(keys) and len(set(keys)) == len(keys)
        assert all(0 < pi <= 1 for *_, pi, _ in batch.pool)
        assert sum(pi for *_, pi, _ in batch.pool) == pytest.approx(len(keys))
        assert {(q, c) for q, c, _, _ in batch.pool} == set(session.judged) - seen
        seen |= set(keys)
        session.mine += [HumanLabel(query_id=q, config_id=c, rater="r", faithful=False) for q, c in keys]
    assert seen == set(session.judged)


def test_a_pending_batch_blocks_a_new_draw_and_doubles_come_from_other_raters():
    session = example_session(True)
    keys = list(session.judged)
    session.others = {k: {"other"} for k in keys[:10]}
    fresh, doubles = pool_items(session)
    assert {p.key for p in doubles} == set(keys[:10]) and len(fresh) == len(keys) - 10
    batch = plan_next_batch(session, strategy="uncertain", size=10, double_share=0.3, seed=0)
    assert sum(1 for *_, d in batch.picks if d) == 3
    session.batches.append(batch)
    with pytest.raises(ValueError, match="not finished"):
        plan_next_batch(session, strategy="random", size=10, double_share=0.2, seed=1)


def test_uncertain_gives_low_confidence_verdicts_more_weight_in_a_session():
    session = example_session(True)
    fresh, _ = pool_items(session)
    pi = stratum_probabilities(fresh, 10, "uncertain")
    for verdict in (True, False):
        same = [(session.judged[p.key].confidence, q) for p, q in zip(fresh, pi)
                if session.judged[p.key].labels["faithful"] is verdict]
        same.sort()
        assert same[0][1] > same[-1][1]  # least confident verdict > most confident one
        confidences = np.array([c for c, _ in same])
        probabilities = np.array([q for _, q in same])
        assert np.corrcoef(confidences, probabilities)[0, 1] < -0.9
