"""An aligned rubric's reading: a monotone claim model, and how claims combine."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from groundjudge.judge.alignment import ClaimModel, combine
from groundjudge.judge.claim_signals import ClaimSignals


def signals(unfound: int = 0, numbers: int = 0, p_yes: float | None = 0.7) -> ClaimSignals:
    return ClaimSignals(p_yes=p_yes, unfound=unfound, unfound_numbers=numbers, unfound_names=0, found_share=1.0,
                        length=5, cited=False)


def test_weights_against_their_signals_sign_are_refused() -> None:
    with pytest.raises(ValidationError, match="unfound_numbers must be <= 0"):
        ClaimModel(kind="logistic", weights={"unfound_numbers": 0.5})
    with pytest.raises(ValidationError, match="p_yes_logit must be >= 0"):
        ClaimModel(kind="logistic", weights={"p_yes_logit": -0.1})
    with pytest.raises(ValidationError, match="unknown claim signals"):
        ClaimModel(kind="logistic", weights={"colour": 1.0})


def test_the_logistic_model_never_rises_with_unfound_numbers_nor_falls_with_p_yes() -> None:
    model = ClaimModel(kind="logistic", intercept=1.0, weights={"unfound_numbers": -2.0, "p_yes_logit": 0.5})
    assert model.support(signals(1, 1)) < model.support(signals(1, 0))
    assert model.support(signals(p_yes=0.9)) > model.support(signals(p_yes=0.2))


def test_the_grounded_model_is_the_base_rule_with_its_term_factor() -> None:
    model = ClaimModel(kind="grounded", term_factor=0.5)
    assert model.support(signals(2, p_yes=0.8)) == pytest.approx(0.2)
    assert model.support(signals(1, p_yes=None)) == pytest.approx(0.5)  # not asked: P(yes) taken as 1
    with pytest.raises(ValidationError, match="term_factor"):
        ClaimModel(kind="grounded")


def test_the_soft_minimum_lies_between_the_minimum_and_the_mean() -> None:
    supports = [0.2, 0.6, 0.9]
    assert combine(supports, "min", 0.0) == 0.2
    soft = combine(supports, "softmin", 0.1)
    assert 0.2 < soft < sum(supports) / 3
    assert combine(supports, "softmin", 1e-4) == pytest.approx(0.2, abs=1e-3)
    assert combine([], "min", 0.0) == 1.0  # nothing to check


def test_a_fitted_cut_point_changes_the_grade_only_in_an_aligned_rubric() -> None:
    from groundjudge.judge.alignment import Aligned, FittedCriterion
    from groundjudge.judge.results import NuggetResult
    from groundjudge.judge.rubric import Criterion
    from groundjudge.judge.scoring import criterion_values

    correct = Criterion(name="correct", kind="ordinal", labels=[0, 1, 2, 3], description="d", metric="correctness",
                        score="nugget_grade", cut_points=[0.25, 0.6, 0.95])
    nuggets = [NuggetResult(text=f"n{i}", stated=i < 2) for i in range(4)]  # half stated
    aligned = Aligned(criterion="faithful", claim_model=ClaimModel(kind="grounded", term_factor=0.7), threshold=0.3,
                      labels_sha256=["0" * 64], fitted_questions=["q"], claim_labels=False, folds=5, seed=0,
                      out_of_fold={}, criteria={"correct": FittedCriterion(cut_points=[0.1, 0.4, 0.8],
                                                                           out_of_fold={})})
    plain = criterion_values([correct], claims=[], nuggets=nuggets, has_expected_answer=True)
    fitted = criterion_values([correct], claims=[], nuggets=nuggets, has_expected_answer=True, aligned=aligned)
    assert plain["correct"].label == 1 and fitted["correct"].label == 2
    with pytest.raises(ValidationError, match="ascend"):
        FittedCriterion(cut_points=[0.5, 0.2, 0.9], out_of_fold={})


def test_a_claim_judged_by_its_sampled_word_alone_keeps_that_word_and_leaves_the_support_unknown() -> None:
    """An endpoint without token probabilities: the fitted reading needs P(yes), so a claim the
    model was asked about keeps the base's verdict from the sampled word, never a support made up
    from its terms, and the answer's verdict follows that word with an unknown confidence."""
    from groundjudge.judge.alignment import Aligned, rescore_claims
    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.judge.rubric import Criterion
    from groundjudge.judge.scoring import criterion_values

    faithful = Criterion(name="faithful", kind="binary", labels=[True, False], description="d",
                         metric="faithfulness", score="claim_support", threshold=0.25)
    aligned = Aligned(criterion="faithful", claim_model=ClaimModel(kind="logistic", intercept=3.0), threshold=0.5,
                      labels_sha256=["0" * 64], fitted_questions=["q"], claim_labels=True, folds=5, seed=0,
                      out_of_fold={})
    said_no = ClaimResult(claim="The fee is waived.", verdict="unsupported", klass="unsupported", unfound_terms=[],
                          confidence=None, model_confidence=None)
    not_asked = ClaimResult(claim="Staff get leave.", verdict="supported", klass="uncited", unfound_terms=[],
                            confidence=1.0, model_confidence=None)
    rescored = rescore_claims(aligned, [said_no, not_asked])
    assert rescored[0] == said_no  # by its word, as the base judged it
    assert rescored[1].confidence is not None and rescored[1].confidence > 0.9  # not asked: the fitted reading
    values = criterion_values([faithful], claims=rescored, nuggets=[], has_expected_answer=False, aligned=aligned)
    assert values["faithful"].label is False and values["faithful"].confidence is None
    said_yes = said_no.replaced(verdict="supported", klass="uncited")
    values = criterion_values([faithful], claims=rescore_claims(aligned, [said_yes, not_asked]), nuggets=[],
                              has_expected_answer=False, aligned=aligned)
    assert values["faithful"].label is True and values["faithful"].confidence is None
