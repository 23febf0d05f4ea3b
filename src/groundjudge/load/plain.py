"""Records of the plain shape, decoded by msgspec: a batch of JSONL lines in one call, a trace
and its chunks straight into their structs, no Python call per field or per chunk.

A trace, golden case or corpus chunk as most files write it (the declared fields only, but for
a few left to pydantic; a chunk as an object of its declared fields or as its id alone; a
number for every number) is decoded with the contract's bounds (:class:`msgspec.Meta`). A trace
is decoded into :class:`~groundjudge.contracts.Trace` itself (a struct), then finished across
the batch as validation finishes one. A golden case or corpus chunk is decoded into a struct
that mirrors its contract (:class:`~groundjudge.contracts.GoldenCase`,
:class:`~groundjudge.contracts.CorpusChunk`), then made into the very record pydantic would
make: the same values, types and given fields. Anything else (an unknown field,
``not_recorded``, a case's ``user_context``, a chunk's ``acl``, a number written as text, a
total given as a bare number, offsets that are not two integers) fails the whole batch here,
and the caller validates that batch with pydantic, which keeps or names everything as it always
has. So this path accepts only what the contract accepts; a test compares the two on generated
lines of every shape.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from itertools import chain, compress, groupby, islice, repeat
from operator import attrgetter, is_
from sys import intern
from types import GenericAlias
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import from_json

from groundjudge.contracts import (
    Behavior,
    Citation,
    ContentType,
    ContextChunk,
    CorpusChunk,
    GoldenCase,
    Offsets,
    RetrievedChunk,
    Trace,
    _one_of_equals,
    read_only_map,
    with_expected_grades,
)
from groundjudge.frozen import EMPTY, given_fields

Id = Annotated[str, Meta(min_length=1)]
Texts = tuple[str, ...] | UnsetType


class _PlainCase(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The fields of :class:`~groundjudge.contracts.GoldenCase` but ``user_context`` and
    ``not_recorded`` (a case that gives either is left to pydantic), as msgspec reads them."""

    id: Id
    question: Id
    expected_answer: str | None | UnsetType = UNSET
    expected_chunk_ids: tuple[Id, ...] | UnsetType = UNSET
    relevance: dict[str, Annotated[int, Meta(ge=0, le=3)]] | UnsetType = UNSET
    expected_doc_ids: tuple[Id, ...] | None | UnsetType = UNSET
    must_cite: tuple[Id, ...] | UnsetType = UNSET
    must_contain: Texts = UNSET
    forbidden: Texts = UNSET
    gold_claim_substrings: Texts = UNSET
    difficulty: str | None | UnsetType = UNSET
    tags: Texts = UNSET
    expected_behavior: Behavior | UnsetType = UNSET
    constraints: Texts = UNSET
    paraphrases: Texts = UNSET


