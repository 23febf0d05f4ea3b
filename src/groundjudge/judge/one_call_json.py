"""The ``one_call_json`` protocol: one call per case, whose JSON reply is the case's verdict.

A reply is stored in the cache as soon as it arrives, whatever it parses to, and parsed after
the cache (a parser fix reads it again for free). An invalid reply gets one repair retry: the
model is shown its reply and what was wrong with it. A cached reply whose repair is missing (a
run stopped between the two) pays for the repair only; one that was broken twice is asked again
from the start with ``retry_errors``, else it stays a ``judge_error``.

The engine (:mod:`.engine`) schedules the calls: concurrency, budget and stop rules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from groundjudge.judge.cache import CachedReply
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.client import CallFailed, CallResult
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.pending import NO_USAGE, Pending
from groundjudge.judge.render import render_messages
from groundjudge.judge.results import CaseJudgement, CriterionValue, shared_criteria
from groundjudge.judge.scoring import criterion_values, values_key
from groundjudge.judge.verdict import RawVerdict, VerdictError, parse_verdict, read_replies

if TYPE_CHECKING:
    from groundjudge.judge.engine import JudgeEngine

__all__ = ["OneCallJson", "claims_of"]


def claims_of(verdict: Any) -> list[ClaimResult]:
    """The verdict's claims as results; a claim supported by exactly what it cites holds one
    tuple for both (tuples are immutable: sharing one changes nothing that can be read)."""
    out = []
    for c in verdict.claims:
        cited = tuple(c.cited)
        support = cited if c.support == c.cited else tuple(c.support)
        out.append(ClaimResult(claim=c.claim, cited=cited, verdict=c.verdict, support=support, klass=c.triage_class))
    return out


_READ_AT_ONCE = 64  # replies read in one validation; see _read_by_pieces


def _read_by_pieces(raws: list[str]) -> Iterator[RawVerdict | None]:
    """``read_replies`` of ``raws``, a few dozen at a time as they are taken: the verdicts read
    but not yet built into results stay few and die young. Read a lookup batch at a time, they
    outlived the collector's young generations, and under Python's default settings (a notebook
    calling ``run_eval``) each batch added to the full collections that walk the whole heap."""
    for start in range(0, len(raws), _READ_AT_ONCE):
        yield from read_replies(raws[start:start + _READ_AT_ONCE])


class OneCallJson:
    """The protocol's steps for ``engine``'s run: what it reads from the cache, what it sends."""

    groups_shared_prefixes = False  # calls go in the selection's priority order, for the budget to cut from its end
    def __init__(self, engine: JudgeEngine) -> None:
        self.engine = engine
        self.rubric = engine.rubric
        schema = engine.rubric.output_schema
        assert schema is not None  # the rubric checks it has one for this protocol
        self.schema = schema

    def cache_key(self, item: JudgeItem) -> str:
        return self.engine.key(item)

    def from_cached(self, items: Sequence[JudgeItem], keys: Sequence[str], found: Sequence[CachedReply | None],
                    selected_because: Sequence[str | None]) -> list[CaseJudgement | None]:
        """Each item judged from a valid cached reply, without the event loop; else None (no
        entry, or one that needs a repair or a new call: :meth:`run_item` handles those). The
        replies are read a few dozen at a time (``verdict.read_replies``); each valid one is parsed and
        checked (``parse_verdict``, ``criterion_values``) and its result built from those values."""
        read = _read_by_pieces([cached.raw for cached in found if cached is not None])
        out: list[CaseJudgement | None] = [None] * len(items)
        settled = 0
        values_of: dict[tuple[Any, ...], Mapping[str, CriterionValue]] = {}  # the batch's distinct values
        for i, (item, key, cached) in enumerate(zip(items, keys, found, strict=True)):
            if cached is None:
                continue
            try:
                claims, values, reason = self._judged(item, cached.raw, next(read), values_of)
            except VerdictError:
                continue
            out[i] = CaseJudgement(case_id=item.case_id, config_id=item.config_id, status="judged",
                                   selected_because=selected_because[i], source="cache", criteria=values,
                                   claims=tuple(claims), judge_reason=reason, usage=NO_USAGE, cache_key=key,
                                   raw=cached.raw)
            settled += 1
        self.engine.settled_from_cache(settled)
        return out

    async def run(self, items: Sequence[JudgeItem], looked_up: Sequence[tuple[str, CachedReply | None]],
                  sem: asyncio.Semaphore, stop: dict[str, str]) -> list[Pending]:
        """Judge the items the cache did not settle (``looked_up``: each one's key and entry)."""
        return list(await asyncio.gather(*(self.run_item(item, sem, stop, found)
                                           for item, found in zip(items, looked_up, strict=True))))

    def _from_reply(self, out: Pending, raw: str) -> None:
        """``out`` judged from the reply ``raw``; :class:`VerdictError` where the reply is not a
        valid verdict."""
        out.claims, criteria, out.judge_reason = self._judged(out.item, raw)  # shared values (scoring)
        out.criteria = dict(criteria)
        out.status, out.raw = "judged", raw

    def _judged(self, item: JudgeItem, raw: str, read: RawVerdict | None = None,
                values_of: dict[tuple[Any, ...], Mapping[str, CriterionValue]] | None = None,
                ) -> tuple[list[ClaimResult], Mapping[str, CriterionValue], str]:
        """The claims, criterion values and the judge's reason in the reply ``raw`` (``read``:
        its one-step reading, where made); :class:`VerdictError` where it is not a valid verdict.
        ``values_of``: criterion values already worked out, by ``scoring.values_key``, each
        held as the read-only mapping a result holds (``results.shared_criteria``); a reply
        whose values raise is never kept there."""
        verdict = parse_verdict(raw, {cid for cid, _ in item.contexts}, answer_has_text=bool(item.answer.strip()),
                                read=read)
        claims = claims_of(verdict)
        fields, has_expected = verdict.fields, bool(item.expected_answer)
        known = None if values_of is None else values_key(claims, fields=fields, has_expected_answer=has_expected)
        values: Mapping[str, CriterionValue]
        if values_of is None or known is None:
            values = criterion_values(self.rubric.criteria, claims=claims, fields=fields,
                                      has_expected_answer=has_expected)
        else:
            found = values_of.get(known)
            values = found if found is not None else values_of.setdefault(known, shared_criteria(criterion_values(
                self.rubric.criteria, claims=claims, fields=fields, has_expected_answer=has_expected)))
        return claims, values, verdict.reason

    def _account(self, out: Pending, result: CallResult | None, requests: int) -> None:
        if result is not None:
            self.engine.totals.mode = result.mode
        self.engine.account(out, result, requests)

    async def _call(self, out: Pending, messages: list[dict[str, str]]) -> CallResult:
        client = await self.engine.get_client()
        try:
            result = await client.complete(messages, self.schema, self.rubric.id)
        except CallFailed as exc:
            self._account(out, None, exc.requests)
            raise
        self._account(out, result, result.requests)
        return result

    def _store(self, key: str, raw: str, model: str, out: Pending, *, repaired: bool, history: list[str]) -> None:
        # Every paid reply is stored as soon as it arrives, whatever it parses to: a parser fix
        # can read it again, and a run killed before the repair resumes with the repair only.
        self.engine.cache.put(key, CachedReply(raw=raw, model=model, prompt_tokens=out.usage.prompt_tokens,
                                               completion_tokens=out.usage.completion_tokens, created=time.time(),
                                               repaired=repaired, history=history))

    async def _repair(self, out: Pending, key: str, raw: str, problem: VerdictError, history: list[str]) -> None:
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

    async def _judge_one(self, out: Pending, key: str, history: list[str]) -> None:
        first = await self._call(out, render_messages(self.rubric, out.item))
        self._store(key, first.raw, first.model, out, repaired=False, history=history)
        try:
            self._from_reply(out, first.raw)
        except VerdictError as problem:
            await self._repair(out, key, first.raw, problem, history)

    async def run_item(self, item: JudgeItem, sem: asyncio.Semaphore, stop: dict[str, str],
                       looked_up: tuple[str, CachedReply | None] | None = None) -> Pending:
        engine = self.engine
        out = Pending(item)
        if looked_up is None:
            key = out.cache_key = engine.key(item)
            cached = engine.cache.get(key)
        else:
            (key, cached), out.cache_key = looked_up, looked_up[0]
        if cached is None:
            out.source = "call"
            await engine.send(out, sem, stop, lambda: self._judge_one(out, key, []))
            return engine.finish(out)
        out.source = "cache"
        engine.totals.cache_hits += 1
        try:
            self._from_reply(out, cached.raw)
        except VerdictError as exc:
            history, problem = [*cached.history], exc
            if not cached.repaired:  # a run stopped between the first reply and its repair: pay for the repair only
                out.raw = cached.raw
                await engine.send(out, sem, stop, lambda: self._repair(out, key, cached.raw, problem, history))
            elif engine.retry_errors:
                # Broken twice before (a flaky network, say): ask again from the start; the
                # broken replies stay in the entry's history.
                out.source = "call"
                engine.totals.cache_hits -= 1
                await engine.send(out, sem, stop, lambda: self._judge_one(out, key, [*history, cached.raw]))
            else:
                out.status, out.raw, out.reason = "judge_error", cached.raw, f"invalid verdict (cached reply): {exc}"
        return engine.finish(out)
