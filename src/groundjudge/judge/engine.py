"""Judge many items: cache lookup, bounded concurrent calls, one repair retry, honest outcomes.

Every item ends as ``judged`` (from the cache or a call) or ``judge_error`` with a reason, or
``skipped`` when the budget ran out before it was sent. Nothing is ever scored from an error.
The client is made on the first call that is needed, so a fully cached run never reaches
(or, for the embedded judge, starts) a server.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from groundjudge.judge import claim_check
from groundjudge.judge.cache import CachedReply, JudgeCache, cache_key, derivation_hash
from groundjudge.judge.client import CallFailed, CallResult, JudgeClient, JudgeUnreachable, ModelMismatch, TokenAnswer
from groundjudge.judge.render import JudgeItem, render_messages
from groundjudge.judge.results import CaseJudgement, ClaimResult, CriterionValue, NuggetResult, Status, Usage
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
    questions: int = 0  # claim_check: questions answered (from the cache or a call; none for a case memo)
    without_logprobs: int = 0  # claim_check: answers that came with no token probabilities


@dataclass(slots=True)
class _Pending:
    """One item while it is being judged (mutable); :meth:`result` freezes it. Slotted: a
    nightly run holds one per item until the last is judged."""

    item: JudgeItem
    status: Status = "judge_error"
    reason: str | None = None
    source: Literal["cache", "call"] | None = None
    criteria: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimResult] = field(default_factory=list)
    nuggets: list[NuggetResult] = field(default_factory=list)
    judge_reason: str | None = None
    raw: str | None = None
    cache_key: str | None = None
    usage: Usage = field(default=Usage())  # frozen: one shared zero for the (many) items that cost nothing
    seconds: float = 0.0

    def result(self, selected_because: str | None = None) -> CaseJudgement:
        judged = self.status == "judged"
        return CaseJudgement(
            case_id=self.item.case_id, config_id=self.item.config_id, status=self.status,
            reason=None if judged else self.reason, selected_because=selected_because, source=self.source,
            criteria=self.criteria if judged else {}, claims=self.claims if judged else [],
            nuggets=self.nuggets if judged else [],
            judge_reason=self.judge_reason if judged else None, usage=self.usage, seconds=round(self.seconds, 3),
            cache_key=self.cache_key, raw=self.raw)


def claims_of(verdict: Any) -> list[ClaimResult]:
    return [ClaimResult(claim=c.claim, cited=list(c.cited), verdict=c.verdict, support=list(c.support),
                        klass=c.triage_class)
            for c in verdict.claims]


_VALUES: dict[tuple[Any, ...], CriterionValue] = {}


def _shared(values: dict[str, CriterionValue]) -> dict[str, CriterionValue]:
    """The same (frozen) criterion value object for equal values: a nightly run holds hundreds
    of thousands of verdicts, and their criterion values come from a handful of shares."""
    out = {}
    for name, value in values.items():
        key = (type(value.label), value.label, type(value.value), value.value, type(value.confidence), value.confidence)
        shared = _VALUES.get(key)
        if shared is None:
            if len(_VALUES) >= 10_000:
                out[name] = value
                continue
            shared = _VALUES[key] = value
        out[name] = shared
    return out


_MEMOS_PER_COMMIT = 1000


class _CaseMemo(BaseModel):
    """claim_check: what a judged case's answers came to, stored beside them under the case's
    own key (``JudgeEngine._memo_key``). A re-run of an unchanged case reads this one entry
    instead of splitting the answer, finding the terms and reading every question's answer:
    about 1 ms per case, which on a nightly run of 200,000 was minutes. The key names the
    rubric, model, decoding, the case's whole input and ``cache.derivation_hash()``: another
    version of the code derives it again from the stored answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    criteria: dict[str, CriterionValue]
    claims: list[ClaimResult]
    nuggets: list[NuggetResult]


