"""Batch judging against the scripted server's Files and Batch APIs: submit, kill, collect;
failed lines, an expired batch, a server restart mid-poll; the vLLM offline file format."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pydantic import BaseModel, ConfigDict

from groundjudge.cli import EXIT_BATCH_PENDING, main
from groundjudge.judge.batch import BatchRecord, LineInfo, collect_lines, load_state, plan_requests
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings
from groundjudge.judge.engine import JudgeEngine, Pricing
from groundjudge.judge.rubric import load_rubric
from tests.support.judge_replies import claim_answer, question_in_request, verdict_for_request
from tests.support.openai_server import BatchBackend, HTTPError, Reply, ScriptedOpenAIServer
from tests.test_run_cli import (
    BAD_QUESTION,
    EXAMPLE,
    ROOT,
    check_report,
    cli_env,
    example_script,
    groundjudge_run,
)

QUESTIONS = {json.loads(line)["id"]: json.loads(line)["question"]
             for line in (ROOT / "examples" / "golden.jsonl").read_text().splitlines() if line.strip()}


def run_args(srv: ScriptedOpenAIServer, tmp_path: Path, *extra: str) -> list[str]:
    return groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet", "--batch", *extra)[3:]


def test_submit_kill_and_collect_with_no_live_calls(tmp_path: Path) -> None:
    backend = BatchBackend(polls_to_complete=10_000)  # stays in progress while the first process polls
    env = {**cli_env(), "PYTHONPATH": str(ROOT / "src")}
    with ScriptedOpenAIServer(example_script, batches=backend) as srv:
        first = subprocess.Popen(groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet", "--batch",
                                                 "--batch-wait", "600"), cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        state = tmp_path / "out" / "batch" / "state.json"
        deadline = time.monotonic() + 60
        while not (state.exists() and backend.batches) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        first.send_signal(signal.SIGKILL)  # killed while polling
        first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        submitted = load_state(tmp_path / "out")
        assert submitted is not None and len(submitted.batches) == 1 and not submitted.batches[0].collected
        assert len(submitted.batches[0].lines) == 82  # one request per judged case: 80 + q002 twice
        lines = Path(submitted.batches[0].input_path).read_text().splitlines()
        assert [json.loads(x)["custom_id"] for x in lines] == list(submitted.batches[0].lines)
        assert all(json.loads(x)["url"] == "/v1/chat/completions" and json.loads(x)["method"] == "POST"
                   for x in lines)
        assert srv.call_count == 0 and not backend.lines

        backend.polls_to_complete = 1
        collect = subprocess.run([sys.executable, "-m", "groundjudge.cli", "batch", "collect", str(tmp_path / "out"),
                                  "--wait", "60", "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=180)
        live_calls = srv.call_count
    assert collect.returncode == 0, collect.stderr
    assert live_calls == 0  # every verdict came from the batches
    assert len(backend.lines) == 84  # 82 first requests, then q002's two repairs in a following batch
    repairs = [line for line in backend.lines if line["custom_id"].endswith("-repair")]
    assert len(repairs) == 2 and all(question_in_request(r["body"]) == BAD_QUESTION for r in repairs)
    assert all(r["body"]["messages"][-2]["role"] == "assistant" for r in repairs)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(report) == {"judged": 80, "skipped": 20, "judge_error": 2}
    for cfg in ("baseline", "candidate"):
        assert report["judge"]["per_config"][cfg]["cases"]["q002"]["status"] == "judge_error"
    usage = report["judge"]["totals"]["usage"]
    assert usage["requests"] == 84 and usage["prompt_tokens"] > 0  # the batches' spend, counted once
    final = load_state(tmp_path / "out")
    assert final is not None and [b.collected for b in final.batches] == [True, True] and not final.live

    # the same command again (keeping the errors, as a live re-run would): nothing sent anywhere
    with ScriptedOpenAIServer(example_script, batches=BatchBackend()) as srv:
        again = subprocess.run(groundjudge_run(srv.base_url, srv.model, tmp_path / "again", "--quiet", "--batch",
                                               "--keep-errors", "--cache-dir", str(tmp_path / "cache")),
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert srv.call_count == 0 and not srv.batches.batches


def _faulty_batch_script(failing: set[str]) -> Any:
    def script(body: dict, index: int) -> Any:
        if question_in_request(body) in failing:
            return HTTPError(500)
        return example_script(body, index)
    return script


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _one_attempt_config(tmp_path: Path) -> Path:
    """The example with one attempt per live call (no backoff waits in the test)."""
    text = EXAMPLE.read_text().replace("concurrency = 4", "concurrency = 4\nmax_attempts = 1")
    for name in ("golden.jsonl", "corpus.jsonl", "traces/baseline.jsonl", "traces/candidate.jsonl"):
        text = text.replace(f'"{name}"', f'"{ROOT / "examples" / name}"')
    text = text.replace('labels = ["../calibration/labels/example_rater_a.jsonl", '
                        '"../calibration/labels/example_rater_b.jsonl"]', "")
    path = tmp_path / "groundjudge.toml"
    path.write_text(text.replace('records_dir = "../calibration/records"',
                                 f'records_dir = "{ROOT / "calibration" / "records"}"'))
    return path


def test_failed_lines_go_live_and_end_judged_or_judge_error(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    flaky, broken = QUESTIONS["q001"], QUESTIONS["q003"]
    # in the batch q001 and q003 fail; live, q001 answers and q003 fails again
    backend = BatchBackend(script=_faulty_batch_script({flaky, broken}))
    with ScriptedOpenAIServer(_faulty_batch_script({broken}), batches=backend) as srv:
        args = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--quiet", "--batch"]
        submitted = _invoke(args)
        assert submitted.exit_code == EXIT_BATCH_PENDING, submitted.output
        done = _invoke(["batch", "collect", str(tmp_path / "out"), "--quiet", "--wait", "5"])  # q002's repairs: a 2nd batch
        live = [question_in_request(r.body) for r in srv.requests]
    assert done.exit_code in (0, 1), done.output
    state = load_state(tmp_path / "out")
    assert state is not None
    failed = {state.batches[0].lines[c].case_id: r for c, r in state.batches[0].failed.items()}
    assert set(failed) == {"q001", "q003"} and all(r.startswith("batch line failed: HTTP 500") for r in failed.values())
    assert Counter(live) == {flaky: 2, broken: 2}  # only the failed lines, once each per config, live
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    counts = check_report(report)
    assert sum(counts.values()) == 102  # none lost
    for cfg in ("baseline", "candidate"):
        cases = report["judge"]["per_config"][cfg]["cases"]
        assert cases["q001"]["status"] == "judged" and cases["q001"]["source"] == "call"
        assert cases["q003"]["status"] == "judge_error" and cases["q003"]["reason"].startswith("HTTP 500")


def test_expired_batch_answers_what_it_did_and_the_rest_goes_live(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    backend = BatchBackend(expire_after=30)
    with ScriptedOpenAIServer(example_script, batches=backend) as srv:
        args = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--quiet", "--batch"]
        assert _invoke(args).exit_code == EXIT_BATCH_PENDING
        backend.expire_after = None  # a repair batch that follows completes
        done = _invoke(["batch", "collect", str(tmp_path / "out"), "--quiet", "--wait", "5"])
        live_calls = srv.call_count
    assert done.exit_code in (0, 1), done.output
    state = load_state(tmp_path / "out")
    assert state is not None and state.batches[0].status == "expired"
    assert state.batches[0].stored == 30 and len(state.batches[0].failed) == 52
    assert all("batch_expired" in r for r in state.batches[0].failed.values())
    # the 52 unanswered lines went live (q002 also with its repair, live); q002 answered by
    # the batch was repaired in a following batch
    q002 = {info.key for info in state.batches[0].lines.values() if info.case_id == "q002"}
    assert live_calls == 52 + len(q002 & set(state.live))
    assert len(backend.lines) == 30 + len(q002 - set(state.live))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(report) == {"judged": 80, "skipped": 20, "judge_error": 2}


def test_server_restart_mid_poll_is_survived(tmp_path: Path) -> None:
    backend = BatchBackend(polls_to_complete=2)
    first = ScriptedOpenAIServer(verdict_for_request, batches=backend).start()
    port = first.port
    args = ["run", "--config", str(_one_attempt_config(tmp_path)), "--rubric", "grounded_answer", "--judge-base-url", first.base_url,
            "--judge-model", first.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
            "--quiet", "--batch"]
    try:
        assert _invoke(args).exit_code == EXIT_BATCH_PENDING
    finally:
        first.stop()
    second = ScriptedOpenAIServer(verdict_for_request, batches=backend, port=port)
    threading.Timer(1.5, second.start).start()  # down while the collector starts polling
    try:
        done = _invoke(["batch", "collect", str(tmp_path / "out"), "--quiet", "--wait", "60"])
        polls = [r for r in second.other_requests if r.method == "GET" and r.path.startswith("/v1/batches/")]
        live_calls = second.call_count
    finally:
        second.stop()
    assert done.exit_code in (0, 1), done.output
    assert len(polls) >= 1 and live_calls == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(report) == {"judged": 82, "skipped": 20}


class VllmBatchRequestInput(BaseModel):
    """The per-line schema of vLLM's offline batch runner (vllm.entrypoints.openai.run_batch):
    custom_id, method, url and a chat-completions request body."""

    model_config = ConfigDict(extra="forbid")
    custom_id: str
    method: str
    url: str
    body: dict[str, Any]


# ChatCompletionRequest fields of vLLM's OpenAI server that our requests use
VLLM_CHAT_FIELDS = {"model", "messages", "temperature", "max_tokens", "seed", "response_format"}


def _example_items() -> list[Any]:
    from groundjudge import api
    from groundjudge.metrics.evaluate import evaluate_dataset

    config = api.resolve_config(EXAMPLE, {"inputs.labels": None, "judge.rubric": "grounded_answer"})
    dataset = api.load_inputs(config)
    metrics = evaluate_dataset(dataset, api.metric_settings(config))
    return [s.item for s in api.select(config, dataset, metrics) if s.judge and s.item is not None]


def test_input_file_round_trips_through_vllm_offline_batch_format(tmp_path: Path) -> None:
    import asyncio
    import uuid

    rubric = load_rubric(ROOT / "rubrics", "grounded_answer", None)
    settings = ClientSettings(base_url="", model="judge-test-1")
    decoding = settings.decoding()
    cache = JudgeCache(tmp_path / "cache")
    items = _example_items()
    planned = plan_requests(rubric, settings, decoding, cache, items)
    assert len(planned) == 82
    input_file = tmp_path / "input.jsonl"
    input_file.write_text("".join(p.line() + "\n" for p in planned))

    outputs = []
    for text in input_file.read_text().splitlines():  # what `run_batch -i input.jsonl -o output.jsonl` writes
        request = VllmBatchRequestInput.model_validate_json(text)
        assert request.method == "POST" and request.url == "/v1/chat/completions"
        assert set(request.body) <= VLLM_CHAT_FIELDS and request.body["model"] == "judge-test-1"
        fmt = request.body["response_format"]
        assert fmt["type"] == "json_schema" and set(fmt["json_schema"]) == {"name", "schema", "strict"}
        reply = verdict_for_request(request.body)
        content = reply if isinstance(reply, str) else reply.content
        outputs.append(json.dumps({
            "id": f"vllm-{uuid.uuid4().hex}", "custom_id": request.custom_id, "error": None,
            "response": {"status_code": 200, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": {
                "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": 0,
                "model": "judge-test-1", "prompt_logprobs": None,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": []},
                             "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
                "usage": {"prompt_tokens": 900, "total_tokens": 960, "completion_tokens": 60,
                          "prompt_tokens_details": None}}}}))
    record = BatchRecord(id="offline", input_file_id="local", input_path=str(input_file),
                         lines={p.custom_id: p.info for p in planned})
    spent, seen = collect_lines(outputs, record, cache, allowed_models={"judge-test-1"},
                                pricing=Pricing(prompt_per_mtok=1.0, completion_per_mtok=2.0))
    assert record.stored == 82 and not record.failed and len(seen) == 82
    assert spent.requests == 82 and abs(spent.cost_usd - 82 * (900 * 1.0 + 60 * 2.0) / 1e6) < 1e-12

    # the cache now answers every item exactly as live calls would have: no client is ever made
    engine = JudgeEngine(rubric=rubric, cache=cache, model="judge-test-1", decoding=decoding)
    results = asyncio.run(engine.run(items))
    assert Counter(r.status for r in results) == {"judged": 82} and engine.totals.cache_hits == 82
    assert engine.client is None and all(r.source == "cache" for r in results)
    assert plan_requests(rubric, settings, decoding, cache, items) == []


def test_model_mismatch_and_budget_before_upload(tmp_path: Path) -> None:
    from groundjudge.judge.batch import within_budget
    from groundjudge.judge.results import Usage

    rubric = load_rubric(ROOT / "rubrics", "grounded_answer", None)
    settings = ClientSettings(base_url="", model="judge-test-1", max_tokens=1000)
    cache = JudgeCache(tmp_path / "cache")
    planned = plan_requests(rubric, settings, settings.decoding(), cache, _example_items()[:10])
    estimates = [p.estimate() for p in planned]
    assert all(prompt > 100 and completion == 1000 for prompt, completion in estimates)
    pricing = Pricing(prompt_per_mtok=1.0, completion_per_mtok=1.0)
    three = sum(pricing.cost(*e) for e in estimates[:3])
    kept, left = within_budget(planned, Usage(), pricing, max_tokens=None, max_cost_usd=three + 1e-9)
    assert (len(kept), left) == (3, 7)
    kept, left = within_budget(planned, Usage(cost_usd=three), pricing, max_tokens=None, max_cost_usd=three)
    assert (kept, left) == ([], 10)

    record = BatchRecord(id="b", input_file_id="f", input_path="x", lines={planned[0].custom_id: planned[0].info})
    other = {"custom_id": planned[0].custom_id, "error": None, "response": {"status_code": 200, "body": {
        "model": "someone-else", "choices": [{"message": {"content": "{}"}}], "usage": {}}}}
    collect_lines([json.dumps(other), "{not json", "[1, 2]"], record, cache, allowed_models={"judge-test-1"},
                  pricing=pricing)
    assert record.stored == 0 and "someone-else" in record.failed[planned[0].custom_id]
    assert cache.get(planned[0].info.key) is None  # another model's verdict never enters the cache


def test_cancelled_batch_lines_go_live(tmp_path: Path) -> None:
    import openai

    config = _one_attempt_config(tmp_path)
    with ScriptedOpenAIServer(verdict_for_request, batches=BatchBackend(polls_to_complete=100)) as srv:
        args = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--quiet", "--batch"]
        assert _invoke(args).exit_code == EXIT_BATCH_PENDING
        state = load_state(tmp_path / "out")
        assert state is not None
        with openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as client:
            assert client.batches.cancel(state.batches[0].id).status == "cancelled"
        status = _invoke(["batch", "status", str(tmp_path / "out")])
        assert "cancelled" in status.output
        done = _invoke(["batch", "collect", str(tmp_path / "out"), "--quiet"])
        live_calls = srv.call_count
    assert done.exit_code in (0, 1), done.output
    state = load_state(tmp_path / "out")
    assert state is not None and state.batches[0].status == "cancelled" and state.batches[0].stored == 0
    assert set(state.batches[0].failed.values()) == {
        "batch line failed: batch_cancelled: This request could not be executed before the batch was cancelled."}
    assert live_calls == 82
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(report) == {"judged": 82, "skipped": 20}


def test_claim_check_in_two_batches_matches_live_with_no_live_calls(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    # v2: grounded claims and a contradiction question for low ones (a follow-up batch); v3 asks none
    config.write_text(config.read_text().replace('rubric = "claim_check"',
                                                 'rubric = "claim_check"\nrubric_version = 2'))
    backend = BatchBackend()
    batch_live_calls, live_calls = _batched_then_live(config, backend, tmp_path)
    state = load_state(tmp_path / "out")
    assert state is not None and len(state.batches) == 2 and not state.live
    first, second = state.batches
    assert all(info.kind == "question" for info in first.lines.values())
    contradiction = [line for line in backend.lines if line["custom_id"] in second.lines]
    assert contradiction and all("contradict" in line["body"]["messages"][-1]["content"].lower()
                                 for line in contradiction)
    assert batch_live_calls == 0 and len(backend.lines) == live_calls  # the same questions, in batches
    assert all(line["body"]["logprobs"] is True and line["body"]["max_tokens"] == 1 for line in backend.lines)
    batched = _same_verdicts_batched_and_live(tmp_path)
    assert sum(c["status"] == "judged" for c in batched["per_config"]["candidate"]["cases"].values()) > 30


def _batched_then_live(config: Path, backend: BatchBackend, tmp_path: Path) -> tuple[int, int]:
    """The example judged through batches (run --batch, then batch collect) into tmp_path/out,
    then live into tmp_path/live; (live calls the batched run made, live calls of the live run)."""
    with ScriptedOpenAIServer(claim_answer, batches=backend) as srv:
        common = ["--config", str(config), "--rubric", "claim_check", "--judge-base-url", srv.base_url,
                  "--judge-model", srv.model, "--quiet"]
        submitted = _invoke(["run", *common, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
                             "--batch"])
        assert submitted.exit_code == EXIT_BATCH_PENDING, submitted.output
        done = _invoke(["batch", "collect", str(tmp_path / "out"), "--quiet", "--wait", "10"])
        batch_live_calls = srv.call_count
        live = _invoke(["run", *common, "--cache-dir", str(tmp_path / "live-cache"), "--out", str(tmp_path / "live")])
        live_calls = srv.call_count - batch_live_calls
    assert done.exit_code in (0, 1) and live.exit_code in (0, 1), done.output + live.output
    return batch_live_calls, live_calls


def _same_verdicts_batched_and_live(tmp_path: Path) -> dict[str, Any]:
    batched = json.loads((tmp_path / "out" / "report.json").read_text())["judge"]
    direct = json.loads((tmp_path / "live" / "report.json").read_text())["judge"]
    for cfg in ("baseline", "candidate"):
        for cid, case in direct["per_config"][cfg]["cases"].items():
            other = batched["per_config"][cfg]["cases"][cid]
            assert (other["status"], other["criteria"], other["claims"]) == (
                case["status"], case["criteria"], case["claims"]), (cfg, cid)
    return batched


def test_claim_check_answers_cut_short_in_a_batch_are_repaired_in_the_next_batch(tmp_path: Path) -> None:
    """A batch answers a third of the questions with a reply cut to one token ("N", its
    alternatives pointing at "Yes"): none of them is read as an answer; the following batch asks
    them again, and the verdicts are those of a clean live run, with no live call."""
    import math

    config = _one_attempt_config(tmp_path)
    seen: Counter = Counter()

    def cut_once(body: dict, index: int) -> Reply:
        text = json.dumps(body["messages"])
        seen[text] += 1
        if seen[text] == 1 and hash_of(text) % 3 == 0:
            return Reply("N", top_logprobs=((("Yes", math.log(0.99)), ("N", math.log(0.01))),))
        return claim_answer(body, index)

    backend = BatchBackend(script=cut_once)
    batch_live_calls, _ = _batched_then_live(config, backend, tmp_path)
    assert batch_live_calls == 0
    state = load_state(tmp_path / "out")
    assert state is not None and len(state.batches) == 2
    repairs = state.batches[1].lines.values()
    cut = sum(1 for n in seen.values() if n == 2)
    assert cut > 10 and len(repairs) == cut and all(info.repair and len(info.history) == 1 for info in repairs)
    _same_verdicts_batched_and_live(tmp_path)


def hash_of(text: str) -> int:
    import hashlib

    return hashlib.sha256(text.encode()).digest()[0]


def test_batch_needs_a_judge_base_url(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer", "--cache-dir", str(tmp_path / "cache"),
                                       "--out", str(tmp_path / "out"), "--quiet", "--batch"],
                                env={"GROUNDJUDGE_BASE_URL": "", "GROUNDJUDGE_MODEL": ""})
    assert result.exit_code == 2
    assert "judge.base_url: batch judging needs a judge base URL" in result.output
    assert not (tmp_path / "out" / "report.json").exists()


class _FakeEndpoint:
    """Statuses in turn; files by id."""

    def __init__(self, statuses: list[str], files: dict[str, str]) -> None:
        self.statuses, self.files, self.polls = statuses, files, 0

    def retrieve(self, batch_id: str) -> Any:
        from types import SimpleNamespace

        status = self.statuses[min(self.polls, len(self.statuses) - 1)]
        self.polls += 1
        return SimpleNamespace(id=batch_id, status=status, output_file_id="out" if "out" in self.files else None,
                               error_file_id=None)

    def content(self, file_id: str) -> str:
        return self.files[file_id]


def test_poll_backs_off_and_lines_missing_from_every_file_are_failed(tmp_path: Path) -> None:
    from groundjudge.judge.batch import collect, poll

    record = BatchRecord(id="b1", input_file_id="f", input_path="x", lines={
        "a": LineInfo(key="ka", case_id="q1", config_id="c"), "b": LineInfo(key="kb", case_id="q2", config_id="c")})
    waits: list[float] = []
    endpoint = _FakeEndpoint(["in_progress"] * 3 + ["failed"], {})
    batch = poll(endpoint, record, wait_s=1e6, sleep=waits.append)  # type: ignore[arg-type]
    assert batch.status == "failed" and waits == [2.0, 4.0, 8.0] and record.status == "failed"
    waits.clear()
    assert poll(_FakeEndpoint(["in_progress"], {}), record, wait_s=5, sleep=waits.append).status == "in_progress"
    assert waits == [2.0]  # the next wait would pass the deadline: give up, still running

    cache = JudgeCache(tmp_path / "cache")
    (tmp_path / "batch").mkdir()
    spent = collect(endpoint, batch, record, cache, tmp_path, allowed_models={"m"}, pricing=Pricing(),  # type: ignore[arg-type]
                    number=1)
    assert spent.requests == 0 and record.collected
    assert record.failed == {"a": "batch failed: no reply for this line", "b": "batch failed: no reply for this line"}


# --- a hostile server: ids that are paths -----------------------------------------------------

HOSTILE_ID = "x/../../../../PWN"


def _outside(root: Path, run_dir: Path) -> list[Path]:
    """Files under ``root`` that are not under ``run_dir`` or the cache (written by nothing else)."""
    return [p for p in root.rglob("*") if p.is_file() and run_dir not in p.parents
            and (root / "cache") not in p.parents and p.name != "groundjudge.toml" and p.suffix != ".sqlite"
            and not p.name.startswith("history.sqlite")]


def _batch_run_with(backend: BatchBackend, tmp_path: Path, run_dir: Path) -> Any:
    config = _one_attempt_config(tmp_path)
    with ScriptedOpenAIServer(example_script, batches=backend) as srv:
        args = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(run_dir),
                "--quiet", "--batch", "--batch-wait", "5"]
        return CliRunner().invoke(main, args)


def test_a_server_chosen_batch_id_never_becomes_a_path(tmp_path: Path) -> None:
    run_dir = tmp_path / "a" / "b" / "out"  # deep enough that the id's ../ would land inside tmp_path
    result = _batch_run_with(BatchBackend(batch_ids=lambda: HOSTILE_ID), tmp_path, run_dir)
    assert result.exit_code == 3, result.output  # the endpoint misbehaves: exit 3, as for an unreachable one
    assert "error: batch: the endpoint answered the batch id 'x/../../../../PWN', which is not a plain id" in result.stderr
    assert "Traceback" not in result.output
    assert _outside(tmp_path, run_dir) == []
    assert not list(tmp_path.rglob("*PWN*"))


def test_a_server_chosen_file_id_never_becomes_a_path(tmp_path: Path) -> None:
    run_dir = tmp_path / "a" / "b" / "out"
    result = _batch_run_with(BatchBackend(file_ids=lambda: HOSTILE_ID), tmp_path, run_dir)
    assert result.exit_code == 3, result.output
    assert "the endpoint answered the output file id 'x/../../../../PWN', which is not a plain id" in result.stderr
    assert not list(tmp_path.rglob("*PWN*")) and _outside(tmp_path, run_dir) == []


def test_batch_files_are_named_by_the_batch_number(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    with ScriptedOpenAIServer(example_script, batches=BatchBackend()) as srv:
        args = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
                "--quiet", "--batch", "--batch-wait", "10"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    names = sorted(p.name for p in (tmp_path / "out" / "batch").iterdir())
    assert names == ["input-1.jsonl", "input-2.jsonl", "output-1.jsonl", "output-2.jsonl", "state.json"]


# --- a truncated or corrupt batch state --------------------------------------------------------

def _corruptions(text: str) -> dict[str, str | bytes | None]:
    cut = text.index('"lines"') + 200  # after the batch id, in the middle of its lines
    return {"cut mid-way": text[:cut], "cut early": text[:40], "not JSON": "{this is not json",
            "a list": "[]", "wrong shape": '{"config": {}, "batches": [{"id": "batch_1"}]}',
            "a hostile id": text.replace('"id":"batch_', '"id":"../../x').replace('"id": "batch_', '"id": "../../x'),
            "binary": b"\xff\xfe\x00garbage", "empty": "", "a folder": None}


def test_a_corrupt_batch_state_is_one_clear_line_for_every_command(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    backend = BatchBackend(polls_to_complete=10_000)
    run_dir = tmp_path / "out"
    state_path = run_dir / "batch" / "state.json"
    with ScriptedOpenAIServer(example_script, batches=backend) as srv:
        run = ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
               "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(run_dir), "--batch"]
        assert _invoke(run).exit_code == EXIT_BATCH_PENDING
        good = state_path.read_text(encoding="utf-8")
        batch_id = json.loads(good)["batches"][0]["id"]
        for name, broken in _corruptions(good).items():
            if broken is None:
                state_path.unlink()
                state_path.mkdir()
            elif isinstance(broken, bytes):
                state_path.write_bytes(broken)
            else:
                state_path.write_text(broken, encoding="utf-8")
            for args in (run, ["batch", "status", str(run_dir)], ["batch", "collect", str(run_dir)]):
                result = CliRunner().invoke(main, args)
                lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
                assert result.exit_code == 2, (name, args[:2], result.output)
                assert lines[0] == "error: bad input" and len(lines) == 2, (name, lines)
                assert lines[1].startswith(f"{state_path}: the batch state "), (name, lines[1])
                assert f"delete {run_dir / 'batch'} and run `groundjudge run --batch` again" in lines[1]
                assert "Traceback" not in result.output
                if name == "cut mid-way":
                    assert f"it names batch {batch_id}" in lines[1]
            if broken is None:
                state_path.rmdir()
        # settings in the state the run cannot use: named, for the commands that read them
        state_path.write_text(good.replace('"concurrency": 4', '"concurrency": -1'), encoding="utf-8")
        for args in (["batch", "status", str(run_dir)], ["batch", "collect", str(run_dir)]):
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 2 and f"{state_path}: config.judge.concurrency: Input should be greater" \
                in result.stderr, result.output
        # what the message says works: with the folder gone, the run starts its batches over
        shutil.rmtree(run_dir / "batch")
        assert _invoke(run).exit_code == EXIT_BATCH_PENDING
    assert len(backend.batches) == 2


def test_an_output_line_nested_100000_deep_is_a_line_without_reply(tmp_path: Path) -> None:
    record = BatchRecord(id="b1", input_file_id="f", input_path="x",
                         lines={"a": LineInfo(key="ka", case_id="q1", config_id="c")})
    deep = '{"custom_id": "a", "response": ' + "[" * 100_000 + "]" * 100_000 + "}"
    spent, seen = collect_lines([deep], record, JudgeCache(tmp_path / "cache"), allowed_models={"m"},
                                pricing=Pricing())
    assert spent.requests == 0 and seen == set()  # asked live by the finishing run, as any unreadable line
