"""The judge engine against a scripted server: one test per fault, every item accounted for.

Each test checks, for every item, its final status (judged / judge_error / skipped) and reason,
that nothing but a judged item carries scores, and that the server saw exactly the calls needed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import Budget, JudgeEngine, Pricing
from groundjudge.judge.render import JudgeItem
from groundjudge.judge.results import CaseJudgement
from groundjudge.judge.rubric import Rubric, load_rubric
from tests.support.judge_replies import RecordedSleep, make_item, verdict_dict, verdict_for_request
from tests.support.openai_server import Disconnect, Hang, HTTPError, Reply, ScriptedOpenAIServer, Truncated

ROOT = Path(__file__).resolve().parent.parent
RUBRIC = load_rubric(ROOT / "rubrics", "grounded_answer")
VERDICT: TypeAdapter[CaseJudgement] = TypeAdapter(CaseJudgement)  # reads and writes a verdict as report.json does


def run_engine(srv: ScriptedOpenAIServer, items: list[JudgeItem], cache_dir: Path, *, concurrency: int = 1,
               budget: Budget | None = None, pricing: Pricing | None = None, rubric: Rubric = RUBRIC,
               **settings: Any) -> tuple[list[CaseJudgement], JudgeEngine, RecordedSleep]:
    options: dict[str, Any] = {"base_url": srv.base_url, "model": srv.model, "timeout_s": 60.0, "max_attempts": 3}
    options.update(settings)
    sleep = RecordedSleep()
    client = JudgeClient(ClientSettings(**options), sleep=sleep)
    cache = JudgeCache(cache_dir)
    engine = JudgeEngine(rubric=rubric, client=client, cache=cache, concurrency=concurrency,
                         budget=budget or Budget(), pricing=pricing or Pricing())
    try:
        outcomes = asyncio.run(engine.run(items))
    finally:
        cache.close()
    return outcomes, engine, sleep


def check_accounting(outcomes: list[CaseJudgement], items: list[JudgeItem]) -> None:
    """Every item comes back once, in order; only judged items carry a verdict and scores."""
    assert [(o.case_id, o.config_id) for o in outcomes] == [(i.case_id, i.config_id) for i in items]
    for o in outcomes:
        assert o.status in ("judged", "judge_error", "skipped")
        if o.status == "judged":
            assert o.claims and o.criteria and o.reason is None
        else:
            assert not o.claims and o.criteria == {}, o
            assert o.reason, o


def statuses(outcomes: list[CaseJudgement]) -> list[str]:
    return [o.status for o in outcomes]


ITEMS = [make_item(n) for n in range(3)]


def test_all_judged_with_one_call_per_item(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        outcomes, engine, _ = run_engine(srv, ITEMS, tmp_path, concurrency=3)
        assert srv.call_count == 3
    check_accounting(outcomes, ITEMS)
    assert statuses(outcomes) == ["judged"] * 3
    for o in outcomes:
        assert o.source == "call" and o.usage.requests == 1
        values = {name: v.value for name, v in o.criteria.items()}
        assert values == {"faithful": 0.5, "citations_supported": 1.0, "correct": 3.0}
        assert (o.label("faithful"), o.label("citations_supported"), o.label("correct")) == (False, True, 3)
    assert engine.totals.usage.requests == 3 and engine.totals.done == 3 and engine.totals.errors == 0
    assert engine.totals.mode == "json_schema" and engine.totals.stopped is None
    record = VERDICT.dump_python(outcomes[0], by_alias=True)
    assert [c["class"] for c in record["claims"]] == ["cited_support", "unsupported"]


def test_429_with_retry_after_is_retried_and_honoured(tmp_path: Path) -> None:
    script = [HTTPError(429, retry_after=5), None, HTTPError(429, retry_after=2)]  # None: a valid verdict

    def act(body: dict, i: int) -> Any:
        action = script[i] if i < len(script) else None
        return action if action is not None else verdict_for_request(body)

    with ScriptedOpenAIServer(act) as srv:
        outcomes, _engine, sleep = run_engine(srv, ITEMS[:2], tmp_path)
        assert srv.call_count == 4
    check_accounting(outcomes, ITEMS[:2])
    assert statuses(outcomes) == ["judged", "judged"]
    assert [o.usage.requests for o in outcomes] == [2, 2]
    assert sleep.waits == [5.0, 2.0]


def test_500_then_success(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([HTTPError(500)], default=verdict_for_request) as srv:
        outcomes, engine, _sleep = run_engine(srv, ITEMS[:2], tmp_path, backoff_initial_s=0)
        assert srv.call_count == 3
    check_accounting(outcomes, ITEMS[:2])
    assert statuses(outcomes) == ["judged", "judged"]
    assert engine.totals.mode == "json_schema"


def test_persistent_500_is_a_judge_error_after_max_attempts(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default=HTTPError(500)) as srv:
        outcomes, engine, _sleep = run_engine(srv, ITEMS[:2], tmp_path, max_attempts=3, backoff_initial_s=0)
        assert srv.call_count == 2 * 3
    check_accounting(outcomes, ITEMS[:2])
    assert statuses(outcomes) == ["judge_error", "judge_error"]
    assert all(o.reason.startswith("HTTP 500 after 3 attempt(s)") for o in outcomes)
    assert engine.totals.errors == 2 and engine.totals.stopped is None  # a 5xx does not stop the run
    # errors are not cached: a later run tries again
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        outcomes, _, _ = run_engine(srv, ITEMS[:2], tmp_path)
        assert srv.call_count == 2
    assert statuses(outcomes) == ["judged", "judged"]


def test_timeout_is_a_judge_error(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default=Hang(10)) as srv:
        outcomes, _engine, _ = run_engine(srv, ITEMS[:2], tmp_path, concurrency=2, timeout_s=0.25,
                                         max_attempts=2, backoff_initial_s=0)
        assert srv.call_count == 4
    check_accounting(outcomes, ITEMS[:2])
    assert statuses(outcomes) == ["judge_error", "judge_error"]
    assert all(o.reason == "timed out after 2 attempt(s)" for o in outcomes)


def test_disconnect_is_retried(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([Disconnect()], default=verdict_for_request) as srv:
        outcomes, _, sleep = run_engine(srv, ITEMS[:2], tmp_path, backoff_initial_s=0)
        assert srv.call_count == 3
    check_accounting(outcomes, ITEMS[:2])
    assert statuses(outcomes) == ["judged", "judged"]
    assert outcomes[0].usage.requests == 2 and len(sleep.waits) == 1


def test_truncated_json_gets_one_repair_then_judged(tmp_path: Path) -> None:
    item = ITEMS[0]
    valid = verdict_dict([cid for cid, _ in item.contexts])
    with ScriptedOpenAIServer([Truncated(valid), Reply(json.dumps(valid))]) as srv:
        outcomes, _, _ = run_engine(srv, [item], tmp_path)
        assert srv.call_count == 2
        repair = srv.requests[1].body["messages"]
    check_accounting(outcomes, [item])
    assert statuses(outcomes) == ["judged"] and outcomes[0].usage.requests == 2
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[2]["content"] == Truncated(valid).truncated_text
    assert "could not be used" in repair[3]["content"] and "JSON" in repair[3]["content"]


def test_bad_repair_is_a_judge_error_after_exactly_two_calls(tmp_path: Path) -> None:
    item = ITEMS[0]
    valid = verdict_dict([cid for cid, _ in item.contexts])
    with ScriptedOpenAIServer([Truncated(valid), Truncated(valid)], default=verdict_for_request) as srv:
        outcomes, _, _ = run_engine(srv, [item], tmp_path)
        assert srv.call_count == 2
    check_accounting(outcomes, [item])
    assert statuses(outcomes) == ["judge_error"]
    assert outcomes[0].reason.startswith("invalid verdict after one repair")
    assert outcomes[0].raw == Truncated(valid).truncated_text  # the raw reply is kept for triage


def test_off_menu_verdict_then_good_repair(tmp_path: Path) -> None:
    item = ITEMS[0]
    bad = verdict_dict([cid for cid, _ in item.contexts])
    bad["claims"][0]["verdict"] = "mostly_true"
    with ScriptedOpenAIServer([json.dumps(bad)], default=verdict_for_request) as srv:
        outcomes, _, _ = run_engine(srv, [item], tmp_path)
        assert srv.call_count == 2
        assert "verdict" in srv.requests[1].body["messages"][-1]["content"]
    assert statuses(outcomes) == ["judged"]


def test_changed_model_id_stops_the_run(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(4)]
    with ScriptedOpenAIServer(lambda body, i: Reply(verdict_for_request(body), model="judge-impostor")) as srv:
        outcomes, engine, _ = run_engine(srv, items, tmp_path, concurrency=1)
        assert srv.call_count == 1
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judge_error"] * 4
    assert "'judge-impostor'" in outcomes[0].reason and "pinned 'judge-test-1'" in outcomes[0].reason
    assert all(o.reason.startswith("not sent: the run stopped after") for o in outcomes[1:])
    assert all(o.usage.requests == 0 for o in outcomes[1:])
    assert engine.totals.stopped and "judge-impostor" in engine.totals.stopped
    # nothing from the other model was cached
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        outcomes, _, _ = run_engine(srv, items, tmp_path)
        assert srv.call_count == 4
    assert statuses(outcomes) == ["judged"] * 4


def test_json_schema_rejected_falls_back_once(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(5)]
    with ScriptedOpenAIServer(verdict_for_request, reject_json_schema=True) as srv:
        outcomes, engine, _ = run_engine(srv, items, tmp_path, concurrency=1)
        assert srv.call_count == 5 + 1  # exactly one extra request, for the whole run
        formats = [r.body["response_format"] for r in srv.requests]
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judged"] * 5
    assert formats[0]["type"] == "json_schema"
    assert formats[1:] == [{"type": "json_object", "schema": RUBRIC.output_schema}] * 5
    assert engine.totals.mode == "json_object_schema"
    assert [o.usage.requests for o in outcomes] == [2, 1, 1, 1, 1]


def test_json_schema_rejected_under_concurrency(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(12)]
    with ScriptedOpenAIServer(verdict_for_request, reject_json_schema=True) as srv:
        outcomes, _engine, _ = run_engine(srv, items, tmp_path, concurrency=4)
        kinds = [r.body["response_format"]["type"] for r in srv.requests]
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judged"] * 12
    # at most one refused request per call of the first wave (later calls start only after a
    # success, so in the negotiated mode)
    assert 1 <= kinds.count("json_schema") <= 4
    assert srv.call_count == 12 + kinds.count("json_schema")


def test_token_budget_skips_later_items(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(4)]

    def script(body: dict, i: int) -> Reply:
        return Reply(verdict_for_request(body), prompt_tokens=100, completion_tokens=50)

    with ScriptedOpenAIServer(script) as srv:
        outcomes, engine, _ = run_engine(srv, items, tmp_path, budget=Budget(max_tokens=300))
        assert srv.call_count == 2
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judged", "judged", "skipped", "skipped"]
    assert all(o.reason == "budget: max_tokens 300 reached" for o in outcomes[2:])
    assert engine.totals.usage.prompt_tokens == 200 and engine.totals.usage.completion_tokens == 100
    assert outcomes[0].usage.prompt_tokens == 100 and outcomes[0].usage.completion_tokens == 50


def test_cost_budget_skips_later_items(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(3)]

    def script(body: dict, i: int) -> Reply:
        return Reply(verdict_for_request(body), prompt_tokens=1000, completion_tokens=1000)

    pricing = Pricing(prompt_per_mtok=2.0, completion_per_mtok=8.0)  # $0.01 per call
    with ScriptedOpenAIServer(script) as srv:
        outcomes, engine, _ = run_engine(srv, items, tmp_path, budget=Budget(max_cost_usd=0.01), pricing=pricing)
        assert srv.call_count == 1
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judged", "skipped", "skipped"]
    assert outcomes[0].usage.cost_usd == pytest.approx(0.01) and engine.totals.usage.cost_usd == pytest.approx(0.01)
    assert all(o.reason == "budget: max_cost_usd 0.01 reached" for o in outcomes[1:])


def test_401_stops_the_run_as_unreachable(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default=HTTPError(401)) as srv:
        outcomes, engine, sleep = run_engine(srv, ITEMS, tmp_path)
        assert srv.call_count == 1
    check_accounting(outcomes, ITEMS)
    assert statuses(outcomes) == ["judge_error"] * 3
    assert outcomes[0].reason.startswith("HTTP 401 after 1 attempt(s)")
    assert all(o.reason.startswith("not sent") for o in outcomes[1:])
    assert engine.totals.stopped and sleep.waits == []


def test_mixed_faults_each_item_ends_honestly(tmp_path: Path) -> None:
    """One run, several items, each with its own fault (picked by its question)."""
    items = [make_item(n) for n in range(5)]
    valid = {i.question: verdict_dict([cid for cid, _ in i.contexts]) for i in items}
    attempts: dict[str, int] = {}

    def script(body: dict, index: int) -> Any:
        q = next(m["content"] for m in body["messages"] if m["role"] == "user").split("\n")[2]
        n = attempts[q] = attempts.get(q, 0) + 1
        if q.endswith("0?"):
            return Reply(json.dumps(valid[q]))  # fine
        if q.endswith("1?"):
            return HTTPError(503) if n == 1 else Reply(json.dumps(valid[q]))  # one hiccup
        if q.endswith("2?"):
            return HTTPError(500)  # never recovers
        if q.endswith("3?"):
            return Truncated(valid[q])  # cut off, twice
        return Reply('{"claims": [{"claim": "x", "verdict": "supported", "support": ["nope#1"]}], '
                     '"correctness": 9}')  # invalid, twice

    with ScriptedOpenAIServer(script) as srv:
        outcomes, engine, _ = run_engine(srv, items, tmp_path, concurrency=3, max_attempts=3, backoff_initial_s=0)
        assert srv.call_count == 1 + 2 + 3 + 2 + 2
    check_accounting(outcomes, items)
    assert statuses(outcomes) == ["judged", "judged", "judge_error", "judge_error", "judge_error"]
    assert outcomes[2].reason.startswith("HTTP 500 after 3 attempt(s)")
    assert outcomes[3].reason.startswith("invalid verdict after one repair")
    assert outcomes[4].reason.startswith("invalid verdict after one repair")
    assert engine.totals.errors == 3 and engine.totals.usage.requests == 10


def test_the_cached_pass_stays_in_one_process_with_every_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                ) -> None:
    """The cached pass stays in one process whatever GROUNDJUDGE_WORKERS says (a worker would
    copy the run's verdicts): the same outcomes as with GROUNDJUDGE_WORKERS=1, in order, with
    the same totals and cache counters, for valid cached verdicts, cached invalid replies and
    misses."""
    from groundjudge.judge.cache import CachedReply
    from groundjudge.judge.client import JudgeUnreachable

    items = [make_item(n) for n in range(40)]
    cache = JudgeCache(tmp_path / "cache")
    probe = JudgeEngine(rubric=RUBRIC, cache=cache, model="m")
    for n, item in enumerate(items):
        if n % 9 == 4:
            continue  # not in the cache: needs a call, and the endpoint is down
        raw = "not json" if n % 7 == 2 else json.dumps(verdict_dict([cid for cid, _ in item.contexts]))
        cache.put(probe.key(item), CachedReply(raw=raw, model="m", prompt_tokens=1, completion_tokens=1,
                                               created=1.0, repaired=True))
    cache.close()

    def unreachable() -> JudgeClient:
        raise JudgeUnreachable("endpoint down", 0)

    def judged(workers: str) -> tuple[list[dict[str, Any]], dict[str, Any], tuple[int, int], list[int]]:
        monkeypatch.setenv("GROUNDJUDGE_WORKERS", workers)
        seen: list[int] = []
        run_cache = JudgeCache(tmp_path / "cache")
        engine = JudgeEngine(rubric=RUBRIC, cache=run_cache, model="m", connect=unreachable, retry_errors=False,
                             on_progress=lambda t: seen.append(t.done))
        try:
            outcomes = asyncio.run(engine.run(items, [f"why {n}" for n in range(len(items))]))
        finally:
            run_cache.close()
        dumped = [VERDICT.dump_python(o, by_alias=True, exclude={"seconds"}) for o in outcomes]
        return dumped, engine.totals.__dict__, (run_cache.hits, run_cache.misses), seen

    alone = judged("1")
    allowed = judged("2")
    assert allowed == alone
    dumped, totals, counters, progress = alone
    missing, invalid = [n for n in range(40) if n % 9 == 4], [n for n in range(40) if n % 7 == 2]
    assert [n for n, d in enumerate(dumped) if d["status"] == "judge_error"] == sorted(missing + invalid)
    assert all(dumped[n]["reason"].startswith("invalid verdict (cached reply)") for n in invalid)
    assert all("endpoint down" in dumped[n]["reason"] for n in missing)
    assert totals["cache_hits"] == 40 - len(missing) and totals["done"] == 40 and totals["errors"] == 10
    assert counters == (40 - len(missing), len(missing))
    assert sorted(progress) == list(range(1, 41))


def test_verdicts_from_the_cache_stay_frozen_and_dump_as_made(tmp_path: Path) -> None:
    """Cached verdicts equal and dump as a verdict made from their fields; a copy is a new record."""
    import msgspec

    from groundjudge.judge.cache import CachedReply

    items = [make_item(n) for n in range(3)]
    cache = JudgeCache(tmp_path / "cache")
    engine = JudgeEngine(rubric=RUBRIC, cache=cache, model="m")
    for item in items:
        cache.put(engine.key(item), CachedReply(raw=json.dumps(verdict_dict([cid for cid, _ in item.contexts])),
                                                model="m", prompt_tokens=1, completion_tokens=1, created=1.0))
    try:
        outcomes = asyncio.run(engine.run(items))
    finally:
        cache.close()
    first, second = outcomes[0], outcomes[1]
    fresh = CaseJudgement(**msgspec.structs.asdict(first))
    assert fresh == first and fresh is not first and hash(fresh) == hash(first)
    assert VERDICT.dump_python(fresh, by_alias=True) == VERDICT.dump_python(first, by_alias=True)
    assert VERDICT.dump_json(fresh) == VERDICT.dump_json(first)
    copied = first.replaced(judge_reason="changed")
    assert copied.judge_reason == "changed" and first.judge_reason != "changed" and second.judge_reason != "changed"
    assert copied.criteria is first.criteria and copied.claims is first.claims  # read-only parts are shared
    with pytest.raises(AttributeError):
        first.judge_reason = "no"  # type: ignore[misc]
    with pytest.raises(ValueError, match="carries a reason and no scores"):  # a copy is checked as a new verdict
        first.replaced(status="skipped", reason="decided")


def test_a_verdicts_criteria_claims_and_nuggets_cannot_be_changed_and_equal_ones_are_shared() -> None:
    """A verdict holds its criteria as a read-only mapping and its claims and nuggets as tuples:
    changing any raises. Verdicts with the same criterion values share one mapping (it cannot
    change, so sharing is safe); they are written as before (objects and arrays)."""
    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.judge.results import CriterionValue, NuggetResult

    claim = ClaimResult.built(claim="Leave is 25 days.", cited=["c1"], verdict="supported", klass="cited_support")
    true, half = CriterionValue(label=True, value=1.0), CriterionValue(label=False, value=0.5)
    made = [CaseJudgement.built(case_id=f"q{n}", config_id="base", status="judged", claims=[claim],
                                criteria={"faithful": true, "cited": half},
                                nuggets=[NuggetResult(text="25 days", stated=True)]) for n in range(3)]
    other = CaseJudgement.built(case_id="q9", config_id="base", status="judged", criteria={"faithful": half})
    first = made[0]
    assert all(m.criteria is first.criteria for m in made) and other.criteria is not first.criteria
    assert first.criteria == {"faithful": true, "cited": half} and isinstance(first.claims, tuple)
    for change in (lambda: first.criteria.__setitem__("faithful", half), lambda: first.criteria.pop("cited"),
                   lambda: first.criteria.update({"x": true}), lambda: first.criteria.clear(),
                   lambda: first.claims.append(claim), lambda: first.nuggets.append(first.nuggets[0])):  # type: ignore[attr-defined]
        with pytest.raises((TypeError, AttributeError)):
            change()
    assert made[1].criteria == {"faithful": true, "cited": half} and len(made[1].claims) == 1
    dumped = VERDICT.dump_python(first, mode="json", by_alias=True)
    assert dumped["criteria"] == {"faithful": {"label": True, "value": 1.0, "confidence": None},
                                  "cited": {"label": False, "value": 0.5, "confidence": None}}
    assert dumped["claims"][0]["class"] == "cited_support" and isinstance(dumped["nuggets"], list)
    assert VERDICT.validate_json(VERDICT.dump_json(first, by_alias=True)) == first


def test_a_verdict_is_a_frozen_record_checked_as_it_is_built_and_read_back_field_by_field() -> None:
    """A verdict the judge stage builds takes its values as they were made (a claim is held as it
    is) and checks what ties them together: a case not judged carries a reason and no scores, its
    status and source are known ones. Read back from a dict or JSON (report.json), every field is
    validated and the same checks hold, with pydantic's errors; it dumps as given."""
    from pydantic import ValidationError

    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.judge.results import NO_USAGE

    claim = ClaimResult.built(claim="Leave is 25 days.", cited=["c1"], verdict="supported", klass="cited_support")
    made = [CaseJudgement.built(case_id=f"q{n}", config_id="base", status="judged", claims=[claim]) for n in range(2)]
    with pytest.raises(AttributeError):  # a claim is a frozen struct: nothing of it changes
        claim.verdict = "unsupported"  # type: ignore[misc]
    with pytest.raises(AttributeError):  # nor of a verdict
        made[0].status = "skipped"  # type: ignore[misc]
    assert claim.cited == ("c1",) and made[0].claims[0] is claim and made[0].usage is NO_USAGE
    assert VERDICT.validate_python(VERDICT.dump_python(made[0], by_alias=True)) == made[0]
    assert VERDICT.validate_python(made[0]) is made[0]  # a verdict given is taken as it is
    assert VERDICT.dump_python(made[0], exclude_defaults=True).keys() == {"case_id", "config_id", "status", "claims"}
    with pytest.raises(ValueError, match="carries a reason and no scores"):
        CaseJudgement.built(case_id="q", config_id="base", status="skipped")
    with pytest.raises(ValueError, match="carries a reason and no scores"):
        CaseJudgement.built(case_id="q", config_id="base", status="judge_error", reason="down", claims=[claim])
    with pytest.raises(ValueError, match="carries a reason and no scores"):
        CaseJudgement(case_id="q", config_id="base", status="skipped", reason="")
    with pytest.raises(ValueError, match="status 'done' is not one of"):
        CaseJudgement(case_id="q", config_id="base", status="done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source 'memo' is not"):
        CaseJudgement(case_id="q", config_id="base", status="judged", source="memo")  # type: ignore[arg-type]
    for bad, where, what in (({"status": "skipped"}, (), "carries a reason and no scores"),
                             ({"status": "done"}, ("status",), "Input should be"),
                             ({"seconds": "soon"}, ("seconds",), "valid number"),
                             ({"claims": [{"claim": "x"}]}, ("claims", 0, "verdict"), "Field required"),
                             ({"colour": "red"}, ("colour",), "Extra inputs are not permitted")):
        for read in (VERDICT.validate_python, lambda value: VERDICT.validate_json(json.dumps(value))):
            with pytest.raises(ValidationError) as caught:
                read({"case_id": "q", "config_id": "base", "status": "judged", **bad})
            error = caught.value.errors()[0]
            assert error["loc"] == where and what in error["msg"], (bad, error)
    copied = made[0].replaced(judge_reason="changed")
    assert copied.judge_reason == "changed" and made[0].judge_reason is None and copied.claims is made[0].claims


def test_the_published_schema_of_a_verdict_is_the_one_it_always_had() -> None:
    """report.json's schema gives a verdict the fields, defaults and rule (a case not judged
    carries a reason and no scores) it had as a pydantic model; documents it accepts read back."""
    import jsonschema

    from groundjudge.report.document import ReportDocument

    schema = ReportDocument.model_json_schema(by_alias=True)
    verdict = schema["$defs"]["CaseJudgement"]
    assert verdict["title"] == "CaseJudgement" and verdict["additionalProperties"] is False
    assert verdict["required"] == ["case_id", "config_id", "status"]
    assert list(verdict["properties"]) == list(CaseJudgement.__struct_fields__)
    assert verdict["properties"]["claims"] == {"default": [], "items": {"$ref": "#/$defs/ClaimResult"},
                                               "title": "Claims", "type": "array"}
    assert verdict["properties"]["seconds"] == {"default": 0.0, "title": "Seconds", "type": "number"}
    assert verdict["if"] == {"properties": {"status": {"enum": ["judge_error", "skipped"]}}}
    check = jsonschema.Draft202012Validator({**verdict, "$defs": schema["$defs"]})
    made = CaseJudgement(case_id="q", config_id="base", status="judge_error", reason="down")
    assert not list(check.iter_errors(VERDICT.dump_python(made, mode="json")))
    assert list(check.iter_errors({"case_id": "q", "config_id": "base", "status": "skipped"}))


@pytest.mark.parametrize("at_once", [1, 2, 5, 64])
def test_the_batched_cached_pass_gives_what_each_item_alone_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   at_once: int) -> None:
    """The cached pass reads its replies together, ``at_once`` at a time; each item's verdict,
    and each reply it cannot use (prose around the object, invalid JSON, a stray support id, a
    reply cut off inside a string next to one that holds two objects), is what the per-item path
    makes of it: a verdict (and the same one), or no verdict, to be asked again."""
    import importlib

    from groundjudge.judge.cache import CachedReply

    monkeypatch.setattr(importlib.import_module("groundjudge.judge.one_call_json"), "_READ_AT_ONCE", at_once)

    items = [make_item(n) for n in range(12)]
    cache = JudgeCache(tmp_path / "cache")
    engine = JudgeEngine(rubric=RUBRIC, cache=cache, model="m", retry_errors=False)  # a broken reply: an error
    good = [json.dumps(verdict_dict([cid for cid, _ in item.contexts])) for item in items]
    raws = {0: good[0], 1: "Sure! " + good[1], 2: "not json", 3: '{"claims": [], "reason": "a',
            4: 'b"}', 5: good[5] + "," + good[5], 6: good[6].replace(items[6].contexts[0][0], "zz#9"),
            8: good[8], 9: good[9][:-1] + ', "extra": [1, 2.5, null]}', 10: "", 11: good[11]}
    for n, raw in raws.items():  # item 7: not in the cache
        cache.put(engine.key(items[n]), CachedReply(raw=raw, model="m", prompt_tokens=1, completion_tokens=1,
                                                    created=1.0, repaired=True))
    try:
        looked = engine.from_cache_only(items, [f"why {n}" for n in range(len(items))])
        alone = [asyncio.run(engine.protocol.run_item(item, asyncio.Semaphore(1), {})) if n != 7 else None  # type: ignore[attr-defined]
                 for n, item in enumerate(items)]
    finally:
        cache.close()
    settled = [n for n, (result, _, _) in enumerate(looked) if result is not None]
    assert settled == [n for n, pending in enumerate(alone) if pending is not None and pending.status == "judged"]
    assert settled == [0, 1, 5, 8, 9, 11]  # 5: the lenient reading takes its first object
    for n in settled:
        result = looked[n][0]
        assert result is not None
        expected = alone[n].result(f"why {n}")  # type: ignore[union-attr]
        assert VERDICT.dump_python(result, by_alias=True, exclude={"seconds"}) == VERDICT.dump_python(
            expected, by_alias=True, exclude={"seconds"})
    assert [looked[n][2] is not None for n in range(len(items))] == [n not in settled and n != 7
                                                                     for n in range(len(items))]
    assert all(alone[n].reason.startswith("invalid verdict (cached reply)")  # type: ignore[union-attr]
               for n in range(len(items)) if n not in settled and n != 7)


