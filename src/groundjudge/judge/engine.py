"""Judge many items: cache lookup, bounded concurrent calls, one repair retry, honest outcomes.

Every item ends as ``judged`` (from the cache or a call) or ``judge_error`` with a reason, or
``skipped`` when the budget ran out before it was sent. Nothing is ever scored from an error.
The client is made on the first call that is needed, so a fully cached run never reaches
(or, for the embedded judge, starts) a server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from groundjudge.judge.cache import CachedReply, JudgeCache, cache_key
from groundjudge.judge.client import CallFailed, CallResult, JudgeClient, JudgeUnreachable, ModelMismatch
from groundjudge.judge.render import JudgeItem, render_messages
from groundjudge.judge.results import CaseJudgement, ClaimResult, Status, Usage
from groundjudge.judge.rubric import Rubric
from groundjudge.judge.scoring import criterion_values
from groundjudge.judge.verdict import VerdictError, parse_verdict


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class Pricing:
    prompt_per_mtok: float = 0.0
    completion_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt_per_mtok + completion_tokens * self.completion_per_mtok) / 1e6


@dataclass
class EngineTotals:
    usage: Usage = field(default_factory=Usage)
    cache_hits: int = 0
    errors: int = 0
    done: int = 0
    mode: str | None = None
    stopped: str | None = None  # why the run stopped sending, if it did


@dataclass
class _Pending:
    """One item while it is being judged (mutable); :meth:`result` freezes it."""

    item: JudgeItem
    status: Status = "judge_error"
    reason: str | None = None
    source: Literal["cache", "call"] | None = None
    criteria: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimResult] = field(default_factory=list)
    judge_reason: str | None = None
    raw: str | None = None
    cache_key: str | None = None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0

    def result(self, selected_because: str | None = None) -> CaseJudgement:
        judged = self.status == "judged"
        return CaseJudgement(
            case_id=self.item.case_id, config_id=self.item.config_id, status=self.status,
            reason=None if judged else self.reason, selected_because=selected_because, source=self.source,
            criteria=self.criteria if judged else {}, claims=self.claims if judged else [],
            judge_reason=self.judge_reason if judged else None, usage=self.usage, seconds=round(self.seconds, 3),
            cache_key=self.cache_key, raw=self.raw)


def claims_of(verdict: Any) -> list[ClaimResult]:
    return [ClaimResult(claim=c.claim, cited=list(c.cited), verdict=c.verdict, support=list(c.support),
                        klass=c.triage_class) for c in verdict.claims]


@dataclass
class JudgeEngine:
    rubric: Rubric
    cache: JudgeCache
    client: JudgeClient | None = None
    connect: Callable[[], JudgeClient] | None = None  # makes the client on the first call needed
    model: str = ""
    decoding: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 4
    budget: Budget = field(default_factory=Budget)
    pricing: Pricing = field(default_factory=Pricing)
    retry_errors: bool = True  # ask again an item whose cached replies were invalid
    on_progress: Callable[[EngineTotals], None] | None = None
    totals: EngineTotals = field(default_factory=EngineTotals)

    def __post_init__(self) -> None:
        if self.client is not None:
            self.model = self.model or self.client.settings.model
            self.decoding = self.decoding or self.client.settings.decoding()
        if not self.model:
            raise ValueError("the engine needs the pinned model id (or a client)")
        self._client_lock = asyncio.Lock()

    def key(self, item: JudgeItem) -> str:
        return cache_key(self.rubric, self.model, self.decoding, item)

    async def _get_client(self) -> JudgeClient:
        async with self._client_lock:
            if self.client is None:
                if self.connect is None:
                    raise RuntimeError("the engine has neither a client nor a way to make one")
                self.client = await asyncio.to_thread(self.connect)
            return self.client

    def _budget_left(self) -> str | None:
        t, b = self.totals.usage, self.budget
        if b.max_tokens is not None and t.tokens >= b.max_tokens:
            return f"budget: max_tokens {b.max_tokens} reached"
        if b.max_cost_usd is not None and t.cost_usd >= b.max_cost_usd:
            return f"budget: max_cost_usd {b.max_cost_usd} reached"
        return None

    def _from_reply(self, out: _Pending, raw: str) -> None:
        item = out.item
        verdict = parse_verdict(raw, [cid for cid, _ in item.contexts], answer_has_text=bool(item.answer.strip()))
        claims = claims_of(verdict)
        values = criterion_values(self.rubric.criteria, claims=claims, fields=verdict.fields,
                                  has_expected_answer=bool(item.expected_answer))
        out.status, out.raw, out.claims, out.criteria = "judged", raw, claims, values
        out.judge_reason = verdict.reason

    def _account(self, out: _Pending, result: CallResult | None, requests: int) -> None:
        used = Usage(requests=requests)
        if result is not None:
            used = Usage(requests=requests, prompt_tokens=result.prompt_tokens,
                         completion_tokens=result.completion_tokens,
                         cost_usd=self.pricing.cost(result.prompt_tokens, result.completion_tokens))
            self.totals.mode = result.mode
        out.usage = out.usage + used
        self.totals.usage = self.totals.usage + used

    async def _call(self, out: _Pending, messages: list[dict[str, str]]) -> CallResult:
        client = await self._get_client()
        try:
            result = await client.complete(messages, self.rubric.output_schema, self.rubric.id)
        except CallFailed as exc:
            self._account(out, None, exc.requests)
            raise
        self._account(out, result, result.requests)
        return result

    def _store(self, key: str, raw: str, model: str, out: _Pending, *, repaired: bool, history: list[str]) -> None:
        # Every paid reply is stored as soon as it arrives, whatever it parses to: a parser fix
        # can read it again, and a run killed before the repair resumes with the repair only.
        self.cache.put(key, CachedReply(raw=raw, model=model, prompt_tokens=out.usage.prompt_tokens,
                                        completion_tokens=out.usage.completion_tokens, created=time.time(),
                                        repaired=repaired, history=history))

    async def _repair(self, out: _Pending, key: str, raw: str, problem: VerdictError, history: list[str]) -> None:
        """The one repair retry: show the model its reply and what was wrong with it."""
        messages = [*render_messages(self.rubric, out.item), {"role": "assistant", "content": raw},
                    {"role": "user", "content": self.rubric.render_repair(str(problem))}]
        second = await self._call(out, messages)
        self._store(key, second.raw, second.model, out, repaired=True, history=[*history, raw])
        try:
            self._from_reply(out, second.raw)
        except VerdictError as again:
            out.status, out.raw = "judge_error", second.raw
            out.reason = f"invalid verdict after one repair: {again}"

    async def _judge_one(self, out: _Pending, key: str, history: list[str]) -> None:
        first = await self._call(out, render_messages(self.rubric, out.item))
        self._store(key, first.raw, first.model, out, repaired=False, history=history)
        try:
            self._from_reply(out, first.raw)
        except VerdictError as problem:
            await self._repair(out, key, first.raw, problem, history)

    async def _send(self, out: _Pending, sem: asyncio.Semaphore, stop: dict[str, str], work: Any) -> None:
        """Run ``work`` (a call or a repair) under the concurrency bound, the stop flag and the budget."""
        async with sem:
            if stop:
                out.status, out.reason = "judge_error", stop["reason"]
                return
            if (over := self._budget_left()) is not None:
                out.status, out.reason = "skipped", over
                return
            started = time.monotonic()
            try:
                await work()
            except (ModelMismatch, JudgeUnreachable) as exc:
                # Never mix verdicts of another model, nor keep hammering a dead server.
                stop.setdefault("reason", f"not sent: the run stopped after: {exc.reason}")
                out.status, out.reason = "judge_error", exc.reason
            except CallFailed as exc:
                out.status, out.reason = "judge_error", exc.reason
            out.seconds += time.monotonic() - started

    async def _run_item(self, item: JudgeItem, sem: asyncio.Semaphore, stop: dict[str, str]) -> _Pending:
        out = _Pending(item)
        key = out.cache_key = self.key(item)
        cached = self.cache.get(key)
        if cached is None:
            out.source = "call"
            await self._send(out, sem, stop, lambda: self._judge_one(out, key, []))
            return self._finish(out)
        out.source = "cache"
        self.totals.cache_hits += 1
        try:
            self._from_reply(out, cached.raw)
        except VerdictError as exc:
            history, problem = [*cached.history], exc
            if not cached.repaired:  # a run stopped between the first reply and its repair: pay for the repair only
                out.raw = cached.raw
                await self._send(out, sem, stop, lambda: self._repair(out, key, cached.raw, problem, history))
            elif self.retry_errors:
                # Broken twice before (a flaky network, say): ask again from the start; the
                # broken replies stay in the entry's history.
                out.source = "call"
                self.totals.cache_hits -= 1
                await self._send(out, sem, stop, lambda: self._judge_one(out, key, [*history, cached.raw]))
            else:
                out.status, out.raw, out.reason = "judge_error", cached.raw, f"invalid verdict (cached reply): {exc}"
        return self._finish(out)

    def _finish(self, out: _Pending) -> _Pending:
        self.totals.done += 1
        if out.status == "judge_error":
            self.totals.errors += 1
        if self.on_progress is not None:
            self.on_progress(self.totals)
        return out

    async def run(self, items: Sequence[JudgeItem], selected_because: Sequence[str | None] | None = None,
                  ) -> list[CaseJudgement]:
        """Judge ``items`` (already in priority order); results come back in the same order."""
        sem = asyncio.Semaphore(max(1, self.concurrency))
        stop: dict[str, str] = {}
        try:
            pending = await asyncio.gather(*(self._run_item(item, sem, stop) for item in items))
        finally:
            if self.client is not None:
                await self.client.close()
        if stop:
            self.totals.stopped = stop["reason"]
        why = list(selected_because) if selected_because is not None else [None] * len(pending)
        return [p.result(w) for p, w in zip(pending, why)]
