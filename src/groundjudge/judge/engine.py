"""Judge many items: cache lookup, bounded concurrent calls, one repair retry, honest outcomes.

Every item ends as ``judged`` (from the cache or a call) or ``judge_error`` with a reason, or
``skipped`` when the budget ran out before it was sent. Nothing is ever scored from an error.
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
from groundjudge.judge.rubric import Rubric
from groundjudge.judge.verdict import JudgeScores, RawVerdict, VerdictError, parse_verdict, score_verdict

Status = Literal["judged", "judge_error", "skipped"]


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
class JudgeOutcome:
    case_id: str
    config_id: str
    status: Status
    reason: str | None = None
    source: Literal["cache", "call"] | None = None
    verdict: RawVerdict | None = None
    scores: JudgeScores | None = None
    raw: str | None = None
    cache_key: str | None = None
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


@dataclass
class JudgeTotals:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = 0
    errors: int = 0
    done: int = 0
    mode: str | None = None
    stopped: str | None = None  # why the run stopped sending, if it did


@dataclass
class JudgeEngine:
    rubric: Rubric
    client: JudgeClient
    cache: JudgeCache
    concurrency: int = 4
    budget: Budget = field(default_factory=Budget)
    pricing: Pricing = field(default_factory=Pricing)
    on_progress: Callable[[JudgeTotals], None] | None = None
    totals: JudgeTotals = field(default_factory=JudgeTotals)

    @property
    def model(self) -> str:
        return self.client.settings.model

    def key(self, item: JudgeItem) -> str:
        return cache_key(self.rubric, self.model, self.client.settings.decoding(), item)

    def _budget_left(self) -> str | None:
        t, b = self.totals, self.budget
        if b.max_tokens is not None and t.prompt_tokens + t.completion_tokens >= b.max_tokens:
            return f"budget: max_tokens {b.max_tokens} reached"
        if b.max_cost_usd is not None and t.cost_usd >= b.max_cost_usd:
            return f"budget: max_cost_usd {b.max_cost_usd} reached"
        return None

    def _from_reply(self, item: JudgeItem, out: JudgeOutcome, raw: str) -> None:
        verdict = parse_verdict(raw, [cid for cid, _ in item.contexts])
        out.status, out.verdict, out.raw = "judged", verdict, raw
        out.scores = score_verdict(verdict, has_expected_answer=bool(item.expected_answer))

    def _account(self, out: JudgeOutcome, result: CallResult | None, requests: int) -> None:
        out.requests += requests
        self.totals.requests += requests
        if result is not None:
            out.prompt_tokens += result.prompt_tokens
            out.completion_tokens += result.completion_tokens
            cost = self.pricing.cost(result.prompt_tokens, result.completion_tokens)
            out.cost_usd += cost
            self.totals.prompt_tokens += result.prompt_tokens
            self.totals.completion_tokens += result.completion_tokens
            self.totals.cost_usd += cost
            self.totals.mode = result.mode

    async def _call(self, item: JudgeItem, out: JudgeOutcome, messages: list[dict[str, str]]) -> CallResult:
        try:
            result = await self.client.complete(messages, self.rubric.output_schema, self.rubric.id)
        except CallFailed as exc:
            self._account(out, None, exc.requests)
            raise
        self._account(out, result, result.requests)
        return result

    def _store(self, key: str, raw: str, model: str, out: JudgeOutcome, *, repaired: bool) -> None:
        # Every paid reply is stored as soon as it arrives, whatever it parses to: a parser fix
        # can read it again, and a run killed before the repair resumes with the repair only.
        self.cache.put(key, CachedReply(raw=raw, model=model, prompt_tokens=out.prompt_tokens,
                                        completion_tokens=out.completion_tokens, created=time.time(),
                                        repaired=repaired))

    async def _repair(self, item: JudgeItem, key: str, out: JudgeOutcome, raw: str, problem: VerdictError) -> None:
        """The one repair retry: show the model its reply and what was wrong with it."""
        messages = [*render_messages(self.rubric, item), {"role": "assistant", "content": raw},
                    {"role": "user", "content": self.rubric.render_repair(str(problem))}]
        second = await self._call(item, out, messages)
        self._store(key, second.raw, second.model, out, repaired=True)
        try:
            self._from_reply(item, out, second.raw)
        except VerdictError as again:
            out.status, out.raw = "judge_error", second.raw
            out.reason = f"invalid verdict after one repair: {again}"

    async def _judge_one(self, item: JudgeItem, key: str, out: JudgeOutcome) -> None:
        first = await self._call(item, out, render_messages(self.rubric, item))
        self._store(key, first.raw, first.model, out, repaired=False)
        try:
            self._from_reply(item, out, first.raw)
        except VerdictError as problem:
            await self._repair(item, key, out, first.raw, problem)

    async def _send(self, item: JudgeItem, out: JudgeOutcome, sem: asyncio.Semaphore, stop: dict[str, str],
                    work: Any) -> None:
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

    async def _run_item(self, item: JudgeItem, sem: asyncio.Semaphore, stop: dict[str, str]) -> JudgeOutcome:
        out = JudgeOutcome(item.case_id, item.config_id, "judge_error")
        key = out.cache_key = self.key(item)
        cached = self.cache.get(key)
        if cached is not None:
            out.source = "cache"
            self.totals.cache_hits += 1
            try:
                self._from_reply(item, out, cached.raw)
            except VerdictError as exc:
                if cached.repaired:
                    out.status, out.raw, out.reason = "judge_error", cached.raw, f"invalid verdict (cached reply): {exc}"
                else:  # a run stopped between the first reply and its repair: pay for the repair only
                    out.raw, problem = cached.raw, exc
                    await self._send(item, out, sem, stop,
                                     lambda: self._repair(item, key, out, cached.raw, problem))
        else:
            out.source = "call"
            await self._send(item, out, sem, stop, lambda: self._judge_one(item, key, out))
        self._finish(out)
        return out

    def _finish(self, out: JudgeOutcome) -> None:
        self.totals.done += 1
        if out.status == "judge_error":
            self.totals.errors += 1
        if self.on_progress is not None:
            self.on_progress(self.totals)

    async def run(self, items: Sequence[JudgeItem]) -> list[JudgeOutcome]:
        """Judge ``items`` (already in priority order); outcomes come back in the same order."""
        sem = asyncio.Semaphore(max(1, self.concurrency))
        stop: dict[str, str] = {}
        try:
            outcomes = await asyncio.gather(*(self._run_item(item, sem, stop) for item in items))
        finally:
            await self.client.close()
        if stop:
            self.totals.stopped = stop["reason"]
        return list(outcomes)


def outcome_record(out: JudgeOutcome) -> dict[str, Any]:
    """A JSON-ready view of one outcome for reports."""
    record: dict[str, Any] = {
        "status": out.status, "reason": out.reason, "source": out.source, "requests": out.requests,
        "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
        "cost_usd": out.cost_usd, "seconds": round(out.seconds, 3), "cache_key": out.cache_key,
    }
    if out.scores is not None:
        record["scores"] = out.scores.model_dump()
    if out.verdict is not None:
        record["claims"] = [{**c.model_dump(), "class": c.triage_class} for c in out.verdict.claims]
        record["judge_reason"] = out.verdict.reason
    return record
