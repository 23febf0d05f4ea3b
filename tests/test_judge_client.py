"""The judge client: the real ``openai`` package against a scripted local server.

Backoff waits go through a recording no-op ``sleep``, so retry tests are instant and can check
how long the client would have waited.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import time
from typing import Any

import httpx
import openai
import pytest

from groundjudge.judge.client import (
    CallFailed,
    CallResult,
    ClientSettings,
    JudgeClient,
    JudgeUnreachable,
    ModelMismatch,
    is_transient,
    retry_after_seconds,
)
from tests.support.judge_replies import RecordedSleep
from tests.support.openai_server import Disconnect, Hang, HTTPError, Reply, ScriptedOpenAIServer

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
MESSAGES = [{"role": "system", "content": "grade"}, {"role": "user", "content": "data"}]
OK = '{"ok": true}'


def make_client(srv: ScriptedOpenAIServer | None = None, base_url: str | None = None,
                **overrides: Any) -> tuple[JudgeClient, RecordedSleep]:
    settings = {"base_url": base_url or srv.base_url, "model": srv.model if srv else "m", "api_key": "sk-test-key",
                "timeout_s": 60.0, "max_attempts": 4, "backoff_initial_s": 1.0, "backoff_max_s": 30.0}
    settings.update(overrides)
    sleep = RecordedSleep()
    return JudgeClient(ClientSettings(**settings), sleep=sleep), sleep


def complete(client: JudgeClient, n: int = 1) -> list[CallResult | BaseException]:
    async def go() -> list[CallResult | BaseException]:
        try:
            return await asyncio.gather(*(client.complete(MESSAGES, SCHEMA, "rubric") for _ in range(n)),
                                        return_exceptions=True)
        finally:
            await client.close()
    return asyncio.run(go())


def one(client: JudgeClient) -> CallResult:
    (result,) = complete(client)
    if isinstance(result, BaseException):
        raise result
    return result


def test_request_is_pinned_deterministic_and_schema_constrained() -> None:
    with ScriptedOpenAIServer([Reply(OK, prompt_tokens=11, completion_tokens=3)]) as srv:
        client, sleep = make_client(srv, seed=7, max_tokens=321)
        result = one(client)
        body = srv.requests[0].body
        headers = srv.requests[0].headers
    assert (result.raw, result.model, result.prompt_tokens, result.completion_tokens) == (OK, srv.model, 11, 3)
    assert (result.attempts, result.requests, result.mode) == (1, 1, "json_schema")
    assert body["model"] == srv.model and body["messages"] == MESSAGES
    assert body["temperature"] == 0 and body["seed"] == 7 and body["max_tokens"] == 321
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "rubric", "schema": SCHEMA, "strict": True}}
    assert headers["authorization"] == "Bearer sk-test-key"
    assert sleep.waits == []


def test_no_seed_is_sent_when_unset() -> None:
    with ScriptedOpenAIServer() as srv:
        one(make_client(srv, seed=None)[0])
        assert "seed" not in srv.requests[0].body


def test_429_honours_retry_after() -> None:
    with ScriptedOpenAIServer([HTTPError(429, retry_after=7), HTTPError(429, retry_after="2"), Reply(OK)]) as srv:
        client, sleep = make_client(srv)
        result = one(client)
        assert srv.call_count == 3
    assert sleep.waits == [7.0, 2.0]
    assert (result.attempts, result.requests) == (3, 3)


def test_retry_after_is_capped_by_backoff_max() -> None:
    with ScriptedOpenAIServer([HTTPError(429, retry_after=3600), Reply(OK)]) as srv:
        client, sleep = make_client(srv, backoff_max_s=12.0)
        one(client)
    assert sleep.waits == [12.0]


def test_retry_after_as_http_date() -> None:
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    with ScriptedOpenAIServer([HTTPError(429, retry_after=when), Reply(OK)]) as srv:
        client, sleep = make_client(srv)
        one(client)
    assert 17 <= sleep.waits[0] <= 20


def test_unparsable_retry_after_falls_back_to_backoff() -> None:
    with ScriptedOpenAIServer([HTTPError(429, retry_after="soon"), Reply(OK)]) as srv:
        client, sleep = make_client(srv, backoff_initial_s=1.0)
        result = one(client)
        assert srv.call_count == 2
    assert result.raw == OK
    assert 0.5 <= sleep.waits[0] <= 1.0


def test_exponential_backoff_with_jitter_then_failure() -> None:
    with ScriptedOpenAIServer(default=HTTPError(503)) as srv:
        client, sleep = make_client(srv, max_attempts=4, backoff_initial_s=1.0)
        (exc,) = complete(client)
        assert srv.call_count == 4  # one layer retries: the SDK's own retries are off
    assert isinstance(exc, CallFailed) and not isinstance(exc, JudgeUnreachable)
    assert exc.reason.startswith("HTTP 503 after 4 attempt(s)") and exc.requests == 4
    assert len(sleep.waits) == 3
    for wait, (low, high) in zip(sleep.waits, [(0.5, 1), (1, 2), (2, 4)]):
        assert low <= wait <= high


def test_transient_500_on_first_call_keeps_the_structured_output_mode() -> None:
    """A 500 that says nothing about response_format is a server hiccup, not a refusal of json_schema."""
    with ScriptedOpenAIServer([HTTPError(500), Reply(OK)]) as srv:
        client, sleep = make_client(srv)
        result = one(client)
        modes = [r.body["response_format"]["type"] for r in srv.requests]
    assert modes == ["json_schema", "json_schema"]
    assert (result.mode, result.attempts, result.requests) == ("json_schema", 2, 2)
    assert len(sleep.waits) == 1


def test_negotiation_falls_back_to_json_object_with_schema_once() -> None:
    with ScriptedOpenAIServer(reject_json_schema=True) as srv:
        client, sleep = make_client(srv)

        async def go() -> list[CallResult]:
            try:
                return [await client.complete(MESSAGES, SCHEMA, "rubric") for _ in range(3)]
            finally:
                await client.close()

        results = asyncio.run(go())
        formats = [r.body["response_format"] for r in srv.requests]
    assert srv.call_count == 4  # one extra request, on the first call only
    assert formats[0]["type"] == "json_schema"
    assert formats[1:] == [{"type": "json_object", "schema": SCHEMA}] * 3
    assert [r.requests for r in results] == [2, 1, 1]
    assert all(r.mode == "json_object_schema" and r.attempts == 1 for r in results)
    assert sleep.waits == []  # negotiation is not a transient retry


def test_negotiation_under_concurrency_is_bounded_by_the_first_wave() -> None:
    """Calls already in flight when the server refuses json_schema each pay one refused request
    (they were sent before anyone knew); every later call uses the negotiated mode at once."""
    with ScriptedOpenAIServer(reject_json_schema=True) as srv:
        client, _ = make_client(srv)

        async def go() -> tuple[list[CallResult], CallResult]:
            try:
                wave = await asyncio.gather(*(client.complete(MESSAGES, SCHEMA, "r") for _ in range(6)))
                return list(wave), await client.complete(MESSAGES, SCHEMA, "r")
            finally:
                await client.close()

        wave, later = asyncio.run(go())
        formats = [r.body["response_format"]["type"] for r in srv.requests]
    refused = formats.count("json_schema")
    assert 1 <= refused <= 6 and srv.call_count == 7 + refused
    assert sum(r.requests for r in wave) == 6 + refused
    assert later.requests == 1 and later.mode == "json_object_schema"
    assert formats[-1] == "json_object"


def test_negotiation_steps_down_to_plain_json() -> None:
    def script(body: dict, index: int) -> Any:
        if "response_format" in body:
            return HTTPError(400, body={"error": {"message": "response_format is not supported"}})
        return Reply(OK)

    with ScriptedOpenAIServer(script) as srv:
        client, _ = make_client(srv)
        results = complete_sequential(client, 2)
        assert srv.call_count == 4  # json_schema, json_object + schema, plain: then plain only
        assert "response_format" not in srv.requests[-1].body
    assert [r.mode for r in results] == ["json", "json"]  # type: ignore[union-attr]


def test_non_transient_error_after_negotiation_is_not_retried() -> None:
    with ScriptedOpenAIServer([Reply(OK), HTTPError(422)]) as srv:
        client, sleep = make_client(srv)
        first, second = complete_sequential(client, 2)
        assert srv.call_count == 2
    assert isinstance(first, CallResult)
    assert isinstance(second, CallFailed) and second.reason.startswith("HTTP 422 after 1 attempt(s)")
    assert sleep.waits == []


def complete_sequential(client: JudgeClient, n: int) -> list[CallResult | BaseException]:
    async def go() -> list[CallResult | BaseException]:
        out: list[CallResult | BaseException] = []
        try:
            for _ in range(n):
                try:
                    out.append(await client.complete(MESSAGES, SCHEMA, "rubric"))
                except CallFailed as exc:
                    out.append(exc)
        finally:
            await client.close()
        return out
    return asyncio.run(go())


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_unknown_model_make_the_judge_unreachable(status: int) -> None:
    with ScriptedOpenAIServer(default=HTTPError(status)) as srv:
        client, sleep = make_client(srv)
        (exc,) = complete(client)
        assert srv.call_count == 1
    assert isinstance(exc, JudgeUnreachable) and f"HTTP {status}" in exc.reason
    assert sleep.waits == []


def test_closed_port_is_unreachable_after_bounded_attempts() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client, sleep = make_client(base_url=f"http://127.0.0.1:{port}/v1", max_attempts=3)
    (exc,) = complete(client)
    assert isinstance(exc, JudgeUnreachable)
    assert exc.reason == "connection failed after 3 attempt(s)" and exc.requests == 3
    assert len(sleep.waits) == 2


def test_timeout_is_retried_then_fails() -> None:
    with ScriptedOpenAIServer(default=Hang(60)) as srv:
        client, _sleep = make_client(srv, timeout_s=0.2, max_attempts=2)
        started = time.monotonic()
        (exc,) = complete(client)
        assert srv.call_count == 2
    assert time.monotonic() - started < 30  # two 0.2 s timeouts, not a 60 s hang (room for a busy machine)
    assert isinstance(exc, CallFailed) and not isinstance(exc, JudgeUnreachable)
    assert exc.reason == "timed out after 2 attempt(s)"


def test_disconnect_is_retried() -> None:
    with ScriptedOpenAIServer([Disconnect(), Reply(OK)]) as srv:
        client, _sleep = make_client(srv)
        result = one(client)
        assert srv.call_count == 2
    assert result.raw == OK and result.attempts == 2


def test_model_mismatch_and_declared_snapshots() -> None:
    with ScriptedOpenAIServer([Reply(OK, model="judge-other"), Reply(OK, model="judge-test-1-2025-01-01")]) as srv:
        client, _ = make_client(srv, model_snapshots=("judge-test-1-2025-01-01",))
        mismatch, snapshot = complete_sequential(client, 2)
    assert isinstance(mismatch, ModelMismatch) and "'judge-other'" in mismatch.reason
    assert isinstance(snapshot, CallResult) and snapshot.model == "judge-test-1-2025-01-01"


def _status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return openai.APIStatusError("x", response=response, body=None)


@pytest.mark.parametrize(("status", "transient"), [
    (400, False), (401, False), (403, False), (404, False), (408, True), (409, True), (422, False),
    (429, True), (500, True), (502, True), (503, True), (504, True),
])
def test_retry_classification(status: int, transient: bool) -> None:
    assert is_transient(_status_error(status)) is transient


def test_retry_classification_of_network_errors() -> None:
    request = httpx.Request("POST", "http://x")
    assert is_transient(openai.APITimeoutError(request=request))
    assert is_transient(openai.APIConnectionError(request=request))
    assert not is_transient(ValueError("x"))


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None), ({"retry-after": "3"}, 3.0), ({"retry-after": "1.5"}, 1.5), ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after": "-4"}, 0.0), ({"retry-after": "soon"}, None), ({"retry-after": ""}, None),
])
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(_status_error(429, headers)) == expected


def test_decoding_settings_exclude_transport() -> None:
    a = ClientSettings(base_url="http://a/v1", model="m", api_key="k1", timeout_s=1, max_attempts=2)
    b = ClientSettings(base_url="http://b/v1", model="m", api_key="k2", timeout_s=9, max_attempts=7)
    assert a.decoding() == b.decoding()
    assert "k1" not in json.dumps(a.decoding())
    assert ClientSettings(base_url="x", model="m", seed=1).decoding() != ClientSettings(base_url="x", model="m",
                                                                                       seed=2).decoding()
