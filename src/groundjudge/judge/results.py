"""What the judge stage produces, as typed records: per case, per config and for the run.

A case is ``judged`` (from the cache or a call), ``skipped`` (with the reason) or
``judge_error`` (with the reason); only judged cases carry criterion values, and a value that
does not apply (no claims, no expected answer) is ``None``, never a number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, NotRequired, Self, get_args

import msgspec
from frozendict import frozendict
from pydantic import AfterValidator, ConfigDict, Field, GetCoreSchemaHandler, with_config
from pydantic.config import JsonDict
from pydantic_core import core_schema
from typing_extensions import TypedDict

from groundjudge.frozen import Frozen
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.metrics.value import MetricValue

Status = Literal["judged", "judge_error", "skipped"]
Label = bool | int


class _Frozen(Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def built(cls, **values: Any) -> Self:
        """A record made by the judge stage's own code (a parsed verdict, the answers to its
        questions), validated as any record; records given as values (a verdict's claims) are
        taken as they are."""
        return cls(**values)


class Usage(_Frozen):
    """Requests, tokens and spend; values add up with ``+``."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    # replies whose endpoint reported no token counts (llama.cpp's server streaming one-token
    # answers, say): their tokens are not in the sums above, which are then a lower bound
    unmetered: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(requests=self.requests + other.requests, prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens,
                     cost_usd=self.cost_usd + other.cost_usd, unmetered=self.unmetered + other.unmetered)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def tokens_text(self) -> str:
        """The token count as a person should read it: with how many replies it leaves out.

        >>> Usage(requests=3, prompt_tokens=90, unmetered=1).tokens_text()
        '90 tokens (+ 1 reply with no token count)'
        >>> Usage(requests=2, unmetered=2).tokens_text()
        'tokens not reported (2 replies)'
        """
        if not self.unmetered:
            return f"{self.tokens} tokens"
        replies = f"{self.unmetered} repl{'y' if self.unmetered == 1 else 'ies'}"
        if self.tokens == 0:
            return f"tokens not reported ({replies})"
        return f"{self.tokens} tokens (+ {replies} with no token count)"

    @staticmethod
    def total(items: Iterable[Usage]) -> Usage:
        out = Usage()
        for item in items:
            out = out + item
        return out


class NuggetResult(_Frozen):
    """One nugget of the expected answer and whether the answer states it."""

    text: str
    stated: bool
    confidence: float | None = None


class CriterionValue(_Frozen):
    """A criterion for one case: the label people would give, the value reports average, and
    the judge's confidence where it has one: P(True) for a binary criterion, the probability
    that the grade given is right for an ordinal one (``scoring.grade_confidence``)."""

    label: Label | None
    value: float | None
    confidence: float | None = None

    @classmethod
    def shared(cls, label: Label | None, value: float | None, confidence: float | None = None) -> CriterionValue:
        """The value of these parts, the same (frozen) object for equal parts: a nightly run holds
        hundreds of thousands of verdicts, and their criterion values come from a handful of
        shares; a value already held is not made again."""
        key = _parts(label, value, confidence)
        found = _VALUES.get(key)
        return found if found is not None else _hold(key, cls(label=label, value=value, confidence=confidence))

    def held(self) -> CriterionValue:
        """The held value equal to this one (see :meth:`shared`); this one if none is held yet."""
        key = _parts(self.label, self.value, self.confidence)
        found = _VALUES.get(key)
        return found if found is not None else _hold(key, self)


def _parts(label: Label | None, value: float | None, confidence: float | None) -> tuple[Any, ...]:
    """A criterion value's parts, each with its type (``True`` is not ``1``)."""
    return (type(label), label, type(value), value, type(confidence), confidence)


def _hold(key: tuple[Any, ...], value: CriterionValue) -> CriterionValue:
    if len(_VALUES) < _VALUES_HELD:  # values that differ on every verdict: not held
        _VALUES[key] = value
    return value


_VALUES_HELD = 10_000
# the parts (each with its type) of a criterion value -> the one value object held for them
_VALUES: dict[tuple[Any, ...], CriterionValue] = {}


def shared_criteria(values: Mapping[str, CriterionValue]) -> frozendict[str, CriterionValue]:
    """A verdict's criteria as a read-only mapping, the same one for verdicts whose values are the
    same objects (``pending.shared_values`` keeps one per distinct value): a nightly run's verdicts
    hold a handful of distinct ones. The table keeps each mapping's values alive, so an id in
    its keys always names the object that mapping holds."""
    if not values:
        return _NO_CRITERIA
    key = tuple((name, id(value)) for name, value in values.items())
    found = _CRITERIA.get(key)
    if found is None:
        found = frozendict(values)
        if len(_CRITERIA) < _CRITERIA_HELD:  # values that differ on every verdict: not held
            _CRITERIA[key] = found
    return found


_NO_CRITERIA: frozendict[str, CriterionValue] = frozendict()
_CRITERIA_HELD = 4096
_CRITERIA: dict[tuple[tuple[str, int], ...], frozendict[str, CriterionValue]] = {}
# criterion name -> value: read-only, shared by the verdicts with the same values
Criteria = Annotated[Mapping[str, CriterionValue], AfterValidator(shared_criteria)]


_NOT_JUDGED_SCHEMA: JsonDict = {
    # A case that was not judged carries a reason and never a score (SPEC 10).
    "if": {"properties": {"status": {"enum": ["judge_error", "skipped"]}}},
    "then": {"required": ["reason"], "properties": {"reason": {"type": "string", "minLength": 1},
                                                    "criteria": {"maxProperties": 0}, "claims": {"maxItems": 0}}},
}
_STATUSES = frozenset(get_args(Status))
_SOURCES = frozenset((None, "cache", "call"))
NO_USAGE = Usage()  # what a case that cost nothing holds: frozen, one for every such case


class CaseJudgement(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the judge made of one case of one config: a frozen msgspec struct.

    A nightly run holds one per (case, config), hundreds of thousands: the judge stage builds
    them from values its own code made and checked (a parsed verdict's claims and criterion
    values), so building one checks only what ties the fields together: a status and source of
    the known ones, and a case that was not judged carries a reason and no scores (a
    ``ValueError`` otherwise). Given lists are held as tuples, criteria as a read-only mapping
    (the same one for verdicts with the same value objects). The garbage collector does not
    track a verdict (nothing it holds refers back to it).

    Pydantic validates a verdict from JSON or a dict field by field (report.json read back:
    errors name ``cases.q1.status``), takes a verdict given as it is, writes one as the object
    report.json has always had, and gives it the JSON schema it always had
    (:data:`VerdictFields`). :func:`verdict_fields` gives the fields to write many verdicts at
    once through ``TypeAdapter(list[VerdictFields])`` with no Python call per verdict.
    """

    case_id: str
    config_id: str
    status: Status
    reason: str | None = None  # why skipped or errored
    selected_because: str | None = None
    source: Literal["cache", "call"] | None = None
    criteria: Mapping[str, CriterionValue] = _NO_CRITERIA
    claims: tuple[ClaimResult, ...] = ()
    nuggets: tuple[NuggetResult, ...] = ()
    judge_reason: str | None = None  # the model's own one-line reason
    usage: Usage = NO_USAGE
    seconds: float = 0.0
    cache_key: str | None = None
    raw: str | None = None

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {sorted(_STATUSES)}")
        if self.source not in _SOURCES:
            raise ValueError(f"source {self.source!r} is not 'cache', 'call' or None")
        if self.status != "judged" and (self.criteria or self.claims or not self.reason):
            raise ValueError(f"a {self.status} case carries a reason and no scores")
        if type(self.criteria) is not frozendict:
            msgspec.structs.force_setattr(self, "criteria", shared_criteria(self.criteria))
        if type(self.claims) is not tuple:
            msgspec.structs.force_setattr(self, "claims", tuple(self.claims))
        if type(self.nuggets) is not tuple:
            msgspec.structs.force_setattr(self, "nuggets", tuple(self.nuggets))

    @classmethod
    def built(cls, **values: Any) -> Self:
        """A verdict made by the judge stage's own code (see the class)."""
        return cls(**values)

    def replaced(self, **values: Any) -> Self:
        """A copy with these fields changed, checked as a new verdict is."""
        return type(self)(**{**msgspec.structs.asdict(self), **values})

    def label(self, criterion: str) -> Label | None:
        value = self.criteria.get(criterion)
        return None if value is None else value.label

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        fields = handler.generate_schema(VerdictFields)

        def build(values: dict[str, Any]) -> CaseJudgement:
            return cls(**values)

        def given_or_built(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            return value if type(value) is cls else validate(value)

        from_fields = core_schema.no_info_after_validator_function(build, fields)
        return core_schema.json_or_python_schema(
            json_schema=from_fields,
            python_schema=core_schema.no_info_wrap_validator_function(given_or_built, from_fields),
            serialization=core_schema.wrap_serializer_function_ser_schema(_as_fields, schema=fields))


def _as_fields(verdict: CaseJudgement, write: core_schema.SerializerFunctionWrapHandler) -> Any:
    """A verdict written by pydantic as its fields (``include``, ``exclude`` and the other
    options of a dump apply to them)."""
    return write(msgspec.structs.asdict(verdict))


verdict_fields = msgspec.structs.asdict  # a verdict's fields by name, in order: what VerdictFields writes


# A verdict's fields as pydantic reads and writes them (see CaseJudgement): the same names, types
# and defaults, and the name report.json's schema has always given them.
VerdictFields: Any = with_config(ConfigDict(extra="forbid", json_schema_extra=_NOT_JUDGED_SCHEMA))(
    TypedDict("CaseJudgement", {  # type: ignore[operator]
        "case_id": str,
        "config_id": str,
        "status": Status,
        "reason": NotRequired[Annotated[str | None, Field(default=None)]],
        "selected_because": NotRequired[Annotated[str | None, Field(default=None)]],
        "source": NotRequired[Annotated[Literal["cache", "call"] | None, Field(default=None)]],
        "criteria": NotRequired[Annotated[Criteria, Field(default_factory=frozendict)]],
        "claims": NotRequired[Annotated[tuple[ClaimResult, ...], Field(default=())]],
        "nuggets": NotRequired[Annotated[tuple[NuggetResult, ...], Field(default=())]],
        "judge_reason": NotRequired[Annotated[str | None, Field(default=None)]],
        "usage": NotRequired[Annotated[Usage, Field(default_factory=Usage)]],
        "seconds": NotRequired[Annotated[float, Field(default=0.0)]],
        "cache_key": NotRequired[Annotated[str | None, Field(default=None)]],
        "raw": NotRequired[Annotated[str | None, Field(default=None)]],
    }))


class ConfigJudgeSummary(_Frozen):
    """Judge aggregates of one config, computed from its cases."""

    metrics: dict[str, MetricValue]  # criterion metric name -> mean over judged cases
    labels: dict[str, dict[str, int]]  # criterion name -> label -> count over judged cases
    claims: int
    claim_classes: dict[str, int]
    status_counts: dict[str, int]
    judge_error_rate: MetricValue


class ConfigJudgement(_Frozen):
    summary: ConfigJudgeSummary
    cases: dict[str, CaseJudgement]


class RubricRef(_Frozen):
    id: str
    version: int
    hash: str


class JudgeIdentity(_Frozen):
    """What a calibration record is bound to: rubric, model and decoding settings."""

    rubric: RubricRef
    model: str
    decoding: dict[str, Any]


class CriterionInfo(_Frozen):
    name: str
    kind: Literal["binary", "ordinal"]
    labels: list[Label]
    metric: str


class JudgeTotals(_Frozen):
    usage: Usage
    cache_hits: int
    judge_errors: int
    done: int
    stopped: str | None  # why the run stopped sending, if it did
    output_mode: str | None
    logprobs: bool | None = None  # did the endpoint return token probabilities


class JudgeRun(_Frozen):
    identity: JudgeIdentity
    base_url: str | None
    criteria: list[CriterionInfo]
    to_judge: int
    skip_reasons: dict[str, int]
    totals: JudgeTotals
    cache: dict[str, Any]
    per_config: dict[str, ConfigJudgement]

    def case(self, config_id: str, case_id: str) -> CaseJudgement | None:
        section = self.per_config.get(config_id)
        return section.cases.get(case_id) if section else None

    def criterion(self, name: str) -> CriterionInfo | None:
        return next((c for c in self.criteria if c.name == name), None)

    def criterion_for_metric(self, metric: str) -> CriterionInfo | None:
        return next((c for c in self.criteria if c.metric == metric), None)


def summarize_config(cases: dict[str, CaseJudgement], criteria: list[CriterionInfo]) -> ConfigJudgeSummary:
    """The config's aggregates, in one pass over its cases (in their order, which is the order
    every count is first met in and every mean adds up in)."""
    names = list(dict.fromkeys(crit.name for crit in criteria))
    values: dict[str, list[float | None]] = {name: [] for name in names}  # per judged case, in order
    labels: dict[str, dict[str, int]] = {name: {} for name in names}
    statuses: dict[str, int] = {}
    classes: dict[str, int] = {}
    claims = judged = 0
    for c in cases.values():
        statuses[c.status] = statuses.get(c.status, 0) + 1
        if c.status != "judged":
            continue
        judged += 1
        for name in names:
            value = c.criteria.get(name)
            if value is None:
                values[name].append(None)
                continue
            values[name].append(value.value)
            if value.label is not None:
                counts, label = labels[name], str(value.label)
                counts[label] = counts.get(label, 0) + 1
        claims += len(c.claims)
        for claim in c.claims:
            classes[claim.klass] = classes.get(claim.klass, 0) + 1
    errors = statuses.get("judge_error", 0)
    attempted = judged + errors
    return ConfigJudgeSummary(
        metrics={crit.metric: MetricValue.mean(values[crit.name]) for crit in criteria},
        labels=labels, claims=claims, claim_classes=classes, status_counts=statuses,
        judge_error_rate=MetricValue(value=errors / attempted if attempted else None, n=attempted),
    )
