"""An aligned rubric: a published claim_check rubric whose reading of the replies was fitted to
human labels (``groundjudge align``).

The derived rubric keeps its base's prompts and asking rule byte for byte, so it asks exactly
the questions its base asks and the base's cached answers serve it. What was fitted applies when
the replies are read: each claim's support comes from its signals (``claim_signals``) through
the fitted claim model, and the answer's verdict from the claims' supports through the fitted
combination (minimum, or a soft minimum) and threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from groundjudge.judge.claim_result import ClaimClass, ClaimResult, ClaimVerdict
from groundjudge.judge.claim_signals import FEATURES, SIGNS, ClaimSignals, claim_signals

if TYPE_CHECKING:
    from groundjudge.judge.rubric import Criterion


class ClaimModel(BaseModel):
    """How a claim's signals become its support.

    ``logistic``: support = sigmoid(intercept + sum of weight x feature) over ``FEATURES``,
    each weight of the sign ``SIGNS`` allows (more unfound terms, numbers or names never raise
    support; a higher P(yes) never lowers it). ``grounded``: the base rule with a fitted term
    factor, P(yes) (1 where the model was not asked) times ``term_factor`` per unfound term.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["logistic", "grounded"]
    intercept: float = 0.0
    weights: dict[str, float] = Field(default_factory=dict)
    term_factor: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _complete(self) -> ClaimModel:
        if self.kind == "grounded" and self.term_factor is None:
            raise ValueError("a grounded claim model needs term_factor")
        if self.kind == "logistic":
            unknown = set(self.weights) - set(FEATURES)
            if unknown:
                raise ValueError(f"unknown claim signals {sorted(unknown)}; known: {list(FEATURES)}")
            for name, weight in self.weights.items():
                if SIGNS[name] * weight < 0:
                    raise ValueError(f"the weight of {name} must be {'>= 0' if SIGNS[name] > 0 else '<= 0'}")
        return self

    def support(self, signals: ClaimSignals) -> float:
        if self.kind == "grounded":
            assert self.term_factor is not None
            p = 1.0 if signals.p_yes is None else signals.p_yes
            return float(p * self.term_factor ** signals.unfound)
        z = self.intercept + sum(self.weights.get(name, 0.0) * x for name, x in zip(FEATURES, signals.features()))
        return sigmoid(z)


class FittedCriterion(BaseModel):
    """Another criterion's fitted threshold (binary) or cut points (ordinal), and its
    out-of-fold kappa on the labels it was fitted on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    threshold: float | None = Field(default=None, ge=0, le=1)
    cut_points: list[float] | None = None
    out_of_fold: dict[str, float | int | list[float] | None]

    @model_validator(mode="after")
    def _one(self) -> FittedCriterion:
        if (self.threshold is None) == (self.cut_points is None):
            raise ValueError("a fitted criterion has either a threshold or cut points")
        if self.cut_points is not None and self.cut_points != sorted(self.cut_points):
            raise ValueError("cut points must ascend")
        return self


class Aligned(BaseModel):
    """The fitted part of a derived rubric, and the evidence it was fitted on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    criterion: str  # the claim_support criterion whose verdict is fitted
    claim_model: ClaimModel
    combine: Literal["min", "softmin"] = "min"
    temperature: float = Field(default=0.0, ge=0)  # softmin only
    threshold: float = Field(ge=0, le=1)  # answer (and claim) support needed to count as supported
    labels_sha256: list[str] = Field(min_length=1)
    fitted_questions: list[str] = Field(min_length=1)  # query ids whose labels were used in fitting
    claim_labels: bool  # fitted on claim-level labels (human spans), else on answer labels
    folds: int = Field(ge=2)
    seed: int
    out_of_fold: dict[str, float | int | list[float] | None]  # its out-of-fold figures on the fitted labels
    # other criteria fitted where the labels carry them, by name
    criteria: dict[str, FittedCriterion] = Field(default_factory=dict)

    def applied(self, criterion: Criterion) -> Criterion:
        """``criterion`` with its fitted threshold or cut points, where they were fitted."""
        fitted = self.criteria.get(criterion.name)
        if fitted is None:
            return criterion
        if fitted.threshold is not None:
            return criterion.model_copy(update={"threshold": fitted.threshold})
        return criterion.model_copy(update={"cut_points": fitted.cut_points})


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def combine(supports: Sequence[float], how: str, temperature: float) -> float:
    """The answer's support from its claims': the lowest, or a soft minimum that lies between the
    lowest and the mean (``-t log mean exp(-s / t)``; ``t`` -> 0 is the minimum)."""
    if not supports:
        return 1.0  # nothing to check: nothing unsupported
    low = min(supports)
    if how == "min" or temperature <= 0:
        return low
    # shifted by the minimum so that no exponent overflows
    return low - temperature * math.log(sum(math.exp(-(s - low) / temperature) for s in supports) / len(supports))


def asked_without_probability(claim: ClaimResult) -> bool:
    """Whether the model was asked about the claim but its endpoint gave no token probabilities:
    the claim has a verdict from the sampled word and neither a support nor a P(yes). (A claim
    the model was not asked has the support its unfound terms allow; an unchecked one no verdict.)"""
    return claim.confidence is None and claim.model_confidence is None and claim.verdict != "unchecked"


def rescore_claims(aligned: Aligned, claims: Sequence[ClaimResult]) -> list[ClaimResult]:
    """Each claim with its fitted support as its confidence and the verdict that support gives.
    A claim its base left unchecked (its answer already decided by unfound terms) is scored
    too: its signals say the model was not asked, which the claim model was fitted with."""
    out = []
    for claim in claims:
        if asked_without_probability(claim):  # the fitted reading needs P(yes): the sampled word stands
            out.append(claim)
            continue
        support = aligned.claim_model.support(claim_signals(claim))
        supported = support >= aligned.threshold
        klass: ClaimClass
        if supported:
            klass = "uncited" if not claim.cited else ("cited_support" if claim.support else "misattributed")
        else:
            klass = "contradicted" if claim.klass == "contradicted" else "unsupported"
        verdict: ClaimVerdict = "supported" if supported else ("contradicted" if klass == "contradicted"
                                                                else "unsupported")
        out.append(claim.replaced(confidence=support, verdict=verdict, klass=klass))
    return out


def answer_support(aligned: Aligned, claims: Sequence[ClaimResult]) -> tuple[bool, float | None]:
    """The answer's verdict and its combined support from its rescored claims. A claim judged
    by its sampled word alone (no token probabilities) takes part by that word, and the answer's
    support is then unknown (None), as the base rubric leaves it."""
    worded = [c for c in claims if c.confidence is None]
    combined = combine([float(c.confidence) for c in claims if c.confidence is not None], aligned.combine,
                       aligned.temperature)
    label = combined >= aligned.threshold and all(c.verdict == "supported" for c in worded)
    return label, None if worded else combined