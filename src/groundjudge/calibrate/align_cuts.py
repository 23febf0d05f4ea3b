"""The other criteria an aligned rubric fits where the labels carry them: a binary criterion's
threshold (``cited_claim_support``: the lowest cited claim's support; ``answer_relevance``: its
support) and an ordinal criterion's cut points (``nugget_grade``: on the share of nuggets
stated), each chosen for the best kappa (quadratic-weighted for an ordinal criterion) on the
training answers, and measured out of fold on the same question-grouped folds as the claim
model, with a bootstrap CI that resamples questions.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from groundjudge.calibrate.agreement import kappa
from groundjudge.calibrate.align_data import read_labels
from groundjudge.calibrate.align_model import best_threshold
from groundjudge.judge.alignment import FittedCriterion
from groundjudge.judge.results import CaseJudgement, JudgeRun
from groundjudge.judge.scoring import claim_probability

FITTABLE = ("cited_claim_support", "answer_relevance", "nugget_grade")


@dataclass(frozen=True)
class CriterionItems:
    name: str
    ordinal: bool
    labels: list[bool | int]  # the criterion's label scale
    query_ids: list[str]
    keys: list[tuple[str, str | None]]  # (query id, config id) of each answer
    scores: list[float]
    truth: list[bool | int]


def _score(case: CaseJudgement, name: str, kind: str) -> float | None:
    if kind == "cited_claim_support":
        cited = [claim_probability(c, True) for c in case.claims if c.cited]
        return min(cited) if cited else None
    if kind == "answer_relevance":
        value = case.criteria.get(name)
        return None if value is None else value.value
    if not case.nuggets:
        return None
    return sum(1 for n in case.nuggets if n.stated) / len(case.nuggets)


def criterion_items(judge: JudgeRun, kinds: Mapping[str, str], labels: Sequence[Path], rater: str
                    ) -> list[CriterionItems]:
    """Per fittable criterion the labels carry, its labelled answers' scores and labels."""
    out = []
    for info in judge.criteria:
        kind = kinds.get(info.name)
        if kind not in FITTABLE:
            continue
        human = read_labels(labels, info.name, rater, ordinal=info.kind == "ordinal", required=False)[0]
        rows = []
        for config_id, section in sorted(judge.per_config.items()):
            for case_id, case in sorted(section.cases.items()):
                truth = human.get((case_id, config_id), human.get((case_id, None)))
                score = _score(case, info.name, kind) if case.status == "judged" else None
                if truth is not None and score is not None:
                    rows.append((case_id, score, truth[0], config_id))
        if rows:
            out.append(CriterionItems(name=info.name, ordinal=info.kind == "ordinal", labels=list(info.labels),
                                      query_ids=[r[0] for r in rows], keys=[(r[0], r[3]) for r in rows], scores=[r[1] for r in rows],
                                      truth=[r[2] for r in rows]))
    return out


def _grade(share: float, cuts: Sequence[float], scale: Sequence[int]) -> int:
    return sorted(scale)[sum(1 for c in cuts if share >= c)]


def _weights(ordinal: bool) -> str | None:
    return "quadratic" if ordinal else None


def fit_cuts(scores: Sequence[float], truth: Sequence[bool | int], ordinal: bool, scale: Sequence[bool | int]
             ) -> list[float]:
    """The threshold (binary) or ascending cut points (ordinal) with the best kappa."""
    if not ordinal:
        return [best_threshold(scores, [bool(t) for t in truth])[0]]
    grades = sorted(int(g) for g in scale)
    values = sorted(set(scores))
    candidates = sorted({0.0, *((a + b) / 2 for a, b in itertools.pairwise(values)), 1.0 + 1e-9})
    best: tuple[float, list[float]] = (-2.0, [])
    for cuts in itertools.combinations(candidates, len(grades) - 1):
        k = kappa([_grade(s, cuts, grades) for s in scores], list(truth), grades, "quadratic")
        if k is not None and k > best[0] + 1e-12:
            best = (k, [round(min(1.0, c), 6) for c in cuts])
    return best[1] or [0.0] * (len(grades) - 1)


def predict(scores: Sequence[float], cuts: Sequence[float], ordinal: bool, scale: Sequence[bool | int]
            ) -> list[bool | int]:
    if not ordinal:
        return [s >= cuts[0] for s in scores]
    return [_grade(s, cuts, [int(g) for g in scale]) for s in scores]


def _kappa_ci(items: CriterionItems, predicted: Sequence[bool | int], seed: int, reps: int
              ) -> tuple[float | None, float | None, float | None]:
    scale = items.labels
    point = kappa(list(predicted), items.truth, scale, _weights(items.ordinal))
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(items.query_ids):
        groups.setdefault(q, []).append(i)
    blocks = [v for _, v in sorted(groups.items())]
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(reps):
        idx = [i for g in rng.integers(0, len(blocks), len(blocks)) for i in blocks[g]]
        k = kappa([predicted[i] for i in idx], [items.truth[i] for i in idx], scale, _weights(items.ordinal))
        if k is not None:
            draws.append(k)
    if len(draws) < reps // 2:
        return point, None, None
    return point, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def fit_criterion(items: CriterionItems, fold_of: dict[str, int], seed: int, reps: int = 1000
                  ) -> tuple[FittedCriterion, dict[str, Any]]:
    """Fitted on every label; its out-of-fold kappa (each fold cut by a fit on the others) with
    a CI, and the in-sample kappa beside it."""
    predicted: list[bool | int] = [False] * len(items.scores)
    for k in sorted(set(fold_of.values())):
        train = [i for i, q in enumerate(items.query_ids) if fold_of[q] != k]
        test = [i for i, q in enumerate(items.query_ids) if fold_of[q] == k]
        if not test:
            continue
        if not train:
            raise ValueError(f"{items.name}: a fold holds every labelled answer")
        cuts = fit_cuts([items.scores[i] for i in train], [items.truth[i] for i in train], items.ordinal,
                        items.labels)
        for i, p in zip(test, predict([items.scores[i] for i in test], cuts, items.ordinal, items.labels)):
            predicted[i] = p
    cuts = fit_cuts(items.scores, items.truth, items.ordinal, items.labels)
    oof = _kappa_ci(items, predicted, seed, reps)
    in_sample = kappa(predict(items.scores, cuts, items.ordinal, items.labels), items.truth, items.labels,
                      _weights(items.ordinal))
    fitted = FittedCriterion(threshold=None if items.ordinal else round(cuts[0], 6),
                             cut_points=cuts if items.ordinal else None,
                             out_of_fold={"n": len(items.scores), "kappa": _r(oof[0]),
                                          **({"kappa_ci": [round(oof[1], 4), round(oof[2], 4)]}
                                             if oof[1] is not None and oof[2] is not None else {})})
    return fitted, {"oof": oof, "in_sample": in_sample, "n": len(items.scores)}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
