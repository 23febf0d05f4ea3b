"""Demonstrations: a few claims people labelled, shown to the judge in its system prompt.

A small judge model follows worked examples more readily than a definition, so a rubric may
carry K labelled claims, each with the passage sentence nearest to it and the answer people
gave. They go in the system prompt because every question of a run shares it byte for byte:
a server's prefix cache reads them once per run, not once per question.

Examples are a fit to labels like any other, and can make a judge worse as easily as better.
So the demonstrations are drawn from some questions' answers and measured on the answers to
all the other questions (never on an answer to a question a demonstration came from), with
and without them, and kept only when they raise kappa by more than the half-width of its
bootstrap interval (resampled by question, as the answers to one question are not
independent).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundjudge.calibrate.agreement import kappa
from groundjudge.calibrate.align_data import overlaps
from groundjudge.judge.grounding import TermIndex, terms
from groundjudge.judge.render import neutralize
from groundjudge.judge.results import JudgeRun
from groundjudge.judge.rubric import Rubric

ItemKey = tuple[str, str]  # (query_id, config_id)

EXCERPT_WORDS = 60  # a demonstration's passage excerpt is cut to this many words
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_TEMPLATE_MARKS = re.compile(r"(\{)([{%#])|([%}#])(\})")  # what a template engine would read as its own


@dataclass(frozen=True)
class LabelledClaim:
    """One claim of a judged answer and what people said about it."""

    query_id: str
    config_id: str
    claim: str
    supported: bool
    evidence: str  # the passage sentence that shares most of the claim's terms


@dataclass(frozen=True)
class Outcome:
    """Agreement with people on answers to questions no demonstration came from."""

    items: int
    questions: int
    kappa_base: float | None
    kappa_demos: float | None
    ci_demos: tuple[float | None, float | None]
    ci_gain: tuple[float | None, float | None]  # kappa with demos minus without, paired by question

    @property
    def half_width(self) -> float | None:
        low, high = self.ci_demos
        return None if low is None or high is None else (high - low) / 2

    @property
    def kept(self) -> bool:
        """Whether the demonstrations beat the base by more than the half-width of their own CI."""
        if self.kappa_base is None or self.kappa_demos is None or self.half_width is None:
            return False
        return self.kappa_demos - self.kappa_base > self.half_width

    def as_dict(self) -> dict[str, Any]:
        return {"items": self.items, "questions": self.questions, "kappa_base": self.kappa_base,
                "kappa_demos": self.kappa_demos, "ci_demos": list(self.ci_demos), "ci_gain": list(self.ci_gain),
                "half_width": self.half_width, "kept": self.kept}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def nearest_sentence(claim: str, passages: Sequence[str]) -> str:
    """The passage sentence that shares most of the claim's terms (the first of equals), cut
    to ``EXCERPT_WORDS`` words: what a reader would compare the claim with."""
    wanted = set(terms(claim))
    best, best_score = "", -1
    for passage in passages:
        for sentence in _sentences(passage):
            index = TermIndex.of([sentence])
            score = len(wanted) - len(set(index.unfound(claim)) & wanted)
            if score > best_score:
                best, best_score = sentence, score
    words = best.split()
    return " ".join(words[:EXCERPT_WORDS]) + (" ..." if len(words) > EXCERPT_WORDS else "")


def labelled_claims(run: JudgeRun, human: Mapping[ItemKey, tuple[bool | None, Sequence[tuple[int, int]]]],
                    passages: Mapping[ItemKey, Sequence[str]]) -> list[LabelledClaim]:
    """Claims whose label people settled: a claim that overlaps a span they marked as a
    hallucination is unsupported; every claim of an answer they called faithful is supported.
    Claims of unfaithful answers that overlap no span are left out (people marked the answer,
    not necessarily every claim of it)."""
    out: list[LabelledClaim] = []
    for config_id, section in sorted(run.per_config.items()):
        for case_id, case in sorted(section.cases.items()):
            key = (case_id, config_id)
            if case.status != "judged" or key not in human or key not in passages:
                continue
            faithful, spans = human[key]
            for c in case.claims:
                if overlaps(c.start, c.end, spans):
                    supported = False
                elif faithful is True:
                    supported = True
                else:
                    continue
                out.append(LabelledClaim(case_id, config_id, c.claim, supported,
                                         nearest_sentence(c.claim, passages[key])))
    return out


def _distance(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


def pick(claims: Sequence[LabelledClaim], k: int, *, seed: int) -> list[LabelledClaim]:
    """``k`` demonstrations, half of them unsupported (the odd one too), each from a question no
    other demonstration came from, preferring generating configs not yet shown and, among
    those, the claim least like the ones already picked (largest smallest term distance).
    Seeded: the same claims and seed give the same demonstrations."""
    rng = random.Random(seed)
    pool = list(claims)
    rng.shuffle(pool)
    of = {id(c): frozenset(terms(c.claim)) for c in pool}  # each claim's terms, once
    want = {False: k - k // 2, True: k // 2}
    chosen: list[LabelledClaim] = []
    words: list[frozenset[str]] = []
    while len(chosen) < k:
        used_q = {c.query_id for c in chosen}
        used_cfg = {c.config_id for c in chosen}
        open_kinds = [s for s, n in want.items() if n > sum(1 for c in chosen if c.supported is s)]
        candidates = [c for c in pool if c.supported in open_kinds and c.query_id not in used_q and c.evidence]
        if not candidates:
            break
        # the kind that is further from its quota goes first, so the two stay balanced
        kind = max(open_kinds, key=lambda s: want[s] - sum(1 for c in chosen if c.supported is s))
        of_kind = [c for c in candidates if c.supported is kind] or candidates
        fresh = [c for c in of_kind if c.config_id not in used_cfg] or of_kind
        best = max(fresh, key=lambda c: min((_distance(of[id(c)], w) for w in words), default=1.0))
        chosen.append(best)
        words.append(of[id(best)])
        pool.remove(best)
    return chosen


def _inert(text: str) -> str:
    """Text from answers and passages, made safe to sit in a system prompt: no delimiter
    look-alikes, no template marks, on one line."""
    text = neutralize(" ".join(text.split()))
    return _TEMPLATE_MARKS.sub(lambda m: " ".join(g for g in m.groups() if g), text)


def render_block(demos: Sequence[LabelledClaim], yes: str, no: str) -> str:
    """The demonstrations as the system prompt shows them, after the rubric's own text."""
    parts = ["Worked examples (statements people checked against a passage, with the right answer):"]
    for n, demo in enumerate(demos, 1):
        parts.append(f"Example {n}.\nPASSAGE EXCERPT:\n<<<DATA\n{_inert(demo.evidence)}\nDATA>>>\n"
                     f"STATEMENT:\n<<<DATA\n{_inert(demo.claim)}\nDATA>>>\n"
                     f"Answer: {yes if demo.supported else no}")
    return "\n\n".join(parts)


