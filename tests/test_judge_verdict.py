"""Verdicts: lenient extraction, strict validation, scores counted from claims (never stated)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from groundjudge.judge.one_call_json import claims_of
from groundjudge.judge.rubric import load_rubric
from groundjudge.judge.scoring import criterion_values
from groundjudge.judge.verdict import (
    JudgedClaim,
    RawVerdict,
    VerdictError,
    extract_json,
    parse_verdict,
    read_replies,
)

IDS = ["a#1", "a#2", "b#1"]
RUBRIC = load_rubric(Path(__file__).resolve().parent.parent / "rubrics", "grounded_answer")


def score_verdict(verdict: RawVerdict, *, has_expected_answer: bool) -> dict:
    """The grounded_answer v1 criteria's values for a verdict, by metric name."""
    values = criterion_values(RUBRIC.criteria, claims=claims_of(verdict), fields=verdict.fields,
                              has_expected_answer=has_expected_answer)
    return {c.metric_name: values[c.name].value for c in RUBRIC.criteria} | {"labels": {
        name: v.label for name, v in values.items()}, "classes": [c.klass for c in claims_of(verdict)]}


def claim(verdict: str = "supported", cited: list[str] | None = None, support: list[str] | None = None,
          text: str = "a claim") -> dict:
    return {"claim": text, "cited": cited if cited is not None else [], "verdict": verdict,
            "support": support if support is not None else []}


def reply(*claims: dict, correctness: int = 3, **extra: object) -> str:
    return json.dumps({"claims": list(claims), "correctness": correctness, "reason": "r", **extra})


GOOD = reply(claim(cited=["a#1"], support=["a#1"]))


@pytest.mark.parametrize("raw", [
    GOOD,
    f"```json\n{GOOD}\n```",
    f"```\n{GOOD}\n```",
    f"Here is my grading:\n```json\n{GOOD}\n```\nLet me know if you need more.",
    f"Sure! {GOOD} Hope this helps.",
    f"  \n{GOOD}\n\n",
])
def test_lenient_extraction(raw: str) -> None:
    verdict = parse_verdict(raw, IDS)
    assert verdict.claims[0].support == ["a#1"] and verdict.correctness == 3


@pytest.mark.parametrize("text", ['the doc says "}" once', 'a "{" opens', 'backslash \\ then "}"', 'ends with \\'])
def test_extraction_respects_strings_with_escaped_quotes_and_braces(text: str) -> None:
    body = reply(claim(cited=["a#1"], support=["a#1"], text=text))
    assert json.loads(body)["claims"][0]["claim"] == text
    verdict = parse_verdict(f"My verdict: {body} -- done", IDS)
    assert verdict.claims[0].claim == text


def test_extraction_of_nested_object_in_prose() -> None:
    assert extract_json('text {"a": {"b": [1, {"c": "}"}]}} more } text') == {"a": {"b": [1, {"c": "}"}]}}


