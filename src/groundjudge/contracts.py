"""Data contracts (SPEC section 3): the shapes every stage agrees on.

All records are frozen pydantic models, except a trace's chunks and citations: frozen dataclasses
with slots, validated by pydantic the same way (a nightly set holds millions of them). A loaded
trace may hold those lists as columns that read as the same lists (``load.items``). Unknown
fields are kept (``extra="allow"``) so that a team's own annotations travel through to the
reports untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Final, Literal, TypeVar, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

M = TypeVar("M", bound=BaseModel)

_FIELDS_SETS: dict[type, set[str]] = {}
_CONTAINERS: dict[type, tuple[str, ...]] = {}  # model class -> its fields that hold a list or a dict
# (class, field) -> the field's shared empty list, or the last dict seen; (class, "{}") -> the
# class's one empty dict, for every empty dict field and the empty extras ("{}" names no field)
_SHARED: dict[tuple[type, str], Any] = {}


def with_shared_parts(model: M) -> M:
    """``model``, with parts that equal those of earlier models of its kind made one object:

    - its record of the fields that were set when it was made (a set of a dozen names);
    - each empty list or dict field, and its empty dict of unknown fields;
    - a dict field equal to the same field of the last model of its kind (a trace's
      ``versions``, the same on every trace of a run).

    A nightly run holds hundreds of thousands of cases, traces, chunks and verdicts, each with
    its own copies of these otherwise: a set of versions per record, and an object for each
    empty list or dict. The records are frozen and nothing changes their lists or
    dicts in place (``model_copy(deep=True)`` gives a record parts of its own)."""
    cls = type(model)
    fields = model.__pydantic_fields_set__
    seen = _FIELDS_SETS.get(cls)
    if seen is not None and seen == fields:
        object.__setattr__(model, "__pydantic_fields_set__", seen)
    else:
        _FIELDS_SETS[cls] = fields
    names = _CONTAINERS.get(cls)
    if names is None:
        names = _CONTAINERS[cls] = tuple(name for name, info in cls.model_fields.items()
                                         if get_origin(info.annotation) in (list, dict))
    values = model.__dict__
    for name in names:
        value = values[name]
        if type(value) is list:
            if not value:
                values[name] = _SHARED.setdefault((cls, name), value)
        elif type(value) is dict:
            key = (cls, name)
            if not value:
                values[name] = _SHARED.setdefault((cls, "{}"), value)
            elif len(value) <= _SMALL_DICT:
                last = _SHARED.get(key)
                if last is not None and last == value and _same_types(last, value):
                    values[name] = last
                else:
                    _SHARED[key] = value
    extra = model.__pydantic_extra__
    if extra is not None and not extra:
        object.__setattr__(model, "__pydantic_extra__", _SHARED.setdefault((cls, "{}"), extra))
    return model


_SMALL_DICT = 16  # larger dicts are not compared


def _same_types(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether equal dicts also hold values of the same types (1 == 1.0 == True)."""
    return all(type(v) is type(b[k]) for k, v in a.items())


