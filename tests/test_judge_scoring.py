"""The confidence of an ordinal grade read from nugget recall: the judge's own probability that
its grade is the one its nugget facts imply (Poisson-binomial over the nuggets' P(stated))."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from groundjudge.judge.results import NuggetResult
from groundjudge.judge.rubric import Criterion
from groundjudge.judge.scoring import criterion_values, grade_confidence

CORRECT = Criterion(name="correct", kind="ordinal", labels=[0, 1, 2, 3], description="d", metric="correctness",
                    score="nugget_grade", cut_points=[0.25, 0.6, 0.95])


def grade(share: float) -> int:
    return sum(1 for cut in (0.25, 0.6, 0.95) if share >= cut)


def enumerated(probabilities: list[float], wanted: int) -> float:
    """P(grade == wanted) by listing every stated/not-stated pattern of the nuggets."""
    total = 0.0
    for pattern in itertools.product([True, False], repeat=len(probabilities)):
        p = float(np.prod([q if s else 1 - q for q, s in zip(probabilities, pattern)]))
        total += p if grade(sum(pattern) / len(pattern)) == wanted else 0.0
    return total


@pytest.mark.parametrize("probabilities", [[0.9], [0.9, 0.2], [0.7, 0.6, 0.99, 0.05], [0.5] * 5, [1.0, 0.0, 0.3]])
def test_the_grade_confidence_is_the_poisson_binomial_mass_of_that_grade(probabilities: list[float]) -> None:
    masses = [grade_confidence(CORRECT, probabilities, g) for g in range(4)]
    assert masses == pytest.approx([enumerated(probabilities, g) for g in range(4)], abs=1e-12)
    assert sum(masses) == pytest.approx(1.0)


def nuggets(*confidences: float | None) -> list[NuggetResult]:
    return [NuggetResult(text=f"n{i}", stated=c is not None and c >= 0.5, confidence=c)
            for i, c in enumerate(confidences)]


def test_the_criterion_carries_the_confidence_of_the_grade_it_gives() -> None:
    value = criterion_values([CORRECT], claims=[], nuggets=nuggets(0.9, 0.8, 0.3, 0.95), has_expected_answer=True)
    c = value["correct"]
    assert c.label == 2 and c.value == 2.0  # 3 of 4 stated: share 0.75
    assert c.confidence == pytest.approx(enumerated([0.9, 0.8, 0.3, 0.95], 2))
    # a nugget answered without token probabilities: the grade stands, its confidence is unknown
    value = criterion_values([CORRECT], claims=[], nuggets=nuggets(0.9, None), has_expected_answer=True)
    assert value["correct"].label is not None and value["correct"].confidence is None
    assert criterion_values([CORRECT], claims=[], nuggets=[], has_expected_answer=True)["correct"].confidence is None


def test_the_grade_confidence_is_calibrated_when_the_nugget_probabilities_are() -> None:
    """Nuggets stated with exactly their judged probability: among grades given with confidence
    around c, the grade is right about c of the time (what a reliability table would show)."""
    rng = np.random.default_rng(7)
    conf, right = [], []
    for _ in range(6000):
        p = rng.beta(0.6, 0.6, size=int(rng.integers(1, 6)))
        said = grade(float(np.mean(p >= 0.5)))
        truth = grade(float(np.mean(rng.uniform(size=p.size) < p)))
        conf.append(grade_confidence(CORRECT, p.tolist(), said))
        right.append(said == truth)
    conf_a, right_a = np.array(conf), np.array(right)
    for low in (0.3, 0.5, 0.7, 0.9):
        band = (conf_a >= low) & (conf_a < low + 0.1)
        assert band.sum() > 100
        assert right_a[band].mean() == pytest.approx(conf_a[band].mean(), abs=0.05)


def test_centred_puts_the_rubric_threshold_at_one_half_and_keeps_the_order() -> None:
    from groundjudge.judge.scoring import centred

    assert centred(0.25, 0.25) == 0.5 and centred(0.0, 0.25) == 0.0 and centred(1.0, 0.25) == 1.0
    assert centred(0.1, 0.25) == pytest.approx(0.2) and centred(0.625, 0.25) == pytest.approx(0.75)
    assert centred(0.7, 0.5) == 0.7  # a 0.5 threshold changes nothing (claim_check v1)
    grid = [i / 100 for i in range(101)]
    assert [centred(p, 0.3) for p in grid] == sorted(centred(p, 0.3) for p in grid)
    assert all((centred(p, 0.3) >= 0.5) == (p >= 0.3) for p in grid)


def test_unchecked_claims_count_in_no_share_nor_mean_and_leave_the_deciding_label() -> None:
    from groundjudge.judge.claim_result import ClaimResult

    faithful = Criterion(name="faithful", kind="binary", labels=[True, False], description="d",
                         metric="faithfulness", score="claim_support", threshold=0.25)
    share = Criterion(name="supported_share", kind="binary", labels=[True, False], description="d",
                      metric="claim_share", score="claim_share")
    claims = [ClaimResult(claim="a", verdict="supported", klass="uncited", confidence=1.0),
              ClaimResult(claim="b", verdict="unchecked", klass="unchecked"),
              ClaimResult(claim="c", verdict="unsupported", klass="unsupported", confidence=0.2)]
    values = criterion_values([faithful, share], claims=claims, has_expected_answer=False)
    assert values["faithful"].label is False and values["faithful"].value == pytest.approx(0.6)
    assert values["faithful"].confidence == pytest.approx(0.2 / 0.5)
    assert values["supported_share"].value == pytest.approx(0.5)  # one of the two checked claims


def test_criterion_values_of_equal_parts_are_one_object_and_equal_to_a_made_one() -> None:
    from groundjudge.judge.results import CriterionValue

    for parts in [(True, 1.0, None), (1, 1.0, None), (False, 0.5, 0.25), (None, None, None), (2, 2.0, None)]:
        shared = CriterionValue.shared(*parts)
        assert shared is CriterionValue.shared(*parts)
        made = CriterionValue(label=parts[0], value=parts[1], confidence=parts[2])
        assert shared == made and shared.model_dump() == made.model_dump()
        assert made.held() is shared  # an equal value made elsewhere is replaced by the held one
    # a label True and a label 1 are equal in Python but not the same grade: never one object
    assert CriterionValue.shared(True, 1.0).label is True and CriterionValue.shared(1, 1.0).label == 1
    assert type(CriterionValue.shared(1, 1.0).label) is int


def test_replies_with_equal_values_keys_have_equal_criterion_values() -> None:
    """The cached pass works a batch's criterion values out once per ``values_key``: for varied
    claims and reply fields, equal keys give equal values (or the same error), a field's type
    is part of its key (``True == 1``, yet only ``True`` is on a binary scale), and claims
    with a probability or fields that are not plain text, numbers or truth values get no key."""
    import random

    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.judge.scoring import values_key
    from groundjudge.judge.verdict import VerdictError

    criteria = [
        Criterion(name="faithful", kind="binary", labels=[True, False], description="d", metric="faithfulness",
                  score="claim_share"),
        Criterion(name="cited", kind="binary", labels=[True, False], description="d", metric="citations",
                  score="cited_claim_share"),
        Criterion(name="support", kind="binary", labels=[True, False], description="d", metric="support",
                  score="claim_support"),
        Criterion(name="cited_support", kind="binary", labels=[True, False], description="d", metric="cited_sup",
                  score="cited_claim_support"),
        Criterion(name="correct", kind="ordinal", labels=[0, 1, 2, 3], description="d", metric="correctness",
                  score="field", field="correctness", needs_expected_answer=True),
        Criterion(name="concise", kind="binary", labels=[True, False], description="d", metric="concise",
                  score="field", field="concise"),
    ]
    rng = random.Random(5)
    verdicts = ("supported", "partially_supported", "unsupported", "contradicted", "unchecked")
    classes = ("cited_support", "misattributed", "uncited", "partial", "unsupported", "contradicted", "unchecked")
    field_values: list[object] = [True, False, 0, 1, 2, 3, 7, "complete", "wrong", "yes", None, 1.0]

    def outcome(claims: list[ClaimResult], fields: dict[str, object], expected: bool) -> object:
        try:
            return criterion_values(criteria, claims=claims, fields=fields, has_expected_answer=expected)
        except VerdictError as exc:
            return ("error", str(exc))

    seen: dict[tuple[object, ...], object] = {}
    for _ in range(3000):
        claims = [ClaimResult(claim=f"c{n}", cited=("a#1",) * rng.randrange(2), verdict=rng.choice(verdicts),
                              support=("a#1",) * rng.randrange(2), klass=rng.choice(classes))
                  for n in range(rng.randrange(4))]
        fields = {name: rng.choice(field_values) for name in ("correctness", "concise") if rng.random() < 0.8}
        expected = rng.random() < 0.7
        key = values_key(claims, fields=fields, has_expected_answer=expected)
        if any(type(v) is float for v in fields.values()):
            assert key is None
            continue
        assert key is not None
        assert seen.setdefault(key, outcome(claims, fields, expected)) == outcome(claims, fields, expected)
    assert len(seen) > 100
    one = [ClaimResult(claim="c", verdict="supported", klass="uncited")]
    assert (values_key(one, fields={"concise": True}, has_expected_answer=True)
            != values_key(one, fields={"concise": 1}, has_expected_answer=True))
    assert values_key([ClaimResult(claim="c", verdict="supported", klass="uncited", confidence=0.9)],
                      has_expected_answer=True) is None
    assert values_key(one, fields={"extra": [1, 2]}, has_expected_answer=True) is None
