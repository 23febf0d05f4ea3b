"""The ``claim_check`` protocol: claims split without a model, one short yes/no question each.

For one case it asks, in this order (each phase after the one before, questions of a phase
concurrently where the endpoint allows):

1. per check-worthy claim: does the context support it? (shared prefix: system text, question,
   every context chunk, the answer; the claim last)
2. per claim whose support is low, if the rubric asks: does the context contradict it? (same prefix)
3. per claim with citations: does what it cites support it? (prefix: only the cited chunks)
4. per nugget of the expected answer: does the answer state it? (prefix: question and answer)
5. where the rubric asks it (``claim_questions.relevance``), once: does the answer respond to
   what was asked? (question and answer, as the nugget prefix starts)

Each answer is one token; its probability (``P(yes) / (P(yes) + P(no))`` over the top
alternatives) is the support. Every question is cached on its own, keyed by the exact messages
and the judge's identity, so editing one sentence re-asks one claim.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from groundjudge.judge.cache import canonical_json, canonical_strings
from groundjudge.judge.claim_result import ClaimClass, ClaimResult, ClaimVerdict
from groundjudge.judge.claims import Sentence, split_claims, split_nuggets
from groundjudge.judge.grounding import Languages, TermIndex
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.render import neutralize
from groundjudge.judge.results import NuggetResult
from groundjudge.judge.rubric import ClaimQuestions, Rubric
from groundjudge.judge.verdict import VerdictError

Kind = Literal["claim", "contradiction", "cited", "nugget", "relevance"]


@dataclass(frozen=True)
class Question:
    kind: Kind
    index: int  # which claim or nugget
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class Answer:
    """What one question's reply says: the probability of yes (None without token
    probabilities) and the sampled answer."""

    probability: float | None
    said_yes: bool

    def yes(self, cut: float) -> bool:
        return self.said_yes if self.probability is None else self.probability >= cut


def question_key(model: str, decoding: dict[str, Any], question: Question) -> str:
    """Everything the reply depends on: model, decoding and the exact messages. The rubric is
    not part of it: whatever of a rubric shapes a question is in its messages, and how a reply
    is read (its yes and no words, thresholds, grounding) is applied when it is read, so rubric
    versions that ask the same question share its answer."""
    messages = question.messages
    canonical = None
    if all(type(v) is str for m in messages for v in m.values()):  # text only: orjson writes it as json does
        try:
            canonical = b"".join((b'{"decoding":', canonical_json(decoding), b',"kind":',
                                  canonical_strings(question.kind), b',"messages":', canonical_strings(messages),
                                  b',"model":', canonical_strings(model), b',"protocol":"claim_questions"}'))
        except orjson.JSONEncodeError:  # a lone surrogate: the reference encoding says so
            pass
    if canonical is None:
        canonical = canonical_json({"protocol": "claim_questions", "model": model, "decoding": decoding,
                                    "kind": question.kind, "messages": messages})
    return hashlib.sha256(canonical).hexdigest()


def _norm(token: str) -> str:
    return unicodedata.normalize("NFKC", token).strip().strip(".!:,;\"'").casefold()


def read_answer(raw: str, spec: ClaimQuestions) -> Answer:
    """Parse a stored reply (``{"text": ..., "tokens": [[[token, logprob], ...], ...]}``).

    The sampled answer must be one of the rubric's yes or no words; anything else (prose, a
    word cut short such as ``"N"``, nothing at all) is a :class:`VerdictError`, whatever the
    alternatives say: a reply that did not answer is asked again, never read as a probability.
    The probability is then P(yes) / (P(yes) + P(no)) over the first position's alternatives
    (tokens that mean neither are ignored); None when the reply carries none of them.
    """
    try:
        data = json.loads(raw)
        text, tokens = data["text"], data["tokens"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise VerdictError("the stored answer is not readable") from None
    if not isinstance(text, str) or not isinstance(tokens, list):
        raise VerdictError("the stored answer is not readable")
    yes, no = {_norm(t) for t in spec.yes_tokens}, {_norm(t) for t in spec.no_tokens}
    first = _norm(text.split()[0]) if text.split() else ""
    if first not in yes and first not in no:
        raise VerdictError(f"the answer {text[:40]!r} is neither yes nor no")
    p_yes = p_no = 0.0
    try:
        for token, logprob in tokens[0] if tokens else []:
            # a log-probability is a number <= 0 (a hair above, for rounding): NaN, infinity or
            # 1000 from a faulty server would make the support no number at all, or overflow
            if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or not -math.inf <= logprob <= 1e-6:
                raise VerdictError(f"the reply's log-probability {logprob!r} for {str(token)[:20]!r} is not a "
                                   "number <= 0")
            word = _norm(str(token))
            if word in yes:
                p_yes += math.exp(logprob)
            elif word in no:
                p_no += math.exp(logprob)
    except (TypeError, ValueError) as exc:  # alternatives that are not (token, log-probability) pairs
        if isinstance(exc, VerdictError):
            raise
        raise VerdictError("the reply's token alternatives are not (token, log-probability) pairs") from None
    probability = p_yes / (p_yes + p_no) if p_yes + p_no > 0 else None
    return Answer(probability=probability, said_yes=first in yes)


def _messages(rubric: Rubric, prefix: str, tail: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": rubric.system_prompt}, {"role": "user", "content": prefix + tail}]


def _contexts(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"id": " ".join(neutralize(cid).splitlines()), "text": neutralize(text)} for cid, text in pairs]


@dataclass(frozen=True)
class CasePlan:
    """The claims of one case and the prefixes their questions share."""

    sentences: list[Sentence]  # check-worthy sentences only
    nuggets: list[str]
    shared_prefix: str
    nugget_prefix: str | None
    unfound: list[list[str]] | None = None  # per sentence, terms the context never mentions (grounding)
    # Claims not asked because the answer's faithful verdict is already false without the model
    # (grounding ``ask_model: when_answer_open``): reported as unchecked.
    unchecked: frozenset[int] = frozenset()
    languages: Languages | None = None  # grounding ``terms: snowball``: what the terms are read in


def plan_case(rubric: Rubric, item: JudgeItem) -> CasePlan:
    spec = rubric.claim_questions
    assert spec is not None
    sentences = [s for s in split_claims(item.answer) if s.check]
    shared = spec.render("context", question=neutralize(item.question), contexts=_contexts(item.contexts),
                         answer=neutralize(item.answer))
    nuggets = split_nuggets(item.expected_answer) if item.expected_answer else []
    nugget_prefix = spec.render("nugget_context", question=neutralize(item.question),
                                answer=neutralize(item.answer)) if nuggets else None
    unfound = None
    unchecked: frozenset[int] = frozenset()
    languages = None
    if spec.grounding is not None:
        texts = [text for _, text in item.contexts]
        if spec.grounding.terms == "snowball":
            languages = Languages.of_case(item.answer, texts, spec.grounding.language)
        index = _index(item.question, texts, languages)
        unfound = [index.unfound(s.text) for s in sentences]
        unchecked = _unchecked(rubric, sentences, unfound)
    return CasePlan(sentences=sentences, nuggets=nuggets, shared_prefix=shared, nugget_prefix=nugget_prefix,
                    unfound=unfound, unchecked=unchecked, languages=languages)


def _unchecked(rubric: Rubric, sentences: Sequence[Sentence], unfound: list[list[str]]) -> frozenset[int]:
    """With ``ask_model: when_answer_open``: once one claim's unfound terms alone put it below the
    threshold, the answer is unfaithful whatever the model says about the others, so the uncited
    claims the model would have been asked about are left unchecked. Cited claims are still asked:
    their support decides their citation class."""
    grounding = rubric.claim_questions.grounding if rubric.claim_questions else None
    if grounding is None or grounding.ask_model != "when_answer_open":
        return frozenset()
    cut = support_cut(rubric)
    if not any(grounding.term_factor ** len(u) < cut for u in unfound):
        return frozenset()
    return frozenset(i for i, (s, u) in enumerate(zip(sentences, unfound))
                     if not s.citations and _ask_model(rubric, u))


def _index(question: str, texts: Sequence[str], languages: Languages | None = None) -> TermIndex:
    # The question counts as a source of terms: an answer may repeat what it was asked.
    return TermIndex.of([question, *texts], languages)


def _ask_model(rubric: Rubric, unfound: list[str] | None) -> bool:
    """Whether the model's answer about a claim with these unfound terms can matter."""
    grounding = rubric.claim_questions.grounding if rubric.claim_questions else None
    if grounding is None or grounding.ask_model == "always" or unfound is None:
        return True
    if not unfound:
        return False  # every term is in the passages: supported by that rule
    if grounding.ask_model in ("when_decisive", "when_answer_open"):
        return grounding.term_factor ** len(unfound) >= support_cut(rubric)
    return True


