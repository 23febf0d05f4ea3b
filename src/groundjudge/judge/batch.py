"""Batch judging (SPEC 9): the OpenAI Batch API file format, submitted, polled and collected.

Every verdict request the cache cannot answer becomes one line of a JSONL input file
(``{custom_id, method, url, body}``, the body exactly what a live call sends); the file is
uploaded (``/v1/files``, purpose ``batch``) and a batch created on ``/v1/chat/completions``
with a 24 h window. The state of the run's batches lives in ``RUN_DIR/batch/state.json``, so
any later process can poll and collect. Collected replies go into the judge cache exactly as a
live call stores them (same key, same ``CachedReply``), and the run then finishes from the
cache. A reply that needs its one repair is repaired in a following batch (it depends on the
first reply). claim_check's questions are batched the same way: support, cited-support, nugget and
relevance questions first, the contradiction questions (which depend on the support answers) in
a following batch. Lines that failed, and lines an expired or cancelled batch never answered, are
not sent in a batch again: the finishing run asks them live (with the usual retries), where
they end judged or ``judge_error`` with a reason.

Cost is counted at batch prices: the configured prices times ``batch_discount``. Budgets apply
before upload, on an estimate per line (prompt characters / 4, plus ``max_output_tokens``).

The same input file runs offline on vLLM's batch runner (``python -m
vllm.entrypoints.openai.run_batch -i input.jsonl -o output.jsonl``); its output lines have the
same shape as the Batch API's and are collected by :func:`collect_lines`.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundjudge.config import Config, load_config
from groundjudge.errors import GroundjudgeError, InputError
from groundjudge.files import jsonl_lines, write_text_atomic
from groundjudge.judge import claim_check
from groundjudge.judge.cache import CachedReply, JudgeCache, cache_key
from groundjudge.judge.client import ClientSettings, chat_request, token_answer, token_request
from groundjudge.judge.engine import Pricing
from groundjudge.judge.render import JudgeItem, render_messages
from groundjudge.judge.results import Usage
from groundjudge.judge.rubric import Rubric
from groundjudge.judge.verdict import VerdictError, parse_verdict
from groundjudge.urls import is_redacted, redact_url

CHAT_URL: Final = "/v1/chat/completions"
WINDOW: Final = "24h"
TERMINAL = ("completed", "expired", "cancelled", "failed")
STATE = "state.json"


class BatchError(GroundjudgeError):
    """The batch endpoint cannot be used (unreachable, refused, or it answered ids that are not ids)."""


# What a batch or file id may be: OpenAI's ("batch_...", "file-..."), vLLM's and other servers'
# ids (UUIDs, dotted or colon-separated names). The server chooses them, so one that could be
# a path ("x/../../PWN"), a URL part or a terminal sequence is refused before it is used at all;
# file names under RUN_DIR/batch come from the batch's number, never from an id.
PLAIN_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$"
_PLAIN_ID = re.compile(PLAIN_ID)


def plain_id(what: str, value: Any) -> str:
    """``value`` if it is a plain id (``PLAIN_ID``, no ``..``), else a :class:`BatchError`."""
    if isinstance(value, str) and _PLAIN_ID.match(value) and ".." not in value:
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise BatchError(f"the endpoint answered the {what} {shown}, which is not a plain id; it is not used, "
                     "not even as a file name")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LineInfo(_Model):
    """What one input line asks, so its reply can be stored as a live call would store it."""

    key: str  # the judge cache key
    case_id: str
    config_id: str
    kind: Literal["verdict", "question"] = "verdict"  # a one-call verdict, or a claim_check question
    repair: bool = False
    history: list[str] = Field(default_factory=list)  # earlier invalid replies for this key
    tokens_before: tuple[int, int] = (0, 0)  # prompt/completion tokens of the first reply (repairs)


PlainId = Annotated[str, Field(pattern=PLAIN_ID)]


class BatchRecord(_Model):
    id: PlainId
    input_file_id: PlainId
    input_path: str
    lines: dict[str, LineInfo]  # custom_id -> what it asks
    status: str = "validating"
    output_file_id: PlainId | None = None
    error_file_id: PlainId | None = None
    collected: bool = False
    stored: int = 0  # replies put in the cache
    failed: dict[str, str] = Field(default_factory=dict)  # custom_id -> reason


class BatchState(_Model):
    """``RUN_DIR/batch/state.json``."""

    config: dict[str, Any]  # the run's resolved settings: `groundjudge batch collect` needs no flags
    # settings stored redacted (a base URL's credentials): collect asks for them again
    redacted: list[str] = Field(default_factory=list)
    batches: list[BatchRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)  # what collected lines cost, at batch prices
    live: dict[str, str] = Field(default_factory=dict)  # cache key -> why it is left to a live call
    over_budget: int = 0  # requests not uploaded because the budget would not cover them

    @property
    def open(self) -> BatchRecord | None:
        return next((b for b in self.batches if not b.collected), None)


_URL_SETTINGS = (("judge", "base_url"), ("judge", "escalate", "base_url"))


def new_state(config_json: dict[str, Any]) -> BatchState:
    """The state of a run's first batch, its settings with every base URL redacted
    (``groundjudge.urls``): credentials in a URL are never written."""
    config = json.loads(json.dumps(config_json))
    redacted = []
    for *parents, name in _URL_SETTINGS:
        holder: Any = config
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(name), str) and is_redacted(holder[name]):
            holder[name] = redact_url(holder[name])
            redacted.append(".".join([*parents, name]))
    return BatchState(config=config, redacted=redacted)


def load_state(run_dir: Path) -> BatchState | None:
    """The run's batch state, or None when no batch was submitted. A file that cannot be read
    (cut short, not JSON, not a state) is an InputError saying what to do, with the batch ids it
    still shows, if any."""
    path = run_dir / "batch" / STATE
    if not path.exists():
        return None
    text = ""
    try:
        text = path.read_bytes().decode("utf-8")
        return BatchState.model_validate_json(text)
    except OSError as exc:
        why = f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"])) or "record"
        why = ("is cut short or not valid JSON" if first["type"].startswith("json")
               else f"is not a batch state ({where}: {first['msg']})")
    ids = list(dict.fromkeys(m for m in re.findall(r'"id"\s*:\s*"([^"\\]{1,255})"', text) if _PLAIN_ID.match(m)))
    known = (f"; it names batch {', '.join(ids)} (look it up, or cancel it, where it was submitted)" if ids
             else "; no batch id can be read from it")
    raise InputError.one(path, None, None, f"the batch state {why}{known}. {_start_over(run_dir)}")


def _start_over(run_dir: Path) -> str:
    return (f"To start the batches over, delete {run_dir / 'batch'} and run `groundjudge run --batch` again: "
            "every reply already collected is in the judge cache and is not asked again")


def state_config(run_dir: Path, state: BatchState, environ: dict[str, str] | None = None) -> Config:
    """The run's settings as the state holds them (a ``Config``), with each redacted base URL
    given back: ``GROUNDJUDGE_BASE_URL`` for the judge's, else the config file the run was made
    with, when its URL is the same once redacted. Without it, an InputError saying how."""
    path = run_dir / "batch" / STATE
    try:
        config = Config.model_validate(state.config)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise InputError.one(path, None, "config." + ".".join(map(str, first["loc"])),
                             f"{first['msg']}. {_start_over(run_dir)}") from None
    if not state.redacted:
        return config
    environ = dict(os.environ) if environ is None else environ
    original = None
    if config.source is not None and Path(config.source).is_file():
        try:
            original = load_config(config.source)
        except InputError:
            original = None
    judge = config.judge
    for dotted in state.redacted:
        stored = judge.base_url if dotted == "judge.base_url" else (judge.escalate.base_url if judge.escalate else None)
        candidates = []
        if dotted == "judge.base_url":
            candidates += [environ.get("GROUNDJUDGE_BASE_URL"), original.judge.base_url if original else None]
        elif original is not None and original.judge.escalate is not None:
            candidates.append(original.judge.escalate.base_url)
        real = next((c for c in candidates if c and stored is not None and redact_url(c) == stored), None)
        if real is None:
            how = ("set GROUNDJUDGE_BASE_URL to it" if dotted == "judge.base_url" else
                   f"keep the config file the run was made with ({config.source or 'none was used'})")
            raise InputError.one(path, None, dotted, f"the URL held credentials and is stored as {stored} (never in "
                                                     f"full): {how}, then run this again")
        if dotted == "judge.base_url":
            judge = judge.model_copy(update={"base_url": real})
        elif judge.escalate is not None:  # always, as its stored URL was found above
            judge = judge.model_copy(update={"escalate": judge.escalate.model_copy(update={"base_url": real})})
    return config.model_copy(update={"judge": judge})


def save_state(run_dir: Path, state: BatchState) -> None:
    write_text_atomic(run_dir / "batch" / STATE, state.model_dump_json(indent=1))


# --- planning: which requests the cache cannot answer ----------------------------------------

@dataclass(frozen=True)
class Planned:
    custom_id: str
    info: LineInfo
    body: dict[str, Any]

    def line(self) -> str:
        return json.dumps({"custom_id": self.custom_id, "method": "POST", "url": CHAT_URL, "body": self.body},
                          ensure_ascii=False, separators=(",", ":"))

    def estimate(self) -> tuple[int, int]:
        """Prompt and completion tokens, estimated before the call (upper bound on completion)."""
        chars = sum(len(m["content"]) for m in self.body["messages"])
        return math.ceil(chars / 4), int(self.body.get("max_tokens") or 0)


def _valid(raw: str, item: JudgeItem) -> bool:
    try:
        parse_verdict(raw, [cid for cid, _ in item.contexts], answer_has_text=bool(item.answer.strip()))
    except VerdictError:
        return False
    return True


def plan_requests(rubric: Rubric, settings: ClientSettings, decoding: dict[str, Any], cache: JudgeCache,
                  items: Iterable[JudgeItem], *, retry_errors: bool = True,
                  asked: set[str] = frozenset()) -> list[Planned]:  # type: ignore[assignment]
    """One request per distinct cache key the cache cannot answer: a first call, or the repair
    of a cached invalid first reply; the engine's own rules (see ``one_call_json.OneCallJson.run_item``).
    ``asked``: keys this run already sent in a batch; a key whose repair is also invalid is
    then final (judge_error), not asked a third time."""
    if rubric.protocol == "claim_questions":
        return plan_questions(rubric, settings, decoding, cache, items, retry_errors=retry_errors, asked=asked)
    assert rubric.output_schema is not None
    out: dict[str, Planned] = {}
    rubric_hash = rubric.content_hash
    for item in items:
        key = cache_key(rubric, settings.model, decoding, item, rubric_hash=rubric_hash)
        if key in out:
            continue
        messages = render_messages(rubric, item)
        cached = cache.get(key)
        info = LineInfo(key=key, case_id=item.case_id, config_id=item.config_id)
        if cached is not None:
            if _valid(cached.raw, item):
                continue
            if not cached.repaired:
                problem = _problem(cached.raw, item)
                messages = [*messages, {"role": "assistant", "content": cached.raw},
                            {"role": "user", "content": rubric.render_repair(problem)}]
                info = info.model_copy(update={"repair": True, "history": [*cached.history, cached.raw],
                                               "tokens_before": (cached.prompt_tokens, cached.completion_tokens)})
            elif retry_errors and key not in asked:
                info = info.model_copy(update={"history": [*cached.history, cached.raw]})
            else:
                continue
        body = chat_request(settings, messages, rubric.output_schema, rubric.id, settings.output_mode)
        out[key] = Planned(custom_id=f"{key}{'-repair' if info.repair else ''}", info=info, body=body)
    return list(out.values())


def plan_questions(rubric: Rubric, settings: ClientSettings, decoding: dict[str, Any], cache: JudgeCache,
                   items: Iterable[JudgeItem], *, retry_errors: bool = True,
                   asked: set[str] = frozenset()) -> list[Planned]:  # type: ignore[assignment]
    """claim_check: every question of a case the cache cannot answer, by the engine's rules
    (``claim_questions.ClaimQuestions._ask``): no answer yet, or an invalid one (prose, a word
    cut short) that gets its repair (the same question again), or whose repair was invalid too and is asked
    again from the start (``retry_errors``, unless this run already sent it: ``asked``).
    Support, cited-support, nugget and relevance questions depend on nothing; the contradiction
    questions depend on the support answers, so they are planned once those are all readable
    in the cache (a following batch)."""
    spec = rubric.claim_questions
    assert spec is not None
    out: dict[str, Planned] = {}

    def key_of(question: claim_check.Question) -> str:
        return claim_check.question_key(settings.model, decoding, question)

    def add(item: JudgeItem, question: claim_check.Question) -> claim_check.Answer | None:
        """Plan ``question`` unless the cache holds a valid answer (returned) or a final invalid one."""
        key = key_of(question)
        if key in out:
            return None
        cached = cache.get(key)
        info = LineInfo(key=key, case_id=item.case_id, config_id=item.config_id, kind="question")
        if cached is not None:
            try:
                return claim_check.read_answer(cached.raw, spec)
            except VerdictError:
                history = [*cached.history, cached.raw]
                if not cached.repaired:
                    info = info.model_copy(update={"repair": True, "history": history})
                elif retry_errors and key not in asked:
                    info = info.model_copy(update={"history": history})
                else:
                    return None  # final: the finishing run reports it as judge_error
        body = token_request(settings, question.messages, max_tokens=1, top_logprobs=spec.top_logprobs)
        out[key] = Planned(custom_id=f"{key}{'-repair' if info.repair else ''}", body=body, info=info)
        return None

    for item in items:
        plan = claim_check.plan_case(rubric, item)
        asked_now = claim_check.claim_questions(rubric, plan)
        answers = [add(item, q) for q in asked_now]
        cited = claim_check.cited_questions(rubric, item, plan, claim_check.cited_unfound(rubric, item, plan))[0]
        for q in [*cited, *claim_check.nugget_questions(rubric, plan), *claim_check.relevance_questions(rubric, item)]:
            add(item, q)
        if any(a is None for a in answers):
            continue
        support = claim_check.supports(rubric, plan, asked_now, answers)[0]  # type: ignore[arg-type]
        for q in claim_check.contradiction_questions(rubric, plan, support):
            add(item, q)
    return list(out.values())


def _problem(raw: str, item: JudgeItem) -> str:
    try:
        parse_verdict(raw, [cid for cid, _ in item.contexts], answer_has_text=bool(item.answer.strip()))
    except VerdictError as exc:
        return str(exc)
    return ""


def within_budget(planned: Sequence[Planned], spent: Usage, pricing: Pricing, *, max_tokens: int | None,
                  max_cost_usd: float | None) -> tuple[list[Planned], int]:
    """The requests (in order) whose estimated cost still fits the budget, and how many do not."""
    tokens, cost = spent.tokens, spent.cost_usd
    kept: list[Planned] = []
    for p in planned:
        prompt, completion = p.estimate()
        t, c = tokens + prompt + completion, cost + pricing.cost(prompt, completion)
        if (max_tokens is not None and t > max_tokens) or (max_cost_usd is not None and c > max_cost_usd):
            break
        tokens, cost = t, c
        kept.append(p)
    return kept, len(planned) - len(kept)


# --- collecting: output lines into the cache --------------------------------------------------

def _reason(line: dict[str, Any]) -> str:
    error = line.get("error")
    if error:
        return "batch line failed: " + ": ".join(str(x) for x in (error.get("code"), error.get("message")) if x)
    response = line.get("response") or {}
    body = response.get("body") or {}
    message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
    return f"batch line failed: HTTP {response.get('status_code')}" + (f": {message}" if message else "")


def collect_lines(lines: Iterable[str], record: BatchRecord, cache: JudgeCache, *, allowed_models: set[str],
                  pricing: Pricing) -> tuple[Usage, set[str]]:
    """Store every good reply of an output (or error) file in the cache as the live engine does;
    note every failed line with its reason. Returns what the stored replies cost, and the
    custom ids of the lines that were there (stored or failed)."""
    spent, seen = Usage(), set()
    for text in lines:
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            continue  # an unreadable line: its request ends "no reply" and is asked live
        if not isinstance(line, dict):
            continue
        custom_id = line.get("custom_id")
        info = record.lines.get(custom_id) if isinstance(custom_id, str) else None
        if info is None or not isinstance(custom_id, str):
            continue  # not ours (a shared batch), nothing to store
        seen.add(custom_id)
        response = line.get("response") or {}
        body = response.get("body") if isinstance(response, dict) else None
        if line.get("error") or response.get("status_code") != 200 or not isinstance(body, dict):
            record.failed[custom_id] = _reason(line)
            continue
        model = body.get("model")
        if model not in allowed_models:
            record.failed[custom_id] = f"batch reply from model {model!r}, pinned {min(allowed_models)!r}"
            continue
        choice = (body.get("choices") or [{}])[0] or {}
        if info.kind == "question":  # stored as the live engine stores a claim_check answer
            text, tokens = token_answer(choice)
            raw = json.dumps({"text": text, "tokens": tokens}, ensure_ascii=False)
        else:
            raw = (choice.get("message") or {}).get("content") or ""
        usage = body.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        before_p, before_c = info.tokens_before
        cache.put(info.key, CachedReply(raw=raw, model=model, prompt_tokens=before_p + prompt,
                                        completion_tokens=before_c + completion, created=time.time(),
                                        repaired=info.repair, history=list(info.history)))
        record.stored += 1
        record.failed.pop(custom_id, None)
        spent = spent + Usage(requests=1, prompt_tokens=prompt, completion_tokens=completion,
                              cost_usd=pricing.cost(prompt, completion))
    return spent, seen


# --- the endpoint ------------------------------------------------------------------------------

@dataclass
class BatchEndpoint:
    """Files and batches on an OpenAI-compatible base URL (the ``openai`` package, no SDK retries:
    connection faults and 5xx are retried here with backoff, within ``patience_s``)."""

    base_url: str
    api_key: str | None
    patience_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "not-needed", max_retries=0,
                                     timeout=60.0)

    def _retry(self, what: str, call: Callable[[], Any]) -> Any:
        deadline, delay = time.monotonic() + self.patience_s, 0.5
        while True:
            try:
                return call()
            except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError) as exc:
                if time.monotonic() + delay > deadline:
                    raise BatchError(f"{what}: {type(exc).__name__} for {self.patience_s:.0f} s: {exc}") from exc
                self.sleep(delay * (0.5 + random.random() / 2))
                delay = min(delay * 2, 30.0)
            except openai.APIStatusError as exc:
                raise BatchError(f"{what}: HTTP {exc.status_code}: {exc}") from exc

    def upload(self, path: Path) -> str:
        def call() -> Any:
            with open(path, "rb") as handle:
                return self._client.files.create(file=(path.name, handle), purpose="batch")
        return plain_id("file id", self._retry("upload", call).id)

    def create(self, input_file_id: str, run_dir: str) -> Any:
        return self._retry("create batch", lambda: self._client.batches.create(
            input_file_id=input_file_id, endpoint=CHAT_URL, completion_window=WINDOW,
            metadata={"groundjudge_run": run_dir[-500:]}))

    def retrieve(self, batch_id: str) -> Any:
        return self._retry("poll batch", lambda: self._client.batches.retrieve(batch_id))

    def content(self, file_id: str) -> str:
        return str(self._retry("download", lambda: self._client.files.content(file_id).text))

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True)
class Progress:
    """Where the run's batches stand after one step."""

    kind: Literal["pending", "submitted", "done"]
    batch_id: str | None
    status: str | None
    state: BatchState
    message: str