@pytest.mark.parametrize("raw", [
    "",
    "I cannot grade this.",
    GOOD[: len(GOOD) // 2],  # cut off mid-way (max_tokens)
    "[1, 2, 3]",
    '{"claims": [}',
])
def test_not_json_is_a_verdict_error(raw: str) -> None:
    with pytest.raises(VerdictError):
        parse_verdict(raw, IDS)


def test_off_menu_verdict_is_an_error_not_a_grade() -> None:
    with pytest.raises(VerdictError, match="verdict"):
        parse_verdict(reply(claim("mostly_supported", support=["a#1"])), IDS)
    with pytest.raises(VerdictError, match="verdict"):
        parse_verdict(reply(claim("SUPPORTED", support=["a#1"])), IDS)


@pytest.mark.parametrize("correctness", [4, -1, "high", 2.5])
def test_off_scale_correctness_is_an_error(correctness: object) -> None:
    body = json.dumps({"claims": [claim(support=["a#1"])], "correctness": correctness, "reason": ""})
    with pytest.raises(VerdictError, match="correctness"):
        parse_verdict(body, IDS)


def test_missing_fields_are_errors() -> None:
    with pytest.raises(VerdictError, match="claims"):
        parse_verdict('{"correctness": 2, "reason": "x"}', IDS)
    with pytest.raises(VerdictError, match="claim"):
        parse_verdict(reply({"verdict": "unsupported"}), IDS)
    # correctness is read by the `correct` criterion: missing it is an error where it is graded
    no_grade = parse_verdict('{"claims": [{"claim": "c", "verdict": "unsupported"}], "reason": "x"}', IDS)
    with pytest.raises(VerdictError, match="correctness"):
        score_verdict(no_grade, has_expected_answer=True)
    assert score_verdict(no_grade, has_expected_answer=False)["correctness"] is None


def test_no_claims_for_an_answer_with_text_is_an_error() -> None:
    with pytest.raises(VerdictError, match="claims is empty"):
        parse_verdict(reply(correctness=0), IDS)
    assert parse_verdict(reply(correctness=0), IDS, answer_has_text=False).claims == []


def test_support_id_not_in_context_is_an_error() -> None:
    with pytest.raises(VerdictError, match=r"not in the CONTEXT.*zz#9"):
        parse_verdict(reply(claim(cited=["a#1"], support=["a#1", "zz#9"])), IDS)


def test_supported_cited_claim_without_support_is_an_error() -> None:
    with pytest.raises(VerdictError, match="names no supporting"):
        parse_verdict(reply(claim("supported", cited=["a#1"], support=[])), IDS)


def test_supported_uncited_claim_needs_no_support_ids() -> None:
    """Answers without citations (most real ones) must not fail for want of support ids."""
    verdict = parse_verdict(reply(claim("supported", cited=[], support=[])), IDS)
    assert score_verdict(verdict, has_expected_answer=True)["faithfulness"] == 1.0


def test_cited_ids_outside_the_context_are_allowed() -> None:
    """A citation to a chunk that never reached the context is the system's mistake, not the judge's."""
    verdict = parse_verdict(reply(claim("unsupported", cited=["elsewhere#3"])), IDS)
    assert verdict.claims[0].cited == ["elsewhere#3"]


def test_scores_are_counted_from_claims() -> None:
    verdict = parse_verdict(reply(
        claim("supported", cited=["a#1"], support=["a#1"]),  # cited, supported by its citation
        claim("supported", cited=["a#2"], support=["b#1"]),  # cited, supported, but not by what it cites
        claim("supported", cited=[], support=["a#2"]),  # supported, uncited
        claim("partially_supported", cited=["b#1"], support=["b#1"]),  # cited, partial
        claim("unsupported", cited=["a#1"]),  # cited, unsupported
        claim("contradicted", cited=[], support=[]),
        correctness=2,
    ), IDS)
    scores = score_verdict(verdict, has_expected_answer=True)
    assert len(scores["classes"]) == 6
    assert scores["faithfulness"] == pytest.approx(3 / 6)
    # claims with citations: 1, 2, 4, 5; supported by a cited id: only claim 1
    assert scores["citation_support"] == pytest.approx(1 / 4)
    assert scores["correctness"] == 2
    assert scores["labels"] == {"faithful": False, "correct": 2, "citations_supported": False}
    assert [scores["classes"].count(k) for k in ("unsupported", "contradicted", "misattributed")] == [1, 1, 1]


def test_model_stated_scores_are_ignored() -> None:
    raw = reply(claim("unsupported", cited=["a#1"]), claim("supported", support=["a#1"]),
                faithfulness=1.0, citation_support=1.0, score=10)
    scores = score_verdict(parse_verdict(raw, IDS), has_expected_answer=True)
    assert scores["faithfulness"] == pytest.approx(0.5)
    assert scores["citation_support"] == 0.0


def test_undefined_scores_are_none_not_zero() -> None:
    no_claims = score_verdict(parse_verdict(reply(correctness=0), IDS, answer_has_text=False),
                              has_expected_answer=False)
    assert no_claims["faithfulness"] is None and no_claims["citation_support"] is None
    assert no_claims["correctness"] is None  # no expected answer: correctness is not a grade
    assert no_claims["labels"] == {"faithful": None, "correct": None, "citations_supported": None}
    uncited = score_verdict(parse_verdict(reply(claim(support=["a#1"])), IDS), has_expected_answer=True)
    assert uncited["faithfulness"] == 1.0 and uncited["citation_support"] is None


@pytest.mark.parametrize(("verdict", "cited", "support", "expected"), [
    ("supported", ["a#1"], ["a#1", "a#2"], "cited_support"),
    ("supported", ["a#1"], ["a#2"], "misattributed"),
    ("supported", [], ["a#2"], "uncited"),
    ("partially_supported", ["a#1"], ["a#1"], "partial"),
    ("unsupported", ["a#1"], [], "unsupported"),
    ("contradicted", ["a#1"], ["a#1"], "contradicted"),
])
def test_triage_classes(verdict: str, cited: list[str], support: list[str], expected: str) -> None:
    assert JudgedClaim(claim="c", cited=cited, verdict=verdict, support=support).triage_class == expected


def test_verdicts_are_frozen() -> None:
    verdict = RawVerdict.model_validate(json.loads(GOOD))
    with pytest.raises(ValidationError, match="frozen"):
        verdict.correctness = 0  # type: ignore[misc]


def test_correctness_may_be_given_as_a_word_and_is_scored_as_its_grade():
    raw = ('{"claims": [{"claim": "c", "cited": ["a"], "verdict": "supported", "support": ["a"]}], '
           '"correctness": "incomplete", "reason": "r"}')
    assert score_verdict(parse_verdict(raw, ["a"]), has_expected_answer=True)["correctness"] == 2
    for bad in ('"almost"', "4", "true", "2.0"):
        with pytest.raises(VerdictError):
            score_verdict(parse_verdict(raw.replace('"incomplete"', bad), ["a"]), has_expected_answer=True)


# ------------------------------------------- the one-step reading agrees with the lenient one

_TEXT = st.text(st.characters(blacklist_categories=()), max_size=6)  # surrogates and controls too
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)
_CLAIM = st.fixed_dictionaries(
    {"claim": st.sampled_from(["c", ""]) | _TEXT,
     "verdict": st.sampled_from(["supported", "partially_supported", "unsupported", "contradicted", "SUPPORTED"])},
    optional={"cited": st.lists(st.sampled_from([*IDS, "zz#9"]), max_size=2) | _VALUE,
              "support": st.lists(st.sampled_from([*IDS, "zz#9"]), max_size=2), "note": _VALUE})
