"""The judge cache: keyed by everything a verdict depends on, raw replies parsed after lookup."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from groundjudge import api
from groundjudge.judge.cache import CachedReply, JudgeCache, cache_key
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import JudgeEngine
from groundjudge.judge.render import JudgeItem
from groundjudge.judge.results import CaseJudgement
from groundjudge.judge.rubric import Rubric, load_rubric, lock_rubrics
from tests.support.judge_replies import make_item, verdict_dict, verdict_for_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
RUBRICS = ROOT / "rubrics"
RUBRIC = load_rubric(RUBRICS, "grounded_answer")
SETTINGS = ClientSettings(base_url="http://127.0.0.1:1/v1", model="judge-test-1")
ITEMS = [make_item(n) for n in range(6)]


def run(srv: ScriptedOpenAIServer, items: list[JudgeItem], cache_dir: Path, *, rubric: Rubric = RUBRIC,
        model: str | None = None, enabled: bool = True, retry_errors: bool = True,
        **settings: Any) -> tuple[list[CaseJudgement], dict]:
    client = JudgeClient(ClientSettings(base_url=srv.base_url, model=model or srv.model, backoff_initial_s=0,
                                        **settings))
    cache = JudgeCache(cache_dir, enabled=enabled)
    engine = JudgeEngine(rubric=rubric, client=client, cache=cache, concurrency=4, retry_errors=retry_errors)
    try:
        outcomes = asyncio.run(engine.run(items))
        stats = cache.stats()
    finally:
        cache.close()
    return outcomes, stats


def replace(item: JudgeItem, **changes: Any) -> JudgeItem:
    return msgspec.structs.replace(item, **changes)


# ---------------------------------------------------------------------------------- the key


def test_key_is_the_hash_of_the_canonical_json_document() -> None:
    """The key is assembled from pieces for speed: it must stay the SHA-256 of one
    ``json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"))`` of every input,
    whatever the text holds, or every cache made so far would stop answering."""
    import hashlib
    import random

    from groundjudge.judge.cache import canonical_key_document

    rng = random.Random(11)
    alphabet = ["a", "Z", " ", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "€", "😀",
                "\ufeff", "/", "<", "&"]

    def text(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(n)))

    decodings = [SETTINGS.decoding(), {"temperature": 0, "top_p": 1e-05, "seed": None, "stop": ["\n", "é"]}]
    for n in range(300):
        item = JudgeItem(case_id=f"c{n}", config_id="base", question=text(30),
                         contexts=[(text(8), text(60)) for _ in range(rng.randrange(4))], answer=text(80),
                         citations=[text(6) for _ in range(rng.randrange(3))],
                         expected_answer=rng.choice([None, text(20)]))
        decoding = decodings[n % 2]
        reference = json.dumps(canonical_key_document(RUBRIC, "m-é", decoding, item), sort_keys=True,
                               ensure_ascii=False, separators=(",", ":"))
        assert cache_key(RUBRIC, "m-é", decoding, item) == hashlib.sha256(reference.encode("utf-8")).hexdigest()
    # the key of a fixed item, as every version before the pieces made it: caches stay valid
    assert cache_key(RUBRIC, "judge-test-1", {"temperature": 0.0, "seed": 7, "max_tokens": 700}, ITEMS[0]) == (
        "4ab879f25da4a73e3ca9617fe229701d8d15b386e8c1892eb30c2445f189695b")
    # text that is not valid Unicode is refused as before (it cannot be written as UTF-8)
    with pytest.raises(UnicodeEncodeError):
        cache_key(RUBRIC, "m", SETTINGS.decoding(), replace(ITEMS[0], answer="half \udcff"))


def test_keys_stay_those_of_every_earlier_version(tmp_path: Path) -> None:
    """Users' caches are found by these keys: for varied items (text of every kind, no contexts,
    no expected answer, lists where tuples are usual) the key is the one earlier versions made,
    whether made alone (``cache_key``) or by the engine for a batch of items it looks up."""
    decoding = {"temperature": 0.0, "seed": 7, "max_tokens": 700}
    items = [
        JudgeItem(case_id="q1", config_id="base", question="How many days?", contexts=(("a#1", "Staff get 15 days."),),
                  answer="15 days [a#1].", citations=("a#1",), expected_answer="15 days"),
        JudgeItem(case_id="q2", config_id="cand", question="Où est le café ? 😀",
                  contexts=[("é#1", "Le café\nest \"ici\"\t\u2028."), ("b#2", "")], answer="Ici.\u2029", citations=[],
                  expected_answer=None),
        JudgeItem(case_id="q3", config_id="cand", question="", contexts=(), answer="", citations=(), expected_answer=""),
        JudgeItem(case_id="q4", config_id="x", question="q\x00\x1f\x7f",
                  contexts=(("c#1", "<b>&amp;</b>/\\"), ("c#2", "two"), ("c#3", "three")), answer="a\ufeff",
                  citations=("c#2", "c#1", "zz"), expected_answer="\\u0041"),
    ]
    before = ["17c7c7c3fe69f4b2fb0ec4be7ca30f81ca6b508e66a27cb3e99759c5d27a4d43",
              "3716bc7c40f0f619113895fb41099f5a1ac9f85b865ea720265720ae7de508fd",
              "e48784456e696e40d6b0c2d5106af47df636ea59e771927231a822dfdcea1fa0",
              "02f2761dea12000e3b8a23af59fa1849c288f382d292743385c6b787a7b37a0b"]
    assert [cache_key(RUBRIC, "judge-test-1", decoding, item) for item in items] == before
    cache = JudgeCache(tmp_path / "cache")
    try:
        engine = JudgeEngine(rubric=RUBRIC, cache=cache, model="judge-test-1", decoding=decoding)
        looked = engine.from_cache_only(items, [None] * len(items))
    finally:
        cache.close()
    assert [key for _, key, _ in looked] == before


def test_key_is_deterministic_and_hex() -> None:
    key = cache_key(RUBRIC, "m", SETTINGS.decoding(), ITEMS[0])
    assert key == cache_key(RUBRIC, "m", SETTINGS.decoding(), make_item(0))
    assert len(key) == 64 and int(key, 16) >= 0


@pytest.mark.parametrize("change", [
    {"question": "another question"},
    {"answer": "another answer"},
    {"expected_answer": "another expected answer"},
    {"expected_answer": None},
    {"citations": ("doc0#2",)},
    {"citations": ()},
    {"contexts": (("doc0#1", "Chunk doc0#1 states fact number 0!"), ("doc0#2", "Chunk doc0#2 states fact number 0."))},
    {"contexts": (("doc0#2", "Chunk doc0#2 states fact number 0."), ("doc0#1", "Chunk doc0#1 states fact number 0."))},
    {"contexts": (("other#1", "Chunk doc0#1 states fact number 0."), ("doc0#2", "Chunk doc0#2 states fact number 0."))},
    {"contexts": (("doc0#1", "Chunk doc0#1 states fact number 0."),)},
])
def test_every_judged_input_is_in_the_key(change: dict[str, Any]) -> None:
    base = cache_key(RUBRIC, "m", SETTINGS.decoding(), ITEMS[0])
    assert cache_key(RUBRIC, "m", SETTINGS.decoding(), replace(ITEMS[0], **change)) != base


def test_model_rubric_and_decoding_are_in_the_key(tmp_path: Path) -> None:
    base = cache_key(RUBRIC, "m", SETTINGS.decoding(), ITEMS[0])
    assert cache_key(RUBRIC, "m2", SETTINGS.decoding(), ITEMS[0]) != base
    for decoding in (dataclasses.replace(SETTINGS, seed=1), dataclasses.replace(SETTINGS, temperature=0.2),
                     dataclasses.replace(SETTINGS, max_tokens=99), dataclasses.replace(SETTINGS, output_mode="json")):
        assert cache_key(RUBRIC, "m", decoding.decoding(), ITEMS[0]) != base
    v2 = RUBRIC.model_copy(update={"version": 2})
    assert cache_key(v2, "m", SETTINGS.decoding(), ITEMS[0]) != base
    edited = RUBRIC.model_copy(update={"description": RUBRIC.description + "!"})
    assert edited.content_hash != RUBRIC.content_hash
    assert cache_key(edited, "m", SETTINGS.decoding(), ITEMS[0]) != base


def test_transport_settings_and_the_case_identity_are_not_in_the_key() -> None:
    base = cache_key(RUBRIC, "m", SETTINGS.decoding(), ITEMS[0])
    transport = dataclasses.replace(SETTINGS, base_url="http://elsewhere/v1", api_key="sk-x", timeout_s=3,
                                    max_attempts=9, requests_per_minute=10, backoff_initial_s=5)
    assert cache_key(RUBRIC, "m", transport.decoding(), ITEMS[0]) == base
    # the same judgment for another config (or case id) is the same judgment
    assert cache_key(RUBRIC, "m", SETTINGS.decoding(), replace(ITEMS[0], config_id="other", case_id="x")) == base


# ----------------------------------------------------------------------------- re-runs


def test_unchanged_rerun_makes_zero_calls(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        first, stats1 = run(srv, ITEMS, tmp_path)
        assert srv.call_count == 6
        srv.reset()
        second, stats2 = run(srv, ITEMS, tmp_path)
        assert srv.call_count == 0
    assert [o.status for o in second] == ["judged"] * 6
    assert all(o.source == "cache" and o.usage.requests == 0 for o in second)
    assert [o.criteria for o in second] == [o.criteria for o in first]
    assert [o.raw for o in second] == [o.raw for o in first]
    assert (stats1["misses"], stats1["hits"], stats1["entries"]) == (6, 0, 6)
    assert (stats2["misses"], stats2["hits"], stats2["entries"]) == (0, 6, 6)
    assert stats2["size_bytes"] > 0


@pytest.mark.parametrize("what", ["context_text", "answer"])
def test_changing_one_case_rejudges_only_that_case(tmp_path: Path, what: str) -> None:
    changed = list(ITEMS)
    if what == "context_text":
        cid, text = changed[2].contexts[1]
        changed[2] = replace(changed[2], contexts=(changed[2].contexts[0], (cid, text + " Also 7.")))
    else:
        changed[4] = replace(changed[4], answer=changed[4].answer + " And more.")
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        run(srv, ITEMS, tmp_path)
        srv.reset()
        outcomes, _ = run(srv, changed, tmp_path)
        assert srv.call_count == 1
        sent = srv.requests[0].body["messages"][1]["content"]
    index = 2 if what == "context_text" else 4
    assert [o.source for o in outcomes] == ["call" if i == index else "cache" for i in range(6)]
    assert changed[index].question in sent


def test_changing_the_model_rejudges_everything(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        run(srv, ITEMS, tmp_path)
    with ScriptedOpenAIServer(verdict_for_request, model="judge-test-2") as srv:
        outcomes, _ = run(srv, ITEMS, tmp_path)
        assert srv.call_count == 6
        srv.reset()
        run(srv, ITEMS, tmp_path)
        assert srv.call_count == 0
    assert all(o.status == "judged" and o.source == "call" for o in outcomes)


def test_a_new_rubric_version_rejudges_everything(tmp_path: Path) -> None:
    rubrics = Path(shutil.copytree(RUBRICS, tmp_path / "rubrics"))
    v2 = rubrics / "grounded_answer" / "v2.yaml"
    data = yaml.safe_load((rubrics / "grounded_answer" / "v1.yaml").read_text(encoding="utf-8"))
    data["version"] = 2
    data["system_prompt"] = data["system_prompt"].replace("strict grader", "strict and careful grader")
    v2.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    lock_rubrics(rubrics)
    rubric_v2 = load_rubric(rubrics, "grounded_answer")
    assert rubric_v2.version == 2
    cache_dir = tmp_path / "cache"
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        run(srv, ITEMS, cache_dir)
        srv.reset()
        outcomes, _ = run(srv, ITEMS, cache_dir, rubric=rubric_v2)
        assert srv.call_count == 6
        assert "strict and careful grader" in srv.requests[0].body["messages"][0]["content"]
        srv.reset()
        # both versions stay cached side by side
        run(srv, ITEMS, cache_dir, rubric=load_rubric(rubrics, "grounded_answer", 1))
        run(srv, ITEMS, cache_dir, rubric=rubric_v2)
        assert srv.call_count == 0
    assert all(o.status == "judged" for o in outcomes)


def test_disabled_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        run(srv, ITEMS[:2], tmp_path / "c", enabled=False)
        _, stats = run(srv, ITEMS[:2], tmp_path / "c", enabled=False)
        assert srv.call_count == 4
    assert stats["entries"] == 0 and stats["enabled"] is False


# ------------------------------------------------------------- raw replies, parsed after


def _key(item: JudgeItem, model: str = "judge-test-1") -> str:
    return cache_key(RUBRIC, model, ClientSettings(base_url="x", model=model).decoding(), item)


def _put(cache_dir: Path, item: JudgeItem, raw: str, *, repaired: bool = False) -> None:
    cache = JudgeCache(cache_dir)
    cache.put(_key(item), CachedReply(raw=raw, model="judge-test-1", prompt_tokens=10, completion_tokens=5,
                                      created=time.time(), repaired=repaired))
    cache.close()


def test_the_raw_reply_is_what_is_stored(tmp_path: Path) -> None:
    item = ITEMS[0]
    raw = "Here you go:\n```json\n" + json.dumps(verdict_dict([c for c, _ in item.contexts])) + "\n```"
    with ScriptedOpenAIServer([Reply(raw, prompt_tokens=123, completion_tokens=45)]) as srv:
        (outcome,), _ = run(srv, [item], tmp_path, api_key="sk-secret-never-on-disk")
    assert outcome.status == "judged" and outcome.cache_key == _key(item)
    cache = JudgeCache(tmp_path)
    stored = cache.get(_key(item))
    cache.close()
    assert stored is not None
    assert (stored.raw, stored.model, stored.prompt_tokens, stored.completion_tokens) == (raw, "judge-test-1", 123, 45)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"sk-secret-never-on-disk" not in on_disk


INVALID = '{"claims": [{"claim": "x", "verdict": "probably", "support": []}], "correctness": 2}'


def test_a_cached_invalid_repair_reply_is_a_judge_error_without_a_call_when_errors_are_kept(tmp_path: Path) -> None:
    item = ITEMS[0]
    _put(tmp_path, item, INVALID, repaired=True)
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        (outcome,), stats = run(srv, [item], tmp_path, retry_errors=False)
        assert srv.call_count == 0
    assert outcome.status == "judge_error" and outcome.source == "cache" and outcome.criteria == {}
    assert outcome.reason.startswith("invalid verdict (cached reply)")
    assert stats["hits"] == 1


def test_an_item_broken_twice_is_asked_again_on_a_rerun_and_keeps_its_history(tmp_path: Path) -> None:
    """A reply and its repair both broken (a flaky network, say): the next run asks again, and the
    broken replies stay in the cache entry's history; judged items still cost nothing."""
    item, other = ITEMS[0], ITEMS[1]
    flaky = {"on": True}

    def script(body: dict, index: int) -> Any:
        if flaky["on"] and item.question in json.dumps(body, ensure_ascii=False):
            return "cut off {"
        return verdict_for_request(body, index)

    with ScriptedOpenAIServer(script) as srv:
        (first, judged), _ = run(srv, [item, other], tmp_path)
        assert first.status == "judge_error" and judged.status == "judged"
        flaky["on"] = False
        srv.reset()
        (again, still), _ = run(srv, [item, other], tmp_path)
        assert srv.call_count == 1  # the errored item, asked afresh; the judged one from the cache
    assert again.status == "judged" and again.source == "call" and still.source == "cache"
    cache = JudgeCache(tmp_path)
    entry = cache.get(_key(item))
    cache.close()
    assert entry is not None and entry.history == ["cut off {", "cut off {"] and not entry.repaired