def test_the_cached_batch_and_the_item_path_give_the_same_results(tmp_path: Path) -> None:
    """Replies settled together from the cache (``from_cache_only``) give what the item path
    (``run_item``) gives for the same entry, field for field and in the totals; a reply that is
    no valid verdict is settled by neither, and goes on to be asked again."""
    from groundjudge.judge.cache import CachedReply

    items = [make_item(n, contexts=2 + n % 2, expected_answer=None if n % 4 == 3 else "the expected answer")
             for n in range(12)]
    cache = JudgeCache(tmp_path / "cache")
    engine = JudgeEngine(rubric=RUBRIC, cache=cache, model="m")
    broken = {5, 9}
    for n, item in enumerate(items):
        ids = [cid for cid, _ in item.contexts]
        reply = verdict_dict(ids, correctness=n % 4)
        if n % 3 == 1:  # cited by one chunk, supported by another
            reply["claims"][0]["support"] = ids[-1:]
        if n in broken:  # support names a chunk outside the context: not a verdict
            reply["claims"][0]["support"] = ["elsewhere#1"]
        cache.put(engine.key(item), CachedReply(raw=json.dumps(reply), model="m", prompt_tokens=1,
                                                completion_tokens=1, created=1.0, repaired=True))
    why = [f"why {n}" if n % 2 else None for n in range(len(items))]
    try:
        batch = engine.from_cache_only(items, why)
        alone = JudgeEngine(rubric=RUBRIC, cache=cache, model="m", retry_errors=False)
        one_by_one = [asyncio.run(alone.protocol.run_item(item, asyncio.Semaphore(1), {}))  # type: ignore[attr-defined]
                      for item in items]
    finally:
        cache.close()
    assert [n for n, (result, _, _) in enumerate(batch) if result is None] == sorted(broken)
    assert all(batch[n][2] is not None for n in broken)  # the entry found goes on to the call path
    assert [one_by_one[n].status for n in broken] == ["judge_error"] * len(broken)
    for n, (result, key, _) in enumerate(batch):
        assert key == engine.key(items[n])
        if result is not None:
            assert VERDICT.dump_python(result) == VERDICT.dump_python(one_by_one[n].result(why[n])), n
            claim = result.claims[0]
            assert claim.support is claim.cited if n % 3 != 1 else claim.support != claim.cited
    assert (engine.totals.cache_hits, engine.totals.done) == (len(items) - len(broken),) * 2
    assert alone.totals.cache_hits == len(items)  # the item path counts the broken entries as hits, then errors
