"""The judge client: the ``openai`` package against any OpenAI-compatible base URL.

One layer retries: the SDK's own retries are off (``max_retries=0``) and tenacity retries
transient failures (timeouts, connection errors, 408/409/429, 5xx), honouring Retry-After.
Structured output is negotiated once per client, in order: ``json_schema``, then
``json_object`` with the schema (llama.cpp's server), then plain JSON read leniently.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from groundjudge.errors import GroundjudgeError

if TYPE_CHECKING:
    import openai

OutputMode = Literal["json_schema", "json_object_schema", "json"]
MODES: tuple[OutputMode, ...] = ("json_schema", "json_object_schema", "json")


class CallFailed(GroundjudgeError):
    """A judge call failed for good; ``requests`` says how many HTTP requests it cost."""

    def __init__(self, reason: str, requests: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.requests = requests


class ModelMismatch(CallFailed):
    """The server answered with another model than the pinned one."""


class JudgeUnreachable(CallFailed):
    """The server cannot be used: no connection, or a refusal no retry can fix (auth, unknown model)."""


@dataclass(frozen=True)
class ClientSettings:
    base_url: str
    model: str
    api_key: str | None = None
    model_snapshots: Sequence[str] = ()
    temperature: float = 0.0
    seed: int | None = 1234
    max_tokens: int = 1024
    timeout_s: float = 120.0
    max_attempts: int = 4
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    requests_per_minute: float | None = None
    output_mode: OutputMode = "json_schema"  # the first mode tried
    # One-token answers streamed: llama.cpp's server then computes token probabilities for the
    # generated token only, not for every prompt row (seconds per question on a CPU). Transport
    # only: the answer and its probabilities are the same, so it is not part of the decoding.
    stream_answers: bool = False

    def decoding(self, top_logprobs: int | None = None) -> dict[str, Any]:
        """What shapes a reply, and so belongs in the cache key and calibration records.

        With ``top_logprobs`` (the claim_check protocol): one-token answers read through their
        top alternatives, so max_tokens and the structured-output mode do not apply.
        """
        if top_logprobs is not None:
            return {"temperature": self.temperature, "seed": self.seed, "max_tokens": 1,
                    "top_logprobs": top_logprobs}
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens,
                "output_mode": self.output_mode}


@dataclass
class CallResult:
    raw: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int  # transient retries included
    requests: int  # HTTP requests made, structured-output negotiation included
    mode: OutputMode | None
    metered: bool = True  # False: the endpoint reported no token counts (the zeros are unknowns)


@dataclass
class TokenAnswer:
    """A short answer: its text and, per generated token, the top alternatives with logprobs."""

    text: str
    tokens: list[list[tuple[str, float]]]
    model: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    requests: int
    metered: bool = True  # False: the endpoint reported no token counts (the zeros are unknowns)


def response_format(mode: OutputMode, schema: dict[str, Any], name: str) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return None


def chat_request(settings: ClientSettings, messages: list[dict[str, str]], schema: dict[str, Any], name: str,
                 mode: OutputMode) -> dict[str, Any]:
    """The body of one verdict request: what a live call sends, and what a batch line holds."""
    body: dict[str, Any] = {"model": settings.model, "messages": messages, "temperature": settings.temperature,
                            "max_tokens": settings.max_tokens}
    if settings.seed is not None:
        body["seed"] = settings.seed
    fmt = response_format(mode, schema, name)
    if fmt is not None:
        body["response_format"] = fmt
    return body


def token_request(settings: ClientSettings, messages: list[dict[str, str]], *, max_tokens: int = 1,
                  top_logprobs: int = 10) -> dict[str, Any]:
    """The body of one short question with token probabilities (claim_check), live or in a batch."""
    body: dict[str, Any] = {"model": settings.model, "messages": messages, "temperature": settings.temperature,
                            "max_tokens": max_tokens, "logprobs": True, "top_logprobs": top_logprobs}
    if settings.seed is not None:
        body["seed"] = settings.seed
    return body


def token_answer(choice: Any) -> tuple[str, list[list[tuple[str, float]]]]:
    """The text of a short answer and, per token, its top alternatives with logprobs, from a
    completion choice (an SDK object, or the same as a plain dict from a batch output line)."""
    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    message = get(choice, "message")
    text = (get(message, "content") if message is not None else None) or ""
    tokens: list[list[tuple[str, float]]] = []
    logprobs = get(choice, "logprobs")
    for position in (get(logprobs, "content") if logprobs is not None else None) or []:
        alternatives = [(get(alt, "token"), get(alt, "logprob")) for alt in (get(position, "top_logprobs") or [])]
        if not alternatives and get(position, "token") is not None:
            alternatives = [(get(position, "token"), get(position, "logprob"))]
        tokens.append(alternatives)
    return text, tokens


def is_transient(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Seconds asked for by a Retry-After (or retry-after-ms) header, if any."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):  # not a date either: fall back to our own backoff
        return None
    return max(0.0, parsed.timestamp() - time.time())


@dataclass
class JudgeClient:
    settings: ClientSettings
    _client: openai.AsyncOpenAI = field(init=False)
    _mode_index: int = field(init=False)
    _mode_confirmed: bool = field(init=False, default=False)
    _limiter: AsyncLimiter | None = field(init=False, default=None)
    sleep: Any = field(default=asyncio.sleep)  # patched to a no-op in tests

    def __post_init__(self) -> None:
        import openai  # loaded with the first client: a run the cache settles never needs it

        self._client = openai.AsyncOpenAI(
            base_url=self.settings.base_url, api_key=self.settings.api_key or "not-needed",
            max_retries=0, timeout=self.settings.timeout_s,
        )
        self._mode_index = MODES.index(self.settings.output_mode)
        if self.settings.requests_per_minute:
            self._limiter = AsyncLimiter(self.settings.requests_per_minute, 60)

    @property
    def mode(self) -> OutputMode:
        return MODES[self._mode_index]


    def _wait(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        asked = retry_after_seconds(exc)
        if asked is not None:
            return min(asked, self.settings.backoff_max_s)
        base = self.settings.backoff_initial_s * 2.0 ** (retry_state.attempt_number - 1)
        return min(base, self.settings.backoff_max_s) * (0.5 + random.random() / 2)

    async def _one_call(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str,
                        requests: list[int]) -> tuple[Any, OutputMode]:
        import openai

        while True:
            mode = self.mode
            kwargs = chat_request(self.settings, messages, schema, name, mode)
            if self._limiter is not None:
                await self._limiter.acquire()
            requests[0] += 1
            try:
                response = await self._client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                # A server that cannot do this structured-output mode says so on first use;
                # step down a mode and try again at once (not a transient retry).
                if not self._mode_confirmed and mode != "json" and _rejects_output_mode(exc):
                    if self.mode == mode:
                        self._mode_index += 1
                    continue
                raise
            self._mode_confirmed = True
            return response, mode

    async def _retried(self, call: Any) -> tuple[Any, OutputMode | None, int, int]:
        """Run ``call(requests)`` with transient retries; check the pinned model on the reply."""
        import openai

        attempts = 0
        requests = [0]
        # the loop runs at least once and either sets both or raises (reraise=True)
        response: Any = None
        mode: OutputMode | None = None
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_transient), stop=stop_after_attempt(self.settings.max_attempts),
            wait=self._wait, sleep=self.sleep, reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    response, mode = await call(requests)
        except openai.APIStatusError as exc:
            kind = JudgeUnreachable if exc.status_code in (401, 403, 404) else CallFailed
            raise kind(f"HTTP {exc.status_code} after {attempts} attempt(s): {_short(exc)}", requests[0]) from exc
        except openai.APIConnectionError as exc:  # APITimeoutError is a subclass
            what = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
            kind = CallFailed if isinstance(exc, openai.APITimeoutError) else JudgeUnreachable
            raise kind(f"{what} after {attempts} attempt(s)", requests[0]) from exc
        allowed = {self.settings.model, *self.settings.model_snapshots}
        if response.model not in allowed:
            raise ModelMismatch(f"server answered as model {response.model!r}, pinned {self.settings.model!r}",
                                requests[0])
        return response, mode, attempts, requests[0]

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> CallResult:
        """One judge call (with transient retries). Raises on a final failure or a model mismatch."""
        response, mode, attempts, requests = await self._retried(
            lambda requests: self._one_call(messages, schema, name, requests))
        choice = response.choices[0] if response.choices else None
        raw = (choice.message.content if choice and choice.message else None) or ""
        usage = response.usage
        return CallResult(raw=raw, model=response.model,
                          prompt_tokens=usage.prompt_tokens if usage else 0,
                          completion_tokens=usage.completion_tokens if usage else 0,
                          attempts=attempts, requests=requests, mode=mode, metered=usage is not None)

    async def ask_token(self, messages: list[dict[str, str]], *, max_tokens: int = 1,
                        top_logprobs: int = 10) -> TokenAnswer:
        """A short answer with the probabilities of each answer token's alternatives.

        Where the endpoint gives no token probabilities, ``tokens`` is empty and only the
        sampled text is there (the caller records the confidence as unknown).
        """
        async def call(requests: list[int]) -> tuple[Any, None]:
            kwargs: dict[str, Any] = {"model": self.settings.model, "messages": messages,
                                      "temperature": self.settings.temperature, "max_tokens": max_tokens,
                                      "logprobs": True, "top_logprobs": top_logprobs}
            if self.settings.seed is not None:
                kwargs["seed"] = self.settings.seed
            if self._limiter is not None:
                await self._limiter.acquire()
            requests[0] += 1
            if self.settings.stream_answers:
                return await _collect_stream(await self._client.chat.completions.create(stream=True, **kwargs)), None
            return await self._client.chat.completions.create(**kwargs), None

        response, _, attempts, requests = await self._retried(call)
        choice = response.choices[0] if response.choices else None
        text, tokens = token_answer(choice) if choice is not None else ("", [])
        usage = response.usage
        return TokenAnswer(text=text, tokens=tokens, model=response.model,
                           prompt_tokens=usage.prompt_tokens if usage else 0,
                           completion_tokens=usage.completion_tokens if usage else 0,
                           attempts=attempts, requests=requests, metered=usage is not None)

    async def close(self) -> None:
        await self._client.close()


async def _collect_stream(stream: Any) -> Any:
    """A streamed chat completion folded back into the shape of a plain one (text, per-token
    logprobs, model, usage where the server sends it)."""
    from types import SimpleNamespace

    text, positions, model, usage = [], [], "", None
    async for chunk in stream:
        model = chunk.model or model
        usage = getattr(chunk, "usage", None) or usage
        for choice in chunk.choices or []:
            if choice.delta and choice.delta.content:
                text.append(choice.delta.content)
            if choice.logprobs and choice.logprobs.content:
                positions += list(choice.logprobs.content)
    message = SimpleNamespace(content="".join(text))
    choice = SimpleNamespace(message=message, logprobs=SimpleNamespace(content=positions))
    return SimpleNamespace(model=model, choices=[choice], usage=usage)


def _rejects_output_mode(exc: openai.APIStatusError) -> bool:
    """Does this error refuse the structured-output mode? Only when it says so: the statuses
    servers use for that (400/415/422/500/501) and a message naming the format. A plain 500 is
    transient and a 400 may be about something else (a prompt too long), so neither downgrades
    the output mode for the whole run."""
    if exc.status_code not in (400, 415, 422, 500, 501):
        return False
    text = str(exc).lower()
    return any(w in text for w in ("response_format", "json_schema", "schema", "json_object"))


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:297] + "..."
