"""A claim's signals: counted from what its judgement records, the same at fit and run time."""

from __future__ import annotations

import math

import pytest

from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.claim_signals import FEATURES, claim_signals, is_name


def claim(text: str, unfound: list[str] | None, p_yes: float | None = None, cited: list[str] | None = None) -> ClaimResult:
    return ClaimResult(claim=text, cited=cited or [], verdict="supported", klass="uncited", unfound_terms=unfound,
                       model_confidence=p_yes)


def test_numbers_names_and_the_found_share_come_from_the_unfound_terms() -> None:
    s = claim_signals(claim("The fee rose to 45 dollars in Paris last year.", ["45", "dollars", "paris"], 0.8))
    assert (s.unfound, s.unfound_numbers, s.unfound_names) == (3, 1, 1)
    # terms: fee rose 45 dollars paris last year -> 7 distinct, 4 found
    assert s.length == 7 and math.isclose(s.found_share, 4 / 7)
    assert s.p_yes == 0.8 and not s.cited


def test_a_capital_where_a_sentence_or_list_item_starts_is_no_name() -> None:
    assert not is_name("members", "Members meet weekly.")
    assert not is_name("members", "It is open. Members meet weekly.")
    assert not is_name("members", "Rules:\n- Members meet weekly.")
    assert is_name("lyon", "The office in Lyon is open.")
    assert is_name("lyon", "Lyon has an office; the office in Lyon is open.")


def test_not_asked_is_its_own_indicator_and_p_yes_enters_as_its_logit() -> None:
    asked = claim_signals(claim("Staff get 18 days.", ["18"], 0.9)).features()
    not_asked = claim_signals(claim("Staff get 18 days.", ["18"], None)).features()
    i, j = FEATURES.index("asked"), FEATURES.index("p_yes_logit")
    assert (asked[i], not_asked[i]) == (1.0, 0.0)
    assert math.isclose(asked[j], math.log(0.9 / 0.1)) and not_asked[j] == 0.0
    assert claim_signals(claim("Staff get 18 days.", [], 1.0)).features()[j] < 10  # clipped, never infinite


def test_a_claim_judged_without_grounding_has_no_signals() -> None:
    with pytest.raises(ValueError, match="grounding"):
        claim_signals(claim("Staff get 18 days.", None))
