"""Records of the plain shape, decoded by msgspec: a batch of JSONL lines in one call, each
record straight into its struct, no Python call per field or per chunk.

A trace, golden case or corpus chunk as most files write it (the declared fields only, but for
a few left to pydantic; a chunk as an object of its declared fields or as its id alone; a
number for every number) is decoded into the contract's struct itself
(:class:`~groundjudge.contracts.Trace`, :class:`~groundjudge.contracts.GoldenCase`,
:class:`~groundjudge.contracts.CorpusChunk`) with the bounds its fields carry
(:class:`msgspec.Meta`), then finished across the batch as validation finishes one. Anything
else (an unknown field, ``not_recorded``, a case's ``user_context``, a chunk's ``acl``, a number
written as text, a total given as a bare number, offsets that are not two integers) fails the
whole batch here, and the caller validates that batch with pydantic, which keeps or names
everything as it always has. So this path accepts only what the contract accepts; a test
compares the two on generated lines of every shape.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from functools import cache
from itertools import chain, groupby, islice, repeat
from operator import attrgetter, is_
from sys import intern
from typing import Any

import msgspec
from pydantic_core import from_json

from groundjudge.contracts import (
    Citation,
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
from groundjudge.frozen import EMPTY

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


def _none_given(records: list[Any], name: str, default: Any) -> bool:
    """Whether no record gives field ``name``: each holds the default object itself (a value
    decoded from a line, an empty map too, is another object)."""
    return all(map(is_, map(attrgetter(name), records), repeat(default)))


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
    if not (_none_given(traces, "not_recorded", EMPTY) and _none_given(traces, "model_extra", EMPTY)):
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


def _plain_cases(lines: bytes) -> list[GoldenCase] | None:
    """The golden cases of ``lines`` as :class:`~groundjudge.contracts.GoldenCase` structs, their
    grades then made read-only maps with every expected chunk graded, as validation makes them.
    Parsed by pydantic-core, whose string cache makes equal short strings one (a case's chunk
    ids, tags, difficulty), as pydantic's own validation holds them, then checked and converted
    by msgspec, which keeps those strings. A case that gives ``not_recorded``, ``user_context``
    (not null) or a field the struct decodes as its ``model_extra`` leaves the batch to
    pydantic, as every unknown field does."""
    try:
        cases = msgspec.convert(from_json(lines, allow_inf_nan=False, cache_strings=True), list[GoldenCase])
    except (ValueError, msgspec.ValidationError):  # (pydantic-core: invalid JSON)
        return None
    if not (_none_given(cases, "not_recorded", EMPTY) and _none_given(cases, "model_extra", EMPTY)
            and _none_given(cases, "user_context", None)):
        return None
    expected = list(map(attrgetter("expected_chunk_ids"), cases))
    if any(expected) or not _none_given(cases, "relevance", EMPTY):
        graded = map(with_expected_grades, map(read_only_map, map(attrgetter("relevance"), cases)), expected)
        _set(cases, "relevance", list(graded))
    return cases


def _plain_chunks(lines: bytes) -> list[CorpusChunk] | None:
    """The corpus chunks of ``lines`` decoded straight into
    :class:`~groundjudge.contracts.CorpusChunk` structs, then finished across the batch: a
    section path given as ``a > b`` split, a batch's runs of one document id held as one string.
    A chunk that gives ``acl`` (not null) or a field the struct decodes as its ``model_extra``
    leaves the batch to pydantic, as every unknown field does."""
    try:
        chunks = _chunk_decoder().decode(lines)
    except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not chunks:
        return chunks
    if not (_none_given(chunks, "model_extra", EMPTY) and _none_given(chunks, "acl", None)):
        return None
    _set(chunks, "doc_id", _runs_shared(list(map(attrgetter("doc_id"), chunks))))
    paths = list(map(attrgetter("section_path"), chunks))
    split = _section_paths(paths)
    if split is not paths:
        _set(chunks, "section_path", split)
    return chunks


@cache
def _chunk_decoder() -> msgspec.json.Decoder[list[CorpusChunk]]:
    return msgspec.json.Decoder(list[CorpusChunk], dec_hook=_offsets)


@cache
def _trace_decoder() -> msgspec.json.Decoder[list[Trace]]:
    return msgspec.json.Decoder(list[Trace], dec_hook=_offsets)


_PLAIN: dict[type, Callable[[bytes], list[Any] | None]] = {
    Trace: _plain_traces, GoldenCase: _plain_cases, CorpusChunk: _plain_chunks}


def plain_records(model: type[Any], lines: bytes) -> list[Any] | None:
    """The records of ``lines`` (a JSON array of JSON objects) when ``model`` is a trace,
    golden case or corpus chunk and every one is of the plain shape; else None (the batch is
    left to pydantic)."""
    read = _PLAIN.get(model)
    return None if read is None else read(lines)
