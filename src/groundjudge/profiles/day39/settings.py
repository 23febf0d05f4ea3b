"""The day-39 profile's settings (``[profile.day39]``) and the lesson's release-gate sets.

The lesson gives its gates three ways: the runner's fixed five (``runner``, the default, so a
report matches the runner's exit code), the gate of its section 13 for an internal knowledge
assistant (``internal-assistant``) and one set per domain ("Release gate mẫu theo domain").
A set is a starting point: ``[profile.day39.gates]`` (or ``--gates metric=bound ...``) adds
bounds or replaces a set's, and ``[profile.day39.tag_gates.<tag>]`` (``--tag-gates
tag:metric=bound``) bounds a tag's cases. Every set also keeps the runner's
ACL rule (a case tagged ``acl`` with a failed check fails the config), which no setting turns off.

Where a set names a target the lesson leaves to the team ("cost/query <= budget", "p95
latency <= target"), the bound must be given: a gate with no bound could not be evaluated,
and a gate that cannot be evaluated never passes, so that is a configuration error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date as Date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from groundjudge.profiles.registry import Flag, ProfileSettings

__all__ = [
    "DETERMINISTIC_METRICS",
    "GATE_SETS",
    "JUDGE_METRICS",
    "NEEDS_TARGET",
    "Bound",
    "Day39Settings",
    "GateSpec",
    "gate_specs",
]

# Per-config values a gate can read: the runner's own, the template's abstention accuracy, and
# counts of the cases that block a release whatever the averages.
DETERMINISTIC_METRICS: tuple[str, ...] = (
    *(f"{m}@{k}" for m in ("hit", "recall", "precision", "mrr", "ndcg") for k in (5, 10)),
    "context_recall", "citation_correctness", "behavior_score", "abstention_accuracy", "failed_case_rate",
    "p95_latency_ms", "latency_end_to_end_ms", "cost_usd", "acl_critical_failures", "critical_hallucinations",
)
# Judged per answer (``groundjudge run``): the share of judged answers the criterion labels
# True, the quantity a calibration record vouches for (the mean grade for ``correctness``).
JUDGE_METRICS: dict[str, str] = {
    "faithfulness": "faithful",
    "answer_relevance": "relevant",
    "completeness": "complete",
    "correctness": "correct",
    "citation_support": "citations_supported",
}
LOWER_IS_BETTER = frozenset({"p95_latency_ms", "latency_end_to_end_ms", "cost_usd", "failed_case_rate",
                             "acl_critical_failures", "critical_hallucinations"})


class Bound(BaseModel):
    """One gate's bound: ``min``, ``max`` or both (inclusive, as the runner compares), and what
    a gate with no value does: ``fail`` (the default: it never passes) or ``skip`` (reported,
    not blocking; the decision is then at best PASS_WITH_RISK)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min: float | None = None
    max: float | None = None
    on_missing: Literal["fail", "skip"] = "fail"

    @model_validator(mode="after")
    def _a_finite_bound(self) -> Bound:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs a bound: min, max or both (for example { min = 0.9 })")
        for name, value in (("min", self.min), ("max", self.max)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} = {value} is not a finite number: no value can be compared with it")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}: no value can pass")
        return self

    def text(self) -> str:
        parts = ([f">= {self.min:g}"] if self.min is not None else []) \
            + ([f"<= {self.max:g}"] if self.max is not None else [])
        return " and ".join(parts)


