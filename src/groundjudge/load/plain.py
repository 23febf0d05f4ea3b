"""Traces of the plain shape, decoded by msgspec: a batch of JSONL lines in one call, a trace's
chunks straight into their structs, no Python call per field or per chunk.

A trace as most files write it (the declared fields only; a chunk as an object of its declared
fields or as its id alone; a number for every number) is decoded into a struct that mirrors
:class:`~groundjudge.contracts.Trace` with the contract's bounds (:class:`msgspec.Meta`), then
made into the very record pydantic would make: the same values, types and given fields.
Anything else (an unknown field, ``not_recorded``, a number written as text, a total given as
a bare number, offsets that are not two integers) fails the whole batch here, and the caller
validates that batch with pydantic, which keeps or names everything as it always has. So this
path accepts only what the contract accepts; a test compares the two on generated lines of
every shape.

Golden cases and corpus chunks are left to pydantic: they hold no chunks, and making a record
costs as much as validating it there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import cache, partial
from itertools import chain, islice, repeat
from operator import attrgetter
from sys import intern
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, SchemaValidator
from pydantic_core import core_schema as cs

from groundjudge.contracts import (
    Citation,
    ContextChunk,
    Offsets,
    RetrievedChunk,
    Trace,
    _one_of_equals,
    read_only_map,
)
from groundjudge.frozen import EMPTY, given_fields

Id = Annotated[str, Meta(min_length=1)]


class _PlainTrace(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The fields of :class:`~groundjudge.contracts.Trace` and their bounds, as msgspec reads
    them; a field not given is ``UNSET`` (so the record's given fields are those given)."""

    query_id: Id
    config_id: Id
    question: str | None | UnsetType = UNSET
    paraphrase: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    retrieved_chunks: tuple[RetrievedChunk | Id, ...] | UnsetType = UNSET
    context_chunks: tuple[ContextChunk | Id, ...] | UnsetType = UNSET
    answer: str | None | UnsetType = UNSET
    citations: tuple[Citation | Id, ...] | UnsetType = UNSET
    behavior: Literal["answer", "abstain", "permission_denied", "escalate"] | None | UnsetType = UNSET
    error: str | None | UnsetType = UNSET
    latency_ms: dict[str, Annotated[float, Meta(ge=0, le=1e12)]] | UnsetType = UNSET
    tokens: dict[str, Annotated[int, Meta(ge=0, le=10**15)]] | UnsetType = UNSET
    cost_usd: Annotated[float, Meta(ge=0, le=1e12)] | None | UnsetType = UNSET
    versions: dict[str, str] | UnsetType = UNSET


_FIELDS = _PlainTrace.__struct_fields__
_CHUNKS = (("retrieved_chunks", RetrievedChunk), ("context_chunks", ContextChunk), ("citations", Citation))


class NotPlain(ValueError):
    """A value this path leaves to pydantic."""


def _offsets(kind: type, value: Any) -> Any:
    """A chunk's ``offsets`` of two integers (a pair, or ``start`` and ``end``), as pydantic
    makes them; any other shape (and any other type msgspec leaves to this hook) is not plain."""
    if kind is Offsets:
        pair = (value if type(value) is list and len(value) == 2
                else (value.get("start"), value.get("end")) if type(value) is dict and value.keys() == {"start", "end"}
                else None)
        if pair is not None and all(type(n) is int for n in pair):
            return Offsets.model_validate({"start": pair[0], "end": pair[1]})  # a bad span is not plain either
    raise NotPlain(f"not a plain {getattr(kind, '__name__', kind)}")


def _share(items: list[Any], name: str) -> None:
    """Each item's string ``name`` as the one string of its value (``sys.intern``), as the
    contract holds a chunk's ids: they name the same chunks across a run's traces."""
    values = map(intern, map(attrgetter(name), items))
    deque(map(msgspec.structs.force_setattr, items, repeat(name), values), maxlen=0)