_REPLY = st.fixed_dictionaries(
    {"claims": st.lists(_CLAIM, max_size=3)},
    optional={"correctness": st.integers(-1, 4) | st.sampled_from(["complete", "wrong", "high"]) | _VALUE,
              "reason": _TEXT | st.none(), "extra": _VALUE})
_AROUND = [("", ""), (" \n", "\t"), ("Here: ", " done"), ("```json\n", "\n```"), ("\u00a0", ""), ("\ufeff", ""),
           ("\x0b", ""), ("", ","), ("", "}")]


def _reference(raw: str, ids: list[str]) -> tuple[str, object]:
    """parse_verdict as it was before its one-step reading: the lenient reading, then the checks."""
    from groundjudge.judge.verdict import checked_verdict, read_verdict

    try:
        verdict = checked_verdict(read_verdict(raw), ids)
    except VerdictError as exc:
        return "error", str(exc)
    return "verdict", (repr(verdict), repr(verdict.model_extra))


def _parsed(raw: str, ids: list[str]) -> tuple[str, object]:
    try:
        verdict = parse_verdict(raw, ids)
    except VerdictError as exc:
        return "error", str(exc)
    return "verdict", (repr(verdict), repr(verdict.model_extra))


@given(_REPLY, st.booleans(), st.sampled_from([None, 1]), st.sampled_from(_AROUND))
@settings(max_examples=600, deadline=None)
def test_one_step_reading_agrees_with_the_lenient_reading(reply: dict, ascii_only: bool, indent: int | None,
                                                          around: tuple[str, str]) -> None:
    """Whatever the reply, parse_verdict gives the verdict, or the error message, that the
    lenient reading gives: the one-step reading of a plain JSON reply changes nothing."""
    raw = around[0] + json.dumps(reply, ensure_ascii=ascii_only, indent=indent) + around[1]
    assert _parsed(raw, IDS) == _reference(raw, IDS)


