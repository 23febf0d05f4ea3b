"""Judge many items: cache lookup, bounded concurrent calls, one repair retry, honest outcomes.

Every item ends as ``judged`` (from the cache or a call) or ``judge_error`` with a reason, or
``skipped`` when the budget ran out before it was sent. Nothing is ever scored from an error.
The client is made on the first call that is needed, so a fully cached run never reaches
(or, for the embedded judge, starts) a server.

This module is the scheduler, the same for every protocol: cache keys, the concurrency bound,
the budget, the stop rule, accounting, progress, the cache writes stored in batches and the
order of the calls. What is sent and how a reply becomes a verdict is the rubric's protocol's:
:mod:`.one_call_json` (one reply is the case's verdict) and :mod:`.claim_questions`
(claim_check: each claim's questions, one token each).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groundjudge import distributed
from groundjudge.judge.cache import CachedReply, CacheKeys, JudgeCache, derivation_hash
from groundjudge.judge.claim_questions import ClaimQuestions
from groundjudge.judge.client import (
    CallFailed,
    CallResult,
    JudgeClient,
    JudgeUnreachable,
    ModelMismatch,
    TokenAnswer,
)
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.one_call_json import OneCallJson
from groundjudge.judge.pending import NotSent, Pending
from groundjudge.judge.results import CaseJudgement, Usage
from groundjudge.judge.rubric import Rubric

__all__ = ["Budget", "EngineTotals", "JudgeEngine", "JudgeProtocol", "Pricing", "prefix_order"]


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
    questions: int = 0  # claim_check: questions answered (from the cache or a call; none for a case memo)
    without_logprobs: int = 0  # claim_check: answers that came with no token probabilities


class JudgeProtocol(Protocol):
    """What a rubric's protocol does for the engine (:mod:`.one_call_json`, :mod:`.claim_questions`)."""

    #: send cases that share question and context one after another (:func:`prefix_order`)
    groups_shared_prefixes: bool

    def cache_key(self, item: JudgeItem) -> str:
        """The key under which the cache may settle the item (:meth:`from_cached`)."""

    def from_cached(self, items: Sequence[JudgeItem], keys: Sequence[str], found: Sequence[CachedReply | None],
                    selected_because: Sequence[str | None]) -> list[CaseJudgement | None]:
        """Each item's result where the entry found under its key (None: no entry) settles it,
        without the event loop (and counted: :meth:`JudgeEngine.settled_from_cache`); else None.
        In the order of ``items``."""

    async def run(self, items: Sequence[JudgeItem], looked_up: Sequence[tuple[str, CachedReply | None]],
                  sem: asyncio.Semaphore, stop: dict[str, str]) -> list[Pending]:
        """Judge the items the cache did not settle; results in the order of ``items``."""


PROTOCOLS: dict[str, Callable[[JudgeEngine], JudgeProtocol]] = {
    "one_call_json": OneCallJson,
    "claim_questions": ClaimQuestions,
}

_PUTS_PER_COMMIT = 1000
_LOOKUPS_PER_READ = 2000


def prefix_order(items: Sequence[JudgeItem]) -> list[int]:
    """Indexes of ``items`` with cases that share question and context next to each other
    (stable otherwise): a server that keeps the last prompt's prefix then reads it once."""
    first: dict[tuple[str, tuple[str, ...]], int] = {}
    for i, item in enumerate(items):
        first.setdefault((item.question, tuple(cid for cid, _ in item.contexts)), i)
    return sorted(range(len(items)), key=lambda i: first[(items[i].question,
                                                          tuple(cid for cid, _ in items[i].contexts))])


