"""Calibration: agreement statistics, records, the trust rule and bias-corrected rates."""

from __future__ import annotations

import hashlib
import math
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from groundjudge.calibrate.agreement import agreement, bootstrap_ci, bootstrap_kappas, kappa, labels_for_width
from groundjudge.calibrate.evidence import deciding_record
from groundjudge.calibrate.ppi import ppi_mean
from groundjudge.calibrate.record import build_record, find_records
from groundjudge.calibrate.trust import TrustRules, trust_status
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.errors import InputError
from groundjudge.judge.results import CriterionInfo

CRITERIA = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness"),
            CriterionInfo(name="correct", kind="ordinal", labels=[0, 1, 2, 3], metric="correctness"),
            CriterionInfo(name="citations_supported", kind="binary", labels=[True, False], metric="citation_support")]

GRADES = [0, 1, 2, 3]
ROOT = Path(__file__).resolve().parent.parent


def test_kappa_weighted_kappa_and_confusion_equal_sklearn():
    rng = random.Random(3)
    a = [rng.choice(GRADES) for _ in range(80)]
    b = [x if rng.random() < 0.7 else rng.choice(GRADES) for x in a]
    ag = agreement(a, b, [str(i) for i in range(80)], GRADES, ordinal=True, reps=200)
    assert ag.kappa == pytest.approx(cohen_kappa_score(a, b, labels=GRADES, weights="quadratic"), abs=1e-12)
    assert ag.kappa_linear == pytest.approx(cohen_kappa_score(a, b, labels=GRADES, weights="linear"), abs=1e-12)
    assert ag.kappa_unweighted == pytest.approx(cohen_kappa_score(a, b, labels=GRADES), abs=1e-12)
    assert ag.confusion == confusion_matrix(a, b, labels=GRADES).tolist()
    assert ag.observed == pytest.approx(sum(x == y for x, y in zip(a, b)) / 80)
    assert ag.disagreements == [str(i) for i, (x, y) in enumerate(zip(a, b)) if x != y]