class GateSpec(BaseModel):
    """A gate of the release: a metric of the config (or of its cases with ``tag``) and its bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str
    bound: Bound
    tag: str | None = None
    label: str  # how the lesson names it

    @property
    def name(self) -> str:
        return f"{self.metric}[{self.tag}]" if self.tag else self.metric


def _min(value: float) -> Bound:
    return Bound(min=value)


def _max(value: float) -> Bound:
    return Bound(max=value)


_ACL = ("acl_critical_failures", _max(0), "ACL leak count = 0 (no case tagged acl fails a check)")
_LABELS = {
    "recall@10": "Recall@10", "mrr@10": "MRR@10", "ndcg@10": "NDCG@10", "hit@10": "Hit@10",
    "faithfulness": "Faithfulness", "answer_relevance": "Answer relevance", "completeness": "Answer completeness",
    "citation_correctness": "Citation correctness", "abstention_accuracy": "No-answer (abstention) accuracy",
    "behavior_score": "Behavior score", "p95_latency_ms": "p95 end-to-end latency (ms)", "cost_usd": "Cost/query (USD)",
    "critical_hallucinations": "Critical hallucination count = 0",
    "acl_critical_failures": "ACL leak count = 0",
    "failed_case_rate": "Cases with a failed check",
}

# set name -> (metric, bound or None where the lesson leaves the target to the team)
GATE_SETS: dict[str, tuple[tuple[str, Bound | None], ...]] = {
    "runner": (("recall@10", _min(0.85)), ("mrr@10", _min(0.70)), ("citation_correctness", _min(0.95)),
               ("behavior_score", _min(0.90)), ("p95_latency_ms", _max(6000.0))),
    "internal-assistant": (("recall@10", _min(0.85)), ("mrr@10", _min(0.70)), ("ndcg@10", _min(0.75)),
                           ("faithfulness", _min(0.90)), ("answer_relevance", _min(0.88)),
                           ("citation_correctness", _min(0.95)), ("abstention_accuracy", _min(0.90)),
                           ("critical_hallucinations", _max(0)), ("p95_latency_ms", _max(6000.0)),
                           ("cost_usd", None)),
    "hr-legal-finance": (("recall@10", _min(0.90)), ("citation_correctness", _min(0.97)),
                         ("faithfulness", _min(0.93))),
    "customer-support": (("recall@10", _min(0.85)), ("answer_relevance", _min(0.88)),
                         ("abstention_accuracy", _min(0.90))),
    "developer-docs": (("mrr@10", _min(0.75)), ("ndcg@10", _min(0.80))),
    "internal-search": (("hit@10", _min(0.90)), ("p95_latency_ms", None)),
    "capstone": (("recall@10", _min(0.80)), ("mrr@10", _min(0.65)), ("critical_hallucinations", _max(0))),
}
# the developer-docs set's "exact code/error-code cases pass": no case so tagged fails a check
_TAG_SETS: dict[str, tuple[tuple[str, str, Bound], ...]] = {
    "developer-docs": (("error-code", "failed_case_rate", _max(0)),),
}
NEEDS_TARGET = {name: [m for m, b in gates if b is None] for name, gates in GATE_SETS.items()}


def _bounds(metric: str, value: Any) -> Any:
    """A bound as written: a table ({ min = 0.9 }) or a number, the lower bound of a metric
    where higher is better and the upper bound of the others (latency, cost, counts)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"max": value} if metric in LOWER_IS_BETTER else {"min": value}
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{metric}={value}: the bound is not a number") from None
        return _bounds(metric, number)
    return value


def _words(value: Any, *, tagged: bool) -> Any:
    """``"recall@10=0.9 p95_latency_ms=6000"`` (the command line's words) as a mapping; with
    ``tagged``, ``"error-code:failed_case_rate=0"`` as tag -> metric -> bound."""
    if not isinstance(value, str):
        return value
    out: dict[str, Any] = {}
    for word in value.split():
        key, sep, bound = word.partition("=")
        if not sep:
            raise ValueError(f"{word!r}: write metric=bound" + (" after tag:" if tagged else ""))
        if tagged:
            tag, colon, metric = key.partition(":")
            if not colon:
                raise ValueError(f"{word!r}: write tag:metric=bound")
            out.setdefault(tag, {})[metric] = bound
        else:
            out[key] = bound
    return out


