"""The labelling page shows the claims the claim_check judge checks (judge.claims.split_claims)."""

from __future__ import annotations

from groundjudge.label.claims import split_answer


def test_sentences_carry_their_citations_without_the_markers():
    claims = split_answer("Staff get 15 days [c#1]. Parents get 16 weeks [c#2, c#3]! Is it paid? Yes.\nA [note].",
                          ["c#1", "c#2", "c#3"])
    assert claims == [
        {"text": "Staff get 15 days.", "citations": ["c#1"]},
        {"text": "Parents get 16 weeks!", "citations": ["c#2", "c#3"]},
        {"text": "Is it paid?", "citations": []},
        {"text": "Yes.", "citations": []},
        {"text": "A [note].", "citations": []},  # not a context id: kept as text
    ]


def test_empty_and_hostile_answers():
    assert split_answer("", []) == [] and split_answer("   \n ", ["x"]) == []
    text = "<script>alert(1)</script> is what it says [doc#1]. Hope this helps!"
    assert split_answer(text, ["doc#1"]) == [{"text": "<script>alert(1)</script> is what it says.",
                                              "citations": ["doc#1"]}]  # the closing has nothing to check