def sklearn_kappa(a, b, labels, weights):
    """scikit-learn's value, NaN where it is undefined (it warns then)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a, b, labels=labels, weights=weights))


def random_pairs(rng: random.Random, labels: list, n: int) -> tuple[list, list]:
    """Two raters who agree often, each on a random subset of the labels (so some are degenerate)."""
    used_a = rng.sample(labels, rng.randint(1, len(labels)))
    used_b = rng.sample(labels, rng.randint(1, len(labels)))
    a = [rng.choice(used_a) for _ in range(n)]
    b = [x if x in used_b and rng.random() < 0.6 else rng.choice(used_b) for x in a]
    return a, b


DEGENERATE = [
    ([True] * 5, [True] * 5),  # one label on both sides: undefined
    ([3, 3, 3], [3, 3, 3]),
    ([True], [False]),  # one item
    ([0], [0]),
    ([True, True, True], [True, False, True]),  # one rater uses a single label: kappa 0
    ([0, 1, 2, 3], [0, 1, 2, 3]),  # perfect agreement
    ([0, 3, 0, 3], [3, 0, 3, 0]),  # perfect disagreement
    ([True, False], [False, True]),
    ([2, 2, 1], [1, 1, 2]),  # labels 0 and 3 never used
]


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_numpy_kappa_equals_sklearn_on_many_sequences(weights):
    rng = random.Random(2024)
    cases = list(DEGENERATE)
    for _ in range(400):
        labels = rng.choice([[True, False], GRADES])
        cases.append(random_pairs(rng, labels, rng.choice([1, 2, 3, 5, 8, 13, 40, 120])))
    undefined = 0
    for a, b in cases:
        labels = [True, False] if isinstance(a[0], bool) else GRADES
        ours, theirs = kappa(a, b, labels, weights), sklearn_kappa(a, b, labels, weights)
        if math.isnan(theirs):
            assert ours is None, (a, b)
            undefined += 1
        else:
            assert ours is not None and abs(ours - theirs) <= 1e-12, (a, b, ours, theirs)
    assert 5 <= undefined < len(cases) / 2  # both kinds were exercised


@pytest.mark.parametrize(("labels", "weights"), [([True, False], None), (GRADES, None), (GRADES, "linear"),
                                                 (GRADES, "quadratic")])
def test_vectorised_bootstrap_equals_sklearn_on_each_resample(labels, weights, monkeypatch):
    """The resamples are numpy's seeded draws, one per rep, and each kappa is scikit-learn's."""
    rng = random.Random(7)
    a, b = random_pairs(rng, labels, 12)  # small: some resamples are undefined
    ours = bootstrap_kappas(a, b, labels, weights, seed=3, reps=300)
    monkeypatch.setattr("groundjudge.calibrate.agreement._CELLS_PER_BLOCK", 12 * 7)  # blocks of 7 resamples
    assert np.array_equal(bootstrap_kappas(a, b, labels, weights, seed=3, reps=300), ours, equal_nan=True)
    draws = np.random.default_rng(3)
    xa, xb = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    expected = []
    for _ in range(300):
        idx = draws.integers(0, len(a), len(a))
        expected.append(sklearn_kappa(xa[idx].tolist(), xb[idx].tolist(), labels, weights))
    expected = np.array(expected)
    assert np.array_equal(np.isnan(ours), np.isnan(expected))
    assert np.allclose(ours[~np.isnan(ours)], expected[~np.isnan(expected)], rtol=0, atol=1e-12)


def test_undefined_resamples_are_left_out_and_an_all_undefined_bootstrap_has_no_interval():
    # One disagreeing item in 20: about 1/e of the resamples miss it and hold a single label.
    a, b = [True] * 19 + [False], [True] * 20
    values = bootstrap_kappas(a, b, [True, False], None, seed=0, reps=400)
    undefined = np.isnan(values)
    assert 100 < undefined.sum() < 200
    defined = values[~undefined]
    assert bootstrap_ci(a, b, [True, False], None, seed=0, reps=400) == tuple(np.percentile(defined, [2.5, 97.5]))
    assert np.isnan(bootstrap_kappas([True] * 20, [True] * 20, [True, False], None, reps=50)).all()
    assert bootstrap_ci([True] * 20, [True] * 20, [True, False], None, reps=50) == (None, None)


def test_bootstrap_is_reproducible_with_a_seed_and_brackets_kappa():
    rng = random.Random(5)
    a = [rng.random() < 0.6 for _ in range(60)]
    b = [x if rng.random() < 0.85 else not x for x in a]
    first = bootstrap_ci(a, b, [True, False], None, seed=11, reps=500)
    assert first == bootstrap_ci(a, b, [True, False], None, seed=11, reps=500)
    assert first != bootstrap_ci(a, b, [True, False], None, seed=12, reps=500)
    k = cohen_kappa_score(a, b, labels=[True, False])
    assert first[0] < k < first[1]


def test_undefined_kappa_is_none_and_skew_is_warned():
    ag = agreement([True] * 10, [True] * 10, [str(i) for i in range(10)], [True, False], ordinal=False, reps=50)
    assert ag.kappa is None and ag.observed == 1.0
    assert any("skewed" in w for w in ag.warnings)


def test_labels_for_width():
    assert labels_for_width(50, 0.4, 0.8, 0.2) == 150  # width halves with 4x the items
    assert labels_for_width(50, 0.5, 0.6, 0.2) == 0
    assert labels_for_width(50, None, None, 0.2) is None


pairs = st.lists(st.tuples(st.sampled_from(GRADES), st.sampled_from(GRADES)), min_size=2, max_size=40)


@settings(max_examples=60, deadline=None)
@given(pairs)
def test_kappa_is_symmetric_in_its_two_raters(data):
    a, b = [x for x, _ in data], [y for _, y in data]
    ids = [str(i) for i in range(len(data))]
    one = agreement(a, b, ids, GRADES, ordinal=True, reps=20)
    two = agreement(b, a, ids, GRADES, ordinal=True, reps=20)
    assert one.kappa == pytest.approx(two.kappa) if one.kappa is not None else two.kappa is None
    assert one.observed == two.observed


@settings(max_examples=60, deadline=None)
@given(pairs, st.randoms(use_true_random=False))
def test_kappa_is_invariant_to_item_order(data, rnd):
    shuffled = list(data)
    rnd.shuffle(shuffled)
    ids = [str(i) for i in range(len(data))]

    def k(rows):
        return agreement([x for x, _ in rows], [y for _, y in rows], ids, GRADES, ordinal=True, reps=20).kappa

    assert k(data) == pytest.approx(k(shuffled)) if k(data) is not None else k(shuffled) is None


# --- records and the trust rule --------------------------------------------------------------

PROV = {"rubric": {"id": "grounded_answer", "version": 1, "hash": "a" * 64}, "model": "judge-1",
        "decoding": {"temperature": 0.0, "seed": 1}}


def make_items(n, flip_every=None):
    judge, human = {}, {}
    for i in range(n):
        truth = i % 3 != 0
        judged = (not truth) if flip_every and i % flip_every == 0 else truth
        judge[(f"q{i}", "c")] = ItemLabels({"faithful": judged, "correct": 3 if judged else 0,
                                            "citations_supported": judged})
        human[(f"q{i}", "c")] = ItemLabels({"faithful": truth, "correct": 3 if truth else 0,
                                            "citations_supported": truth})
    return judge, human


def record_for(n, flip_every=None, prov=PROV):
    judge, human = make_items(n, flip_every)
    return build_record(judge, prov, {"alice": human}, CRITERIA, reps=300)


RULES = TrustRules(min_items=50, min_kappa=0.6, min_kappa_lower=0.4)


def test_trusted_with_enough_agreeing_items():
    status = trust_status("faithful", PROV, [record_for(90, flip_every=15)], RULES)
    assert status.trusted, status.reason


@pytest.mark.parametrize(("records", "reason"), [
    ([], "no calibration record"),
    ([record_for(30)], "30 labelled items < min_items 50"),
    ([record_for(90, flip_every=2)], "kappa"),
    ([record_for(90, prov={**PROV, "model": "judge-2"})], "stale: model: judge-2 in the record, judge-1 in this run"),
    ([record_for(90, prov={**PROV, "rubric": {**PROV["rubric"], "hash": "b" * 64}})],
     "stale: rubric hash: bbbbbbbbbbbb in the record, aaaaaaaaaaaa in this run"),
])
def test_untrusted_cases(records, reason):
    status = trust_status("faithful", PROV, records, RULES)
    assert not status.trusted
    assert reason in status.reason


def test_untrusted_when_the_ci_lower_bound_is_too_low():
    # kappa above 0.6 but on few items: the interval reaches below 0.4.
    status = trust_status("faithful", PROV, [record_for(50, flip_every=9)],
                          TrustRules(min_items=10, min_kappa=0.6, min_kappa_lower=0.6))
    assert not status.trusted and "lower bound" in status.reason


def test_inter_rater_agreement_is_reported_beside_judge_agreement():
    judge, human = make_items(60, flip_every=10)
    second, _ = make_items(60, flip_every=20)  # bob disagrees with alice on every 20th item
    record = build_record(judge, PROV, {"alice": human, "bob": second}, CRITERIA, reps=100)
    faithful = record["criteria"]["faithful"]
    assert faithful["judge_vs_human"]["n"] == 60 and record["primary_rater"] == "alice"
    assert set(faithful["judge_vs_each_rater"]) == {"alice", "bob"}
    assert faithful["inter_rater"]["alice~bob"]["n"] == 60
    # The primary rater's figures are computed once and reported under both names.
    assert faithful["judge_vs_human"] == faithful["judge_vs_each_rater"]["alice"]
    assert faithful["judge_vs_human"] != faithful["judge_vs_each_rater"]["bob"]



# --- several records for one judge: which decides, and what a stale one differs in -----------

def written(record: dict, name: str, created: str) -> dict:
    """A record as find_records reads it back from ``records/<name>.json``."""
    return {**record, "_path": f"records/{name}.json", "created": created}


def test_per_criterion_the_record_with_most_items_then_raters_then_newest_decides():
    judge, human = make_items(90, flip_every=15)
    few_judge, few_human = make_items(30)
    big = written(build_record(judge, PROV, {"alice": human}, CRITERIA, reps=50), "big", "2026-01-01T00:00:00+00:00")
    # a later record from 30 items on which the judge and one person agree exactly (kappa 1.0)
    small = written(build_record(few_judge, PROV, {"sam": few_human}, CRITERIA, reps=50), "small",
                    "2026-06-01T00:00:00+00:00")
    lenient = TrustRules(min_items=20, min_kappa=0.6, min_kappa_lower=0.4)
    assert trust_status("faithful", PROV, [small], lenient).trusted  # alone, it would be trusted
    status = trust_status("faithful", PROV, [big, small], lenient)
    assert status.record == "records/big.json" and status.n == 90 and status.raters == {"alice": 90}
    assert status.labels_hash == big["evidence"]["labels_hash"] != small["evidence"]["labels_hash"]
    assert status.reason.endswith(f"decided by big.json (labels {big['evidence']['labels_hash'][:12]}, n=90, "
                                  "raters alice 90)")
    # as many items: more raters decide, whatever the dates; then the newest
    two = written(build_record(judge, PROV, {"alice": human, "bob": human}, CRITERIA, reps=50), "two",
                  "2025-01-01T00:00:00+00:00")
    assert deciding_record("faithful", [big, small, two]) is two
    newer = written(big, "newer", "2026-02-01T00:00:00+00:00")
    assert deciding_record("faithful", [big, newer, small]) is newer
    # per criterion: a record without a criterion's agreement does not decide it
    no_faithful = written({**newer, "criteria": {k: v for k, v in newer["criteria"].items() if k != "faithful"}},
                          "partial", "2026-03-01T00:00:00+00:00")
    assert deciding_record("faithful", [big, no_faithful]) is big
    assert deciding_record("correct", [big, no_faithful]) is no_faithful


def test_the_records_evidence_names_labels_verdicts_and_rater(tmp_path):
    judge, human = make_items(40)
    labels = tmp_path / "alice.jsonl"
    labels.write_text("{}\n")
    record = build_record(judge, PROV, {"alice": human}, CRITERIA, label_files=[labels], reps=50)
    evidence = record["evidence"]
    assert evidence["label_files"] == [{"path": str(labels), "sha256": hashlib.sha256(b"{}\n").hexdigest()}]
    assert evidence["primary_rater"] == "alice" and len(evidence["labels_hash"]) == 64
    # the labels hash is the labels as read: another order gives the same hash, another label another one
    reordered = dict(reversed(list(human.items())))
    assert build_record(judge, PROV, {"alice": reordered}, CRITERIA, reps=50)["evidence"]["labels_hash"] == \
        evidence["labels_hash"]
    changed = {**human, ("q1", "c"): ItemLabels({**human[("q1", "c")].labels, "faithful": False})}
    assert build_record(judge, PROV, {"alice": changed}, CRITERIA, reps=50)["evidence"]["labels_hash"] != \
        evidence["labels_hash"]


def test_a_legacy_record_without_evidence_is_read_with_its_labels_unrecorded():
    legacy = written(record_for(90, flip_every=15), "legacy", "2025-01-01T00:00:00+00:00")
    del legacy["evidence"]
    legacy["schema_version"] = 1
    status = trust_status("faithful", PROV, [legacy], RULES)
    assert status.trusted and status.labels_hash is None
    assert "decided by legacy.json (labels unrecorded (legacy record), n=90, raters alice 90)" in status.reason
    # a new record of the same evidence size and raters is newer, so it decides
    new = written(record_for(90, flip_every=15), "new", "2026-01-01T00:00:00+00:00")
    assert trust_status("faithful", PROV, [legacy, new], RULES).record == "records/new.json"


def test_the_bundled_legacy_records_are_read():
    records = find_records(ROOT / "calibration" / "records")
    legacy = [r for r in records if "evidence" not in r]
    assert legacy  # written before records named their labels: kept as they are, read as legacy
    for record in legacy:
        status = trust_status("faithful", record["judge"], records, RULES)
        assert status.record == record["_path"] and status.labels_hash is None
        assert f"decided by {Path(record['_path']).name} (labels unrecorded (legacy record), n=" in status.reason


def test_an_unreadable_record_is_an_input_error_not_a_silent_skip(tmp_path):
    (tmp_path / "cut.json").write_text('{"kind": "groundjudge.calibration", "crit')
    with pytest.raises(InputError, match="cut.json.*unreadable calibration record"):
        find_records(tmp_path)


def test_a_stale_message_names_each_difference_of_the_closest_record():
    run = {"rubric": {"id": "grounded_answer", "version": 2, "hash": "a" * 64}, "model": "judge-1",
           "decoding": {"temperature": 0.0, "seed": 1, "max_tokens": 512}}
    far = written(record_for(90, prov={**run, "model": "judge-0", "decoding": {"temperature": 0.2}}), "far",
                  "2026-05-01T00:00:00+00:00")
    close = written(record_for(60, prov={**run, "decoding": {"temperature": 0.0, "seed": 7, "top_logprobs": 5,
                                                             "max_tokens": 512}}), "close", "2025-01-01T00:00:00+00:00")
    old = written(record_for(60, prov={**run, "rubric": {**run["rubric"], "version": 1, "hash": "b" * 64}}), "old",
                  "2025-01-01T00:00:00+00:00")
    status = trust_status("faithful", run, [far, close], RULES)
    assert not status.trusted and status.record is None
    assert status.reason == ("untrusted: the calibration record is stale: decoding seed: 7 in the record, 1 in this "
                             "run; decoding top_logprobs: 5 in the record, not set in this run (closest record "
                             "close.json)")
    assert trust_status("faithful", run, [far, old], RULES).reason == (
        "untrusted: the calibration record is stale: rubric version: 1 in the record, 2 in this run; rubric hash: "
        "bbbbbbbbbbbb in the record, aaaaaaaaaaaa in this run (closest record old.json)")
    assert trust_status("faithful", run, [far], RULES).reason == (
        "untrusted: the calibration record is stale: model: judge-0 in the record, judge-1 in this run; decoding "
        "max_tokens: not set in the record, 512 in this run; decoding seed: not set in the record, 1 in this run; "
        "decoding temperature: 0.2 in the record, 0.0 in this run (closest record far.json)")

# --- prediction-powered inference ------------------------------------------------------------

def test_ppi_interval_covers_the_true_rate_while_the_raw_judge_rate_is_biased():
    """Simulation: the true rate is 0.7; the judge over-says 'faithful' (bias +0.15)."""
    rng = random.Random(42)
    true_rate, covered, raw_errors, trials = 0.7, 0, [], 400
    for _ in range(trials):
        truth = [rng.random() < true_rate for _ in range(1000)]
        judge = [t or rng.random() < 0.5 for t in truth]  # says True for half of the False ones
        labelled = rng.sample(range(1000), 100)
        est = ppi_mean([float(j) for j in judge], [float(judge[i]) for i in labelled],
                       [float(truth[i]) for i in labelled])
        covered += est["ci_low"] <= true_rate <= est["ci_high"]
        raw_errors.append(est["raw"] - true_rate)
    assert 0.91 <= covered / trials <= 0.99  # nominal 95%
    assert sum(raw_errors) / trials > 0.1  # the raw judge rate is biased upwards


def test_bias_corrected_rates_of_a_run_per_config_and_criterion():
    """The judge on every judged case of the config, the rater with most labels on the labelled
    ones: a rate for a binary criterion, a mean grade for an ordinal one."""
    from groundjudge.calibrate.ppi import bias_corrected_rates
    from tests.test_calibrate_cascade import FIRST_RUN, HUMANS

    other = {("q0", "cand"): ItemLabels({"faithful": False, "correct": 0})}
    rates = bias_corrected_rates(FIRST_RUN, {"sam": HUMANS, "kim": other})
    assert rates["primary_rater"] == "sam" and set(rates) == {"primary_rater", "cand"}
    faithful, correct = rates["cand"]["faithful_rate"], rates["cand"]["correct_mean"]
    # ten judged cases (q10 is a judge_error), nine said faithful; sam agrees on q0 and q8
    assert (faithful["n_all"], faithful["n_labelled"]) == (10, 2)
    assert faithful["raw"] == pytest.approx(0.9) and faithful["corrected"] == pytest.approx(0.9)
    # the judge grades every case 3, sam grades q8 a 2: the mean is corrected down by half a grade
    assert correct["raw"] == pytest.approx(3.0) and correct["corrected"] == pytest.approx(2.5)
    assert correct["ci_low"] < 2.5 < correct["ci_high"]


def test_claim_agreement_matches_an_unchecked_claim_but_does_not_score_it() -> None:
    from groundjudge.calibrate.record import claim_agreement
    from groundjudge.calibrate.verdicts import ItemLabels

    judge = {("q1", "cand"): ItemLabels({}, claims=[("Staff get 18 days.", True), ("Part-timers get 30 days.", None),
                                                    ("A bonus is paid quarterly.", False)])}
    human = {("q1", "cand"): ItemLabels({}, claims=[("Staff get 18 days.", True), ("Part-timers get 30 days.", False),
                                                    ("A bonus is paid quarterly.", True)])}
    # the unchecked claim is matched (so no other claim takes its human label) but not counted
    assert claim_agreement(judge, human) == {"matched_claims": 2, "agreement": 0.5}