def claim_questions(rubric: Rubric, plan: CasePlan) -> list[Question]:
    """One question per claim, but none where the rubric's grounding says the model's answer
    cannot matter (see :class:`~groundjudge.judge.rubric.Grounding`) and none for an unchecked claim."""
    spec = rubric.claim_questions
    assert spec is not None
    return [Question("claim", i, _messages(rubric, plan.shared_prefix, spec.render("claim", claim=neutralize(s.text))))
            for i, s in enumerate(plan.sentences)
            if i not in plan.unchecked and _ask_model(rubric, plan.unfound[i] if plan.unfound is not None else None)]


def support_cut(rubric: Rubric) -> float:
    """The support a claim needs to count as supported: the ``claim_support`` criterion's cut."""
    faithful = next((c for c in rubric.criteria if c.score_kind == "claim_support"), None)
    return faithful.cut if faithful is not None else 0.5


def supports(rubric: Rubric, plan: CasePlan, asked: Sequence[Question], answers: Sequence[Answer]
             ) -> tuple[list[Answer], list[Answer | None]]:
    """Per sentence, the support its verdict uses (grounded where the rubric says so) and the
    model's own answer (None where the model was not asked)."""
    model: list[Answer | None] = [None] * len(plan.sentences)
    for q, a in zip(asked, answers):
        model[q.index] = a
    unfound: Sequence[list[str] | None] = plan.unfound if plan.unfound is not None else [None] * len(model)
    cut = support_cut(rubric)
    return [grounded(rubric, a, u, cut) for a, u in zip(model, unfound)], model


