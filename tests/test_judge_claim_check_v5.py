"""claim_check v5: v4 plus the criteria the day-39 lesson judges besides faithfulness, answer
relevance (one question per answer) and completeness (from v4's nugget answers), against the
scripted server. v4 and the earlier versions are unchanged: their verdicts on the bundled
example are byte for byte those of the code before v5, and v5's faithful, correct and
citations_supported verdicts are v4's."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from groundjudge import api
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings
from groundjudge.judge.render import JudgeItem
from groundjudge.judge.results import CaseJudgement
from groundjudge.judge.rubric import Rubric, load_rubric, read_lock
from groundjudge.metrics.evaluate import evaluate_dataset
from tests.support.engine_run import judge_items
from tests.support.judge_replies import claim_answer
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
RUBRICS = ROOT / "rubrics"
V4, V5 = load_rubric(RUBRICS, "claim_check", 4), load_rubric(RUBRICS, "claim_check", 5)

# The canonical JSON of each version's verdicts on the bundled example (every item the example
# sends to the judge, the scripted server answering with ``claim_answer``), as the code before
# claim_check v5 (commit 9a4ff42) wrote them: sha256 of json.dumps(verdicts, sort_keys=True).
BEFORE_V5 = {
    1: "d5a59c47a59b22e9668f8b6b2e19a46dd79f2649373d97fb12caae264ca22fe5",
    2: "5c7814fdc82aabbe4adc0f0f29cd4910e14bcf55eec640cd189a4590c1062016",
    3: "3666a5e6be1533c5d51f6b8cb6dce26c1e87e8a7dfe6d7d2ca152ba274f50453",
    4: "3666a5e6be1533c5d51f6b8cb6dce26c1e87e8a7dfe6d7d2ca152ba274f50453",
}
QUESTIONS_BEFORE_V5 = {1: 337, 2: 212, 3: 169, 4: 169}
RELEVANCE = "respond to what the QUESTION asks"  # the relevance question's words


def judge(rubric: Rubric, items: list[JudgeItem], srv: ScriptedOpenAIServer, cache_dir: Path):
    return judge_items(srv, rubric, items, cache_dir)


def canonical(results: list[Any]) -> list[dict[str, Any]]:
    return [TypeAdapter(CaseJudgement).dump_python(r, mode="json", by_alias=True,
                                                   exclude={"source", "seconds", "usage", "cache_key", "raw"})
            for r in results]


@pytest.fixture(scope="module")
def example_items() -> list[JudgeItem]:
    config = api.resolve_config(ROOT / "examples" / "groundjudge.toml")
    dataset = api.load_inputs(config)
    metrics = evaluate_dataset(dataset, api.metric_settings(config))
    return [s.item for s in api.select(config, dataset, metrics) if s.judge and s.item is not None]


def test_the_family_default_is_not_v5_which_is_chosen_by_name() -> None:
    assert load_rubric(RUBRICS, "claim_check").version == 7  # v5 and v6 are opt_in; v7 is the newest other one
    assert V5.opt_in and not V4.opt_in
    assert read_lock(RUBRICS)["claim_check/v5"] == V5.content_hash  # published, hash-locked
    assert [c.name for c in V5.criteria] == ["faithful", "correct", "citations_supported", "relevant", "complete"]
    assert {c.name: c.metric_name for c in V5.criteria}["relevant"] == "answer_relevance"


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_earlier_versions_give_the_verdicts_they_gave_before_v5(version: int, example_items: list[JudgeItem],
                                                                 tmp_path: Path) -> None:
    rubric = load_rubric(RUBRICS, "claim_check", version)
    with ScriptedOpenAIServer(claim_answer) as srv:
        results, engine = judge(rubric, example_items, srv, tmp_path)
        relevance_asked = any(RELEVANCE in r.body["messages"][-1]["content"] for r in srv.requests)
    assert len(results) == 82 and all(r.status == "judged" for r in results)
    text = json.dumps(canonical(results), sort_keys=True, ensure_ascii=False)
    assert hashlib.sha256(text.encode()).hexdigest() == BEFORE_V5[version]
    assert engine.totals.questions == QUESTIONS_BEFORE_V5[version]
    assert not relevance_asked


def test_v5_asks_v4s_questions_plus_one_relevance_question_per_answer(example_items: list[JudgeItem],
                                                                      tmp_path: Path) -> None:
    with ScriptedOpenAIServer(claim_answer) as srv:
        v4, e4 = judge(V4, example_items, srv, tmp_path / "v4")
        v4_asked = [r.body["messages"] for r in srv.requests]
        srv.reset()
        v5, e5 = judge(V5, example_items, srv, tmp_path / "v5")
        v5_asked = [r.body["messages"] for r in srv.requests]
    relevance = [m for m in v5_asked if RELEVANCE in m[-1]["content"]]
    assert len(relevance) == len(example_items) == 82
    assert sorted(map(json.dumps, [m for m in v5_asked if m not in relevance])) == sorted(map(json.dumps, v4_asked))
    assert e5.totals.questions == e4.totals.questions + 82
    for a, b in zip(v4, v5, strict=True):
        assert (a.case_id, a.config_id) == (b.case_id, b.config_id)
        for name in ("faithful", "correct", "citations_supported"):
            assert a.criteria[name] == b.criteria[name], (a.case_id, name)
        assert a.claims == b.claims and a.nuggets == b.nuggets
    # v4's cached answers serve v5: only the relevance questions are new
    with ScriptedOpenAIServer(claim_answer) as srv:
        judge(V5, example_items, srv, tmp_path / "v4")
        assert srv.call_count == 82


# --- the two new criteria on one case ------------------------------------------------------------

CONTEXTS = (("product_api_docs:v2026-03:chunk_004",
             "ERR-429 nghĩa là vượt rate limit; client nên backoff và retry theo header Retry-After."),)


def item(answer: str, expected: str | None = "ERR-429 nghĩa là vượt rate limit. Client nên backoff và retry theo "
                                             "header Retry-After.") -> JudgeItem:
    return JudgeItem(case_id="api_002", config_id="hybrid-rerank", question="Loi ERR-429 co nghia la gi?",
                     contexts=CONTEXTS, answer=answer, citations=(), expected_answer=expected)


def last_block(body: dict) -> str:
    return re.findall(r"<<<DATA\n(.*?)\nDATA>>>", body["messages"][-1]["content"], re.DOTALL)[-1]


def scripted(relevance_p: float, nuggets: dict[str, float], *, logprobs: bool = True):
    def script(body: dict, index: int) -> Reply:
        user = body["messages"][-1]["content"]
        if RELEVANCE in user:
            p = relevance_p
        else:
            p = nuggets.get(last_block(body), 0.95)
        tops = ((("Yes", math.log(p)), ("No", math.log(1 - p))),) if logprobs else None
        return Reply("Yes" if p >= 0.5 else "No", top_logprobs=tops)
    return script


def test_relevance_is_the_p_yes_of_one_question_and_completeness_the_share_of_nuggets(tmp_path: Path) -> None:
    answer = "ERR-429 nghĩa là vượt rate limit."
    nuggets = {"ERR-429 nghĩa là vượt rate limit.": 0.9, "Client nên backoff và retry theo header Retry-After.": 0.2}
    with ScriptedOpenAIServer(scripted(0.8, nuggets)) as srv:
        (case,), _ = judge(V5, [item(answer)], srv, tmp_path)
        relevance = [r.body for r in srv.requests if RELEVANCE in r.body["messages"][-1]["content"]]
    assert case.status == "judged", case.reason
    [body] = relevance
    user = body["messages"][-1]["content"]
    assert "Loi ERR-429 co nghia la gi?" in user and answer in user
    assert "PASSAGES" not in user  # the question and the answer only
    assert body["max_tokens"] == 1
    relevant, complete = case.criteria["relevant"], case.criteria["complete"]
    assert (relevant.label, relevant.value) == (True, pytest.approx(0.8))
    assert relevant.confidence == pytest.approx(0.8)  # centred on the 0.5 threshold: unchanged
    assert [n.stated for n in case.nuggets] == [True, False]
    assert (complete.label, complete.value) == (False, 0.5)  # a fact of the expected answer is missing
    assert complete.confidence == pytest.approx(0.9 * 0.2)  # P(every nugget stated)


def test_an_answer_off_the_question_is_not_relevant(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(scripted(0.1, {})) as srv:
        (case,), _ = judge(V5, [item("Public API cho phép 600 requests mỗi phút.")], srv, tmp_path)
    assert case.criteria["relevant"].label is False and case.criteria["relevant"].value == pytest.approx(0.1)


def test_without_an_expected_answer_completeness_has_no_value(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(scripted(0.9, {})) as srv:
        (case,), _ = judge(V5, [item("ERR-429 nghĩa là vượt rate limit.", expected=None)], srv, tmp_path)
    assert (case.criteria["complete"].label, case.criteria["complete"].value) == (None, None)
    assert case.criteria["relevant"].label is True


def test_without_token_probabilities_the_sampled_word_decides(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(scripted(0.2, {}, logprobs=False)) as srv:
        (case,), _ = judge(V5, [item("ERR-429 nghĩa là vượt rate limit.")], srv, tmp_path)
    relevant = case.criteria["relevant"]
    assert (relevant.label, relevant.value, relevant.confidence) == (False, 0.0, None)


def test_an_invalid_relevance_answer_is_repaired_once_then_judge_error(tmp_path: Path) -> None:
    def script(body: dict, index: int) -> Reply:
        if RELEVANCE in body["messages"][-1]["content"]:
            return Reply("Perhaps", top_logprobs=((("Perhaps", -0.1), ("Yes", -3.0)),))
        return scripted(0.9, {})(body, index)

    with ScriptedOpenAIServer(script) as srv:
        (case,), _ = judge(V5, [item("ERR-429 nghĩa là vượt rate limit.")], srv, tmp_path)
        asked = sum(1 for r in srv.requests if RELEVANCE in r.body["messages"][-1]["content"])
    assert asked == 2  # the question and its one repair
    assert case.status == "judge_error" and "neither yes nor no" in (case.reason or "") and case.criteria == {}


def test_a_rubric_that_scores_relevance_must_ask_it() -> None:
    data = V5.model_dump(exclude_defaults=True)
    data["claim_questions"] = {k: v for k, v in data["claim_questions"].items() if k != "relevance"}
    with pytest.raises(ValueError, match="answer_relevance criterion needs claim_questions.relevance"):
        Rubric.model_validate(data)


def test_a_batch_plans_the_relevance_question_with_the_others(tmp_path: Path) -> None:
    from groundjudge.judge.batch import plan_questions

    settings = ClientSettings(base_url="http://127.0.0.1:9/v1", model="judge-test-1")
    decoding = settings.decoding(V5.claim_questions.top_logprobs)  # type: ignore[union-attr]
    cache = JudgeCache(tmp_path)
    try:
        v5 = plan_questions(V5, settings, decoding, cache, [item("ERR-429 nghĩa là vượt rate limit.")])
        v4 = plan_questions(V4, settings, decoding, cache, [item("ERR-429 nghĩa là vượt rate limit.")])
    finally:
        cache.close()
    asked = [p.body["messages"][-1]["content"] for p in v5]
    assert sum(RELEVANCE in a for a in asked) == 1 and len(v5) == len(v4) + 1
