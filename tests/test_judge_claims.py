"""The deterministic claim splitter (judge/claims.py): a table of hard cases and properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundjudge.judge.claims import RULES, Sentence, _find_markers, split_claims, split_nuggets

C = None  # "check": a sentence with something to check

# (answer, [(text, citations, rule)])
CASES = [
    # citations: one id, several ids, adjacent markers, full-width brackets, plain numbers
    ("With 4 completed years a full-time employee gets 18 days per year [hr-leave-v3#2].",
     [("With 4 completed years a full-time employee gets 18 days per year.", ("hr-leave-v3#2",), C)]),
    ("The P60 summarises pay [dev-12219#p1, dev-12219#p2]. It is due by 31 May [dev-12219#p1][dev-12219#p3].",
     [("The P60 summarises pay.", ("dev-12219#p1", "dev-12219#p2"), C),
      ("It is due by 31 May.", ("dev-12219#p1", "dev-12219#p3"), C)]),
    ("Nhân viên được 15 ngày phép【hn-office-vi#2】. Lương tháng 13 trả vào tháng 12【hn-office-vi#3】.",
     [("Nhân viên được 15 ngày phép.", ("hn-office-vi#2",), C),
      ("Lương tháng 13 trả vào tháng 12.", ("hn-office-vi#3",), C)]),
    ("Refunds take 5 days [1][2]. Duplicates are merged [2, 3]; see [2].",
     [("Refunds take 5 days.", ("1", "2"), C), ("Duplicates are merged; see.", ("2", "3"), C)]),
    # a marker after the final period belongs to the sentence before it
    ("They get 15 days. [hn-office-vi#2] The global table does not apply. [hr-leave-v3#1]",
     [("They get 15 days.", ("hn-office-vi#2",), C), ("The global table does not apply.", ("hr-leave-v3#1",), C)]),
    ("Tokens expire after 60 minutes.[api-v3#1]Use the refresh token.",
     [("Tokens expire after 60 minutes.", ("api-v3#1",), C), ("Use the refresh token.", (), C)]),
    ("Access is granted in 2 days.\n[partner-faq#1]",
     [("Access is granted in 2 days.", ("partner-faq#1",), C)]),
    ("[a-1] [b-2]", [("", ("a-1", "b-2"), "empty_after_markers")]),
    # brackets that are not citations
    ("He wrote [sic] the wrong date. See [the policy](https://x.example/p.html) for details [p#1].",
     [("He wrote [sic] the wrong date.", (), C), ("See the policy for details.", ("p#1",), C)]),
    # abbreviations
    ("Dr. Smith and Mr. Jones met in the U.S. in 2019. They agreed.",
     [("Dr. Smith and Mr. Jones met in the U.S. in 2019.", (), C), ("They agreed.", (), C)]),
    ("Use a mild cleaner, e.g. vinegar, i.e. a weak acid. Rinse well.",
     [("Use a mild cleaner, e.g. vinegar, i.e. a weak acid.", (), C), ("Rinse well.", (), C)]),
    ("Cats vs. Dogs is a study. Call ext. 4357 or see No. 5 and Fig. 2 in Vol. 3 of the report.",
     [("Cats vs. Dogs is a study.", (), C), ("Call ext. 4357 or see No. 5 and Fig. 2 in Vol. 3 of the report.", (), C)]),
    ("Add salt, pepper, etc. The dish is then baked. Stores open at 9 a.m. The queue forms early.",
     [("Add salt, pepper, etc.", (), C), ("The dish is then baked.", (), C), ("Stores open at 9 a.m.", (), C),
      ("The queue forms early.", (), C)]),
    ("No. Unused leave is not paid out [hr-leave-v3#3].",
     [("No. Unused leave is not paid out.", ("hr-leave-v3#3",), C)]),
    ("The book is by J. K. Rowling. It sold well.",
     [("The book is by J. K. Rowling.", (), C), ("It sold well.", (), C)]),
    # decimals, thousands, versions
    ("The rate is 3.5% on $1,000.25 balances. It rose by 0.25 points.",
     [("The rate is 3.5% on $1,000.25 balances.", (), C), ("It rose by 0.25 points.", (), C)]),
    ("Install v1.2.3 with Python 3.11. Version 2.0 is not supported.",
     [("Install v1.2.3 with Python 3.11.", (), C), ("Version 2.0 is not supported.", (), C)]),
    # ellipses and quotes
    ("The steps vary... but the result is the same. Wait… The oven must be hot.",
     [("The steps vary... but the result is the same.", (), C), ("Wait…", (), C), ("The oven must be hot.", (), C)]),
    ('He said "stop." Then he left. She asked "why?" and stayed.',
     [('He said "stop."', (), C), ("Then he left.", (), C), ('She asked "why?" and stayed.', (), C)]),
    ("Is it free? Yes, for students! Others pay $5.",
     [("Is it free?", (), C), ("Yes, for students!", (), C), ("Others pay $5.", (), C)]),
    # lists, lead-ins, headings
    (("Based on the provided passages, here is how to make ribs:\n\n1. Heat the grill.\n2) Brush the ribs. "
     "Cook 5 minutes.\n- Serve hot [r#1]\n* Enjoy with rice"),
     [("Based on the provided passages, here is how to make ribs:", (), "lead_in"), ("Heat the grill.", (), C),
      ("Brush the ribs.", (), C), ("Cook 5 minutes.", (), C), ("Serve hot", ("r#1",), C), ("Enjoy with rice", (), C)]),
    ("## Leave policy\n**Carry-over:**\nUp to 5 days carry over [hr#3].\n### Notes",
     [("Leave policy", (), "heading"), ("Carry-over:", (), "heading"), ("Up to 5 days carry over.", ("hr#3",), C),
      ("Notes", (), "heading")]),
    ("Ingredients:\n- 1 bay leaf\n- 3/4 tsp ground cardamom\nSpicy Rice Pilaf Recipe",
     [("Ingredients:", (), "heading"), ("1 bay leaf", (), C), ("3/4 tsp ground cardamom", (), C),
      ("Spicy Rice Pilaf Recipe", (), "heading")]),
    ("- **Bold claim** about `max_retries=8` here.\n- ---",
     [("Bold claim about `max_retries=8` here.", (), C), ("---", (), "no_words")]),
    ("Run this:\n```\npip install x. Then y.\n```\nIt installs x.",
     [("Run this:", (), "heading"), ("``` pip install x. Then y. ```", (), "code_block"), ("It installs x.", (), C)]),
    # source notes in words stay with their sentence
    ("Rinse with cool water. (Passage 1) Pat dry. (Passages 2 and 3)",
     [("Rinse with cool water. (Passage 1)", (), C), ("Pat dry. (Passages 2 and 3)", (), C)]),
    # greetings and closings
    ("Sure! The limit is 10 requests per second [api#2]. I hope this helps! Let me know if you have questions.",
     [("Sure!", (), "greeting"), ("The limit is 10 requests per second.", ("api#2",), C),
      ("I hope this helps!", (), "closing"), ("Let me know if you have questions.", (), "closing")]),
    ("Hello there! If you have any other questions, feel free to ask!",
     [("Hello there!", (), "greeting"), ("If you have any other questions, feel free to ask!", (), "closing")]),
    ("If you have questions, contact HR at ext. 4357.",
     [("If you have questions, contact HR at ext. 4357.", (), C)]),
    # Vietnamese
    ("Xin chào! Theo tài liệu, nhân viên được 18 ngày phép năm [hr-leave-v3#2]. Hy vọng thông tin này hữu ích.",
     [("Xin chào!", (), "greeting"), ("Theo tài liệu, nhân viên được 18 ngày phép năm.", ("hr-leave-v3#2",), C),
      ("Hy vọng thông tin này hữu ích.", (), "closing")]),
    ("Tôi không tìm thấy thông tin về độ dài mật khẩu SSO trong các tài liệu được cung cấp.",
     [("Tôi không tìm thấy thông tin về độ dài mật khẩu SSO trong các tài liệu được cung cấp.", (), "meta_refusal")]),
    ("TP. Hồ Chí Minh có văn phòng mới. Đúng. Nếu bạn có câu hỏi, hãy liên hệ.",
     [("TP. Hồ Chí Minh có văn phòng mới.", (), C), ("Đúng. Nếu bạn có câu hỏi, hãy liên hệ.", (), C)]),
    # CJK punctuation
    ("员工有18天年假【hr-leave-v3#2】。公司在河内！真的吗？希望这对你有帮助！",
     [("员工有18天年假。", ("hr-leave-v3#2",), C), ("公司在河内！", (), C), ("真的吗？", (), C),
      ("希望这对你有帮助！", (), "closing")]),
    # statements about the context itself
    ("Unable to answer based on given passages.", [("Unable to answer based on given passages.", (), "meta_refusal")]),
    ("I don't know based on the provided documents. The policy covers stipends [rw#2].",
     [("I don't know based on the provided documents.", (), "meta_refusal"),
      ("The policy covers stipends.", ("rw#2",), C)]),
    ("The passages do not mention the cooking time. However, they do not provide any information on the oven.",
     [("The passages do not mention the cooking time.", (), "meta_refusal"),
      ("However, they do not provide any information on the oven.", (), "meta_refusal")]),
    ("The passages do not mention X, but they say the P60 is due by 31 May.",
     [("The passages do not mention X, but they say the P60 is due by 31 May.", (), C)]),
    ("According to passage 1, you do not have to report a tuition-only scholarship.",
     [("According to passage 1, you do not have to report a tuition-only scholarship.", (), C)]),
    ("Based on the given passages, females did not have the right to vote.",
     [("Based on the given passages, females did not have the right to vote.", (), C)]),
    ("You do not have permission to access the Q3 results.",
     [("You do not have permission to access the Q3 results.", (), C)]),
    # empty and white space only
    ("", []),
    ("  \n\n ", []),
]


@pytest.mark.parametrize(("answer", "expected"), CASES, ids=[f"case{n:02d}" for n in range(len(CASES))])
def test_hard_cases(answer: str, expected: list[tuple[str, tuple[str, ...], str | None]]) -> None:
    got = split_claims(answer)
    assert [(s.text, s.citations, s.rule) for s in got] == expected
    for s in got:
        assert s.check is (s.rule is None)
        assert s.rule is None or s.rule in RULES


def test_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30


def test_spans_point_into_the_answer() -> None:
    answer = "Sure! The limit is 10/s [api#2].\n\n- Retries: 8 [api#5]"
    got = split_claims(answer)
    assert [answer[s.start:s.end] for s in got] == ["Sure!", "The limit is 10/s [api#2].", "- Retries: 8 [api#5]"]


def test_sentence_is_frozen() -> None:
    s = split_claims("One fact.")[0]
    assert isinstance(s, Sentence)
    with pytest.raises(AttributeError):
        s.text = "other"  # type: ignore[misc]


def test_split_nuggets_keeps_only_check_worthy_text() -> None:
    expected = "Hello! Employees get 18 days [hr#2]. Unused days expire on 31 March.\nHope this helps."
    assert split_nuggets(expected) == ["Employees get 18 days.", "Unused days expire on 31 March."]


# --- properties ---------------------------------------------------------------------------------

_MARKERS = ["[hr-leave-v3#2]", "[1]", "[dev-12219#p1, dev-12219#p2]", "【hn-office-vi#2】", "[a-1][b-2]"]
_PIECES = st.one_of(
    st.sampled_from(["Dr.", "e.g.", "3.5", "v1.2.3", "U.S.", "etc.", "...", "…", "。", "！", "?", "!", ".", ":",
                     "\n", "\n\n", "1. ", "- ", "* ", "## ", "**", "`", '"', "“", "”", "(Passage 1)", "Yes.",
                     "Xin chào!", "Hope this helps.", "Unable to answer based on given passages.", "```"]),
    st.sampled_from(_MARKERS),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.sampled_from(["The", "it", "Đây", "员工", "days", "18", " ", "  ", "\t"]),
)
answers = st.lists(_PIECES, max_size=25).map("".join)


def _marker_mask(answer: str) -> list[bool]:
    """True at characters that belong to a citation marker of the answer."""
    mask = [False] * len(answer)
    for start, end, _ids in _find_markers(answer):
        for i in range(start, end):
            mask[i] = True
    return mask


@settings(max_examples=400, deadline=None)
@given(answers)
def test_spans_ordered_disjoint_inside(answer: str) -> None:
    got = split_claims(answer)
    last_end = 0
    for s in got:
        assert 0 <= last_end <= s.start < s.end <= len(answer)
        assert not answer[s.start].isspace() and not answer[s.end - 1].isspace()
        last_end = s.end


@settings(max_examples=400, deadline=None)
@given(answers)
def test_every_visible_character_is_covered(answer: str) -> None:
    covered = [False] * len(answer)
    for s in split_claims(answer):
        for i in range(s.start, s.end):
            covered[i] = True
    mask = _marker_mask(answer)
    missing = [i for i, ch in enumerate(answer) if not ch.isspace() and not mask[i] and not covered[i]]
    assert not missing, f"uncovered characters at {missing[:5]}: {[answer[i] for i in missing[:5]]}"


@settings(max_examples=200, deadline=None)
@given(answers)
@example("[hr-leave-v3#2](")  # a marker followed by "(" but no link: once left in the claim's text
def test_deterministic_and_text_has_no_markers(answer: str) -> None:
    first = split_claims(answer)
    assert first == split_claims(answer)
    for s in first:
        assert s.text == s.text.strip() and "  " not in s.text and "\n" not in s.text
        for cid in s.citations:
            assert cid in answer[s.start:s.end]
        assert s.check is (s.rule is None)
        assert not re.search(r"\[hr-leave-v3#2\]|【hn-office-vi#2】", s.text)