@dataclass
class JudgeEngine:
    """Judges items with ``rubric`` against ``cache`` and one client, by the rubric's protocol
    (``PROTOCOLS``); ``totals`` accumulate over :meth:`run` calls. The protocols call back the
    methods under "what the protocols call" below, so every call is bounded, budgeted, stopped
    and accounted for in one place."""

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
            spec = self.rubric.claim_questions if self.rubric.protocol == "claim_questions" else None
            self.decoding = self.decoding or self.client.settings.decoding(spec.top_logprobs if spec else None)
        if not self.model:
            raise ValueError("the engine needs the pinned model id (or a client)")
        self._client_lock = asyncio.Lock()
        self._rubric_hash = self.rubric.content_hash
        self._keys = CacheKeys(self.rubric, self.model, self.decoding, rubric_hash=self._rubric_hash)
        self._memo_keys: CacheKeys | None = None  # claim_check's, made on the first use
        self._later: list[tuple[str, CachedReply]] = []  # cache entries not stored yet (claim_check's case memos)
        self.protocol: JudgeProtocol = PROTOCOLS[self.rubric.protocol](self)

    # --- cache keys ----------------------------------------------------------------------------

    def key(self, item: JudgeItem) -> str:
        return self._keys(item)

    def _memo_key(self, item: JudgeItem) -> str:
        """claim_check: the key of the case's memo (``claim_questions.CaseMemo``)."""
        if self._memo_keys is None:
            self._memo_keys = CacheKeys(self.rubric, self.model, {**self.decoding, "claim_check_case": derivation_hash()},
                                        rubric_hash=self._rubric_hash)
        return self._memo_keys(item)

    # --- what the protocols call ---------------------------------------------------------------

    async def get_client(self) -> JudgeClient:
        async with self._client_lock:
            if self.client is None:
                if self.connect is None:
                    raise RuntimeError("the engine has neither a client nor a way to make one")
                self.client = await asyncio.to_thread(self.connect)
            return self.client

    def budget_left(self) -> str | None:
        """Why nothing more may be sent (the budget is spent), else None."""
        t, b = self.totals.usage, self.budget
        if b.max_tokens is not None and t.tokens >= b.max_tokens:
            return f"budget: max_tokens {b.max_tokens} reached"
        if b.max_cost_usd is not None and t.cost_usd >= b.max_cost_usd:
            return f"budget: max_cost_usd {b.max_cost_usd} reached"
        return None

    def account(self, out: Pending, answer: CallResult | TokenAnswer | None, requests: int) -> None:
        """Add a reply's requests, tokens and cost (or only the requests of a failed call)."""
        used = Usage(requests=requests)
        if answer is not None:
            used = Usage(requests=requests, prompt_tokens=answer.prompt_tokens,
                         completion_tokens=answer.completion_tokens,
                         cost_usd=self.pricing.cost(answer.prompt_tokens, answer.completion_tokens),
                         unmetered=0 if answer.metered else 1)
        out.usage = out.usage + used
        self.totals.usage = self.totals.usage + used

    @staticmethod
    def failed(out: Pending, exc: CallFailed, stop: dict[str, str]) -> None:
        """The stop rule: a call failed; a judge that is not the pinned model, or cannot be
        reached, stops the run (never mix verdicts of another model, nor keep hammering a dead
        server); any other failure is this item's alone."""
        if isinstance(exc, (ModelMismatch, JudgeUnreachable)):
            stop.setdefault("reason", f"not sent: the run stopped after: {exc.reason}")
        out.status, out.reason = "judge_error", exc.reason

    async def send(self, out: Pending, sem: asyncio.Semaphore, stop: dict[str, str],
                   work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` (a call or a repair) under the concurrency bound, the stop flag and the budget."""
        async with sem:
            if (refused := self.not_sent(stop)) is not None:
                out.status, out.reason = refused.status, refused.reason
                return
            started = time.monotonic()
            try:
                await work()
            except CallFailed as exc:
                self.failed(out, exc, stop)
            out.seconds += time.monotonic() - started

    def not_sent(self, stop: dict[str, str]) -> NotSent | None:
        """Why a question may not be sent now (the run stopped, the budget is spent), else None."""
        if stop:
            return NotSent("judge_error", stop["reason"])
        if (over := self.budget_left()) is not None:
            return NotSent("skipped", over)
        return None

    def settled_from_cache(self, judged: int) -> None:
        """``judged`` items settled by the cache (a protocol's ``from_cached``): counted as hits
        and as done, each reported to ``on_progress`` as :meth:`finish` reports an item."""
        if self.on_progress is None:
            self.totals.cache_hits += judged
            self.totals.done += judged
            return
        for _ in range(judged):
            self.totals.cache_hits += 1
            self.totals.done += 1
            self.on_progress(self.totals)

    def finish(self, out: Pending) -> Pending:
        self.totals.done += 1
        if out.status == "judge_error":
            self.totals.errors += 1
        if self.on_progress is not None:
            self.on_progress(self.totals)
        return out

    def put_later(self, key: str, entry: CachedReply) -> None:
        """Store ``entry`` with others, a thousand in one transaction (claim_check's case memos:
        a commit per memo made the first re-run of a nightly set a quarter slower)."""
        self._later.append((key, entry))
        if len(self._later) >= _PUTS_PER_COMMIT:
            self.store_later_puts()

    def store_later_puts(self) -> None:
        if self._later:
            self.cache.put_many(self._later)
            self._later.clear()

    # --- the run -------------------------------------------------------------------------------

    def _all_from_cache(self, items: Sequence[JudgeItem], why: Sequence[str | None],
                        ) -> list[tuple[CaseJudgement | None, str, CachedReply | None]]:
        """For every item, in order: its result when the cache settles it (made at once, so a
        nightly run never holds an item's pending state and its result together), else None
        with the cache key and the entry found, if any.

        Not split over a forked worker, as the metrics are: by this point the process holds
        the run's inputs, rows and most verdicts, and a worker per round copied enough of them
        to take a nightly run past its memory goal for little time saved.

        Inside ``distributed.ray_engine`` (``--engine ray``) the same lookup runs on the Ray
        cluster, in batches (``judge.on_ray``)."""
        if (ray_session := distributed.current()) is not None and items:
            from groundjudge.judge.on_ray import STAGE, look_up

            looked, nodes = look_up(self, items, why)
            ray_session.ran_on(STAGE, nodes)
            return looked
        return self.from_cache_only(items, why)

    def from_cache_only(self, items: Sequence[JudgeItem], why: Sequence[str | None],
                        ) -> list[tuple[CaseJudgement | None, str, CachedReply | None]]:
        """The lookup of :meth:`_all_from_cache`, in this process."""
        if len(items) != len(why):
            raise ValueError(f"{len(items)} items but {len(why)} reasons")
        protocol = self.protocol
        out: list[tuple[CaseJudgement | None, str, CachedReply | None]] = []
        every_key = [protocol.cache_key(item) for item in items]
        rowids = self.cache.locate(every_key)  # where the rows are, when the keys are most of the cache
        for start in range(0, len(items), _LOOKUPS_PER_READ):  # the cache read in batches of keys
            end = start + _LOOKUPS_PER_READ
            part, keys = items[start:end], every_key[start:end]
            found = self.cache.get_many(keys, rowids[start:end] if rowids is not None else None)
            settled = protocol.from_cached(part, keys, found, why[start:end])
            out += [(result, key, None) if result is not None else (None, key, cached)
                    for key, cached, result in zip(keys, found, settled, strict=True)]
        return out

    async def run(self, items: Sequence[JudgeItem], selected_because: Sequence[str | None] | None = None,
                  ) -> list[CaseJudgement]:
        """Judge ``items`` (already in priority order); results come back in the same order."""
        sem = asyncio.Semaphore(max(1, self.concurrency))
        stop: dict[str, str] = {}
        why = list(selected_because) if selected_because is not None else [None] * len(items)
        try:
            # Cache hits first, in a plain loop: a nightly run of 200,000 cached items then
            # costs no coroutine per item (claim_check: the cases with a case memo). The rest
            # (calls, repairs; claim_check: its questions) run concurrently.
            looked = self._all_from_cache(items, why)
            misses = [i for i, (p, _, _) in enumerate(looked) if p is None]
            if self.protocol.groups_shared_prefixes:
                misses = [misses[i] for i in prefix_order([items[i] for i in misses])]
            called = await self.protocol.run([items[i] for i in misses], [looked[i][1:] for i in misses], sem, stop)
            self.store_later_puts()
            results: list[Any] = [r for r, _, _ in looked]  # the cache's results; None where called
            del looked
            for i, p in zip(misses, called):
                results[i] = p.result(why[i])
        finally:
            if self.client is not None:
                await self.client.close()
        if stop:
            self.totals.stopped = stop["reason"]
        return results
