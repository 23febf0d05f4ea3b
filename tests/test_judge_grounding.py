"""The exact term check (judge/grounding.py) and claim_check v2, which combines it with the
model's P(yes), against a scripted server; its language-aware rule (``terms: snowball``) and
claim_check v6, which uses it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.claim_check import plan_case
from groundjudge.judge.client import ClientSettings
from groundjudge.judge.grounding import Languages, TermIndex, terms
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.rubric import Grounding, load_rubric
from tests.support.engine_run import judge_items
from tests.support.openai_server import Reply, ScriptedOpenAIServer
from tests.test_judge_claim_check import CONTEXTS, item, judge_script, statement, yes_no

ROOT = Path(__file__).resolve().parent.parent
V1 = load_rubric(ROOT / "rubrics", "claim_check", 1)
V2 = load_rubric(ROOT / "rubrics", "claim_check", 2)
V3 = load_rubric(ROOT / "rubrics", "claim_check", 3)
V4 = load_rubric(ROOT / "rubrics", "claim_check", 4)
V6 = load_rubric(ROOT / "rubrics", "claim_check", 6)


# --- terms ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("The IRS's Form 1,040 lists deductions.", ["irs's", "form", "1040", "lists", "deductions"]),
    ("Based on the passages, it is 3.5 days.", ["3.5", "days"]),  # framing words carry no fact
    ("According to the information provided, however, cats purr.", ["cats", "purr"]),
    ("Version 2.1.0 shipped in 2024.", ["version", "2.1.0", "shipped", "2024"]),
    ("Trả lời: Hà Nội là thủ đô.", ["trả", "lời", "hà", "nội", "là", "thủ", "đô"]),
    ("東京は日本の首都です。", ["東", "京", "は", "日", "本", "の", "首", "都", "で", "す"]),
    ("It’s Dr. O’Neil’s view.", ["dr", "o'neil", "view"]),  # a second apostrophe ends the word
])
def test_terms_keep_what_states_a_fact(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_unfound_matches_plural_possessive_and_word_families_but_not_other_numbers() -> None:
    index = TermIndex.of(["Employees receive a P60 summarising pay and deductions by 31 May.",
                          "The employer's records are kept for 3 years."])
    assert index.unfound("An employee's P60 summarises the deduction.") == []  # plural, possessive, stem
    assert index.unfound("Employers keep records for 6 years.") == ["keep", "6"]  # numbers match exactly
    assert index.unfound("The P45 arrives by 30 June, then by 30 June again.") == ["p45", "arrives", "30", "june"]
    assert index.unfound("") == [] and TermIndex.of([]).unfound("Cats purr.") == ["cats", "purr"]


def test_the_versions_ask_byte_identical_questions_and_keep_their_hashes() -> None:
    assert V1.content_hash.startswith("d94873c579f1") and V2.content_hash.startswith("8b8cc94bb8b8")
    assert V2.claim_questions is not None and V2.claim_questions.grounding is not None
    assert V1.claim_questions is not None and V1.claim_questions.grounding is None
    assert V3.claim_questions is not None and V3.claim_questions.contradiction is None
    for field in ("context", "claim", "contradiction", "nugget_context", "nugget", "yes_tokens", "no_tokens"):
        assert getattr(V1.claim_questions, field) == getattr(V2.claim_questions, field)
    for field in ("context", "claim", "nugget_context", "nugget", "yes_tokens", "no_tokens"):
        assert getattr(V2.claim_questions, field) == getattr(V3.claim_questions, field)
    assert V3.claim_questions.model_dump() == {**V4.claim_questions.model_dump(),  # type: ignore[union-attr]
                                               "grounding": {"term_factor": 0.7, "ask_model": "when_decisive",
                                                             "terms": "legacy", "language": None}}
    assert V3.criteria == V4.criteria
    assert V1.system_prompt == V2.system_prompt == V3.system_prompt == V4.system_prompt


# --- claim_check v2 end to end ------------------------------------------------------------------

# Claim 1: every term is in the context (no question with when_unfound). Claim 2 brings in
# "30" (one unfound term). Claim 3 brings in four: "cash", "bonus", "paid", "quarterly".
ANSWER = ("Full-time staff get 18 days of annual leave. Part-time staff get 30 days. "
          "A cash bonus is paid quarterly.")


def run(srv: ScriptedOpenAIServer, rubric, items, cache_dir: Path):
    return judge_items(srv, rubric, items, cache_dir)


def test_v2_asks_only_claims_with_unfound_terms_and_lowers_support_per_term(tmp_path: Path) -> None:
    truth = {"Part-time staff get 30 days.": 0.8, "A cash bonus is paid quarterly.": 0.9}
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (case,), engine = run(srv, V2, [item(ANSWER, expected=None)], tmp_path / "cache")
        asked = [(statement(r.body), "contradict" in r.body["messages"][-1]["content"]) for r in srv.requests]
    assert case.status == "judged", case.reason
    first, second, third = case.claims
    assert (first.unfound_terms, first.model_confidence, first.confidence) == ((), None, 1.0)
    assert first.verdict == "supported"
    assert second.unfound_terms == ("30",) and second.model_confidence == pytest.approx(0.8)
    assert second.confidence == pytest.approx(0.8 * 0.7) and second.verdict == "supported"
    assert third.unfound_terms == ("cash", "bonus", "paid", "quarterly")
    assert third.model_confidence == pytest.approx(0.9)
    assert third.confidence == pytest.approx(0.9 * 0.7 ** 4)  # 0.216 < 0.25
    assert third.verdict == "contradicted"  # the scripted judge says yes to its contradiction question
    # no question about the claim whose every term the context has; a contradiction question
    # only for the claim below the threshold
    assert asked == [("Part-time staff get 30 days.", False), ("A cash bonus is paid quarterly.", False),
                     ("A cash bonus is paid quarterly.", True)]
    assert case.criteria["faithful"].label is False
    # the answer's confidence is its lowest support centred on the threshold: 0.216 / (2 * 0.25)
    assert case.criteria["faithful"].confidence == pytest.approx(0.9 * 0.7 ** 4 / 0.5)
    assert engine.totals.questions == 3


def test_v3_asks_only_where_the_answer_can_change_the_verdict_and_never_about_contradiction(
        tmp_path: Path) -> None:
    truth = {"Part-time staff get 30 days.": 0.8, "A cash bonus is paid quarterly.": 0.9}
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (case,), engine = run(srv, V3, [item(ANSWER, expected=None)], tmp_path / "cache")
        asked = [statement(r.body) for r in srv.requests]
    first, second, third = case.claims
    assert (first.confidence, first.verdict) == (1.0, "supported")  # every term in the passages
    assert second.confidence == pytest.approx(0.8 * 0.7) and second.model_confidence == pytest.approx(0.8)
    # four unfound terms: 0.7^4 = 0.24 < 0.25 whatever the model says, so it is not asked
    assert third.unfound_terms == ("cash", "bonus", "paid", "quarterly") and third.model_confidence is None
    assert third.confidence == pytest.approx(0.7 ** 4) and third.verdict == "unsupported"
    assert asked == ["Part-time staff get 30 days."] and engine.totals.questions == 1
    # the same verdicts as v2, which asked three questions (the third claim and its contradiction)
    assert case.criteria["faithful"].label is False


def test_v2_shares_v1s_cached_answers_and_a_low_support_gets_its_contradiction_question(tmp_path: Path) -> None:
    truth = {"Part-time staff get 30 days.": 0.3, "A cash bonus is paid quarterly.": 0.9}
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (v1,), _ = run(srv, V1, [item(ANSWER, expected=None)], cache)
        v1_requests = len(srv.requests)
        (v2,), _ = run(srv, V2, [item(ANSWER, expected=None)], cache)
        v2_new = [statement(r.body) + (" (contradiction)" if "contradict" in r.body["messages"][-1]["content"] else "")
                  for r in srv.requests[v1_requests:]]
    assert v1.status == v2.status == "judged"
    assert v1_requests == 3 + 1  # three claims, one contradiction question (0.3 < 0.5)
    # v2: the claim questions come from v1's cache. Claim 2 (0.3 * 0.7 = 0.21 < 0.25) was also
    # below v1's 0.5, so its contradiction question is cached too; claim 3 (0.9 * 0.7^4 = 0.216)
    # was not, so its contradiction question is the only new one
    assert v2_new == ["A cash bonus is paid quarterly. (contradiction)"]
    assert v2.claims[1].confidence == pytest.approx(0.21) and v2.claims[1].verdict == "unsupported"
    assert v2.claims[2].verdict == "contradicted" and v1.claims[2].verdict == "supported"
    assert v1.criteria["faithful"].label is False and v2.criteria["faithful"].label is False


def test_v2_without_logprobs_keeps_the_confidence_unknown_and_the_sampled_word_decides(tmp_path: Path) -> None:
    def script(body: dict, index: int) -> Reply:
        return Reply("Yes")  # no token probabilities
    with ScriptedOpenAIServer(script) as srv:
        (case,), engine = run(srv, V2, [item(ANSWER, expected=None)], tmp_path / "cache")
    first, second, third = case.claims
    assert first.confidence == 1.0  # settled by the term check, not by the model
    assert second.confidence is None and second.verdict == "supported"  # yes, and 0.7 >= 0.25
    assert third.confidence is None and third.verdict == "contradicted"  # yes, but 0.7^4 < 0.25; and
    # the scripted judge says yes to the contradiction question too
    assert engine.totals.without_logprobs == 3  # two claims and the contradiction question


def test_v2_cited_support_uses_the_terms_of_what_the_claim_cites(tmp_path: Path) -> None:
    answer = "Requests go to the line manager [leave#2]. Full-time staff get 18 days [leave#2]."
    case_item = item(answer, expected=None)
    case_item = case_item.__class__(**{**msgspec.structs.asdict(case_item), "citations": ()})
    with ScriptedOpenAIServer(judge_script({"Full-time staff get 18 days.": 0.9})) as srv:
        (case,), _ = run(srv, V2, [case_item], tmp_path / "cache")
        asked = [(statement(r.body), "leave#1" in r.body["messages"][-1]["content"]) for r in srv.requests]
    first, second = case.claims
    # the first claim's terms are all in leave#2, which it cites: supported by its citation, no call
    assert first.klass == "cited_support" and first.cited_confidence == 1.0
    # the second cites leave#2, which lacks "full", "time", "18", "days": asked against leave#2 only
    assert second.cited_confidence == pytest.approx(0.9 * 0.7 ** len(TermIndex.of(
        ["How much leave do staff get?", CONTEXTS[1][1]]).unfound("Full-time staff get 18 days.")))
    assert ("Full-time staff get 18 days.", False) in asked  # the cited question shows leave#2 only
    assert not any(s == "Requests go to the line manager." for s, _ in asked)


# --- through the CLI: the unfound terms reach triage, report.md and the HTML ---------------------

def test_v4_asks_nothing_about_an_answer_its_unfound_terms_already_make_unfaithful(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(judge_script({})) as srv:
        (case,), engine = run(srv, V4, [item(ANSWER, expected=None)], tmp_path / "cache")
        asked = len(srv.requests)
    first, second, third = case.claims
    assert (first.confidence, first.verdict) == (1.0, "supported")  # every term in the passages
    # the third claim's four unfound terms decide the answer, so the second (one unfound term,
    # which v3 asks about) is left unchecked: no verdict and no probability, its terms still named
    assert (second.verdict, second.klass, second.confidence, second.model_confidence) == (
        "unchecked", "unchecked", None, None)
    assert second.unfound_terms == ("30",)
    assert third.verdict == "unsupported" and third.confidence == pytest.approx(0.7 ** 4)
    assert asked == 0 and engine.totals.questions == 0
    faithful = case.criteria["faithful"]
    assert faithful.label is False  # as v3 decides it
    assert faithful.value == pytest.approx((1.0 + 0.7 ** 4) / 2)  # the mean over the checked claims
    assert faithful.confidence == pytest.approx(0.7 ** 4 / 0.5)


def test_v4_asks_as_v3_while_the_answer_is_open_and_always_about_cited_claims(tmp_path: Path) -> None:
    open_answer = "Full-time staff get 18 days of annual leave. Part-time staff get 30 days."
    # decided by the bonus sentence, but the 30-days claim cites leave#2: its support decides its
    # citation class, so it is still asked, against the whole context and against leave#2
    cited_answer = "Part-time staff get 30 days [leave#2]. A cash bonus is paid quarterly."
    items = [item(open_answer, expected=None, case_id="open"), item(cited_answer, expected=None, case_id="cited")]
    truth = {"Part-time staff get 30 days.": 0.8}
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (v4_open, v4_cited), _ = run(srv, V4, items, tmp_path / "v4")
        v4_asked = [(statement(r.body), "id=leave#1" in r.body["messages"][-1]["content"]) for r in srv.requests]
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (v3_open, v3_cited), _ = run(srv, V3, items, tmp_path / "v3")
        v3_asked = [(statement(r.body), "id=leave#1" in r.body["messages"][-1]["content"]) for r in srv.requests]
    # one question about the whole context serves both answers (the second is a cache hit); the
    # cited claim's own question shows only leave#2
    assert v4_asked == v3_asked == [("Part-time staff get 30 days.", True), ("Part-time staff get 30 days.", False)]
    assert (v4_open.claims, v4_open.criteria) == (v3_open.claims, v3_open.criteria)
    assert [c.verdict for c in v4_cited.claims] == ["supported", "unsupported"]
    assert v4_cited.claims == v3_cited.claims
    assert v4_cited.criteria["faithful"].label is False


def test_v4_plans_no_batch_line_for_an_unchecked_claim(tmp_path: Path) -> None:
    from groundjudge.judge.batch import plan_questions

    settings = ClientSettings(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=5, max_attempts=1)
    decoding = settings.decoding(10)
    cache = JudgeCache(tmp_path / "cache")
    try:
        v3 = plan_questions(V3, settings, decoding, cache, [item(ANSWER, expected=None)])
        v4 = plan_questions(V4, settings, decoding, cache, [item(ANSWER, expected=None)])
    finally:
        cache.close()
    assert len(v3) == 1 and v4 == []


def test_a_run_with_claim_check_v4_names_the_unfound_terms_of_flagged_claims(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from groundjudge.cli import main

    def script(body: dict, index: int) -> Reply:  # unsure about everything: P(yes) 0.6
        return Reply("Yes", top_logprobs=(yes_no(0.6),))

    with ScriptedOpenAIServer(script) as srv, pytest.MonkeyPatch.context() as mp:
        for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
            mp.delenv(var, raising=False)
        result = CliRunner().invoke(main, [
            "run", "--config", str(ROOT / "examples" / "groundjudge.toml"), "--judge-base-url", srv.base_url,
            "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
            "--rubric", "claim_check/v4", "--no-history", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["judge"]["identity"]["rubric"]["version"] == 4
    for section in doc["judge"]["per_config"].values():
        for verdict in section["cases"].values():
            unchecked = [c for c in verdict["claims"] if c["verdict"] == "unchecked"]
            # left unchecked only in an answer another claim's unfound terms already sank
            assert not unchecked or any(len(c["unfound_terms"] or []) >= 4 for c in verdict["claims"])
            assert all(not c["cited"] and c["confidence"] is None for c in unchecked)
    rows = [json.loads(line) for line in (tmp_path / "out" / "triage.jsonl").read_text().splitlines()]
    flagged = [r for r in rows if r["kind"] in ("unsupported_claim", "contradicted_claim")]
    assert flagged, "a claim with three or more unfound terms at P(yes) 0.6 falls below 0.25"
    assert {r["kind"] for r in flagged} == {"unsupported_claim"}  # v3 asks no contradiction question
    for r in flagged:
        n = len(r["unfound_terms"])
        if n >= 4:  # not asked: the unfound terms alone decide
            assert r["model_probability"] is None and r["support_probability"] == pytest.approx(0.7 ** n)
        else:
            assert n == 3 and r["model_probability"] == pytest.approx(0.6)
            assert r["support_probability"] == pytest.approx(0.6 * 0.7 ** n)
    sample = flagged[0]
    assert f"not in the passages: {', '.join(sample['unfound_terms'])}" in (tmp_path / "out" / "triage.md").read_text()
    assert "| not in the passages |" in (tmp_path / "out" / "report.md").read_text()
    assert "not in the passages: " in (tmp_path / "out" / "report.html").read_text()


def test_v3_a_cited_claim_its_citation_cannot_support_is_not_marked_cited_support(tmp_path: Path) -> None:
    # leave#2 lacks "full", "time", "18", "days" (and "annual"): no answer could lift 0.7^n to
    # 0.25, so v3 does not ask, and the cited support is that ceiling, not 1
    answer = "Full-time staff get 18 days of annual leave [leave#2]."
    case_item = item(answer, expected=None)
    missing = TermIndex.of(["How much leave do staff get?", CONTEXTS[1][1]]).unfound(
        "Full-time staff get 18 days of annual leave.")
    assert len(missing) >= 4
    with ScriptedOpenAIServer(judge_script({})) as srv:
        (case,), _ = run(srv, V3, [case_item], tmp_path / "cache")
        asked = len(srv.requests)
    (claim,) = case.claims
    assert asked == 0  # every term is in the whole context, and leave#2 alone decides nothing
    assert claim.verdict == "supported" and claim.klass == "misattributed"
    assert claim.cited_confidence == pytest.approx(0.7 ** len(missing))
    assert case.criteria["citations_supported"].label is False


def test_replies_without_token_counts_are_counted_as_such_not_as_zero_tokens(tmp_path: Path) -> None:
    from groundjudge.judge.results import Usage

    def script(body: dict, index: int) -> Reply:  # the first reply has no usage object
        return Reply("Yes", top_logprobs=(yes_no(0.8),), usage=index > 0, prompt_tokens=50, completion_tokens=1)

    answer = "Part-time staff get 30 days. Part-time staff get 31 days."
    with ScriptedOpenAIServer(script) as srv:
        (case,), engine = run(srv, V4, [item(answer, expected=None)], tmp_path / "cache")
    assert case.status == "judged" and engine.totals.usage.requests == 2
    assert (engine.totals.usage.unmetered, engine.totals.usage.tokens) == (1, 51)
    assert engine.totals.usage.tokens_text() == "51 tokens (+ 1 reply with no token count)"
    assert Usage(requests=4, unmetered=4).tokens_text() == "tokens not reported (4 replies)"


# --- terms: snowball (claim_check v6) ----------------------------------------------------------

LEAVE_EN = ["Employees can carry over up to five unused leave days into the next calendar year."]
TAX_VI = ["Người nộp thuế phải khai báo thu nhập chậm nhất 30 ngày sau ngày nhận thông báo."]
# A correct Vietnamese answer to TAX_VI: "You need to declare income within 30 days from when you
# receive the notice". "bạn, cần, trong, từ, khi" (you, need, within, from, when) are function words.
ANSWER_VI = "Bạn cần khai báo thu nhập trong 30 ngày từ khi nhận thông báo."


def snowball(passages: list[str], claim: str, declared: str | None = None) -> list[str]:
    languages = Languages.of_case(claim, passages, declared)
    return TermIndex.of(passages, languages).unfound(claim)


def test_snowball_english_function_words_are_no_terms_where_legacy_counts_them() -> None:
    claim = "Yes, this means employees always get to go on carrying over unused leave days into the next year."
    assert TermIndex.of(LEAVE_EN).unfound(claim) == ["yes", "means", "always", "get", "go"]  # v2-v5
    assert snowball(LEAVE_EN, claim) == []  # "carrying" finds "carry": one stem
    # frame words no stop list has: said about the passages, they state no fact
    assert snowball(LEAVE_EN, "According to the passages, employees can additionally carry over leave.") == []


def test_snowball_the_vietnamese_function_words_of_a_correct_answer_are_no_terms() -> None:
    assert TermIndex.of(TAX_VI).unfound(ANSWER_VI) == ["bạn", "cần", "trong", "từ", "khi"]  # v4 flagged it
    assert Languages.of_case(ANSWER_VI, TAX_VI) == Languages(answer="vi", passages="vi")
    assert snowball(TAX_VI, ANSWER_VI) == []
    # a wrong deadline and a penalty the passages never mention still are unfound
    assert snowball(TAX_VI, "Bạn cần khai báo thu nhập trong 45 ngày, nếu không sẽ bị phạt.") == ["45", "phạt"]


def test_snowball_content_words_numbers_and_names_stay_terms() -> None:
    assert snowball(LEAVE_EN, "Yes, employees at Contoso always get 12 unused leave days paid out in cash.") == [
        "contoso", "12", "paid", "cash"]
    # numbers match exactly, and so do the number words a stop list holds ("5 million" != "5 billion")
    assert snowball(["Revenue rose to 5 million dollars in 2023."], "Revenue rose to 5 billion dollars in 2024.") == [
        "billion", "2024"]
    assert snowball(["It costs 1,040 dollars."], "It costs 1040 dollars.") == []


@pytest.mark.parametrize("passage, claim, language, unfound", [
    ("Les demandes de congé sont envoyées au responsable hiérarchique.",
     "La demande de congés est envoyée au responsable.", "fr", []),
    ("Les demandes de congé sont envoyées au responsable hiérarchique.",
     "La demande de congés est refusée par le directeur.", "fr", ["refusée", "directeur"]),
    ("Die Anträge auf Urlaub werden beim Vorgesetzten eingereicht.",
     "Ein Antrag auf Urlaub wird beim Vorgesetzten eingereicht.", "de", []),
    ("Die Anträge auf Urlaub werden beim Vorgesetzten eingereicht.",
     "Ein Antrag auf Urlaub wird bei der Personalabteilung eingereicht.", "de", ["personalabteilung"]),
])
def test_snowball_stems_french_and_german(passage: str, claim: str, language: str, unfound: list[str]) -> None:
    assert Languages.of_case(claim, [passage]).answer == language
    assert snowball([passage], claim) == unfound


def test_snowball_reads_chinese_and_japanese_character_by_character() -> None:
    passages = ["東京は日本の首都です。人口は約1400万人です。"]
    assert snowball(passages, "日本の首都は東京です。") == []
    assert snowball(passages, "日本の首都は大阪です。") == ["大", "阪"]  # as the legacy rule reads it
    assert TermIndex.of(passages).unfound("日本の首都は大阪です。") == ["大", "阪"]
    zh = ["纳税申报表每年提交一次。"]
    assert Languages.of_case("纳税申报表每月提交。", zh).answer == "zh"
    # every character is a term, also those the Chinese stop list holds (月, month)
    assert snowball(zh, "纳税申报表每年提交。") == [] and snowball(zh, "纳税申报表每月提交。") == ["月"]


def test_a_declared_language_is_used_where_detection_would_guess() -> None:
    # too short to detect: the passages' language stands in, then a declaration overrides it
    assert Languages.of_case("Ja.", LEAVE_EN) == Languages(answer="en", passages="en")
    assert Languages.of_case("Ja.", LEAVE_EN, "de") == Languages(answer="de", passages="en")
    assert snowball(LEAVE_EN, "Ja.") == ["ja"] and snowball(LEAVE_EN, "Ja.", "de") == []
    # neither side long enough to tell: English, the fallback
    assert Languages.of_case("Ok.", ["Five."]) == Languages(answer="en", passages="en")


def test_a_mixed_language_case_indexes_the_passages_with_the_answers_stemmer() -> None:
    # a Vietnamese answer about English passages: the English names it takes over are found,
    # its own function words are no terms, and the English passages' function words neither
    passages = ["Form 1040 is the standard federal income tax return filed by taxpayers."]
    answer = "Bạn cần nộp Form 1040 khi khai thuế thu nhập liên bang theo the standard return."
    languages = Languages.of_case(answer, passages)
    assert languages == Languages(answer="vi", passages="en")
    assert TermIndex.of(passages, languages).unfound(answer) == ["nộp", "khai", "thuế", "thu", "nhập", "liên",
                                                                 "bang"]


def test_grounding_language_needs_snowball_and_the_published_versions_keep_the_legacy_rule() -> None:
    with pytest.raises(ValueError, match="only to terms: snowball"):
        Grounding(term_factor=0.7, language="vi")
    with pytest.raises(ValueError):
        Grounding(term_factor=0.7, terms="snowball", language="vietnamese")
    for rubric in (V2, V3, V4):
        assert rubric.claim_questions is not None and rubric.claim_questions.grounding is not None
        assert rubric.claim_questions.grounding.terms == "legacy"
    assert V6.opt_in and V6.claim_questions is not None and V6.claim_questions.grounding is not None
    assert V6.claim_questions.grounding.terms == "snowball" and V6.claim_questions.grounding.language is None
    # v6 is v4 but for the term rule: the same questions, byte for byte, and the same criteria
    assert V6.claim_questions.model_dump() == {**V4.claim_questions.model_dump(),  # type: ignore[union-attr]
                                               "grounding": {"term_factor": 0.7, "ask_model": "when_answer_open",
                                                             "terms": "snowball", "language": None}}
    assert (V6.criteria, V6.system_prompt) == (V4.criteria, V4.system_prompt)


@pytest.mark.parametrize("answer, unfound", [
    # fixed examples: v4's unfound terms as they were before the snowball rule existed
    (ANSWER, [[], ["30"], ["cash", "bonus", "paid", "quarterly"]]),
    ("Yes, full-time staff always get 18 days. It means three years of service.",
     [["yes", "always"], ["means", "service"]]),
    ("The line manager's requests go to HR by 30 June.", [["hr", "30", "june"]]),
])
def test_v4_plans_the_same_unfound_terms_as_before(answer: str, unfound: list[list[str]]) -> None:
    assert plan_case(V4, item(answer, expected=None)).unfound == unfound


# --- claim_check v6 end to end ------------------------------------------------------------------

def test_v6_reuses_v4s_answers_and_asks_only_claims_whose_ask_decision_changed(tmp_path: Path) -> None:
    # claim 1: v4 finds "yes", "always" unfound and asks; v6 finds every term and asks nothing.
    # claim 2: "30" unfound under both: asked by v4, v6 reads v4's answer. Claim 3: v4 finds
    # "yes", "means", "always", "december" (four: decided, not asked, and the answer
    # unfaithful); v6 finds only "december" and asks, the one new question.
    answer = ("Yes, full-time staff always get 18 days of annual leave. Part-time staff get 30 days. "
              "Yes, this means part-time staff always get to go on leave in December.")
    truth = {"Part-time staff get 30 days.": 0.8}
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (v4,), _ = run(srv, V4, [item(answer, expected=None)], cache)
        v4_asked = [statement(r.body) for r in srv.requests]
        (v6,), engine = run(srv, V6, [item(answer, expected=None)], cache)
        v6_asked = [statement(r.body) for r in srv.requests[len(v4_asked):]]
    assert [list(c.unfound_terms or ()) for c in v4.claims] == [["yes", "always"], ["30"],
                                                   ["yes", "means", "always", "december"]]
    # the third claim decides v4's answer, so its other uncited claims are left unchecked
    assert [c.verdict for c in v4.claims] == ["unchecked", "unchecked", "unsupported"] and v4_asked == []
    assert v4.criteria["faithful"].label is False
    assert [c.unfound_terms for c in v6.claims] == [(), ("30",), ("december",)]
    assert v6_asked == ["Part-time staff get 30 days.",
                        "Yes, this means part-time staff always get to go on leave in December."]
    assert engine.totals.questions == 2
    first, second, third = v6.claims
    assert (first.verdict, first.confidence, first.model_confidence) == ("supported", 1.0, None)
    assert second.confidence == pytest.approx(0.8 * 0.7) and third.confidence == pytest.approx(0.9 * 0.7)
    assert v6.criteria["faithful"].label is True
    # run again: every answer is cached
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (again,), engine = run(srv, V6, [item(answer, expected=None)], cache)
        assert srv.requests == []
    assert again.claims == v6.claims


def test_v6_passes_the_correct_vietnamese_answer_v4_flags(tmp_path: Path) -> None:
    case = JudgeItem(case_id="vi", config_id="cand", question="Thời hạn khai báo thu nhập là bao lâu?",
                     contexts=(("thue#1", TAX_VI[0]),), answer=ANSWER_VI + " Nếu không sẽ bị phạt.",
                     citations=(), expected_answer=None)
    truth = {"Nếu không sẽ bị phạt.": 0.3}
    with ScriptedOpenAIServer(judge_script(truth)) as srv:
        (v4,), _ = run(srv, V4, [case], tmp_path / "v4")
        (v6,), _ = run(srv, V6, [case], tmp_path / "v6")
        asked = [statement(r.body) for r in srv.requests]
    assert v4.claims[0].unfound_terms == ("bạn", "cần", "trong", "từ", "khi")
    assert v4.claims[0].verdict == "unsupported" and v4.criteria["faithful"].label is False
    assert v6.claims[0].unfound_terms == () and v6.claims[0].verdict == "supported"
    # the penalty the passages never mention is still found out: one unfound term and the model's no
    assert v6.claims[1].unfound_terms == ("phạt",) and v6.claims[1].verdict == "unsupported"
    assert v6.claims[1].confidence == pytest.approx(0.3 * 0.7)
    assert asked == ["Nếu không sẽ bị phạt."]  # v4 asked nothing: its first claim decided the answer
    assert v6.criteria["faithful"].label is False


def test_a_rubric_that_declares_the_language_reads_every_case_in_it(tmp_path: Path) -> None:
    assert V6.claim_questions is not None and V6.claim_questions.grounding is not None
    grounding = V6.claim_questions.grounding.model_copy(update={"language": "vi"})
    declared = V6.model_copy(update={"claim_questions": V6.claim_questions.model_copy(
        update={"grounding": grounding})})
    # "Có thể." (it can) is too short to detect: the passages' language stands in
    case = JudgeItem(case_id="vi", config_id="cand", question="Is leave carried over?", contexts=(
        ("leave#1", LEAVE_EN[0]),), answer="Có thể.", citations=(), expected_answer=None)
    assert plan_case(V6, case).languages == Languages(answer="en", passages="en")
    assert plan_case(declared, case).languages == Languages(answer="vi", passages="en")
    assert plan_case(V6, case).unfound == [["có", "thể"]]
    assert plan_case(declared, case).unfound == [["thể"]]  # "có" (have, can) is a Vietnamese function word


def test_a_run_with_the_default_rubric_reads_v6s_answers_and_names_the_unfound_terms(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from groundjudge.cli import main

    def script(body: dict, index: int) -> Reply:  # unsure about everything: P(yes) 0.6
        return Reply("Yes", top_logprobs=(yes_no(0.6),))

    def run(rubric: list[str], out: str) -> dict:
        result = CliRunner().invoke(main, [
            "run", "--config", str(ROOT / "examples" / "groundjudge.toml"), "--judge-base-url", srv.base_url,
            "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / out),
            *rubric, "--no-history", "--quiet"])
        assert result.exit_code in (0, 1), result.output
        return json.loads((tmp_path / out / "report.json").read_text())

    with ScriptedOpenAIServer(script) as srv, pytest.MonkeyPatch.context() as mp:
        for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
            mp.delenv(var, raising=False)
        v6 = run(["--rubric", "claim_check/v6"], "v6")
        asked = srv.call_count
        doc = run([], "default")
        assert srv.call_count == asked  # the default asks v6's questions: all cached
    assert doc["judge"]["identity"]["rubric"]["version"] == 7 and v6["judge"]["identity"]["rubric"]["version"] == 6
    rows = [json.loads(line) for line in (tmp_path / "default" / "triage.jsonl").read_text().splitlines()]
    flagged = [r for r in rows if r["kind"] == "unsupported_claim"]
    assert flagged and any(r["unfound_terms"] for r in flagged)
    assert all(r["support_probability"] is not None for r in flagged)
    named = next(r for r in flagged if r["unfound_terms"])
    assert f"not in the passages: {', '.join(named['unfound_terms'])}" in (tmp_path / "default" / "triage.md").read_text()
