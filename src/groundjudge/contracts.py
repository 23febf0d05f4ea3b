"""Data contracts (SPEC section 3): the shapes every stage agrees on.

The records a run holds by the hundred thousand (a trace and its chunks and citations, a golden
case, a corpus chunk) are frozen msgspec structs: a struct takes far less memory than a model,
and the garbage collector does not track it. Pydantic validates them the same way as the models
they were (the same checks, errors and JSON schema). The other records (human labels, offsets)
are frozen pydantic models. Immutable all the way down: sequences are tuples and mappings
read-only (``frozendict``), so no record changes once loaded and no two records share anything
that could. Unknown fields are kept (``extra="allow"``; a struct's ``model_extra``) so that a
team's own annotations travel through to the reports untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from sys import intern
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NotRequired, Self, TypeVar

import msgspec
from frozendict import frozendict
from msgspec import Meta
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    model_validator,
    with_config,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticKnownError, core_schema
from typing_extensions import TypedDict

from groundjudge.frozen import EMPTY, HELD_MAX, Frozen, read_only

K = TypeVar("K")
V = TypeVar("V")
# A mapping field: validated as a dict, held as a read-only ``frozendict`` (a dict subclass, so
# it is written, compared and pickled as the dict it was; only changing it raises).
def read_only_map(value: Mapping[K, V]) -> Mapping[K, V]:
    """``value`` as a read-only mapping (the one empty mapping when it is empty)."""
    return frozendict(value) if value else EMPTY  # type: ignore[return-value]


ReadOnlyMap = Annotated[Mapping[K, V], AfterValidator(read_only_map)]


def _one_of_equals(value: Mapping[str, str]) -> frozendict[str, str]:
    """The read-only mapping equal to ``value`` that was made first: a run's traces state the
    same versions (or the same unrecorded fields) again and again, so each distinct mapping is
    held once. It cannot change, so sharing it is safe; a run with more distinct ones than
    ``HELD_MAX`` gets its own for the rest. Looked up by its items in order (a tuple hashes
    many times faster than a frozendict), so the common case makes no mapping at all."""
    if not value:
        return EMPTY
    key = tuple(value.items())
    seen = _SEEN.get(key)
    if seen is not None:
        return seen
    made = frozendict(value)
    if len(_SEEN) < HELD_MAX:
        _SEEN[key] = made
    return made


_SEEN: dict[tuple[tuple[str, str], ...], frozendict[str, str]] = {}
# A mapping of strings most records of a run share (a trace's versions, what it did not record)
SharedMap = Annotated[Mapping[str, str], AfterValidator(_one_of_equals)]

Behavior = Literal["answer", "abstain", "permission_denied", "escalate"]
ContentType = Literal["prose", "code", "table", "figure"]
Grade = Annotated[int, Field(ge=0, le=3), Meta(ge=0, le=3)]  # (msgspec decodes a case's grades)
NonEmptyStr = Annotated[str, Field(min_length=1)]
# a chunk id in a trace: non-empty for pydantic, and for msgspec where it decodes a trace's chunks
ItemId = Annotated[str, Field(min_length=1), msgspec.Meta(min_length=1)]
# What a trace measured: never negative, and below bounds no real trace reaches (1e12 ms is 32
# years), so that sums over any number of traces stay finite. NaN and infinities are refused
# everywhere (``allow_inf_nan=False`` below): a mean over them would be no number at all. Each
# bound is stated for pydantic and for msgspec (which decodes a plain trace).
LatencyMs = Annotated[float, Field(ge=0, le=1e12), Meta(ge=0, le=1e12)]
TokenCount = Annotated[int, Field(ge=0, le=10**15), Meta(ge=0, le=10**15)]
CostUsd = Annotated[float, Field(ge=0, le=1e12), Meta(ge=0, le=1e12)]


class _Record(Frozen):
    model_config = ConfigDict(extra="allow", frozen=True, str_strip_whitespace=False, allow_inf_nan=False)

    def model_post_init(self, context: Any) -> None:
        # Unknown fields, as read-only as the declared ones (set here, as the record is made).
        extra: Any = self.__pydantic_extra__
        if extra is not None and type(extra) is not frozendict:
            object.__setattr__(self, "__pydantic_extra__", read_only(extra))
        super().model_post_init(context)


def _not_recorded(value: Any, fields: tuple[str, ...], record: str) -> Any:
    """``not_recorded`` as field -> reason: a list of field names gets a plain reason each (a
    list holding anything but names is left as it is, for validation to refuse)."""
    if isinstance(value, (list, tuple)) and all(type(name) is str for name in value):
        value = {name: f"the {record} records no {name}" for name in value}
    if isinstance(value, dict):
        unknown = [name for name in value if name not in fields]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a field that can be unrecorded; one of {', '.join(fields)}")
    return value


class Offsets(Frozen):
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


_FIELDS = ConfigDict(extra="allow", str_strip_whitespace=False, allow_inf_nan=False)


class _Struct(msgspec.Struct, frozen=True, kw_only=True, gc=False, forbid_unknown_fields=True):
    """A record held as a frozen msgspec struct that pydantic validates, writes and publishes as
    the frozen model (``extra="allow"``) it stands for: a golden set or a corpus holds one per
    line, by the hundred thousand, and a struct takes a fraction of a model's memory (no field
    dict, no set of given fields) and stays out of the garbage collector's walks (``gc=False``:
    it holds strings, numbers, tuples, read-only maps and structs of the same kind, nothing that
    could refer back to it).

    Pydantic validates a record field by field through ``_fields``, a TypedDict of the fields
    with the model's types, defaults and checks, whose config states the schema's title: the
    same errors on the same fields, the same JSON schema. Checks across fields, and values made
    from other fields, are ``_finish``'s. Unknown fields are kept in ``model_extra`` (read-only)
    and written after the declared ones, as a model writes them. A record given as it is passes
    as it is; anything but a mapping is refused as a model refuses it.

    Made by code (``GoldenCase(id=..., ...)``), the values are taken as they are: give tuples and
    read-only maps, or use :meth:`model_validate`. msgspec decodes a file's plain records
    straight into the struct (:mod:`groundjudge.load.plain`), with the bounds its fields carry
    (:class:`msgspec.Meta`); an unknown field there is an error (``forbid_unknown_fields``),
    which leaves that batch to pydantic.
    """

    _fields: ClassVar[Any]

    @classmethod
    def _finish(cls, values: dict[str, Any]) -> None:
        """Check what ties the validated fields together (a ``ValueError`` names the record) and
        make the values that follow from others; every declared field is in ``values`` after."""

    @classmethod
    def model_validate(cls, obj: Any) -> Self:
        """The record ``obj`` (a mapping of its fields) describes, validated as a file's line is."""
        result: Self = _adapter(cls).validate_python(obj)
        return result

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Self:
        """The record of one JSON object, validated as a file's line is."""
        result: Self = _adapter(cls).validate_json(data)
        return result

    def model_dump(self, *, mode: Literal["json", "python"] = "python", **options: Any) -> dict[str, Any]:
        """The record as pydantic writes it: its fields, then its unknown ones."""
        result: dict[str, Any] = _adapter(type(self)).dump_python(self, mode=mode, **options)
        return result

    def model_dump_json(self, **options: Any) -> str:
        """:meth:`model_dump` as JSON text."""
        return _adapter(type(self)).dump_json(self, **options).decode()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # the TypedDict's schema where it is used, under a reference named after the struct:
        # the JSON schema then defines a nested record by its own name, as it defined the model
        fields = {key: value for key, value in handler.resolve_ref_schema(handler.generate_schema(cls._fields)).items()
                  if key != "ref"}
        return _struct_schema(cls, fields, cls._finish, ref=f"{cls.__module__}.{cls.__qualname__}:{id(cls)}")