def _chunks(kind: type, items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each trace's chunks of ``kind`` as structs (an id given alone: its chunk)."""
    flat = list(chain.from_iterable(items))
    if str not in map(type, flat):
        return items
    made = iter([kind(chunk_id=item) if type(item) is str else item for item in flat])
    return list(map(tuple, map(islice, repeat(made), map(len, items))))


_FINAL: dict[str, Callable[[list[Any]], list[Any]]] = {
    **{name: partial(_chunks, kind) for name, kind in _CHUNKS},
    "latency_ms": lambda values: list(map(read_only_map, values)),
    "tokens": lambda values: list(map(read_only_map, values)),
    "versions": lambda values: list(map(_one_of_equals, values)),
}


def _rows(plains: list[_PlainTrace]) -> tuple[list[dict[str, Any]], set[str] | None]:
    """Each trace's given fields with their values as the contract holds them, made a field
    at a time across the batch (one pass per field, not a dict comprehension per trace); and
    the names given, when every trace of the batch gives the same ones (else None)."""
    rows: list[dict[str, Any]] = [{} for _ in plains]
    given: set[str] | None = set()
    for name in _FIELDS:
        column = list(map(attrgetter(name), plains))
        unset = column.count(UNSET)
        if unset == len(column):
            continue
        holders = rows
        if unset:
            given = None
            holders = [row for row, value in zip(rows, column, strict=True) if value is not UNSET]
            column = [value for value in column if value is not UNSET]
        elif given is not None:
            given.add(name)
        final = _FINAL.get(name)
        deque(map(dict.__setitem__, holders, repeat(name), column if final is None else final(column)), maxlen=0)
    retrieved, context, cited = (list(chain.from_iterable(row.get(name, ()) for row in rows)) for name, _ in _CHUNKS)
    _share(retrieved, "chunk_id")
    _share(context + cited, "chunk_id")
    if None in map(attrgetter("doc_id"), retrieved):
        retrieved = [item for item in retrieved if item.doc_id is not None]
    _share(retrieved, "doc_id")
    return rows, given


def _made_from_fields(model: type[BaseModel]) -> SchemaValidator:
    """A validator of a list of the model's records from their declared fields' final values:
    each record made by pydantic-core as validation makes it (its given fields are the keys
    given, a missing field takes its default), with no check of a value. ``model_post_init``
    does not run: :func:`_finish` does its work for the whole batch."""
    fields = {}
    for name, info in model.model_fields.items():
        schema: cs.CoreSchema = cs.any_schema()
        default = info.default
        if info.default_factory is not None:
            default = info.default_factory()  # type: ignore[call-arg]
            if default is not info.default_factory():  # type: ignore[call-arg]
                schema = cs.with_default_schema(schema, default_factory=info.default_factory)
                default = PydanticUndefined
        if default is not PydanticUndefined:  # (a factory of one and the same value: that value)
            schema = cs.with_default_schema(schema, default=default)
        fields[name] = cs.model_field(schema)
    record = cs.model_schema(model, cs.model_fields_schema(fields), frozen=True)
    return SchemaValidator(cs.list_schema(record))


def _finish(records: list[Any], given: set[str] | None) -> None:
    """What the records' ``model_post_init`` does (:class:`~groundjudge.contracts._Record`),
    across the batch: each holds the shared set of its given fields (``given``, when every
    record gives the same ones) and the empty read-only map of unknown fields (a plain trace
    has none)."""
    sets = (repeat(given_fields(given)) if given is not None
            else map(given_fields, map(attrgetter("__pydantic_fields_set__"), records)))
    deque(map(object.__setattr__, records, repeat("__pydantic_fields_set__"), sets), maxlen=0)
    deque(map(object.__setattr__, records, repeat("__pydantic_extra__"), repeat(EMPTY)), maxlen=0)


@cache
def _reader() -> tuple[msgspec.json.Decoder[list[_PlainTrace]], SchemaValidator]:
    return msgspec.json.Decoder(list[_PlainTrace], dec_hook=_offsets), _made_from_fields(Trace)


def plain_records(model: type[BaseModel], lines: bytes) -> list[Any] | None:
    """The records of ``lines`` (a JSON array of JSON objects) when ``model`` is
    :class:`~groundjudge.contracts.Trace` and every one is of the plain shape; else None (the
    batch is left to pydantic)."""
    if model is not Trace:
        return None
    decoder, made = _reader()
    try:
        plains = decoder.decode(lines)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    rows, given = _rows(plains)
    del plains  # (their values are the rows' now)
    records: list[Any] = made.validate_python(rows)
    _finish(records, given)
    return records