class Day39Settings(ProfileSettings):
    """``[profile.day39]``: which gates decide the release, the report's summary fields, and
    how many failed queries it lists."""

    release_gate: Annotated[str, Field(description=(
        "The lesson's gate set: runner (its five fixed gates, the default), internal-assistant (its section 13), "
        "hr-legal-finance, customer-support, developer-docs, internal-search or capstone."))] = "runner"
    gates: Annotated[dict[str, Bound], Flag("--gates", words=True), Field(description=(
        "Bounds added to the set, or replacing its own: metric=number words (a lower bound, or the upper bound "
        "of latency, cost and counts), or a TOML table of { min, max, on_missing }."))] = {}
    tag_gates: Annotated[dict[str, dict[str, Bound]], Flag("--tag-gates", words=True), Field(description=(
        "Bounds on the cases of one tag (deterministic metrics): tag:metric=number words."))] = {}
    configs: Annotated[list[str], Field(description=(
        "The configs the release gate decides (repeatable); default: every config, as the runner does."))] = []
    baseline: Annotated[str | None, Field(description=(
        "The report's baseline config; default: the first config of the outputs."))] = None
    candidate: Annotated[str | None, Field(description=(
        "The config under test; default: the last config of the outputs."))] = None
    owner: Annotated[str | None, Field(description="The report summary's owner.")] = None
    date: Annotated[Date | None, Field(description="The report summary's date (default: today).")] = None
    top_failed: Annotated[int, Field(ge=0, description="Rows of the Top Failed Queries table (default 10).")] = 10

    @field_validator("release_gate")
    @classmethod
    def _known_set(cls, value: str) -> str:
        if value not in GATE_SETS:
            raise ValueError(f"unknown gate set {value!r}; known: {', '.join(GATE_SETS)}")
        return value

    @field_validator("gates", mode="before")
    @classmethod
    def _read_gates(cls, value: Any) -> Any:
        value = _words(value, tagged=False)
        if isinstance(value, Mapping):
            for metric in value:
                _check_metric(str(metric))
            return {m: _bounds(str(m), b) for m, b in value.items()}
        return value

    @field_validator("tag_gates", mode="before")
    @classmethod
    def _read_tag_gates(cls, value: Any) -> Any:
        value = _words(value, tagged=True)
        if not isinstance(value, Mapping):
            return value
        out = {}
        for tag, gates in value.items():
            if not isinstance(gates, Mapping):
                return value  # the model says what is wrong
            for metric in gates:
                _check_metric(str(metric))
                if metric in JUDGE_METRICS:
                    raise ValueError(f"{metric} under tag {tag!r}: a judge gate reads a whole config (its trust is "
                                     "calibrated per config); bound it in gates")
            out[tag] = {m: _bounds(str(m), b) for m, b in gates.items()}
        return out

    @model_validator(mode="after")
    def _targets_given(self) -> Day39Settings:
        missing = [m for m in NEEDS_TARGET[self.release_gate] if m not in self.gates]
        if missing:
            keys = ", ".join(f"{m} = {{ max = ... }}" for m in missing)
            raise ValueError(f"the {self.release_gate} gates bound {', '.join(_LABELS.get(m, m) for m in missing)} by "
                             f"a target of yours, which the lesson does not fix: set it in "
                             f"[profile.day39.gates] ({keys}) or with --gates")
        return self


def _check_metric(metric: str) -> None:
    if metric not in DETERMINISTIC_METRICS and metric not in JUDGE_METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join([*DETERMINISTIC_METRICS, *JUDGE_METRICS])}")


def gate_specs(settings: Day39Settings) -> list[GateSpec]:
    """The gates of the release, in the set's order, then the settings' own: the ACL rule, the
    set's gates (a bound in ``[profile.day39.gates]`` replaces the set's), the added gates,
    then the tag gates."""
    base: dict[str, Bound] = {}
    for metric, bound in GATE_SETS[settings.release_gate]:
        chosen = settings.gates.get(metric, bound)
        assert chosen is not None  # _targets_given
        base[metric] = chosen
    for metric, bound in settings.gates.items():
        base.setdefault(metric, bound)
    specs = [GateSpec(metric=_ACL[0], bound=_ACL[1], label=_ACL[2])]
    specs += [GateSpec(metric=m, bound=b, label=_label(m, b)) for m, b in base.items() if m != _ACL[0]]
    tags: dict[tuple[str, str], Bound] = {(t, m): b for t, m, b in _TAG_SETS.get(settings.release_gate, ())}
    for tag, gates in settings.tag_gates.items():
        tags.update({(tag, m): b for m, b in gates.items()})
    specs += [GateSpec(metric=m, bound=b, tag=t, label=f"{_label(m, b)} on cases tagged {t}")
              for (t, m), b in tags.items()]
    return specs


def _label(metric: str, bound: Bound) -> str:
    name = _LABELS.get(metric, metric)
    return name if name.endswith("= 0") else f"{name} {bound.text()}"


