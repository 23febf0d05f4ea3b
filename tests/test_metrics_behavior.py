"""Behaviour detection: a batch of answers searched at once classifies each as one by one does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from groundjudge.metrics.behavior import DEFAULT_PHRASES, BehaviorRules, _fold

EDGES = [
    None, "", "   \n\t", "I DON'T KNOW.", "i  don't\n\tknow", "i\u00a0don't\u3000know",  # case, white space
    "ｉ ｄｏｎ'ｔ ｋｎｏｗ",  # full-width letters: NFKC makes them ASCII
    "Tôi không biết.", "toi khong biet", "TÔI KHÔNG BIẾT", "Tài liệu không đề cập", "ĐỪNG", "không có quyền",
    "I cannot find it, and you are not authorized.",  # two behaviours: permission is checked first
    "I will escalate this.", "The policy grants 20 days.", "know i don't", "i don'tknow",
    "a\ud800 i don't know",  # a lone surrogate: no UTF-8 for it
    "no\x00information", "no information\x00", "🙂 access denied 🙂", "NOT   IN   CONTEXT",
]


def agree(rules: BehaviorRules, answers: list[str | None]) -> None:
    assert rules.detect_all(answers) == [rules.detect(a) for a in answers]


def test_a_batch_of_answers_is_classified_as_answer_by_answer():
    agree(BehaviorRules(), EDGES)
    assert BehaviorRules().detect_all([]) == []
    assert BehaviorRules().detect_all(["I do not know", None, "Yes."]) == ["abstain", "abstain", "answer"]


def test_a_refusal_token_and_phrases_that_are_not_plain_words():
    """Phrases with a regex's own characters, case folding beyond ASCII (ß is ss), an empty
    phrase (found in every answer), no phrases at all, and the refusal token."""
    odd = {"abstain": {"x": ["a.b", "(x)", "c++", "[?]", "back\\slash", "$^|", "STRASSE", "\x00nul"]},
           "escalate": {"x": ["🙂 up", "Ǆ"]}}
    answers = ["a.b", "axb", "(x)", "x", "C++ please", "cc", "[?]", "?", "back\\slash", "$^|", "straße", "STRAẞE",
               "\x00NUL", "nul", "🙂   UP", "ǆ", "ǅ", "REFUSE", " REFUSE ", "refuse", None]
    agree(BehaviorRules(phrases=odd, refusal_token="REFUSE"), answers)
    assert BehaviorRules(phrases=odd).detect_all(["axb", "straße", "ǆ"]) == ["answer", "abstain", "escalate"]
    agree(BehaviorRules(phrases={}), answers)
    agree(BehaviorRules(phrases={"escalate": {"x": [""]}, "abstain": {"x": []}}), answers)
    agree(BehaviorRules(phrases={"abstain": {"x": ["   "]}}), answers)


def test_a_phrase_list_too_large_for_one_pattern_is_searched_phrase_by_phrase():
    many = {"abstain": {"x": [f"phrase number {i} " * 20 for i in range(20_000)] + ["i don't know"]}}
    rules = BehaviorRules(phrases=many)
    agree(rules, ["I don't know", "nothing here", "phrase number 7 " * 20, None])


pieces = st.sampled_from([p for by_locale in DEFAULT_PHRASES.values() for phrases in by_locale.values()
                          for p in phrases] + ["x", " ", "\n", "É", "đ", "Đ", "ß", "'", "\u0301", "ﬁ", "İ"])


@given(st.lists(st.one_of(st.none(), st.lists(pieces, max_size=6).map("".join), st.text(max_size=30)), max_size=12))
def test_any_batch_is_classified_as_answer_by_answer(answers: list[str | None]) -> None:
    agree(BehaviorRules(), answers)
    agree(BehaviorRules(refusal_token="x"), answers)


# An ASCII answer is searched unfolded: its phrases may come in any case, with any run of ASCII
# white space between their words
spaces = st.lists(st.sampled_from([" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f"]), min_size=1, max_size=3)
cases = st.sampled_from([str.lower, str.upper, str.title, str.swapcase])


@st.composite
def ascii_phrase(draw: st.DrawFn) -> str:
    phrase = draw(st.sampled_from([p for by_locale in DEFAULT_PHRASES.values() for phrases in by_locale.values()
                                   for p in phrases if _fold(p).isascii()]))
    words = _fold(phrase).split(" ")
    text = words[0] + "".join("".join(draw(spaces)) + word for word in words[1:])
    return draw(cases)(text)


@given(st.lists(st.lists(st.one_of(ascii_phrase(), st.sampled_from(["x", ".", " ", "\t", "no", "I"])),
                         max_size=4).map("".join), max_size=12))
def test_ascii_answers_with_any_case_and_white_space_are_classified_as_answer_by_answer(answers: list[str]) -> None:
    agree(BehaviorRules(), answers)
