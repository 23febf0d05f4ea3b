"""Re-asking a run's questions for ``groundjudge calibrate --stability N``.

:func:`plan` finds the claim_check questions behind a run's verdicts (the claim, cited-claim
and relevance questions, whose supports decide criteria with a threshold; see
``calibrate.stability.SUPPORT_SCORES``) and draws a seeded sample of them; :func:`reask` asks
each sampled question N more times through the judge's own client, all asks in one seeded
shuffled order, so that what the server's prompt cache holds before each ask varies as it does
between runs. The re-asks bypass the judge cache: they are never looked up there nor stored,
so the run's cached answers stay exactly as they were (the run's own answer is read from the
cache, read-only, as the first observation).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundjudge.calibrate.stability import SUPPORT_SCORES, Observed, figures
from groundjudge.calibrate.verdicts import items_from_judge
from groundjudge.errors import JudgeUnavailable
from groundjudge.judge import claim_check
from groundjudge.judge.client import CallFailed, JudgeUnreachable, ModelMismatch
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.results import JudgeRun
from groundjudge.judge.session import JudgeSession
from groundjudge.judge.verdict import VerdictError
from groundjudge.load.dataset import Dataset
from groundjudge.select import judge_item

__all__ = ["StabilityPlan", "Target", "describe", "plan", "reask"]


@dataclass(frozen=True)
class Target:
    """One question to re-ask, and how its answer becomes each criterion's support."""

    case_id: str
    config_id: str
    question: claim_check.Question
    key: str  # the question's cache key: where the run's own answer is stored
    criteria: tuple[str, ...]
    unfound: tuple[str, ...] | None  # grounding: the terms its passages lack (None: no grounding)


@dataclass(frozen=True)
class StabilityPlan:
    targets: tuple[Target, ...]
    available: int  # questions behind the run's verdicts, before sampling
    cuts: dict[str, float]  # criterion -> its threshold
    seed: int
    not_covered: dict[str, str] = field(default_factory=dict)  # criterion -> why it has no figures

    def calls(self, repeats: int) -> int:
        return len(self.targets) * repeats


def plan(session: JudgeSession, judged: JudgeRun, dataset: Dataset, *, size: int, seed: int) -> StabilityPlan:
    """The seeded sample of at most ``size`` questions behind the judged cases of ``judged``."""
    rubric = session.rubric
    spec = rubric.claim_questions
    assert spec is not None  # the caller checks the protocol
    by_kind: dict[str, list[str]] = {}
    cuts: dict[str, float] = {}
    not_covered = {}
    for c in rubric.criteria:
        kind = SUPPORT_SCORES.get(c.score_kind)
        if kind is None:
            not_covered[c.name] = f"its verdict ({c.score_kind}) is not one support against a threshold"
            continue
        by_kind.setdefault(kind, []).append(c.name)
        cuts[c.name] = c.cut
    model, decoding = session.model, session.decoding()
    found: dict[str, Target] = {}
    for case_id, config_id in sorted(items_from_judge(judged), key=lambda k: (k[1] or "", k[0])):
        trace = dataset.trace(config_id, case_id) if config_id else None
        item = judge_item(dataset, trace)[0] if trace is not None else None
        if item is None or config_id is None:
            continue
        for question, unfound in _questions(session, item, by_kind):
            key = claim_check.question_key(model, decoding, question)
            if key not in found:
                found[key] = Target(case_id=case_id, config_id=config_id, question=question, key=key,
                                    criteria=tuple(by_kind[question.kind]),
                                    unfound=None if unfound is None else tuple(unfound))
    everything = list(found.values())
    chosen = random.Random(seed).sample(everything, min(size, len(everything)))
    return StabilityPlan(targets=tuple(chosen), available=len(everything), cuts=cuts, seed=seed,
                         not_covered=not_covered)


def _questions(session: JudgeSession, item: JudgeItem, by_kind: dict[str, list[str]],
               ) -> list[tuple[claim_check.Question, list[str] | None]]:
    """The case's questions of the kinds that carry a support, as the run asked them."""
    rubric = session.rubric
    case = claim_check.plan_case(rubric, item)
    out: list[tuple[claim_check.Question, list[str] | None]] = []
    if "claim" in by_kind:
        out += [(q, case.unfound[q.index] if case.unfound is not None else None)
                for q in claim_check.claim_questions(rubric, case)]
    if "cited" in by_kind:
        unfound = claim_check.cited_unfound(rubric, item, case)
        asked, _ = claim_check.cited_questions(rubric, item, case, unfound)
        out += [(q, unfound.get(q.index)) for q in asked]  # no grounding: no unfound terms
    if "relevance" in by_kind:
        out += [(q, None) for q in claim_check.relevance_questions(rubric, item)]
    return out