Behavior = Literal["answer", "abstain", "permission_denied", "escalate"]
ContentType = Literal["prose", "code", "table", "figure"]
Grade = Annotated[int, Field(ge=0, le=3)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
# What a trace measured: never negative, and below bounds no real trace reaches (1e12 ms is 32
# years), so that sums over any number of traces stay finite. NaN and infinities are refused
# everywhere (``allow_inf_nan=False`` below): a mean over them would be no number at all.
LatencyMs = Annotated[float, Field(ge=0, le=1e12)]
TokenCount = Annotated[int, Field(ge=0, le=10**15)]
CostUsd = Annotated[float, Field(ge=0, le=1e12)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, str_strip_whitespace=False, allow_inf_nan=False)


def _not_recorded(value: Any, fields: tuple[str, ...], record: str) -> Any:
    """``not_recorded`` as field -> reason: a list of field names gets a plain reason each."""
    if isinstance(value, (list, tuple)):
        value = {name: f"the {record} records no {name}" for name in value}
    if isinstance(value, dict):
        unknown = [name for name in value if name not in fields]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a field that can be unrecorded; one of {', '.join(fields)}")
    return value


class Offsets(BaseModel):
    """A byte span ``[start, end)`` inside a document."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    start: int = Field(ge=0)
    end: int = Field(ge=0)

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            if len(value) != 2:
                raise ValueError("offsets must be [start, end]")
            return {"start": value[0], "end": value[1]}
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Offsets:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler,
                                     ) -> JsonSchemaValue:
        as_object = handler.resolve_ref_schema(handler(schema))
        pair = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}
        return {"anyOf": [dict(as_object), pair], "title": "Offsets",
                "description": "A byte span [start, end): an object or a two-integer array"}


class UserContext(_Record):
    tenant: str | None = None
    roles: list[str] = Field(default_factory=list)
    locale: str | None = None


class GoldenCase(_Record):
    """One question of the golden set (SPEC 3.1)."""

    id: NonEmptyStr
    question: NonEmptyStr
    expected_answer: str | None = None
    expected_chunk_ids: list[NonEmptyStr] = Field(default_factory=list)
    relevance: dict[str, Grade] = Field(default_factory=dict)
    expected_doc_ids: list[NonEmptyStr] | None = None
    must_cite: list[NonEmptyStr] = Field(default_factory=list)
    must_contain: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)
    gold_claim_substrings: list[str] = Field(default_factory=list)
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    expected_behavior: Behavior = "answer"
    user_context: UserContext | None = None
    constraints: list[str] = Field(default_factory=list)
    paraphrases: list[str] = Field(default_factory=list)
    # fields the source does not record -> why (an adapter's "the X format records no ..."): a
    # metric that reads one is null for this case with that reason, never computed from the default
    not_recorded: dict[str, str] = Field(default_factory=dict)

    @field_validator("not_recorded", mode="before", json_schema_input_type=dict[str, str] | list[str])
    @classmethod
    def _unrecorded_fields(cls, value: Any) -> Any:
        return _not_recorded(value, GOLDEN_UNRECORDABLE, "golden set")

    @model_validator(mode="after")
    def _unrecorded_behavior(self) -> GoldenCase:
        if "expected_behavior" in self.not_recorded and "expected_behavior" in self.model_fields_set:
            raise ValueError("expected_behavior is listed in not_recorded but holds a value; leave it out")
        if "expected_chunk_ids" in self.not_recorded and (self.expected_chunk_ids or self.relevance):
            raise ValueError("expected_chunk_ids is listed in not_recorded but the case grades chunks; leave it out")
        return self

    @model_validator(mode="after")
    def _default_grades(self) -> GoldenCase:
        # An expected chunk without an explicit grade is fully relevant (grade 3).
        missing = {cid: 3 for cid in self.expected_chunk_ids if cid not in self.relevance}
        if missing:
            object.__setattr__(self, "relevance", {**self.relevance, **missing})
        return self

    @property
    def relevant_chunk_ids(self) -> frozenset[str]:
        """Chunks with a grade of at least 1."""
        return frozenset(cid for cid, grade in self.relevance.items() if grade >= 1)


class _TraceItem:
    """A chunk or citation of a trace: a frozen dataclass with slots, not a model. A nightly
    set holds millions of them, and a model instance costs about eight times the memory.

    Unknown fields are kept, as on every record: they go in an instance ``__dict__`` that
    Python creates only for an item that has them (this base class has no ``__slots__``).
    """

    @property
    def model_extra(self) -> dict[str, Any]:
        """The unknown fields, by name (as a model's ``model_extra``)."""
        return dict(vars(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy: the slotted fields and the unknown fields both (the dataclass's own
        # state covers the slots only)
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return _rebuild_item, (type(self), values, dict(vars(self)))


def _rebuild_item(cls: type[_TraceItem], values: dict[str, Any], extra: dict[str, Any]) -> _TraceItem:
    item = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(item, name, value)
    vars(item).update(extra)
    return item


_ITEM = ConfigDict(extra="allow", str_strip_whitespace=False, allow_inf_nan=False)


@pydantic_dataclass(frozen=True, slots=True, config=_ITEM)
class RetrievedChunk(_TraceItem):
    chunk_id: NonEmptyStr
    doc_id: str | None = None
    score: float | None = None
    rank: int | None = None
    stage: str | None = None
    text: str | None = None
    offsets: Offsets | None = None
    type: ContentType | None = None


@pydantic_dataclass(frozen=True, slots=True, config=_ITEM)
class ContextChunk(_TraceItem):
    chunk_id: NonEmptyStr
    text: str | None = None
    text_hash: str | None = None


@pydantic_dataclass(frozen=True, slots=True, config=_ITEM)
class Citation(_TraceItem):
    chunk_id: NonEmptyStr
    offsets: Offsets | None = None


def _ids_to_objects(value: Any) -> Any:
    if isinstance(value, list):
        return [{"chunk_id": item} if isinstance(item, str) else item for item in value]
    return value


class Trace(_Record):
    """What one system config did for one case (SPEC 3.2)."""

    query_id: NonEmptyStr
    config_id: NonEmptyStr
    question: str | None = None
    paraphrase: int = Field(default=0, ge=0)  # 0 = the case's question, i >= 1 = its i-th paraphrase
    retrieved_chunks: list[RetrievedChunk] = Field(default_factory=list)
    context_chunks: list[ContextChunk] = Field(default_factory=list)
    answer: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    behavior: Behavior | None = None
    error: str | None = None
    latency_ms: dict[str, LatencyMs] = Field(default_factory=dict)
    tokens: dict[str, TokenCount] = Field(default_factory=dict)
    cost_usd: CostUsd | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    # fields the system did not record (not "recorded empty") -> why: a metric that reads one is
    # null for this trace with that reason, and the judge is not asked without the passages
    not_recorded: dict[str, str] = Field(default_factory=dict)

    @field_validator("not_recorded", mode="before", json_schema_input_type=dict[str, str] | list[str])
    @classmethod
    def _unrecorded_fields(cls, value: Any) -> Any:
        return _not_recorded(value, TRACE_UNRECORDABLE, "trace")

    @model_validator(mode="after")
    def _unrecorded_are_empty(self) -> Trace:
        held = [name for name in self.not_recorded if getattr(self, name)]
        if held:
            raise ValueError(f"{held[0]} is listed in not_recorded but holds a value; leave it out or empty")
        return self

    @field_validator("retrieved_chunks", mode="before", json_schema_input_type=list[NonEmptyStr | RetrievedChunk])
    @classmethod
    def _retrieved_ids_as_objects(cls, value: Any) -> Any:
        return _ids_to_objects(value)

    @field_validator("context_chunks", mode="before", json_schema_input_type=list[NonEmptyStr | ContextChunk])
    @classmethod
    def _context_ids_as_objects(cls, value: Any) -> Any:
        return _ids_to_objects(value)

    @field_validator("citations", mode="before", json_schema_input_type=list[NonEmptyStr | Citation])
    @classmethod
    def _cited_ids_as_objects(cls, value: Any) -> Any:
        return _ids_to_objects(value)

    @field_serializer("retrieved_chunks", "context_chunks", "citations", mode="wrap")
    def _items_as_lists(self, value: Any, handler: SerializerFunctionWrapHandler) -> Any:
        # A loaded trace may hold these as columns (``load.items``): written as the lists they read as.
        return handler(value if isinstance(value, list) else list(value))

    @field_validator("tokens", mode="before", json_schema_input_type=dict[str, TokenCount] | TokenCount)
    @classmethod
    def _tokens_total(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"total": value}
        return value

    @field_validator("latency_ms", mode="before", json_schema_input_type=dict[str, LatencyMs] | LatencyMs)
    @classmethod
    def _latency_total(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"end_to_end": value}
        return value


class Acl(_Record):
    tenants: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)


class CorpusChunk(_Record):
    """One chunk of the corpus (SPEC 3.3)."""

    chunk_id: NonEmptyStr
    doc_id: NonEmptyStr
    doc_version: str | None = None
    text: str
    section_path: list[str] = Field(default_factory=list)
    offsets: Offsets | None = None
    type: ContentType = "prose"
    acl: Acl | None = None

    @field_validator("section_path", mode="before", json_schema_input_type=list[str] | str)
    @classmethod
    def _split_path(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(">") if part.strip()]
        return value


class ClaimLabel(_Record):
    text: NonEmptyStr
    supported: bool


class HumanLabel(_Record):
    """One rater's labels for one judged item (SPEC 3.4)."""

    query_id: NonEmptyStr
    config_id: str | None = None
    rater: NonEmptyStr
    faithful: bool | None = None
    correct: Grade | None = None
    citations_supported: bool | None = None
    claims: list[ClaimLabel] | None = None


def input_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one input contract, as the loader reads it (ids as plain strings,
    offsets as pairs, a number for total tokens or latency all pass)."""
    return CONTRACTS[name].model_json_schema(mode="validation")


# The fields a source may leave unrecorded (``not_recorded``), as distinct from recording them empty.
TRACE_UNRECORDABLE = ("retrieved_chunks", "context_chunks", "answer", "citations")
GOLDEN_UNRECORDABLE = ("expected_behavior", "expected_chunk_ids")

# The version of metrics.json and report.json: readers refuse other versions by name.
# 3 adds the claim verdict and class ``unchecked`` (claim_check v4) and ``usage.unmetered``;
# 4 adds a metric value's ``reason`` (cases left out: an input was not recorded) and case
# details with no behaviour (null: not recorded). Each version's document is a valid document
# of the next, so readers take them all.
REPORT_SCHEMA_VERSION: Final = 4
READABLE_REPORT_VERSIONS = (2, 3, 4)

CONTRACTS: dict[str, type[BaseModel]] = {
    "golden": GoldenCase,
    "trace": Trace,
    "corpus": CorpusChunk,
    "labels": HumanLabel,
}