def with_demos(rubric: Rubric, demos: Sequence[LabelledClaim]) -> Rubric:
    """``rubric`` with the demonstrations after its system prompt; everything else unchanged."""
    spec = rubric.claim_questions
    if spec is None:
        raise ValueError("demonstrations are for rubrics that ask one yes/no question per claim (claim_check)")
    block = render_block(demos, spec.yes_tokens[0].capitalize(), spec.no_tokens[0].capitalize())
    return rubric.model_copy(update={"system_prompt": f"{rubric.system_prompt}\n\n{block}"})


def demo_rubric(base: Rubric, demos: Sequence[LabelledClaim], outcome: Outcome, *, name: str, version: int,
                labels_sha256: Sequence[str], seed: int) -> Rubric:
    """The base rubric with the demonstrations in its system prompt, as a derived rubric of its
    own (``derived_from``, and the trial that kept them under ``demonstrations``)."""
    shown = with_demos(base, demos)
    data = shown.model_dump(mode="json", exclude_defaults=True)
    data.pop("opt_in", None)
    data.update(id=name, version=version, derived_from=f"{base.key}@{base.content_hash}",
                demonstrations={"count": len(demos), "from_questions": sorted({d.query_id for d in demos}),
                                "labels_sha256": list(labels_sha256), "seed": seed, "trial": outcome.as_dict()},
                description=f"{base.key} with {len(demos)} worked examples from labelled claims in its system "
                            "prompt, kept by `groundjudge align --demos` because they raised agreement with people "
                            "on the answers to other questions. " + base.description)
    return Rubric.model_validate(data)


def _group_kappas(base: Sequence[bool], demos: Sequence[bool], human: Sequence[bool], groups: Sequence[str],
                  *, seed: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Kappa without and with demonstrations in each of ``reps`` resamples of whole questions."""
    names = sorted(set(groups))
    rows: dict[str, list[int]] = {g: [] for g in names}
    for i, g in enumerate(groups):
        rows[g].append(i)
    rng = np.random.default_rng(seed)
    without, with_ = [], []
    for _ in range(reps):
        picked = [i for g in rng.integers(0, len(names), len(names)) for i in rows[names[g]]]
        h = [human[i] for i in picked]
        a = kappa([base[i] for i in picked], h, [True, False])
        b = kappa([demos[i] for i in picked], h, [True, False])
        without.append(np.nan if a is None else a)
        with_.append(np.nan if b is None else b)
    return np.array(without), np.array(with_)


def _interval(values: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return None, None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def compare(base: Mapping[ItemKey, bool], demos: Mapping[ItemKey, bool], human: Mapping[ItemKey, bool],
            *, seed: int = 0, reps: int = 1000) -> Outcome:
    """Kappa against people with and without demonstrations, on the items all three settle."""
    keys = sorted(k for k in human if k in base and k in demos)
    h = [human[k] for k in keys]
    b = [base[k] for k in keys]
    d = [demos[k] for k in keys]
    groups = [k[0] for k in keys]
    if not keys:
        return Outcome(0, 0, None, None, (None, None), (None, None))
    without, with_ = _group_kappas(b, d, h, groups, seed=seed, reps=reps)
    return Outcome(items=len(keys), questions=len(set(groups)), kappa_base=kappa(b, h, [True, False]),
                   kappa_demos=kappa(d, h, [True, False]), ci_demos=_interval(with_),
                   ci_gain=_interval(with_ - without))