def _struct_schema(cls: type[msgspec.Struct], fields: core_schema.CoreSchema,
                   finish: Callable[[dict[str, Any]], None], *, ref: str | None = None) -> core_schema.CoreSchema:
    """How pydantic validates, takes and writes a record held as a frozen struct: validated
    field by field (``fields``, with every declared field then in the values), finished across
    fields (``finish``: a ``ValueError`` names the record), made with its unknown fields as a
    read-only ``model_extra``; a struct of its class taken as it is, anything but a mapping
    refused as a model refuses it; written as its fields, then its unknown ones."""
    declared = tuple(name for name in cls.__struct_fields__ if name != "model_extra")
    names = frozenset(declared)

    def build(values: dict[str, Any]) -> Any:
        finish(values)
        if len(values) == len(declared):  # (every declared field is in ``values``)
            return cls(**values)
        extra = {k: v for k, v in values.items() if k not in names}
        return cls(**{k: v for k, v in values.items() if k in names}, model_extra=read_only(extra))

    def given_or_built(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
        if type(value) is cls:
            return value
        if not isinstance(value, Mapping):  # as a model says it
            raise PydanticKnownError("model_type", {"class_name": cls.__name__})
        return validate(value)

    def as_fields(record: Any, write: core_schema.SerializerFunctionWrapHandler) -> Any:
        out = {name: getattr(record, name) for name in declared}
        if record.model_extra:
            out.update(record.model_extra)
        return write(out)

    from_fields = core_schema.no_info_after_validator_function(build, fields)
    return core_schema.json_or_python_schema(
        json_schema=from_fields,  # JSON holds no structs: no check for one
        python_schema=core_schema.no_info_wrap_validator_function(given_or_built, from_fields),
        serialization=core_schema.wrap_serializer_function_ser_schema(as_fields, schema=fields), ref=ref)


def _unrecorded_held(values: dict[str, Any]) -> None:
    """A trace's fields listed in ``not_recorded`` must hold nothing."""
    held = [name for name in values["not_recorded"] if values[name]]
    if held:
        raise ValueError(f"{held[0]} is listed in not_recorded but holds a value; leave it out or empty")


@cache
def _adapter(kind: type[_Struct]) -> TypeAdapter[Any]:
    # titled so that a validation error names the record, as a model's does
    return TypeAdapter(kind, config=ConfigDict(title=kind.__name__))


@with_config(ConfigDict(title="UserContext", **_FIELDS))
class UserContextFields(TypedDict):
    tenant: NotRequired[Annotated[str | None, Field(default=None)]]
    roles: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    locale: NotRequired[Annotated[str | None, Field(default=None)]]


class UserContext(_Struct, frozen=True, kw_only=True, gc=False):
    """Who asks a golden case's question (see :class:`_Struct`)."""

    _fields = UserContextFields
    tenant: str | None = None
    roles: tuple[str, ...] = ()
    locale: str | None = None
    model_extra: Mapping[str, Any] = EMPTY  # unknown fields, as read-only JSON values


def _golden_unrecorded(value: Any) -> Any:
    return _not_recorded(value, GOLDEN_UNRECORDABLE, "golden set")


# A golden case's fields as pydantic reads and writes them (see GoldenCase): the names, types,
# defaults and checks the model had, and its title and description, which the schema states.
@with_config(ConfigDict(title="GoldenCase", **_FIELDS))
class GoldenCaseFields(TypedDict):
    """One question of the golden set (SPEC 3.1)."""

    id: NonEmptyStr
    question: NonEmptyStr
    expected_answer: NotRequired[Annotated[str | None, Field(default=None)]]
    expected_chunk_ids: NotRequired[Annotated[tuple[NonEmptyStr, ...], Field(default=())]]
    # every expected chunk the case does not grade: grade 3 (``GoldenCase._finish``)
    relevance: NotRequired[Annotated[ReadOnlyMap[str, Grade], Field(default_factory=frozendict)]]
    expected_doc_ids: NotRequired[Annotated[tuple[NonEmptyStr, ...] | None, Field(default=None)]]
    must_cite: NotRequired[Annotated[tuple[NonEmptyStr, ...], Field(default=())]]
    must_contain: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    forbidden: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    gold_claim_substrings: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    difficulty: NotRequired[Annotated[str | None, Field(default=None)]]
    tags: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    # no default here, so that ``_finish`` sees whether the line gives one (a case may not give
    # one and list it in not_recorded); the schema states the default it then takes
    expected_behavior: NotRequired[Annotated[Behavior, Field(json_schema_extra={"default": "answer"})]]
    user_context: NotRequired[Annotated[UserContext | None, Field(default=None)]]
    constraints: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    paraphrases: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    not_recorded: NotRequired[Annotated[
        SharedMap, Field(default_factory=frozendict),
        BeforeValidator(_golden_unrecorded, json_schema_input_type=dict[str, str] | list[str])]]


class GoldenCase(_Struct, frozen=True, kw_only=True, gc=False):
    """One question of the golden set (SPEC 3.1): a frozen msgspec struct, validated by pydantic
    through :class:`GoldenCaseFields` (see :class:`_Struct`). ``relevance`` grades every
    expected chunk: one the line does not grade is fully relevant (3). A case has no set of given
    field names (``model_fields_set``): whether it gave ``expected_behavior`` is decided while it
    is validated."""

    _fields = GoldenCaseFields
    id: ItemId
    question: ItemId
    expected_answer: str | None = None
    expected_chunk_ids: tuple[ItemId, ...] = ()
    relevance: Mapping[str, Grade] = EMPTY
    expected_doc_ids: tuple[ItemId, ...] | None = None
    must_cite: tuple[ItemId, ...] = ()
    must_contain: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    gold_claim_substrings: tuple[str, ...] = ()
    difficulty: str | None = None
    tags: tuple[str, ...] = ()
    expected_behavior: Behavior = "answer"
    user_context: UserContext | None = None
    constraints: tuple[str, ...] = ()
    paraphrases: tuple[str, ...] = ()
    # fields the source does not record -> why (an adapter's "the X format records no ..."): a
    # metric that reads one is null for this case with that reason, never computed from the default
    not_recorded: Mapping[str, str] = EMPTY
    model_extra: Mapping[str, Any] = EMPTY  # unknown fields, as read-only JSON values

    @classmethod
    def _finish(cls, values: dict[str, Any]) -> None:
        values["relevance"] = with_expected_grades(values["relevance"], values["expected_chunk_ids"])
        unrecorded = values["not_recorded"]
        if "expected_behavior" not in values:
            values["expected_behavior"] = "answer"
        elif "expected_behavior" in unrecorded:
            raise ValueError("expected_behavior is listed in not_recorded but holds a value; leave it out")
        if "expected_chunk_ids" in unrecorded and (values["expected_chunk_ids"] or values["relevance"]):
            raise ValueError("expected_chunk_ids is listed in not_recorded but the case grades chunks; leave it out")

    @property
    def relevant_chunk_ids(self) -> frozenset[str]:
        """Chunks with a grade of at least 1."""
        return frozenset(cid for cid, grade in self.relevance.items() if grade >= 1)


def with_expected_grades(relevance: Mapping[str, int], expected: tuple[str, ...]) -> Mapping[str, int]:
    """A case's grades with every expected chunk it does not grade as fully relevant (grade 3)."""
    missing = {cid: 3 for cid in expected if cid not in relevance}
    return frozendict({**relevance, **missing}) if missing else relevance


class _TraceItem(msgspec.Struct, frozen=True, kw_only=True, gc=False, forbid_unknown_fields=True):
    """A chunk or citation of a trace: a frozen msgspec struct, not a model. A nightly set holds
    millions of them: a struct takes far less memory than a model, and ``gc=False`` leaves them
    out of the garbage collector's walks (they hold strings, numbers and offsets: no cycles).

    Pydantic validates them as it validates a model (the schema is derived from the struct's
    fields, errors name ``retrieved_chunks[0].chunk_id``); a struct given as it is passes as it
    is. Unknown fields are kept in ``model_extra`` (a read-only mapping, as a model's) and are
    not written out with the trace.

    msgspec decodes the chunks of a plain trace straight into their structs
    (:mod:`groundjudge.load.plain`): there an unknown field is an error (``forbid_unknown_fields``),
    which leaves that trace to pydantic; the ids carry msgspec's bound beside pydantic's.
    """

    model_extra: frozendict[str, Any] = frozendict()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        fields = [f for f in msgspec.structs.fields(cls) if f.name != "model_extra"]
        names = frozenset(f.name for f in fields)
        shape = with_config(_FIELDS)(TypedDict(cls.__name__, {  # type: ignore[operator]
            f.name: f.type if f.required else NotRequired[f.type] for f in fields}))

        def build(values: dict[str, Any]) -> _TraceItem:
            # ids name the same chunks across a run's traces: one string each (``sys.intern``)
            values["chunk_id"] = intern(values["chunk_id"])
            if type(values.get("doc_id")) is str:
                values["doc_id"] = intern(values["doc_id"])
            if names.issuperset(values):
                return cls(**values)
            extra = {k: v for k, v in values.items() if k not in names}
            return cls(**{k: v for k, v in values.items() if k in names}, model_extra=read_only(extra))

        def given_or_built(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            return value if type(value) is cls else validate(value)

        def as_json(item: _TraceItem, info: core_schema.SerializationInfo) -> dict[str, Any]:
            out = {name: getattr(item, name) for name in names_in_order}
            offsets = out.get("offsets")
            if offsets is not None:
                out["offsets"] = offsets.model_dump(mode=info.mode)
            return out

        names_in_order = tuple(f.name for f in fields)
        from_fields = core_schema.no_info_after_validator_function(build, handler.generate_schema(shape))
        return core_schema.json_or_python_schema(
            json_schema=from_fields,  # JSON holds no structs: no check for one
            python_schema=core_schema.no_info_wrap_validator_function(given_or_built, from_fields),
            serialization=core_schema.plain_serializer_function_ser_schema(as_json, info_arg=True))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler,
                                     ) -> JsonSchemaValue:
        ref = handler(schema)
        properties = handler.resolve_ref_schema(ref)["properties"]
        for f in msgspec.structs.fields(cls):
            if f.name in properties and not f.required:
                properties[f.name]["default"] = f.default  # as a model's schema states its defaults
        return ref


class RetrievedChunk(_TraceItem, frozen=True, kw_only=True, gc=False):
    chunk_id: ItemId
    doc_id: str | None = None
    score: float | None = None
    rank: int | None = None
    stage: str | None = None
    text: str | None = None
    offsets: Offsets | None = None
    type: ContentType | None = None


class ContextChunk(_TraceItem, frozen=True, kw_only=True, gc=False):
    chunk_id: ItemId
    text: str | None = None
    text_hash: str | None = None


class Citation(_TraceItem, frozen=True, kw_only=True, gc=False):
    chunk_id: ItemId
    offsets: Offsets | None = None


def _ids_to_objects(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [{"chunk_id": item} if isinstance(item, str) else item for item in value]
    return value


def _tokens_total(value: Any) -> Any:
    """A bare number of tokens: the total."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"total": value}
    return value


def _latency_total(value: Any) -> Any:
    """A bare latency: the end-to-end one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"end_to_end": value}
    return value


def _trace_unrecorded(value: Any) -> Any:
    return _not_recorded(value, TRACE_UNRECORDABLE, "trace")


# A trace's fields as pydantic reads and writes them (see Trace): the names, types, defaults and
# checks the model had, and its title and description, which the published JSON schema states.
@with_config(ConfigDict(title="Trace", extra="allow", str_strip_whitespace=False, allow_inf_nan=False))
class TraceFields(TypedDict):
    """What one system config did for one case (SPEC 3.2)."""

    query_id: NonEmptyStr
    config_id: NonEmptyStr
    question: NotRequired[Annotated[str | None, Field(default=None)]]
    paraphrase: NotRequired[Annotated[int, Field(default=0, ge=0)]]  # 0 = the case's question, i >= 1 = its i-th paraphrase
    retrieved_chunks: NotRequired[Annotated[
        tuple[RetrievedChunk, ...], Field(default=()),
        BeforeValidator(_ids_to_objects, json_schema_input_type=list[NonEmptyStr | RetrievedChunk])]]
    context_chunks: NotRequired[Annotated[
        tuple[ContextChunk, ...], Field(default=()),
        BeforeValidator(_ids_to_objects, json_schema_input_type=list[NonEmptyStr | ContextChunk])]]
    answer: NotRequired[Annotated[str | None, Field(default=None)]]
    citations: NotRequired[Annotated[
        tuple[Citation, ...], Field(default=()),
        BeforeValidator(_ids_to_objects, json_schema_input_type=list[NonEmptyStr | Citation])]]
    behavior: NotRequired[Annotated[Behavior | None, Field(default=None)]]
    error: NotRequired[Annotated[str | None, Field(default=None)]]
    latency_ms: NotRequired[Annotated[
        ReadOnlyMap[str, LatencyMs], Field(default_factory=frozendict),
        BeforeValidator(_latency_total, json_schema_input_type=dict[str, LatencyMs] | LatencyMs)]]
    tokens: NotRequired[Annotated[
        ReadOnlyMap[str, TokenCount], Field(default_factory=frozendict),
        BeforeValidator(_tokens_total, json_schema_input_type=dict[str, TokenCount] | TokenCount)]]
    cost_usd: NotRequired[Annotated[CostUsd | None, Field(default=None)]]
    versions: NotRequired[Annotated[SharedMap, Field(default_factory=frozendict)]]
    not_recorded: NotRequired[Annotated[
        SharedMap, Field(default_factory=frozendict),
        BeforeValidator(_trace_unrecorded, json_schema_input_type=dict[str, str] | list[str])]]


if TYPE_CHECKING:
    _Retrieved = tuple[RetrievedChunk, ...]
    _Context = tuple[ContextChunk, ...]
    _Cited = tuple[Citation, ...]
else:
    # As msgspec reads a trace's chunks (groundjudge.load.plain): a chunk, or its id alone, which
    # the loader makes into its chunk before the trace leaves it. A trace holds chunks only.
    _Retrieved = tuple[RetrievedChunk | ItemId, ...]
    _Context = tuple[ContextChunk | ItemId, ...]
    _Cited = tuple[Citation | ItemId, ...]


class Trace(msgspec.Struct, frozen=True, kw_only=True, gc=False, forbid_unknown_fields=True):
    """What one system config did for one case (SPEC 3.2): a frozen msgspec struct.

    A nightly run holds one per (case, config, paraphrase), hundreds of thousands: a struct
    takes a fraction of a model's memory, and ``gc=False`` keeps them out of the garbage
    collector's walks (a trace holds strings, numbers, tuples of chunk structs and read-only
    maps of JSON values: nothing that could refer back to it).

    Made from input, a trace is validated by pydantic field by field through
    :class:`TraceFields` (``Trace.model_validate``, ``TypeAdapter(list[Trace])``, a trace
    field of a model): ids given alone become their chunks, a bare number of tokens is the
    total and a bare latency the end-to-end one, ``not_recorded`` may be a list of names, and
    a field listed there must be empty; errors name the field (``retrieved_chunks.0.chunk_id``)
    as a model's do. Unknown fields are kept in ``model_extra``, read-only. Pydantic writes a
    trace as that object (its fields, then its unknown ones) and publishes its schema.

    Made by code (``Trace(query_id=..., ...)``), the values are taken as they are: give tuples
    of chunk structs and read-only maps, or use :meth:`model_validate`. msgspec decodes a file's
    plain traces straight into this struct (:mod:`groundjudge.load.plain`), with the bounds its
    fields carry (:class:`msgspec.Meta`); an unknown field there is an error
    (``forbid_unknown_fields``), which leaves that batch to pydantic.
    """

    query_id: ItemId
    config_id: ItemId
    question: str | None = None
    paraphrase: Annotated[int, Meta(ge=0)] = 0  # 0 = the case's question, i >= 1 = its i-th paraphrase
    retrieved_chunks: _Retrieved = ()
    context_chunks: _Context = ()
    answer: str | None = None
    citations: _Cited = ()
    behavior: Behavior | None = None
    error: str | None = None
    latency_ms: Mapping[str, LatencyMs] = EMPTY
    tokens: Mapping[str, TokenCount] = EMPTY
    cost_usd: CostUsd | None = None
    versions: Mapping[str, str] = EMPTY
    # fields the system did not record (not "recorded empty") -> why: a metric that reads one is
    # null for this trace with that reason, and the judge is not asked without the passages
    not_recorded: Mapping[str, str] = EMPTY
    model_extra: Mapping[str, Any] = EMPTY  # unknown fields, as read-only JSON values

    @classmethod
    def model_validate(cls, obj: Any) -> Trace:
        """The trace ``obj`` (a mapping of its fields) describes, validated as a file's line is."""
        result: Trace = _trace_adapter().validate_python(obj)
        return result

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Trace:
        """The trace of one JSON object, validated as a file's line is."""
        result: Trace = _trace_adapter().validate_json(data)
        return result

    def model_dump(self, *, mode: Literal["json", "python"] = "python", **options: Any) -> dict[str, Any]:
        """The trace as pydantic writes it: its fields, then its unknown ones."""
        result: dict[str, Any] = _trace_adapter().dump_python(self, mode=mode, **options)
        return result

    def model_dump_json(self, **options: Any) -> str:
        """:meth:`model_dump` as JSON text."""
        return _trace_adapter().dump_json(self, **options).decode()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # the fields' schema where it is used (validation from JSON, from Python, writing), not
        # as a definition: its chunks' schemas are then defined before it, as their JSON schema needs
        fields = {key: value for key, value in handler.resolve_ref_schema(handler.generate_schema(TraceFields)).items()
                  if key != "ref"}
        return _struct_schema(cls, fields, _unrecorded_held)


@cache
def _trace_adapter() -> TypeAdapter[Trace]:
    return TypeAdapter(Trace)


@with_config(ConfigDict(title="Acl", **_FIELDS))
class AclFields(TypedDict):
    tenants: NotRequired[Annotated[tuple[str, ...], Field(default=())]]
    roles: NotRequired[Annotated[tuple[str, ...], Field(default=())]]


class Acl(_Struct, frozen=True, kw_only=True, gc=False):
    """Who may read a corpus chunk (see :class:`_Struct`)."""

    _fields = AclFields
    tenants: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    model_extra: Mapping[str, Any] = EMPTY  # unknown fields, as read-only JSON values


def _split_path(value: Any) -> Any:
    """A section path given as one ``a > b`` string: its parts."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(">") if part.strip()]
    return value


# A corpus chunk's fields as pydantic reads and writes them (see CorpusChunk), as the model had them.
@with_config(ConfigDict(title="CorpusChunk", **_FIELDS))
class CorpusChunkFields(TypedDict):
    """One chunk of the corpus (SPEC 3.3)."""

    chunk_id: NonEmptyStr
    doc_id: NonEmptyStr
    doc_version: NotRequired[Annotated[str | None, Field(default=None)]]
    text: str
    section_path: NotRequired[Annotated[
        tuple[str, ...], Field(default=()), BeforeValidator(_split_path, json_schema_input_type=list[str] | str)]]
    offsets: NotRequired[Annotated[Offsets | None, Field(default=None)]]
    type: NotRequired[Annotated[ContentType, Field(default="prose")]]
    acl: NotRequired[Annotated[Acl | None, Field(default=None)]]


if TYPE_CHECKING:
    _SectionPath = tuple[str, ...]
else:
    # As msgspec reads a chunk's section path (groundjudge.load.plain): its parts, or one
    # ``a > b`` string, which the loader splits before the chunk leaves it. A chunk holds parts only.
    _SectionPath = tuple[str, ...] | str


class CorpusChunk(_Struct, frozen=True, kw_only=True, gc=False):
    """One chunk of the corpus (SPEC 3.3): a frozen msgspec struct, validated by pydantic through
    :class:`CorpusChunkFields` (see :class:`_Struct`)."""

    _fields = CorpusChunkFields
    chunk_id: ItemId
    doc_id: ItemId
    doc_version: str | None = None
    text: str
    section_path: _SectionPath = ()
    offsets: Offsets | None = None
    type: ContentType = "prose"
    acl: Acl | None = None
    model_extra: Mapping[str, Any] = EMPTY  # unknown fields, as read-only JSON values


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
    claims: tuple[ClaimLabel, ...] | None = None


def input_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one input contract, as the loader reads it (ids as plain strings,
    offsets as pairs, a number for total tokens or latency all pass)."""
    return TypeAdapter(CONTRACTS[name]).json_schema(mode="validation")


# The fields a source may leave unrecorded (``not_recorded``), as distinct from recording them empty.
TRACE_UNRECORDABLE = ("retrieved_chunks", "context_chunks", "answer", "citations")
GOLDEN_UNRECORDABLE = ("expected_behavior", "expected_chunk_ids")

CONTRACTS: dict[str, type[BaseModel | Trace | _Struct]] = {
    "golden": GoldenCase,
    "trace": Trace,
    "corpus": CorpusChunk,
    "labels": HumanLabel,
}
