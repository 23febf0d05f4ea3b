"""The ``claim_questions`` protocol (claim_check): each claim's short questions, one token each.

:mod:`.claim_check` splits the answer into claims and words the questions; this module asks
them, phase by phase (support, contradiction, cited passages, nuggets, relevance), and derives
the case's verdict from the answers. Each answer is cached under its own key, so cases that
share a question share its answer; a judged case also keeps a memo of what its answers came to
(:class:`CaseMemo`), read instead of the answers by a re-run of the unchanged case.

The engine (:mod:`.engine`) schedules the questions: concurrency, budget and stop rules, and
the memos' storing in batches.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from groundjudge.judge import claim_check
from groundjudge.judge.alignment import rescore_claims
from groundjudge.judge.cache import CachedReply
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.client import CallFailed
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.pending import NotSent, Pending, shared_values
from groundjudge.judge.results import CaseJudgement, CriterionValue, NuggetResult
from groundjudge.judge.scoring import criterion_values
from groundjudge.judge.verdict import VerdictError

if TYPE_CHECKING:
    from groundjudge.judge.engine import JudgeEngine

__all__ = ["CaseMemo", "ClaimQuestions"]


class CaseMemo(BaseModel):
    """What a judged case's answers came to, stored beside them under the case's own key
    (``JudgeEngine._memo_key``). A re-run of an unchanged case reads this one entry instead
    of splitting the answer, finding the terms and reading every question's answer:
    per-case work that adds up to minutes on a nightly run. The key names the rubric,
    model, decoding, the case's whole input and ``cache.derivation_hash()``: another version
    of the code derives it again from the stored answers."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    criteria: dict[str, CriterionValue]
    claims: list[ClaimResult]
    nuggets: list[NuggetResult]