def poll(endpoint: BatchEndpoint, record: BatchRecord, *, wait_s: float,
         sleep: Callable[[float], None] = time.sleep) -> Any:
    """Retrieve the batch until it ends or ``wait_s`` runs out (backoff 2 s doubling to 60 s)."""
    deadline, delay, slept = time.monotonic() + wait_s, 2.0, 0.0
    while True:
        batch = endpoint.retrieve(record.id)
        record.status = batch.status
        if batch.status in TERMINAL or time.monotonic() + delay > deadline or slept + delay > wait_s:
            return batch
        sleep(delay)
        slept += delay
        delay = min(delay * 2, 60.0)


def collect(endpoint: BatchEndpoint, batch: Any, record: BatchRecord, cache: JudgeCache, run_dir: Path, *,
            allowed_models: set[str], pricing: Pricing, number: int) -> Usage:
    """Download the ended batch's output and error files (kept as ``output-N.jsonl`` and
    ``errors-N.jsonl``, N the batch's ``number`` as in ``input-N.jsonl``), store the replies;
    lines in neither (an expired, cancelled or failed batch) are marked failed with the
    batch's status."""
    spent, answered = Usage(), set[str]()
    for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
        if not file_id:
            continue
        text = endpoint.content(plain_id(f"{kind} file id", file_id))
        write_text_atomic(run_dir / "batch" / f"{kind}-{number}.jsonl", text)
        got, ids = collect_lines(jsonl_lines(text), record, cache, allowed_models=allowed_models, pricing=pricing)
        spent, answered = spent + got, answered | ids
    for custom_id in record.lines:
        if custom_id not in answered and custom_id not in record.failed:
            record.failed[custom_id] = f"batch {batch.status}: no reply for this line"
    record.output_file_id, record.error_file_id = batch.output_file_id, batch.error_file_id
    record.collected = True
    return spent