def grounded(rubric: Rubric, answer: Answer | None, unfound: list[str] | None, cut: float) -> Answer:
    """The support the verdict uses: the model's answer as it is without grounding; with it,
    P(yes) times ``term_factor`` per unfound term (no question asked: P(yes) taken as 1).
    Without token probabilities the probability stays unknown and the sampled answer holds
    only if the unfound terms alone would not sink it."""
    grounding = rubric.claim_questions.grounding if rubric.claim_questions else None
    if grounding is None or unfound is None:
        assert answer is not None
        return answer
    factor = grounding.term_factor ** len(unfound)
    if answer is None:
        return Answer(probability=factor, said_yes=factor >= cut)
    if answer.probability is None:
        return Answer(probability=None, said_yes=answer.said_yes and factor >= cut)
    p = answer.probability * factor
    return Answer(probability=p, said_yes=p >= cut)


def contradiction_questions(rubric: Rubric, plan: CasePlan, support: Sequence[Answer]) -> list[Question]:
    spec = rubric.claim_questions
    assert spec is not None
    if spec.contradiction is None:
        return []
    return [Question("contradiction", i, _messages(rubric, plan.shared_prefix,
                                                   spec.render("contradiction", claim=neutralize(s.text))))
            for i, (s, a) in enumerate(zip(plan.sentences, support))
            if i not in plan.unchecked and not a.yes(spec.contradiction_below)]


def cited_unfound(rubric: Rubric, item: JudgeItem, plan: CasePlan) -> dict[int, list[str]]:
    """With grounding: per cited claim, the terms that what it cites never mentions."""
    spec = rubric.claim_questions
    if spec is None or spec.grounding is None:
        return {}
    shown = dict(item.contexts)
    out = {}
    for i, s in enumerate(plan.sentences):
        texts = [shown[cid] for cid in dict.fromkeys(s.citations) if cid in shown]
        if texts:
            out[i] = _index(item.question, texts, plan.languages).unfound(s.text)
    return out


