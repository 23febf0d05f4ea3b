"""Criterion values from what the judge found, as each rubric criterion declares (``score``).

Scores never come from a number the model states about its own answer quality: shares are
counted from claim verdicts, probabilities come from the answer tokens, and a reply field is
used only where the rubric says the criterion is read from it, on the criterion's label scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundjudge.judge.alignment import Aligned, answer_support
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.results import CriterionValue, NuggetResult
from groundjudge.judge.rubric import Criterion
from groundjudge.judge.verdict import CORRECTNESS_WORDS, VerdictError

_NONE = CriterionValue.shared(label=None, value=None)  # a criterion that does not apply (no claims, no expected answer)


def _share(claims: Sequence[ClaimResult], ok: Any) -> CriterionValue:
    if not claims:
        return _NONE
    value = sum(map(ok, claims)) / len(claims)  # ok gives a bool: True counts 1
    return CriterionValue.shared(label=value == 1.0, value=value)


def centred(p: float, cut: float) -> float:
    """``p`` on a scale where ``cut`` sits at 0.5 (piecewise linear, 0 and 1 fixed), so that a
    verdict is true exactly when its confidence is at least 0.5, whatever the rubric's threshold.

    >>> centred(0.25, 0.25), centred(0.1, 0.25), centred(0.625, 0.25), centred(0.7, 0.5)
    (0.5, 0.2, 0.75, 0.7)
    """
    if cut <= 0 or cut >= 1:
        return p
    return p / (2 * cut) if p < cut else 0.5 + (p - cut) / (2 * (1 - cut))


def _support(probabilities: Sequence[float], cut: float) -> CriterionValue:
    """Mean support as the value; true when every claim reaches ``cut``; the lowest support,
    centred on ``cut`` (:func:`centred`), as the confidence that the answer is true."""
    if not probabilities:
        return _NONE
    low = min(probabilities)
    return CriterionValue.shared(label=low >= cut, value=sum(probabilities) / len(probabilities),
                          confidence=centred(low, cut))


def _aligned(aligned: Aligned, claims: Sequence[ClaimResult]) -> CriterionValue:
    """An aligned rubric's verdict: the fitted combination of the claims' fitted supports
    against the fitted threshold; the combined support, centred on it, as the confidence."""
    if not claims:
        return _NONE
    label, combined = answer_support(aligned, claims)
    supports = [float(c.confidence) for c in claims if c.confidence is not None]
    return CriterionValue.shared(label=label, value=sum(supports) / len(supports) if supports else None,
                          confidence=None if combined is None else centred(combined, aligned.threshold))


def claim_probability(claim: ClaimResult, cited: bool) -> float:
    """The support a ``claim_support`` (``cited``: ``cited_claim_support``) criterion reads from a claim."""
    return _probability(claim, cited)


def _probability(claim: ClaimResult, cited: bool) -> float:
    p = claim.cited_confidence if cited else claim.confidence
    if p is not None:
        return p
    # An endpoint without token probabilities: the sampled answer, as 1 or 0.
    return 1.0 if (claim.klass == "cited_support" if cited else claim.verdict == "supported") else 0.0


def _field(criterion: Criterion, fields: Mapping[str, Any]) -> CriterionValue:
    name = criterion.reply_field
    if name not in fields:
        raise VerdictError(f"field {name}: missing")
    raw = fields[name]
    if criterion.kind == "binary":
        if not isinstance(raw, bool):
            raise VerdictError(f"field {name}: must be true or false")
        return CriterionValue.shared(label=raw, value=float(raw))
    if isinstance(raw, str) and raw in CORRECTNESS_WORDS:
        raw = CORRECTNESS_WORDS[raw]
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in criterion.labels:
        raise VerdictError(f"field {name}: must be one of {criterion.labels}")
    return CriterionValue.shared(label=raw, value=float(raw))


def _grade_of(criterion: Criterion, share: float) -> int:
    return sorted(criterion.labels)[sum(1 for cut in criterion.cut_points or [] if share >= cut)]


def grade_confidence(criterion: Criterion, probabilities: Sequence[float], grade: int) -> float:
    """The judge's own probability that ``grade`` is the grade its nugget facts imply: the count
    of stated nuggets follows a Poisson-binomial law over each nugget's P(stated) (the nugget
    answers taken as independent), and the grade of each count is summed where it equals
    ``grade``.

    >>> from groundjudge.judge.rubric import Criterion
    >>> c = Criterion(name="correct", kind="ordinal", labels=[0, 1, 2, 3], description="d",
    ...               metric="correctness", score="nugget_grade", cut_points=[0.25, 0.6, 0.95])
    >>> round(grade_confidence(c, [0.9, 0.8], 3), 2)  # both stated: 0.9 * 0.8
    0.72
    """
    counts = [1.0]  # counts[k] = P(k nuggets stated so far)
    for p in probabilities:
        counts = [(counts[k] if k < len(counts) else 0.0) * (1 - p) + (counts[k - 1] * p if k else 0.0)
                  for k in range(len(counts) + 1)]
    n = len(probabilities)
    return float(min(1.0, sum(q for k, q in enumerate(counts) if _grade_of(criterion, k / n) == grade)))


def _nugget_grade(criterion: Criterion, nuggets: Sequence[NuggetResult]) -> CriterionValue:
    """The grade of the stated share; its confidence (see ``grade_confidence``) only where every
    nugget carries a probability (an endpoint without token probabilities gives none)."""
    if not nuggets:
        return _NONE
    grade = _grade_of(criterion, sum(1 for n in nuggets if n.stated) / len(nuggets))
    probabilities = [n.confidence for n in nuggets]
    confidence = (grade_confidence(criterion, [float(p) for p in probabilities if p is not None], grade)
                  if all(p is not None for p in probabilities) else None)
    return CriterionValue.shared(label=grade, value=float(grade), confidence=confidence)


def _nugget_share(nuggets: Sequence[NuggetResult]) -> CriterionValue:
    """The share of nuggets stated; true when every one is; the confidence that every one is
    (the product of their P(stated)), where each nugget carries a probability."""
    if not nuggets:
        return _NONE
    stated = sum(1 for n in nuggets if n.stated)
    probabilities = [n.confidence for n in nuggets]
    confidence = None
    if all(p is not None for p in probabilities):
        confidence = 1.0
        for p in probabilities:
            confidence *= float(p)  # type: ignore[arg-type]
    return CriterionValue.shared(label=stated == len(nuggets), value=stated / len(nuggets), confidence=confidence)


def _relevance(criterion: Criterion, answer: tuple[float | None, bool] | None) -> CriterionValue:
    """The relevance question's support as the value, true at ``threshold``; without token
    probabilities the sampled answer decides and the confidence is unknown."""
    if answer is None:
        return _NONE
    probability, said_yes = answer
    if probability is None:
        return CriterionValue.shared(label=said_yes, value=1.0 if said_yes else 0.0)
    return CriterionValue.shared(label=probability >= criterion.cut, value=probability,
                          confidence=centred(probability, criterion.cut))


_PLAIN_FIELD_TYPES = (str, int, bool, type(None))


def values_key(claims: Sequence[ClaimResult], *, fields: Mapping[str, Any] | None = None,
               has_expected_answer: bool) -> tuple[Any, ...] | None:
    """All that :func:`criterion_values` reads of these arguments (given no nuggets, relevance
    answer or aligned reading), as a key: replies with equal keys have equal criterion values,
    so a batch of cached replies works each distinct set of values out once. Of a claim that is
    its verdict, its class and whether it cites; of a reply field its name, type and value (the
    type too: ``True == 1``, but only one of them is on a binary scale). None where a part is
    not plain (a claim with a probability, a field that is not text, a whole number, a truth
    value or null): such values are worked out each time."""
    parts = []
    for c in claims:
        if c.confidence is not None or c.cited_confidence is not None:
            return None
        parts.append((c.verdict, c.klass, not c.cited))
    named = []
    for name, value in (fields or {}).items():
        kind = type(value)
        if kind not in _PLAIN_FIELD_TYPES:
            return None
        named.append((name, kind, value))
    return has_expected_answer, tuple(parts), tuple(named)


def criterion_values(criteria: Sequence[Criterion], *, claims: Sequence[ClaimResult],
                     nuggets: Sequence[NuggetResult] = (), fields: Mapping[str, Any] | None = None,
                     has_expected_answer: bool, nothing_to_check: bool = False,
                     relevance: tuple[float | None, bool] | None = None,
                     aligned: Aligned | None = None) -> dict[str, CriterionValue]:
    """One value per criterion; raises :class:`VerdictError` when a reply field is missing or
    off its scale (which earns the reply one repair).

    ``nothing_to_check``: the answer has text but no sentence states a checkable fact (a
    greeting, a refusal about the passages): it cannot be unfaithful, so a ``claim_support``
    criterion is true there, with no mean support to average. ``relevance``: the answer to the
    relevance question, (P(yes) or None, whether the sampled word was yes). ``aligned``: an
    aligned rubric's fitted reading (claims already rescored), which decides its criterion.
    """
    out: dict[str, CriterionValue] = {}
    cited = [c for c in claims if c.cited]
    # Unchecked claims (the verdict was decided without them) count in no share or mean: the
    # label stays what decided it, the mean support is over the claims that were checked.
    checked = [c for c in claims if c.verdict != "unchecked"]
    for criterion in criteria:
        if aligned is not None:  # another criterion's fitted threshold or cut points
            criterion = aligned.applied(criterion)
        kind = criterion.score_kind
        if not has_expected_answer and criterion.uses_expected_answer:
            out[criterion.name] = _NONE
        elif kind == "claim_share":
            out[criterion.name] = _share(checked, lambda c: c.verdict == "supported")
        elif kind == "cited_claim_share":
            out[criterion.name] = _share(cited, lambda c: c.verdict == "supported" and c.klass == "cited_support")
        elif kind == "claim_support" and aligned is not None and criterion.name == aligned.criterion:
            out[criterion.name] = (CriterionValue.shared(label=True, value=None) if nothing_to_check and not claims
                                   else _aligned(aligned, checked))
        elif kind == "claim_support":
            out[criterion.name] = (CriterionValue.shared(label=True, value=None) if nothing_to_check and not claims
                                   else _support([_probability(c, False) for c in checked], criterion.cut))
        elif kind == "cited_claim_support":
            out[criterion.name] = _support([_probability(c, True) for c in cited], criterion.cut)
        elif kind == "nugget_grade":
            out[criterion.name] = _nugget_grade(criterion, nuggets)
        elif kind == "nugget_share":
            out[criterion.name] = _nugget_share(nuggets)
        elif kind == "answer_relevance":
            out[criterion.name] = _relevance(criterion, relevance)
        else:
            out[criterion.name] = _field(criterion, fields or {})
    return out