def test_a_cached_invalid_first_reply_costs_only_the_repair_call(tmp_path: Path) -> None:
    """A run stopped between a bad first reply and its repair resumes with the repair alone."""
    item = ITEMS[0]
    _put(tmp_path, item, INVALID, repaired=False)
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        (outcome,), _ = run(srv, [item], tmp_path)
        assert srv.call_count == 1
        repair_messages = srv.requests[0].body["messages"]
    assert repair_messages[-2] == {"role": "assistant", "content": INVALID}
    assert outcome.status == "judged" and outcome.criteria["faithful"].label is not None
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        (again,), _ = run(srv, [item], tmp_path)
        assert srv.call_count == 0 and again.status == "judged"


def test_a_cached_reply_is_reparsed_with_the_current_parser(tmp_path: Path) -> None:
    """The cache holds text, not a parse: a reply in prose and a fence is read by today's parser."""
    item = ITEMS[1]
    body = verdict_dict([c for c, _ in item.contexts], correctness=1)
    _put(tmp_path, item, 'I think {"note": 1} is irrelevant. ```json\n' + json.dumps(body) + "\n``` done")
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        (outcome,), _ = run(srv, [item], tmp_path)
        assert srv.call_count == 0
    assert outcome.status == "judged" and outcome.source == "cache" and outcome.criteria["correct"].label == 1