def _support(session: JudgeSession, target: Target, answer: claim_check.Answer) -> float | None:
    if answer.probability is None:
        return None
    if target.question.kind == "relevance":
        return answer.probability
    rubric = session.rubric
    grounded = claim_check.grounded(rubric, answer, None if target.unfound is None else list(target.unfound),
                                    claim_check.support_cut(rubric))
    return grounded.probability


def reask(session: JudgeSession, stability: StabilityPlan, repeats: int,
          on_call: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Ask every target ``repeats`` times in one seeded shuffled order; the record's block
    (``calibrate.stability.figures``). ``on_call(done, total)`` after each call."""
    spec = session.rubric.claim_questions
    assert spec is not None
    order = [(i, r) for i in range(len(stability.targets)) for r in range(repeats)]
    random.Random(stability.seed + 1).shuffle(order)
    answers: dict[int, list[claim_check.Answer]] = {i: [] for i in range(len(stability.targets))}
    failed = [0]
    started = time.monotonic()

    async def ask_all() -> None:
        session.ensure_endpoint()
        client = session.new_client()
        sem = asyncio.Semaphore(max(1, session.concurrency))
        done = [0]
        stop: list[str] = []

        async def one(i: int) -> None:
            async with sem:
                if stop:
                    return
                target = stability.targets[i]
                try:
                    reply = await client.ask_token(target.question.messages, top_logprobs=spec.top_logprobs)
                    raw = json.dumps({"text": reply.text, "tokens": reply.tokens}, ensure_ascii=False)
                    answers[i].append(claim_check.read_answer(raw, spec))
                except (ModelMismatch, JudgeUnreachable) as exc:
                    stop.append(exc.reason)
                except (CallFailed, VerdictError):
                    failed[0] += 1  # counted; the question keeps the observations it has
                done[0] += 1
                if on_call is not None:
                    on_call(done[0], len(order))

        try:
            # tasks made in the shuffled order: with one call at a time they run in it
            await asyncio.gather(*(one(i) for i, _ in order))
        finally:
            await client.close()
        if stop:
            raise JudgeUnavailable(f"stability re-asks stopped: {stop[0]}")

    asyncio.run(ask_all())
    observed = []
    for i, target in enumerate(stability.targets):
        first = _stored(session, target)
        seen = ([first] if first is not None else []) + answers[i]
        pairs = [(a.probability, s) for a in seen if a.probability is not None
                 and (s := _support(session, target, a)) is not None]
        if len(pairs) < 2:
            continue  # nothing to compare: no spread, no flip
        for name in target.criteria:
            observed.append(Observed(case_id=target.case_id, config_id=target.config_id, criterion=name,
                                     kind=target.question.kind, index=target.question.index,
                                     stored=first is not None and first.probability is not None,
                                     p_yes=tuple(p for p, _ in pairs), support=tuple(s for _, s in pairs)))
    block = figures(observed, stability.cuts, repeats=repeats, seed=stability.seed, sample=len(stability.targets),
                    available=stability.available, calls=len(order), failed=failed[0],
                    seconds=time.monotonic() - started)
    block["not_covered"] = dict(stability.not_covered)
    return block


def _stored(session: JudgeSession, target: Target) -> claim_check.Answer | None:
    """The run's own answer to the question, read from the cache (never written)."""
    spec = session.rubric.claim_questions
    assert spec is not None
    cached = session.cache.get(target.key)
    if cached is None:
        return None
    try:
        return claim_check.read_answer(cached.raw, spec)
    except VerdictError:
        return None


def describe(stability: StabilityPlan, repeats: int, model: str) -> str:
    """The budget line printed before any call."""
    return (f"stability: re-asking {len(stability.targets)} of {stability.available} question(s) x {repeats} = "
            f"{stability.calls(repeats)} call(s) to {model}, bypassing the cache (seed {stability.seed})")