class _NotSent(Exception):
    """A question that was not sent: the run stopped, or the budget ran out."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


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
        self._memos: list[tuple[str, CachedReply]] = []  # claim_check case memos not stored yet

    def key(self, item: JudgeItem) -> str:
        return cache_key(self.rubric, self.model, self.decoding, item, rubric_hash=self._rubric_hash)

    def _memo_key(self, item: JudgeItem) -> str:
        return cache_key(self.rubric, self.model, {**self.decoding, "claim_check_case": derivation_hash()}, item,
                         rubric_hash=self._rubric_hash)

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
        out.status, out.raw, out.claims, out.criteria = "judged", raw, claims, _shared(values)
        out.judge_reason = verdict.reason

    def _account(self, out: _Pending, result: CallResult | None, requests: int) -> None:
        if result is not None:
            self.totals.mode = result.mode
        self._account_answer(out, result, requests)

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

    def _from_cache(self, item: JudgeItem) -> tuple[_Pending | None, str, CachedReply | None]:
        """The item judged from a valid cached reply, without the event loop; else None, with
        the key and entry looked up (no entry, or one that needs a repair or a new call:
        ``_run_item`` handles those). claim_check: the item from its case memo, if it has one."""
        if self.rubric.protocol == "claim_questions":
            return self._from_memo(item)
        key = self.key(item)
        cached = self.cache.get(key)
        if cached is None:
            return None, key, None
        out = _Pending(item, source="cache", cache_key=key)
        try:
            self._from_reply(out, cached.raw)
        except VerdictError:
            return None, key, cached
        self.totals.cache_hits += 1
        return self._finish(out), key, cached

    def _from_memo(self, item: JudgeItem) -> tuple[_Pending | None, str, CachedReply | None]:
        key = self._memo_key(item)
        cached = self.cache.get(key)
        if cached is None:
            return None, key, None
        try:
            memo = _CaseMemo.model_validate_json(cached.raw)
        except ValidationError:  # not one this code reads: derived again, and replaced
            return None, key, cached
        out = _Pending(item, status="judged", source="cache", criteria=_shared(memo.criteria),
                       claims=list(memo.claims), nuggets=list(memo.nuggets))
        self.totals.cache_hits += 1
        return self._finish(out), key, cached

    def _keep_memo(self, out: _Pending) -> None:
        """Keep a judged case's memo; stored a thousand at a time, in one transaction each (a
        commit per memo made the first re-run of a nightly set a quarter slower)."""
        if out.status != "judged":
            return
        memo = _CaseMemo(criteria=out.criteria, claims=out.claims, nuggets=out.nuggets)
        self._memos.append((self._memo_key(out.item), CachedReply(
            raw=memo.model_dump_json(by_alias=True), model=self.model, prompt_tokens=0, completion_tokens=0,
            created=time.time())))
        if len(self._memos) >= _MEMOS_PER_COMMIT:
            self._store_memos()

    def _store_memos(self) -> None:
        if self._memos:
            self.cache.put_many(self._memos)
            self._memos.clear()

    def _all_from_cache(self, items: Sequence[JudgeItem], why: Sequence[str | None],
                        ) -> list[tuple[CaseJudgement | None, str, CachedReply | None]]:
        """For every item, in order: its result when the cache settles it (made at once, so a
        nightly run never holds an item's pending state and its result together), else None
        with the cache key and the entry found, if any.

        Not split over a forked worker, as the metrics are: by this point the process holds
        the run's inputs, rows and most verdicts, and a worker per round copied 0.1 to 0.2 GB
        of them to save about a second at 100,000 x 2, which took the run past 2 GiB."""
        out: list[tuple[CaseJudgement | None, str, CachedReply | None]] = []
        for item, because in zip(items, why, strict=True):
            pending, key, cached = self._from_cache(item)
            out.append((pending.result(because), key, None) if pending is not None else (None, key, cached))
        return out

    async def _run_item(self, item: JudgeItem, sem: asyncio.Semaphore, stop: dict[str, str],
                        looked_up: tuple[str, CachedReply | None] | None = None) -> _Pending:
        out = _Pending(item)
        if looked_up is None:
            key = out.cache_key = self.key(item)
            cached = self.cache.get(key)
        else:
            (key, cached), out.cache_key = looked_up, looked_up[0]
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

    async def _run_claim_items(self, items: Sequence[JudgeItem], sem: asyncio.Semaphore,
                               stop: dict[str, str]) -> list[_Pending]:
        cases = asyncio.Semaphore(max(1, self.concurrency))
        order = prefix_order(items)
        done = await asyncio.gather(*(self._run_claim_item(items[i], cases, sem, stop) for i in order))
        by_index = dict(zip(order, done))
        return [by_index[i] for i in range(len(items))]

    def _finish(self, out: _Pending) -> _Pending:
        self.totals.done += 1
        if out.status == "judge_error":
            self.totals.errors += 1
        if self.on_progress is not None:
            self.on_progress(self.totals)
        return out

    # --- claim_check: one short question per claim ------------------------------------------

    def _account_answer(self, out: _Pending, answer: CallResult | TokenAnswer | None, requests: int) -> None:
        """Add a reply's requests, tokens and cost (or only the requests of a failed call)."""
        used = Usage(requests=requests)
        if answer is not None:
            used = Usage(requests=requests, prompt_tokens=answer.prompt_tokens,
                         completion_tokens=answer.completion_tokens,
                         cost_usd=self.pricing.cost(answer.prompt_tokens, answer.completion_tokens),
                         unmetered=0 if answer.metered else 1)
        out.usage = out.usage + used
        self.totals.usage = self.totals.usage + used

    async def _ask(self, out: _Pending, question: claim_check.Question, sem: asyncio.Semaphore,
                   stop: dict[str, str], fresh: list[int]) -> claim_check.Answer:
        """One question's answer: from the cache when a valid answer is stored, else asked.

        The rule is the verdict protocol's (``_run_item``): every reply is stored as it
        arrives, valid or not, and read after the cache. An invalid reply (prose, a word cut
        short) is asked once more at once (the repair); one whose repair was invalid too is
        asked again from the start by a later run (``retry_errors``), its invalid replies kept
        in the entry's history, or with ``retry_errors`` off it stays a ``judge_error``."""
        spec = self.rubric.claim_questions
        assert spec is not None
        key = claim_check.question_key(self.model, self.decoding, question)
        cached = self.cache.get(key)
        history: list[str] = []  # the invalid replies before the next one stored
        repairs_only = False
        problem: VerdictError | None = None
        if cached is not None:
            try:
                parsed = claim_check.read_answer(cached.raw, spec)
            except VerdictError as exc:
                if cached.repaired and not self.retry_errors:
                    raise VerdictError(f"{exc} (cached reply; --keep-errors)") from None
                history = [*cached.history, cached.raw]
                # a run stopped between a reply and its repair: pay for the repair only
                repairs_only = not cached.repaired
            else:
                return self._counted(parsed)
        for attempt in range(1 if repairs_only else 2):
            repair = repairs_only or attempt == 1
            raw = await self._ask_once(out, question, key, sem, stop, history, repaired=repair)
            fresh[0] += 1
            try:
                return self._counted(claim_check.read_answer(raw, spec))
            except VerdictError as exc:
                problem = exc
                history = [*history, raw]
        raise VerdictError(f"{problem} (and again on its repair)")

    def _counted(self, parsed: claim_check.Answer) -> claim_check.Answer:
        self.totals.questions += 1
        if parsed.probability is None:
            self.totals.without_logprobs += 1
        return parsed

    async def _ask_once(self, out: _Pending, question: claim_check.Question, key: str, sem: asyncio.Semaphore,
                        stop: dict[str, str], history: list[str], *, repaired: bool) -> str:
        """Send one question and store its reply, whatever it says (``history``: the invalid
        replies stored for this key before it)."""
        spec = self.rubric.claim_questions
        assert spec is not None
        async with sem:
            if stop:
                raise _NotSent("judge_error", stop["reason"])
            if (over := self._budget_left()) is not None:
                raise _NotSent("skipped", over)
            client = await self._get_client()
            try:
                answer = await client.ask_token(question.messages, top_logprobs=spec.top_logprobs)
            except CallFailed as exc:
                self._account_answer(out, None, exc.requests)
                raise
            self._account_answer(out, answer, answer.requests)
            raw = json.dumps({"text": answer.text, "tokens": answer.tokens}, ensure_ascii=False)
            self.cache.put(key, CachedReply(raw=raw, model=answer.model, prompt_tokens=answer.prompt_tokens,
                                            completion_tokens=answer.completion_tokens, created=time.time(),
                                            repaired=repaired, history=list(history)))
            return raw

    async def _ask_all(self, out: _Pending, questions: Sequence[claim_check.Question], sem: asyncio.Semaphore,
                       stop: dict[str, str], fresh: list[int]) -> list[claim_check.Answer]:
        # Wait for every question of the phase, even when one fails, so each answer that was paid
        # for is cached and a re-run asks only what is missing.
        answers = await asyncio.gather(*(self._ask(out, q, sem, stop, fresh) for q in questions),
                                       return_exceptions=True)
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        if failed is not None:
            raise failed
        return list(answers)  # type: ignore[arg-type]

    async def _judge_claims(self, out: _Pending, sem: asyncio.Semaphore, stop: dict[str, str]) -> None:
        rubric, item = self.rubric, out.item
        cut = claim_check.support_cut(rubric)
        plan = claim_check.plan_case(rubric, item)
        fresh = [0]
        asked = claim_check.claim_questions(rubric, plan)
        support, model = claim_check.supports(rubric, plan, asked, await self._ask_all(out, asked, sem, stop, fresh))
        against = claim_check.contradiction_questions(rubric, plan, support)
        contradicted = dict(zip((q.index for q in against), await self._ask_all(out, against, sem, stop, fresh)))
        cited_unfound = claim_check.cited_unfound(rubric, item, plan)
        by_cited, settled = claim_check.cited_questions(rubric, item, plan, cited_unfound)
        cited = {q.index: claim_check.grounded(rubric, a, cited_unfound.get(q.index), cut)
                 for q, a in zip(by_cited, await self._ask_all(out, by_cited, sem, stop, fresh))}
        cited |= {i: claim_check.grounded(rubric, None, cited_unfound[i], cut)
                  for i, why in settled.items() if why == "terms_decide"}
        nuggets = await self._ask_all(out, claim_check.nugget_questions(rubric, plan), sem, stop, fresh)
        relevant = await self._ask_all(out, claim_check.relevance_questions(rubric, item), sem, stop, fresh)
        claims = claim_check.claim_results(plan, support, contradicted, cited, settled, cut,
                                           model if plan.unfound is not None else None)
        out.nuggets = claim_check.nugget_results(plan, nuggets, 0.5)
        out.claims = claims
        out.criteria = criterion_values(rubric.criteria, claims=claims, nuggets=out.nuggets,
                                        has_expected_answer=bool(item.expected_answer),
                                        nothing_to_check=bool(item.answer.strip()) and not plan.sentences,
                                        relevance=(relevant[0].probability, relevant[0].said_yes) if relevant else None)
        out.status, out.source = "judged", "call" if fresh[0] else "cache"

    async def _run_claim_item(self, item: JudgeItem, cases: asyncio.Semaphore, sem: asyncio.Semaphore,
                              stop: dict[str, str]) -> _Pending:
        out = _Pending(item)
        async with cases:  # one case's questions together: its shared prefix stays in the server's cache
            started = time.monotonic()
            try:
                await self._judge_claims(out, sem, stop)
            except _NotSent as exc:
                out.status, out.reason = exc.status, exc.reason
            except (ModelMismatch, JudgeUnreachable) as exc:
                stop.setdefault("reason", f"not sent: the run stopped after: {exc.reason}")
                out.status, out.reason = "judge_error", exc.reason
            except CallFailed as exc:
                out.status, out.reason = "judge_error", exc.reason
            except VerdictError as exc:
                out.status, out.reason = "judge_error", f"invalid answer: {exc}"
            out.seconds += time.monotonic() - started
        self._keep_memo(out)
        if out.source == "cache":
            self.totals.cache_hits += 1
        return self._finish(out)

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
            if self.rubric.protocol == "claim_questions":
                called = await self._run_claim_items([items[i] for i in misses], sem, stop)
                self._store_memos()
            else:
                called = await asyncio.gather(*(self._run_item(items[i], sem, stop, looked[i][1:]) for i in misses))
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