def test_a_failed_repair_is_cached_and_not_paid_for_again_when_errors_are_kept(tmp_path: Path) -> None:
    item = ITEMS[0]
    with ScriptedOpenAIServer(default="not json at all") as srv:
        (first,), _ = run(srv, [item], tmp_path)
        assert srv.call_count == 2
        srv.reset()
        (second,), _ = run(srv, [item], tmp_path, retry_errors=False)
        assert srv.call_count == 0
    assert first.status == second.status == "judge_error"
    assert second.source == "cache" and second.raw == "not json at all"


# ---------------------------------------------------------------------- housekeeping


def test_stats_prune_and_clear(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    now = time.time()
    cache.put("old", CachedReply("{}", "m", 1, 1, now - 10 * 86400))
    cache.put("new", CachedReply("{}", "m", 1, 1, now))
    assert cache.get("missing") is None
    assert cache.get("new").raw == "{}"
    assert cache.stats()["entries"] == 2 and cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1
    assert cache.prune(older_than_days=5) == 1
    assert cache.get("old") is None and cache.get("new") is not None
    assert cache.clear() == 1 and cache.stats()["entries"] == 0
    cache.close()


# ------------------------------------------------------------ through the library API


def test_editing_one_corpus_chunk_rejudges_exactly_the_cases_that_show_it(tmp_path: Path) -> None:
    examples = Path(shutil.copytree(ROOT / "examples", tmp_path / "examples"))
    config_path = examples / "judge-only.toml"
    config_path.write_text('[inputs]\ngolden = "golden.jsonl"\ncorpus = "corpus.jsonl"\n'
                           'traces = ["traces/baseline.jsonl", "traces/candidate.jsonl"]\n', encoding="utf-8")

    def config() -> Any:
        return api.resolve_config(config_path, {"judge.base_url": srv.base_url, "judge.model": srv.model, "judge.rubric": "grounded_answer",
                                                "cache.dir": tmp_path / "cache"}, environ={})

    def run_eval() -> Any:
        with api.open_judge(config(), quiet=True) as judge:
            return api.run_eval(config(), judge)

    with ScriptedOpenAIServer(verdict_for_request) as srv:
        first = run_eval()
        judged = [s for s in first.selections if s.judge]
        assert srv.call_count == len(judged) == 82
        srv.reset()
        again = run_eval()
        assert srv.call_count == 0 and again.judge.totals.cache_hits == 82

        target = "billing-v2#2"
        lines = (examples / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            record = json.loads(line)
            if record["chunk_id"] == target:
                record["text"] += " (Updated.)"
                lines[i] = json.dumps(record, ensure_ascii=False)
        (examples / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        affected = {(s.config_id, s.case_id) for s in judged if any(cid == target for cid, _ in s.item.contexts)}
        assert affected
        srv.reset()
        third = run_eval()
        assert srv.call_count == len(affected)
    cases = [c for section in third.judge.per_config.values() for c in section.cases.values() if c.source]
    called = {(c.config_id, c.case_id) for c in cases if c.source == "call"}
    assert called == affected
    assert all(c.status == "judged" for c in cases)


def test_the_derivation_hash_changes_with_the_judge_code_and_without_sources_lives_one_process(tmp_path: Path) -> None:
    """claim_check's case memos are keyed by it: an edit to how answers are read or combined must
    make them unused (the cases are rebuilt from the stored answers)."""
    import subprocess
    import sys

    src = ROOT / "src" / "groundjudge"
    copy = tmp_path / "src" / "groundjudge"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def hashed() -> str:
        code = "from groundjudge.judge.cache import derivation_hash; print(derivation_hash())"
        return subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(tmp_path / "src")},
                              capture_output=True, text=True, check=True).stdout.strip()

    first = hashed()
    assert first == hashed() and len(first) == 64
    claims = copy / "judge" / "claims.py"
    claims.write_text(claims.read_text() + "\n# a change to how answers are split\n")
    edited = hashed()
    assert edited != first
    import compileall

    compileall.compile_dir(copy, quiet=1, legacy=True)  # byte code only: nothing to tell versions apart by
    for source in copy.rglob("*.py"):
        source.unlink()
    assert len({hashed(), hashed(), edited}) == 3