@pytest.mark.parametrize("raw", [
    GOOD, f" \n{GOOD}\t", GOOD.replace('"r"', '"\\u00e9 \\ud83d\\ude00 \\/"'), GOOD[:-1] + ', "z": NaN}',
    GOOD[:-1] + ', "z": 1e400, "w": -0.0, "v": 123456789012345678901234567890}', GOOD[:-1] + ', "claims": []}',
    GOOD[:-1] + ', "reason": "\\ud800"}', f"\u00a0{GOOD}", f"\ufeff{GOOD}", GOOD[:-1] + ', "z": "a\tb"}',
    GOOD.replace('"correctness": 3', '"correctness": 3.0'), GOOD[:-1] + ', "z": ' + "[" * 300 + "]" * 300 + "}",
])
def test_one_step_reading_edge_cases(raw: str) -> None:
    assert _parsed(raw, IDS) == _reference(raw, IDS)


# ------------------------------------ replies read together, each as it is read on its own

def _one_step(raw: str) -> tuple[str, object] | None:
    try:
        verdict = RawVerdict.model_validate_json(raw)
    except ValidationError:
        return None
    return repr(verdict), repr(verdict.model_extra)


def _together(raws: list[str]) -> list[tuple[str, object] | None]:
    return [None if v is None else (repr(v), repr(v.model_extra)) for v in read_replies(raws)]


_EDGES = [GOOD, f" \n{GOOD}\t", GOOD[:-1] + ', "z": NaN}', GOOD[:-1] + ', "v": 123456789012345678901234567890}',
          GOOD[:-1] + ', "reason": "\\ud800"}', f"\ufeff{GOOD}", GOOD.replace('"correctness": 3', '"correctness": 3.0'),
          GOOD[:-1] + ', "z": ' + "[" * 300 + "]" * 300 + "}", "", "not json", GOOD + ", " + GOOD, "[" + GOOD + "]",
          # a reply cut off inside a string, then one with two objects: joined they would read as
          # two verdicts, each taken from the wrong reply
          '{"claims": [], "reason": "a', 'b"}', GOOD + "," + GOOD]


@given(st.lists(st.tuples(_REPLY, st.booleans(), st.sampled_from([None, 1]), st.sampled_from(_AROUND)), max_size=8),
       st.lists(st.sampled_from(_EDGES), max_size=4), st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_replies_read_together_read_as_each_alone(replies: list, edges: list[str], rnd: object) -> None:
    """read_replies reads every reply as RawVerdict.model_validate_json reads it alone (None where
    that fails), whatever the other replies of the batch are, broken ones included."""
    raws = [around[0] + json.dumps(reply, ensure_ascii=ascii_only, indent=indent) + around[1]
            for reply, ascii_only, indent, around in replies] + edges
    rnd.shuffle(raws)  # type: ignore[attr-defined]
    assert _together(raws) == [_one_step(raw) for raw in raws]


def test_replies_read_together_edge_cases_and_an_empty_batch() -> None:
    assert read_replies([]) == []
    assert _together(_EDGES) == [_one_step(raw) for raw in _EDGES]
    assert _together(["not json"] * 3) == [None, None, None]


def test_a_verdict_read_beforehand_gives_what_parse_verdict_gives() -> None:
    raws = [GOOD, f"Sure! {GOOD}", reply(claim(cited=["a#1"], support=["zz#9"])), reply()]
    for raw, read in zip(raws, read_replies(raws), strict=True):
        outcomes = []
        for given_read in (None, read):
            try:
                verdict = parse_verdict(raw, IDS, read=given_read)
            except VerdictError as exc:
                outcomes.append(("error", str(exc)))
            else:
                outcomes.append(("verdict", repr(verdict)))
        assert outcomes[0] == outcomes[1]