class ClaimQuestions:
    """The protocol's steps for ``engine``'s run: what it reads from the cache, what it asks."""

    groups_shared_prefixes = True  # cases with the same question and context ask questions with the same prefix
    def __init__(self, engine: JudgeEngine) -> None:
        self.engine = engine
        self.rubric = engine.rubric
        spec = engine.rubric.claim_questions
        assert spec is not None  # the rubric checks it has one for this protocol
        self.spec = spec

    def cache_key(self, item: JudgeItem) -> str:
        return self.engine._memo_key(item)

    def from_cached(self, items: Sequence[JudgeItem], keys: Sequence[str], found: Sequence[CachedReply | None],
                    selected_because: Sequence[str | None]) -> list[CaseJudgement | None]:
        """Each item's result from its case memo (found under the memo's key), if it has one
        this code reads; else None."""
        settled = [self._from_memo(item, cached) for item, cached in zip(items, found, strict=True)]
        results = iter(Pending.results([p for p in settled if p is not None],
                                       [b for p, b in zip(settled, selected_because, strict=True) if p is not None]))
        return [next(results) if p is not None else None for p in settled]

    def _from_memo(self, item: JudgeItem, cached: CachedReply | None) -> Pending | None:
        if cached is None:
            return None
        try:
            memo = CaseMemo.model_validate_json(cached.raw)
        except ValidationError:  # not one this code reads: derived again, and replaced
            return None
        out = Pending(item, status="judged", source="cache", criteria=shared_values(memo.criteria),
                      claims=list(memo.claims), nuggets=list(memo.nuggets))
        self.engine.totals.cache_hits += 1
        return self.engine.finish(out)

    async def run(self, items: Sequence[JudgeItem], looked_up: Sequence[tuple[str, CachedReply | None]],
                  sem: asyncio.Semaphore, stop: dict[str, str]) -> list[Pending]:
        """Judge the items without a memo, a case's questions together; results in the order of
        ``items``. ``looked_up`` is not needed: such a case is derived from its questions' answers."""
        cases = asyncio.Semaphore(max(1, self.engine.concurrency))
        return list(await asyncio.gather(*(self.run_item(item, cases, sem, stop) for item in items)))

    async def _ask(self, out: Pending, question: claim_check.Question, sem: asyncio.Semaphore,
                   stop: dict[str, str], fresh: list[int]) -> claim_check.Answer:
        """One question's answer: from the cache when a valid answer is stored, else asked.

        The rule is the verdict protocol's (``OneCallJson.run_item``): every reply is stored as
        it arrives, valid or not, and read after the cache. An invalid reply (prose, a word cut
        short) is asked once more at once (the repair); one whose repair was invalid too is
        asked again from the start by a later run (``retry_errors``), its invalid replies kept
        in the entry's history, or with ``retry_errors`` off it stays a ``judge_error``."""
        engine, spec = self.engine, self.spec
        key = claim_check.question_key(engine.model, engine.decoding, question)
        cached = engine.cache.get(key)
        history: list[str] = []  # the invalid replies before the next one stored
        repairs_only = False
        problem: VerdictError | None = None
        if cached is not None:
            try:
                parsed = claim_check.read_answer(cached.raw, spec)
            except VerdictError as exc:
                if cached.repaired and not engine.retry_errors:
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
        totals = self.engine.totals
        totals.questions += 1
        if parsed.probability is None:
            totals.without_logprobs += 1
        return parsed

    async def _ask_once(self, out: Pending, question: claim_check.Question, key: str, sem: asyncio.Semaphore,
                        stop: dict[str, str], history: list[str], *, repaired: bool) -> str:
        """Send one question and store its reply, whatever it says (``history``: the invalid
        replies stored for this key before it)."""
        engine = self.engine
        async with sem:
            if (refused := engine.not_sent(stop)) is not None:
                raise refused
            client = await engine.get_client()
            try:
                answer = await client.ask_token(question.messages, top_logprobs=self.spec.top_logprobs)
            except CallFailed as exc:
                engine.account(out, None, exc.requests)
                raise
            engine.account(out, answer, answer.requests)
            raw = json.dumps({"text": answer.text, "tokens": answer.tokens}, ensure_ascii=False)
            engine.cache.put(key, CachedReply(raw=raw, model=answer.model, prompt_tokens=answer.prompt_tokens,
                                              completion_tokens=answer.completion_tokens, created=time.time(),
                                              repaired=repaired, history=list(history)))
            return raw

    async def _ask_all(self, out: Pending, questions: Sequence[claim_check.Question], sem: asyncio.Semaphore,
                       stop: dict[str, str], fresh: list[int]) -> list[claim_check.Answer]:
        # Wait for every question of the phase, even when one fails, so each answer that was paid
        # for is cached and a re-run asks only what is missing.
        answers = await asyncio.gather(*(self._ask(out, q, sem, stop, fresh) for q in questions),
                                       return_exceptions=True)
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        if failed is not None:
            raise failed
        return list(answers)  # type: ignore[arg-type]

    async def _judge_claims(self, out: Pending, sem: asyncio.Semaphore, stop: dict[str, str]) -> None:
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
        if rubric.aligned is not None:  # a fitted reading of the same replies (judge.alignment)
            claims = rescore_claims(rubric.aligned, claims)
        out.nuggets = claim_check.nugget_results(plan, nuggets, 0.5)
        out.claims = claims
        out.criteria = criterion_values(rubric.criteria, claims=claims, nuggets=out.nuggets,
                                        has_expected_answer=bool(item.expected_answer),
                                        nothing_to_check=bool(item.answer.strip()) and not plan.sentences,
                                        relevance=(relevant[0].probability, relevant[0].said_yes) if relevant else None,
                                        aligned=rubric.aligned)
        out.status, out.source = "judged", "call" if fresh[0] else "cache"

    async def run_item(self, item: JudgeItem, cases: asyncio.Semaphore, sem: asyncio.Semaphore,
                       stop: dict[str, str]) -> Pending:
        engine = self.engine
        out = Pending(item)
        async with cases:  # one case's questions together: its shared prefix stays in the server's cache
            started = time.monotonic()
            try:
                await self._judge_claims(out, sem, stop)
            except NotSent as exc:
                out.status, out.reason = exc.status, exc.reason
            except CallFailed as exc:
                engine.failed(out, exc, stop)
            except VerdictError as exc:
                out.status, out.reason = "judge_error", f"invalid answer: {exc}"
            out.seconds += time.monotonic() - started
        self.keep_memo(out)
        if out.source == "cache":
            engine.totals.cache_hits += 1
        return engine.finish(out)

    def keep_memo(self, out: Pending) -> None:
        """Keep a judged case's memo, for the engine to store with others in one transaction."""
        if out.status != "judged":
            return
        memo = CaseMemo(criteria=out.criteria, claims=out.claims, nuggets=out.nuggets)
        self.engine.put_later(self.engine._memo_key(out.item), CachedReply(
            raw=memo.model_dump_json(by_alias=True), model=self.engine.model, prompt_tokens=0, completion_tokens=0,
            created=time.time()))
