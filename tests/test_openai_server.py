"""Tests for the scripted OpenAI-compatible test server, driven by the real ``openai`` client."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.openai_server import (
    DEFAULT_CONTENT,
    Disconnect,
    Hang,
    HTTPError,
    Reply,
    ScriptedOpenAIServer,
    Truncated,
)

ROOT = Path(__file__).resolve().parent.parent
MSGS = [
    {"role": "system", "content": "You are a strict judge."},
    {"role": "user", "content": "Grade this answer please"},
]  # 5 + 4 = 9 words


def sync_client(srv: ScriptedOpenAIServer, timeout: float = 60.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=timeout)


def async_client(srv: ScriptedOpenAIServer, timeout: float = 60.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=timeout)


def test_scripted_reply_sync_model_usage_and_recording() -> None:
    with ScriptedOpenAIServer([Reply('{"score": 2, "why": "fine"}', model="judge-x")]) as srv:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        with sync_client(srv) as c:
            r = c.chat.completions.create(model="judge-x", messages=MSGS, temperature=0, seed=7)
            r2 = c.chat.completions.create(model="whatever", messages=MSGS)  # script exhausted -> default
        assert r.model == "judge-x"
        assert r.object == "chat.completion"
        assert r.id.startswith("chatcmpl-") and r.created > 0
        assert r.choices[0].index == 0
        assert r.choices[0].message.role == "assistant"
        assert json.loads(r.choices[0].message.content) == {"score": 2, "why": "fine"}
        assert r.choices[0].finish_reason == "stop"
        assert r.usage.prompt_tokens == 9
        assert r.usage.completion_tokens == 4  # whitespace-separated words
        assert r.usage.total_tokens == 13
        # default action, default (server) model
        assert r2.model == "judge-test-1"
        assert r2.choices[0].message.content == DEFAULT_CONTENT

        assert srv.call_count == 2
        reqs = srv.requests
        assert [q.call_index for q in reqs] == [0, 1]
        assert reqs[0].body["messages"] == MSGS
        assert reqs[0].body["temperature"] == 0 and reqs[0].body["seed"] == 7
        assert reqs[0].headers["authorization"] == "Bearer test"
        assert reqs[0].method == "POST" and reqs[0].path == "/v1/chat/completions"
        assert isinstance(reqs[0].action, Reply) and reqs[0].action.model == "judge-x"
        assert reqs[0].arrived_at <= reqs[1].arrived_at <= time.monotonic()
        assert reqs[0].responded_at is not None

        srv.reset()
        assert srv.call_count == 0 and srv.requests == []


def test_scripted_reply_async_explicit_usage_and_models_endpoint() -> None:
    async def run(srv: ScriptedOpenAIServer) -> None:
        async with async_client(srv) as c:
            r = await c.chat.completions.create(model="m", messages=MSGS)
            models = await c.models.list()
        assert r.model == "served-model"
        assert r.choices[0].message.content == "hello there"
        assert r.choices[0].finish_reason == "length"
        assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (100, 7, 107)
        assert [m.id for m in models.data] == ["served-model"]

    script = [Reply("hello there", prompt_tokens=100, completion_tokens=7, finish_reason="length")]
    with ScriptedOpenAIServer(script, model="served-model") as srv:
        asyncio.run(run(srv))
        assert srv.call_count == 1  # /v1/models is not a chat call
        assert [q.path for q in srv.other_requests] == ["/v1/models"]


def test_rate_limit_with_retry_after_sync_and_async() -> None:
    script = [HTTPError(429, retry_after=2), HTTPError(429, retry_after=1.5)]
    with ScriptedOpenAIServer(script) as srv:
        with sync_client(srv) as c, pytest.raises(openai.RateLimitError) as ei:
            c.chat.completions.create(model="m", messages=MSGS)
        err = ei.value
        assert err.status_code == 429
        assert err.response.headers["retry-after"] == "2"
        assert err.code == "rate_limit_exceeded"
        assert err.type == "rate_limit_error"

        async def run() -> None:
            async with async_client(srv) as c:
                with pytest.raises(openai.RateLimitError) as ei:
                    await c.chat.completions.create(model="m", messages=MSGS)
                assert ei.value.response.headers["Retry-After"] == "1.5"

        asyncio.run(run())
        assert srv.call_count == 2


def test_server_errors() -> None:
    script = [
        HTTPError(500),
        HTTPError(503, body={"error": {"message": "overloaded", "type": "server_error", "code": None}}),
        HTTPError(400, body="plain text failure"),
    ]
    with ScriptedOpenAIServer(script) as srv, sync_client(srv) as c:
        with pytest.raises(openai.InternalServerError) as ei:
            c.chat.completions.create(model="m", messages=MSGS)
        assert ei.value.status_code == 500
        with pytest.raises(openai.InternalServerError) as ei:
            c.chat.completions.create(model="m", messages=MSGS)
        assert ei.value.status_code == 503 and "overloaded" in ei.value.message
        with pytest.raises(openai.BadRequestError) as ei:
            c.chat.completions.create(model="m", messages=MSGS)
        assert ei.value.response.text == "plain text failure"


HANG_S = 60.0  # a hang outlasts every bound below many times over, so no bound depends on machine speed


def test_hang_times_out_without_blocking_others_and_shutdown_is_fast() -> None:
    async def run(srv: ScriptedOpenAIServer) -> float:
        async with async_client(srv, timeout=0.5) as c:
            t0 = time.monotonic()
            hung, ok = await asyncio.gather(
                c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hang"}]),
                # the quick reply gets all the time a busy machine may need
                c.chat.completions.create(model="m", messages=[{"role": "user", "content": "quick"}], timeout=60),
                return_exceptions=True,
            )
            assert isinstance(hung, openai.APITimeoutError), hung
            assert not isinstance(ok, BaseException), ok
            assert ok.choices[0].message.content == "quick"
            return time.monotonic() - t0

    def script(body: dict, i: int):
        return Hang(HANG_S) if body["messages"][0]["content"] == "hang" else Reply("quick")

    srv = ScriptedOpenAIServer(script)
    with srv:
        elapsed = asyncio.run(run(srv))
        assert elapsed < HANG_S / 2  # neither reply waited for the hang
        (hung_req,) = [q for q in srv.requests if isinstance(q.action, Hang)]
        assert hung_req.responded_at is None
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < HANG_S / 2


def test_stop_while_a_request_is_hanging_is_fast() -> None:
    srv = ScriptedOpenAIServer([Hang(HANG_S)]).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            with sync_client(srv, timeout=2 * HANG_S) as c:
                c.chat.completions.create(model="m", messages=MSGS)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    assert _eventually(lambda: srv.call_count == 1, timeout=60)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < HANG_S / 2  # did not wait for the hanging request
    t.join(60)  # the client sees its connection dropped, long before its own timeout
    assert not t.is_alive()
    assert errors and isinstance(errors[0], openai.APIConnectionError)
    assert not srv.thread.is_alive()


def test_disconnect_raises_connection_error_sync_and_async() -> None:
    with ScriptedOpenAIServer([Disconnect(), Disconnect], default=Reply("after")) as srv:
        with sync_client(srv) as c:
            with pytest.raises(openai.APIConnectionError) as ei:
                c.chat.completions.create(model="m", messages=MSGS)
            assert not isinstance(ei.value, openai.APITimeoutError)

        async def run() -> str:
            async with async_client(srv) as c:
                with pytest.raises(openai.APIConnectionError):
                    await c.chat.completions.create(model="m", messages=MSGS)
                r = await c.chat.completions.create(model="m", messages=MSGS)
                return r.choices[0].message.content

        assert asyncio.run(run()) == "after"
        assert srv.call_count == 3


def test_truncated_content_is_invalid_json() -> None:
    full = {"score": 3, "reasoning": "the answer cites the right passage and is complete"}
    with ScriptedOpenAIServer([Truncated(json.dumps(full)), Truncated(full)]) as srv, sync_client(srv) as c:
        for _ in range(2):
            r = c.chat.completions.create(model="m", messages=MSGS)
            content = r.choices[0].message.content
            assert content == json.dumps(full)[: len(json.dumps(full)) // 2]
            assert r.choices[0].finish_reason == "length"
            with pytest.raises(json.JSONDecodeError):
                json.loads(content)


def test_reject_json_schema() -> None:
    schema_rf = {
        "type": "json_schema",
        "json_schema": {"name": "grade", "schema": {"type": "object", "properties": {"score": {"type": "integer"}}}},
    }
    with ScriptedOpenAIServer([Reply('{"score": 1}')], reject_json_schema=True) as srv, sync_client(srv) as c:
        with pytest.raises(openai.InternalServerError):
            c.chat.completions.create(model="m", messages=MSGS, response_format=schema_rf)
        r = c.chat.completions.create(
            model="m", messages=MSGS, response_format={"type": "json_object", "schema": schema_rf["json_schema"]["schema"]}
        )
        # the rejected call did not consume the scripted reply
        assert r.choices[0].message.content == '{"score": 1}'
        assert srv.call_count == 2
        assert isinstance(srv.requests[0].action, HTTPError) and srv.requests[0].action.status == 500

    with ScriptedOpenAIServer([Reply('{"score": 1}')]) as srv, sync_client(srv) as c:
        r = c.chat.completions.create(model="m", messages=MSGS, response_format=schema_rf)
        assert r.choices[0].message.content == '{"score": 1}'


def test_concurrent_requests_are_not_serialised() -> None:
    n, delay = 32, 1.0  # serialised: 32 s; concurrent: about 1 s, and far below 16 s even on a busy machine

    async def run(srv: ScriptedOpenAIServer) -> float:
        async with async_client(srv) as c:
            t0 = time.monotonic()
            rs = await asyncio.gather(
                *(c.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}]) for i in range(n))
            )
            elapsed = time.monotonic() - t0
        assert all(r.choices[0].message.content == "ok" for r in rs)
        return elapsed

    with ScriptedOpenAIServer(default=Reply("ok"), delay_s=delay) as srv:
        elapsed = asyncio.run(run(srv))
        assert srv.call_count == n
    assert elapsed >= delay
    assert elapsed < n * delay / 2, f"{n} requests with delay {delay}s took {elapsed:.2f}s (serialised: {n * delay}s)"


def test_callable_script_receives_body_and_index() -> None:
    seen: list[tuple[dict, int]] = []

    def script(body: dict, i: int):
        seen.append((body, i))
        if i == 1:
            return HTTPError(429)
        if i == 2:
            return None  # -> default
        return Reply(json.dumps({"echo": body["messages"][-1]["content"], "i": i}))

    with ScriptedOpenAIServer(script, default=lambda body, i: Reply(f"default {i}")) as srv, sync_client(srv) as c:
        r0 = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "first"}])
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(model="m", messages=[{"role": "user", "content": "second"}])
        r2 = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "third"}], max_tokens=5)
    assert json.loads(r0.choices[0].message.content) == {"echo": "first", "i": 0}
    assert r2.choices[0].message.content == "default 2"
    assert [i for _, i in seen] == [0, 1, 2]
    assert seen[0][0]["model"] == "m"
    assert seen[2][0]["max_tokens"] == 5


def test_server_thread_gone_after_exit_and_lifetime_limit() -> None:
    with ScriptedOpenAIServer() as srv:
        thread = srv.thread
        assert thread.is_alive() and srv.running
        with sync_client(srv) as c:  # leaves an idle keep-alive connection open
            c.chat.completions.create(model="m", messages=MSGS)
            t0 = time.monotonic()
    # Closing client and server takes a fraction of a second; the bound leaves room for a busy machine.
    assert time.monotonic() - t0 < 10.0
    assert not thread.is_alive()
    assert not srv.running
    assert _eventually(lambda: srv.open_connections == 0, timeout=60)
    with pytest.raises(httpx.HTTPError):
        httpx.get(srv.base_url + "/models", timeout=1)

    srv = ScriptedOpenAIServer(max_lifetime_s=0.3).start()
    assert _eventually(lambda: not srv.thread.is_alive(), timeout=60)
    srv.stop()  # idempotent


def _eventually(pred, timeout: float) -> bool:
    """Poll until ``pred()`` holds; the bound only keeps a broken server from hanging the suite."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_standalone_main() -> None:
    # Every wait here ends on the event itself (a line printed, a reply, the process gone); the
    # bounds are generous and only stop a broken server from hanging the suite. The lifetime
    # is a safety net that must not run out before the test is done on a busy machine.
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--delay", "0.01", "--model", "m", "--lifetime", "600"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()  # "" if the server died before it was up
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), base_url
        with openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=120) as c:
            r = c.chat.completions.create(model="m", messages=MSGS)
        assert r.model == "m"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)  # returns as soon as the process has exited
        assert proc.returncode == 0, stderr
        assert "served 1 chat completions" in stderr
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