def cited_questions(rubric: Rubric, item: JudgeItem, plan: CasePlan,
                    unfound: dict[int, list[str]] | None = None) -> tuple[list[Question], dict[int, str]]:
    """Questions against only what each claim cites; and, for claims that cannot be asked so,
    why: every context chunk cited (the answer is the claim question's), none shown, or (with
    grounding) the terms the cited chunks lack decide it alone: none, or so many that no answer
    could lift it to the threshold."""
    spec = rubric.claim_questions
    assert spec is not None
    shown = dict(item.contexts)
    questions, settled = [], {}
    for i, s in enumerate(plan.sentences):
        if not s.citations:
            continue
        cited = [(cid, shown[cid]) for cid in dict.fromkeys(s.citations) if cid in shown]
        if not cited:
            settled[i] = "not_shown"
        elif len(cited) == len(item.contexts):
            settled[i] = "all_context"
        elif unfound is not None and i in unfound and not _ask_model(rubric, unfound[i]):
            settled[i] = "terms_decide"
        else:
            prefix = spec.render("context", question=neutralize(item.question), contexts=_contexts(cited),
                                 answer=neutralize(item.answer))
            questions.append(Question("cited", i, _messages(rubric, prefix,
                                                            spec.render("claim", claim=neutralize(s.text)))))
    return questions, settled


def nugget_questions(rubric: Rubric, plan: CasePlan) -> list[Question]:
    spec = rubric.claim_questions
    assert spec is not None
    if plan.nugget_prefix is None:
        return []
    return [Question("nugget", i, _messages(rubric, plan.nugget_prefix, spec.render("nugget", nugget=neutralize(n))))
            for i, n in enumerate(plan.nuggets)]


def relevance_questions(rubric: Rubric, item: JudgeItem) -> list[Question]:
    """The one relevance question of a case, where the rubric asks it (none for an empty answer)."""
    spec = rubric.claim_questions
    assert spec is not None
    if spec.relevance is None or not item.answer.strip():
        return []
    text = spec.render("relevance", question=neutralize(item.question), answer=neutralize(item.answer))
    return [Question("relevance", 0, _messages(rubric, text, ""))]


def claim_results(plan: CasePlan, support: Sequence[Answer], contradicted: dict[int, Answer],
                  cited: dict[int, Answer], settled: dict[int, str], cut: float,
                  model: Sequence[Answer | None] | None = None) -> list[ClaimResult]:
    """Claims with verdicts, classes and probabilities, from the answers to their questions
    (``support``: as the verdict uses it, grounded where the rubric says so; ``model``: the
    model's own answers, None where it was not asked, when grounding changed them). An unchecked
    claim (``plan.unchecked``) has neither verdict nor probability: its class says so."""
    out = []
    for i, (s, a) in enumerate(zip(plan.sentences, support)):
        if i in plan.unchecked:
            out.append(ClaimResult.built(claim=s.text, cited=[], verdict="unchecked", klass="unchecked",
                                   start=s.start, end=s.end, unfound_terms=plan.unfound[i] if plan.unfound else None))
            continue
        supported = a.yes(cut)
        verdict: ClaimVerdict
        klass: ClaimClass
        cited_answer = a if settled.get(i) == "all_context" else cited.get(i)
        cited_ok = bool(s.citations) and cited_answer is not None and cited_answer.yes(cut)
        if supported:
            verdict = "supported"
            klass = "uncited" if not s.citations else ("cited_support" if cited_ok else "misattributed")
        elif i in contradicted and contradicted[i].yes(0.5):
            verdict = klass = "contradicted"
        else:
            verdict = klass = "unsupported"
        if settled.get(i) == "not_shown":
            cited_p: float | None = 0.0  # what it cites was not in the context: it cannot support it
        else:
            cited_p = cited_answer.probability if cited_answer is not None else None
        out.append(ClaimResult.built(claim=s.text, cited=list(s.citations), verdict=verdict,
                               support=list(s.citations) if cited_ok else [], klass=klass,
                               confidence=a.probability, cited_confidence=cited_p if s.citations else None,
                               start=s.start, end=s.end,
                               unfound_terms=plan.unfound[i] if plan.unfound is not None else None,
                               model_confidence=(own.probability if model is not None and (own := model[i]) is not None
                                                 else None)))
    return out


def nugget_results(plan: CasePlan, answers: Sequence[Answer], cut: float) -> list[NuggetResult]:
    return [NuggetResult.built(text=n, stated=a.yes(cut), confidence=a.probability) for n, a in zip(plan.nuggets, answers)]
