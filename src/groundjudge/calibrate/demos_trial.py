"""Trying demonstrations on a run's labelled answers: what it costs, then whether they help.

The run's own verdicts (from its report, so from the cache) are the judge without
demonstrations; the same judge with them is asked again about every labelled answer whose
question no demonstration came from. Nothing is asked before the caller has seen the budget
and said go.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundjudge.calibrate.align_data import read_labels
from groundjudge.calibrate.demos import ItemKey, LabelledClaim, Outcome, compare, labelled_claims, pick, with_demos
from groundjudge.errors import InputError
from groundjudge.judge import claim_check
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.results import JudgeRun
from groundjudge.judge.rubric import Rubric
from groundjudge.judge.run import judge_selected
from groundjudge.judge.session import JudgeSession
from groundjudge.select import Selection

CHARS_PER_TOKEN = 4  # a rough count for the budget; the server's own count is what is billed


@dataclass(frozen=True)
class Budget:
    answers: int
    questions: int  # first-round questions: one per claim the rubric asks about, per cited claim, per nugget
    cached: int  # of those, already answered by an earlier trial of the same demonstrations
    prompt_tokens: int  # before a server's prefix cache: what a server without one would read

    def line(self) -> str:
        return (f"{self.answers} answers, up to {self.questions} questions ({self.cached} already cached), "
                f"about {self.prompt_tokens:,} prompt tokens before the server's prefix cache")


@dataclass
class Trial:
    demos: list[LabelledClaim]
    rubric: Rubric  # the base rubric with the demonstrations
    budget: Budget
    outcome: Outcome | None = None  # None until the judge was asked (go)
    errors: list[str] = field(default_factory=list)  # answers the judge could not judge, with why


def read_span_labels(paths: Sequence[Path], rater: str | None = None
                     ) -> dict[ItemKey, tuple[bool | None, list[tuple[int, int]]]]:
    """Per item, people's ``faithful`` label and the hallucination spans they marked (the
    optional ``spans`` field; ``align`` reads them the same way). With several raters, the one
    with most labels (or ``rater``). A label without a config id stands for every config."""
    labels, _ = read_labels(paths, "faithful", rater)
    return {(query_id, config_id or ""): (value, list(spans or [])) for (query_id, config_id), (value, spans)
            in labels.items()}


def budget(rubric: Rubric, cache: JudgeCache, model: str, decoding: dict[str, Any],
           items: Sequence[JudgeItem]) -> Budget:
    questions = cached = chars = 0
    for item in items:
        plan = claim_check.plan_case(rubric, item)
        asked = claim_check.claim_questions(rubric, plan)
        cited = sum(1 for s in plan.sentences if s.citations)
        questions += len(asked) + cited + len(plan.nuggets)
        cached += sum(1 for q in asked if cache.get(claim_check.question_key(model, decoding, q)) is not None)
        chars += sum(len(m["content"]) for q in asked for m in q.messages)
        chars += (cited + len(plan.nuggets)) * (len(rubric.system_prompt) + len(plan.shared_prefix))
    return Budget(answers=len(items), questions=questions, cached=cached, prompt_tokens=chars // CHARS_PER_TOKEN)


def _faithful(run: JudgeRun | Sequence[Any]) -> dict[ItemKey, bool]:
    cases = ([c for section in run.per_config.values() for c in section.cases.values()]
             if isinstance(run, JudgeRun) else list(run))
    out: dict[ItemKey, bool] = {}
    for case in cases:
        label = case.label("faithful") if case.status == "judged" else None
        if isinstance(label, bool):
            out[(case.case_id, case.config_id)] = label
    return out


def plan_trial(base_rubric: Rubric, base_run: JudgeRun, selections: Sequence[Selection],
               labels: dict[ItemKey, tuple[bool | None, list[tuple[int, int]]]], k: int, seed: int,
               judge: JudgeSession) -> tuple[Trial, list[Selection]]:
    """Pick the demonstrations and count what trying them costs (no call)."""
    def key(s: Selection) -> ItemKey:
        return (s.case_id, s.config_id) if (s.case_id, s.config_id) in labels else (s.case_id, "")

    items = {(s.case_id, s.config_id): s for s in selections if s.item is not None}
    human = {(s.case_id, s.config_id): labels[key(s)] for s in items.values() if key(s) in labels}
    passages = {k_: [text for _, text in s.item.contexts] for k_, s in items.items() if s.item is not None}
    demos = pick(labelled_claims(base_run, human, passages), k, seed=seed)
    if len(demos) < k:
        raise InputError.one("labels", None, "demos", f"only {len(demos)} labelled claims from distinct questions "
                                                      f"could be picked for {k} demonstrations")
    rubric = with_demos(base_rubric, demos)
    shown = {d.query_id for d in demos}
    trial_sel = [s for k_, s in sorted(items.items()) if k_ in human and human[k_][0] is not None
                 and s.case_id not in shown]
    trial_sel = [Selection(s.case_id, s.config_id, True, "demonstration trial", s.priority, s.item) for s in trial_sel]
    cost = budget(rubric, judge.cache, judge.model, judge.decoding(),
                  [s.item for s in trial_sel if s.item is not None])
    return Trial(demos=demos, rubric=rubric, budget=cost), trial_sel


def run_trial(trial: Trial, trial_sel: Sequence[Selection], base_run: JudgeRun,
              labels: dict[ItemKey, tuple[bool | None, list[tuple[int, int]]]],
              open_judge: Callable[[Rubric], AbstractContextManager[JudgeSession]], seed: int) -> Trial:
    """Ask the judge with the demonstrations about the trial's answers and compare with the base."""
    with open_judge(trial.rubric) as session:
        results, _ = judge_selected(session, trial_sel)
    trial.errors = [f"{r.config_id}/{r.case_id}: {r.reason}" for r in results if r.status != "judged"]
    human = {}
    for s in trial_sel:
        got = labels.get((s.case_id, s.config_id)) or labels.get((s.case_id, ""))
        if got is not None and isinstance(got[0], bool):
            human[(s.case_id, s.config_id)] = got[0]
    trial.outcome = compare(_faithful(base_run), _faithful(results), human, seed=seed)
    return trial
