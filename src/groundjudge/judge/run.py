"""The judge stage for a run: judge the selected items and account for every (case, config).

Cases the selection skipped, cases without a trace and cases the judge could not judge all
appear, each with its status and reason; per-config summaries are computed here, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from groundjudge.judge.client import JudgeClient
from groundjudge.judge.engine import Budget, EngineTotals, JudgeEngine, Pricing
from groundjudge.judge.results import (
    CaseJudgement,
    ConfigJudgement,
    CriterionInfo,
    JudgeRun,
    JudgeTotals,
    Usage,
    summarize_config,
)
from groundjudge.judge.session import JudgeSession
from groundjudge.load.dataset import Dataset
from groundjudge.select import Selection, skip_counts
from groundjudge.urls import redact_url


def criteria_info(session: JudgeSession) -> list[CriterionInfo]:
    return [CriterionInfo(name=c.name, kind=c.kind, labels=list(c.labels), metric=c.metric_name)
            for c in session.rubric.criteria]


def make_engine(session: JudgeSession, on_progress: Callable[[EngineTotals], None] | None = None) -> JudgeEngine:
    j = session.config.judge

    def connect() -> JudgeClient:  # runs in a worker thread on the first call that is needed
        session.ensure_endpoint()
        return session.new_client()

    return JudgeEngine(
        rubric=session.rubric, cache=session.cache, connect=connect, model=session.model,
        decoding=session.decoding(), concurrency=session.concurrency,
        budget=Budget(max_tokens=j.max_tokens, max_cost_usd=j.max_cost_usd),
        pricing=Pricing(j.price_prompt_per_mtok, j.price_completion_per_mtok),
        retry_errors=j.retry_errors, on_progress=on_progress)


def judge_selected(session: JudgeSession, selections: Sequence[Selection], progress: object = None,
                   spent: Usage | None = None) -> tuple[list[CaseJudgement], EngineTotals]:
    """Judge the selections marked ``judge``; results in the same order as those selections.
    ``spent``: what this run already paid elsewhere (its batches): counted in the totals and
    against the budget."""
    chosen = [s for s in selections if s.judge and s.item is not None]
    engine = make_engine(session, getattr(progress, "update", None))
    if spent is not None:
        engine.totals.usage = spent
    if progress is not None:
        progress.start(len(chosen))  # type: ignore[attr-defined]
    results = asyncio.run(engine.run([s.item for s in chosen], [s.reason for s in chosen]))  # type: ignore[misc]
    return results, engine.totals


def judge_run(session: JudgeSession, dataset: Dataset, selections: Sequence[Selection],
              progress: object = None, spent: Usage | None = None) -> JudgeRun:
    results, totals = judge_selected(session, selections, progress, spent)
    return _judge_run(session, dataset, selections, results, totals)


def _judge_run(session: JudgeSession, dataset: Dataset, selections: Sequence[Selection],
               results: Sequence[CaseJudgement], totals: EngineTotals) -> JudgeRun:
    judged: dict[str, dict[str, CaseJudgement]] = {}  # config -> case -> result
    for r in results:
        judged.setdefault(r.config_id, {})[r.case_id] = r
    chosen: dict[str, list[Selection]] = {}  # config -> its selections, in order
    for s in selections:
        chosen.setdefault(s.config_id, []).append(s)
    criteria = criteria_info(session)
    per_config: dict[str, ConfigJudgement] = {}
    for cfg in dataset.config_ids:
        cases: dict[str, CaseJudgement] = {}
        for case_id in dataset.missing_trace.get(cfg, []):
            cases[case_id] = CaseJudgement(case_id=case_id, config_id=cfg, status="skipped",
                                           reason="missing_trace: no trace for this config")
        for s in chosen.get(cfg, ()):
            cases[s.case_id] = judged[cfg][s.case_id] if s.judge else CaseJudgement(
                case_id=s.case_id, config_id=cfg, status="skipped", reason=s.reason)
        ordered = {cid: cases[cid] for cid in dataset.cases if cid in cases}
        per_config[cfg] = ConfigJudgement(summary=summarize_config(ordered, criteria), cases=ordered)
    return JudgeRun(
        identity=session.identity, base_url=redact_url(session.base_url) if session.base_url else None,
        criteria=criteria,
        to_judge=sum(1 for s in selections if s.judge), skip_reasons=skip_counts(selections),
        totals=JudgeTotals(usage=totals.usage, cache_hits=totals.cache_hits, judge_errors=totals.errors,
                           done=totals.done, stopped=totals.stopped, output_mode=totals.mode),
        cache=session.cache.stats(), per_config=per_config)