def submit(endpoint: BatchEndpoint, planned: Sequence[Planned], state: BatchState, run_dir: Path) -> BatchRecord:
    number = len(state.batches) + 1
    path = run_dir / "batch" / f"input-{number}.jsonl"
    write_text_atomic(path, "".join(p.line() + "\n" for p in planned))
    file_id = endpoint.upload(path)
    batch = endpoint.create(file_id, str(run_dir))
    record = BatchRecord(id=plain_id("batch id", batch.id), input_file_id=file_id, input_path=str(path),
                         status=batch.status, lines={p.custom_id: p.info for p in planned})
    state.batches.append(record)
    save_state(run_dir, state)  # the id is on disk before anything else can go wrong
    return record


def batch_pricing(prompt_per_mtok: float, completion_per_mtok: float, discount: float) -> Pricing:
    return Pricing(prompt_per_mtok * discount, completion_per_mtok * discount)


def advance(session: Any, items: Sequence[JudgeItem], run_dir: Path, *, config_json: dict[str, Any],
            wait_s: float = 0.0, sleep: Callable[[float], None] = time.sleep,
            endpoint: BatchEndpoint | None = None) -> Progress:
    """One step of a batch run (``session``: the run's ``JudgeSession``): poll the open batch
    (up to ``wait_s``), collect it when it has ended, submit what the cache still cannot answer
    (repairs included), and say whether the run can finish from the cache now."""
    j = session.config.judge
    where = session.config.source or "command line"
    if session.base_url is None:
        raise InputError.one(where, None, "judge.base_url", "batch judging needs a judge base URL "
                                                            "(--judge-base-url); the embedded judge has no batches")
    pricing = batch_pricing(j.price_prompt_per_mtok, j.price_completion_per_mtok, j.batch_discount)
    allowed = {session.model, *session.settings.model_snapshots}
    state = load_state(run_dir) or new_state(config_json)
    endpoint = endpoint or BatchEndpoint(session.base_url, session.settings.api_key, sleep=sleep)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            record = state.open
            if record is not None:
                batch = poll(endpoint, record, wait_s=max(0.0, deadline - time.monotonic()), sleep=sleep)
                if batch.status not in TERMINAL:
                    save_state(run_dir, state)
                    return Progress("pending", record.id, batch.status, state,
                                    f"batch {record.id} is {batch.status} ({len(record.lines)} requests)")
                state.usage = state.usage + collect(endpoint, batch, record, session.cache, run_dir,
                                                    allowed_models=allowed, pricing=pricing,
                                                    number=state.batches.index(record) + 1)
                for custom_id, reason in record.failed.items():
                    state.live[record.lines[custom_id].key] = reason
                save_state(run_dir, state)
            asked = {info.key for b in state.batches for info in b.lines.values()}
            planned = [p for p in plan_requests(session.rubric, session.settings, session.decoding(), session.cache,
                                                items, retry_errors=j.retry_errors, asked=asked)
                       if p.info.key not in state.live]
            kept, state.over_budget = within_budget(planned, state.usage, pricing, max_tokens=j.max_tokens,
                                                    max_cost_usd=j.max_cost_usd)
            if not kept:
                if state.batches:
                    save_state(run_dir, state)
                return Progress("done", None, None, state, _done_message(state))
            record = submit(endpoint, kept, state, run_dir)
            if time.monotonic() >= deadline:
                return Progress("submitted", record.id, record.status, state,
                                f"submitted batch {record.id}: {len(kept)} requests"
                                + (f" ({sum(1 for p in kept if p.info.repair)} repairs)" if any(
                                    p.info.repair for p in kept) else "")
                                + (f"; {state.over_budget} left out by the budget" if state.over_budget else ""))
    finally:
        endpoint.close()


def _done_message(state: BatchState) -> str:
    stored = sum(b.stored for b in state.batches)
    parts = [f"{len(state.batches)} batch(es) collected, {stored} replies stored"]
    if state.live:
        parts.append(f"{len(state.live)} request(s) the batches did not answer go live")
    if state.over_budget:
        parts.append(f"{state.over_budget} request(s) not uploaded: over the budget")
    return "; ".join(parts)
