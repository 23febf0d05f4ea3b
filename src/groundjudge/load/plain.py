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
from collections.abc import Iterable
from functools import cache
from itertools import chain, repeat
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


def _rows(plains: Iterable[_PlainTrace]) -> list[dict[str, Any]]:
    """Each trace's given fields with their values as the contract holds them."""
    rows = []
    for plain in plains:
        row = {name: value for name, value in zip(_FIELDS, msgspec.structs.astuple(plain), strict=True)
               if value is not UNSET}
        for name, kind in _CHUNKS:
            items = row.get(name)
            if items and str in map(type, items):  # an id given alone: its chunk
                row[name] = tuple(kind(chunk_id=item) if type(item) is str else item for item in items)
        if "latency_ms" in row:
            row["latency_ms"] = read_only_map(row["latency_ms"])
        if "tokens" in row:
            row["tokens"] = read_only_map(row["tokens"])
        if "versions" in row:
            row["versions"] = _one_of_equals(row["versions"])
        rows.append(row)
    retrieved = list(chain.from_iterable(row.get("retrieved_chunks", ()) for row in rows))
    _share(retrieved, "chunk_id")
    _share([item for item in retrieved if item.doc_id is not None], "doc_id")
    _share(list(chain.from_iterable(row.get(name, ()) for row in rows for name in ("context_chunks", "citations"))),
           "chunk_id")
    return rows


def _made_from_fields(model: type[BaseModel]) -> SchemaValidator:
    """A validator of a list of the model's records from their fields' final values: each
    record made by pydantic-core as validation makes it (its given fields are the keys given,
    a missing field takes its default, ``model_post_init`` runs), with no check of a value."""
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
    record = cs.model_schema(model, cs.model_fields_schema(fields, extra_behavior="allow"),
                             post_init="model_post_init", frozen=True, extra_behavior="allow")
    return SchemaValidator(cs.list_schema(record))


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
    return made.validate_python(_rows(plains))  # type: ignore[no-any-return]