class _PlainChunk(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The fields of :class:`~groundjudge.contracts.CorpusChunk` but ``acl`` (left to
    pydantic), as msgspec reads them; a section path may be given as one ``a > b`` string."""

    chunk_id: Id
    doc_id: Id
    doc_version: str | None | UnsetType = UNSET
    text: str
    section_path: tuple[str, ...] | str | UnsetType = UNSET
    offsets: Offsets | None | UnsetType = UNSET
    type: ContentType | UnsetType = UNSET


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


def _section_paths(values: list[Any]) -> list[Any]:
    """Section paths as the contract holds them: one given as ``a > b`` split at each ``>``."""
    if str not in map(type, values):
        return values
    return [tuple(part.strip() for part in value.split(">") if part.strip()) if type(value) is str else value
            for value in values]


def _share_ids(traces: list[Trace]) -> None:
    """The traces' chunk ids (and documents) as one string per value (:func:`_share`)."""
    retrieved, context, cited = (list(chain.from_iterable(map(attrgetter(name), traces))) for name, _ in _CHUNKS)
    _share(retrieved, "chunk_id")
    _share(context + cited, "chunk_id")
    if None in map(attrgetter("doc_id"), retrieved):
        retrieved = [item for item in retrieved if item.doc_id is not None]
    _share(retrieved, "doc_id")


def _set(items: list[Any], name: str, values: Iterable[Any]) -> None:
    """Each item's field ``name`` set to its value (the items are frozen structs this module
    has just decoded, not yet seen by anyone else)."""
    deque(map(msgspec.structs.force_setattr, items, repeat(name), values), maxlen=0)


def _plain_traces(lines: bytes) -> list[Trace] | None:
    """The traces of ``lines`` decoded straight into :class:`~groundjudge.contracts.Trace`
    structs, then finished a field at a time across the batch as validation finishes them:
    a chunk given as its id alone made into its chunk, chunk and document ids held once per
    value, a batch's runs of the same config id held as one string, latencies and token
    counts as read-only maps (the one empty map when empty), versions shared
    (``_one_of_equals``). A trace that gives ``not_recorded`` (or a field the struct decodes
    as its ``model_extra``) leaves the batch to pydantic, as every unknown field does."""
    try:
        traces = _trace_decoder().decode(lines)
    except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not traces:
        return traces
    for name in ("not_recorded", "model_extra"):  # the default when not given: the one empty map
        if not all(map(is_, map(attrgetter(name), traces), repeat(EMPTY))):
            return None
    _set(traces, "config_id", _runs_shared(list(map(attrgetter("config_id"), traces))))
    for name, kind in _CHUNKS:
        given = list(map(attrgetter(name), traces))
        made = _chunks(kind, given)
        if made is not given:
            _set(traces, name, made)
    _share_ids(traces)
    for name in ("latency_ms", "tokens"):
        _set(traces, name, list(map(read_only_map, map(attrgetter(name), traces))))
    _set(traces, "versions", list(map(_one_of_equals, map(attrgetter("versions"), traces))))
    return traces


def _runs_shared(values: list[Any]) -> list[Any]:
    """A column's strings with each run of equal ones held as its first: a batch of one
    config's traces names it on every line, a corpus gives a document's chunks one after
    another."""
    if values.count(values[0]) == len(values):
        return [values[0]] * len(values)
    return list(chain.from_iterable(repeat(value, len(list(run))) for value, run in groupby(values)))


def _maps(values: list[Any]) -> list[Any]:
    return list(map(read_only_map, values))


def _expected_graded(rows: list[dict[str, Any]]) -> None:
    """A case's grades with its expected chunks graded, as the contract's validator makes them
    (the default grades too)."""
    for row in rows:
        if row["expected_chunk_ids"]:
            row["relevance"] = with_expected_grades(row["relevance"], row["expected_chunk_ids"])


@dataclass(frozen=True)
class _Shape:
    """How a contract's plain records are read: their struct, what a given field's decoded
    values become across the batch (``final``), and what the batch's rows need once every
    field is in them (``after``)."""

    struct: type[msgspec.Struct]
    final: dict[str, Callable[[list[Any]], list[Any]]] = field(default_factory=dict)
    after: Callable[[list[dict[str, Any]]], None] | None = None
    # parsed by pydantic-core, whose string cache makes equal short strings one (a case's
    # chunk ids, tags and difficulty), then checked by msgspec: held as pydantic's own
    # validation holds them; a trace's ids are shared by ``after`` instead
    strings_shared: bool = False


_SHAPES: dict[type[BaseModel], _Shape] = {
    GoldenCase: _Shape(_PlainCase, {"relevance": _maps}, after=_expected_graded, strings_shared=True),
    CorpusChunk: _Shape(_PlainChunk, {"doc_id": _runs_shared, "section_path": _section_paths}),
}


def _defaults(info: FieldInfo, count: int) -> Iterable[Any]:
    """A field's default for ``count`` records, as validation gives it: one value for all,
    unless a factory makes a new one each time."""
    if info.default_factory is None:
        return repeat(info.default)
    first = info.default_factory()  # type: ignore[call-arg]
    if first is info.default_factory():  # type: ignore[call-arg]
        return repeat(first)
    return [first, *(info.default_factory() for _ in range(count - 1))]  # type: ignore[call-arg]


def _rows(plains: list[Any], model: type[BaseModel], shape: _Shape) -> tuple[list[dict[str, Any]], list[set[str]]]:
    """Each record's fields with their values as the contract holds them, in the contract's
    order (a field not given: its default), made a field at a time across the batch (one pass
    per field, not a dict comprehension per record); and the names each record was given (the
    one set of them for all, when every record gives the same ones)."""
    rows: list[dict[str, Any]] = [{} for _ in plains]
    given: set[str] = set()
    given_each: list[list[str]] | None = None  # the names given by some records only
    declared = shape.struct.__struct_fields__
    for name, info in model.model_fields.items():
        column = list(map(attrgetter(name), plains)) if name in declared else []
        unset = column.count(UNSET) if column else len(plains)
        final = shape.final.get(name)
        values: Iterable[Any]
        if unset == len(plains):
            values = _defaults(info, len(plains))
        elif not unset:
            given.add(name)
            values = column if final is None else final(column)
        else:
            mask = [value is not UNSET for value in column]
            if given_each is None:
                given_each = [[] for _ in plains]
            deque(map(list.append, compress(given_each, mask), repeat(name)), maxlen=0)
            made = iter(list(compress(column, mask)) if final is None else final(list(compress(column, mask))))
            defaults = iter(_defaults(info, unset))
            values = [next(made) if held else next(defaults) for held in mask]
        deque(map(dict.__setitem__, rows, repeat(name), values), maxlen=0)
    if shape.after is not None:
        shape.after(rows)
    if given_each is None:
        return rows, [given]
    return rows, [given.union(names) for names in given_each]


def _records(model: type[BaseModel], rows: list[dict[str, Any]], given: list[set[str]]) -> list[Any]:
    """The model's records holding ``rows`` as their fields, as validation leaves them and
    as ``model_post_init`` finishes them (:class:`~groundjudge.contracts._Record`): each with
    the shared set of its given fields and the empty read-only map of unknown fields (a plain
    record has none); made across the batch, as ``model_construct`` makes one."""
    records = list(map(object.__new__, repeat(model, len(rows))))
    sets = repeat(given_fields(given[0])) if len(given) == 1 else map(given_fields, given)
    for name, values in (("__dict__", rows), ("__pydantic_fields_set__", sets),
                         ("__pydantic_extra__", repeat(EMPTY)), ("__pydantic_private__", repeat(None))):
        deque(map(object.__setattr__, records, repeat(name), values), maxlen=0)
    return records


@cache
def _decoder(model: type[BaseModel]) -> msgspec.json.Decoder[list[Any]]:
    return msgspec.json.Decoder(GenericAlias(list, (_SHAPES[model].struct,)), dec_hook=_offsets)


@cache
def _trace_decoder() -> msgspec.json.Decoder[list[Trace]]:
    return msgspec.json.Decoder(list[Trace], dec_hook=_offsets)


def plain_records(model: type[Any], lines: bytes) -> list[Any] | None:
    """The records of ``lines`` (a JSON array of JSON objects) when ``model`` is a trace,
    golden case or corpus chunk and every one is of the plain shape; else None (the batch is
    left to pydantic)."""
    if model is Trace:
        return _plain_traces(lines)
    shape = _SHAPES.get(model)
    return None if shape is None else _plain_models(model, shape, lines)


def _plain_models(model: type[BaseModel], shape: _Shape, lines: bytes) -> list[Any] | None:
    try:
        if shape.strings_shared:
            kind = GenericAlias(list, (shape.struct,))
            plains = msgspec.convert(from_json(lines, allow_inf_nan=False, cache_strings=True), kind, dec_hook=_offsets)
        else:
            plains = _decoder(model).decode(lines)
    except (ValueError, msgspec.DecodeError, msgspec.ValidationError):  # (pydantic-core: invalid JSON)
        return None
    rows, given = _rows(plains, model, shape)
    del plains  # (their values are the rows' now)
    return _records(model, rows, given)
