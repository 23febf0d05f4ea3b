"""A loaded trace's chunk lists, held as columns: read-only sequences of the same items.

A nightly set holds 200,000 traces of ten retrieved chunks, four context chunks and a citation
or two. As lists of item objects they cost an object per chunk and a float per score, the
largest part of what a trace costs. Most items carry nothing but an id, a document, a score,
a rank and perhaps a stage or content type, so the loader (``load.dataset``) keeps such a list
as columns: tuples of ids, documents, stages and types, an ``array`` of scores and one of
ranks; context chunks and citations that are bare ids, as a tuple of ids. A list with anything
more (a chunk's text or offsets, unknown fields, some scores given and others not) stays a
list.

Each sequence reads as the list it replaces: ``len``, indexing (a slice gives a list), ``in``,
iteration and ``==`` against a list all work, and every item read is a new
:class:`~groundjudge.contracts.RetrievedChunk` (or context chunk, or citation) equal to the one
that was parsed. Code that reads a trace's ids, scores or documents for every trace uses
:func:`chunk_ids`, :func:`chunk_scores` and :func:`chunk_docs`, which take either form and read
the columns without making items.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any, Generic, TypeVar, overload

from groundjudge.contracts import Citation, ContextChunk, RetrievedChunk

I = TypeVar("I")


class _Columns(Sequence[I], Generic[I]):
    """What the column forms share: a sequence of ``len(self.ids)`` items, each made on read."""

    __slots__ = ()
    ids: tuple[str, ...]

    def _item(self, i: int) -> I:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> I: ...

    @overload
    def __getitem__(self, index: slice) -> list[I]: ...

    def __getitem__(self, index: int | slice) -> I | list[I]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(len(self.ids))[index]]
        return self._item(range(len(self.ids))[index])  # range raises IndexError as a list would

    def __iter__(self) -> Iterator[I]:
        return map(self._item, range(len(self.ids)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, _Columns)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so as unhashable as one

    def __repr__(self) -> str:
        return repr(list(self))


def _bare(cls: type, **values: Any) -> Any:
    """An item of ``cls`` (a frozen slotted dataclass) with these fields and None elsewhere,
    without validation: its values come from an item that was validated."""
    item: Any = object.__new__(cls)
    put = object.__setattr__
    for name in _FIELDS[cls]:
        put(item, name, values.get(name))
    return item


_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in (RetrievedChunk, ContextChunk, Citation)
}


class RetrievedColumns(_Columns[RetrievedChunk]):
    """Retrieved chunks as columns: ids; documents, stages and content types (each None when no
    chunk has one); scores and ranks (arrays, each None when no chunk has one; ranks 1 to n,
    as most traces have them, are one shared ``range``)."""

    __slots__ = ("docs", "ids", "ranks", "scores", "stages", "types")

    def __init__(self, ids: tuple[str, ...], docs: tuple[str | None, ...] | None, scores: array[float] | None,
                 ranks: array[int] | range | None, stages: tuple[str | None, ...] | None = None,
                 types: tuple[str | None, ...] | None = None) -> None:
        self.ids, self.docs, self.scores, self.ranks, self.stages, self.types = ids, docs, scores, ranks, stages, types

    @classmethod
    def of(cls, chunks: Sequence[RetrievedChunk]) -> RetrievedColumns | None:
        """``chunks`` as columns, or None when one of them carries more than the columns hold."""
        n = len(chunks)
        if not n or any(map(vars, chunks)):  # an item's unknown fields live in its own __dict__
            return None
        ids, docs, scores, ranks, stages, types, texts, offsets = zip(*map(_RETRIEVED, chunks), strict=True)
        if texts.count(None) != n or offsets.count(None) != n:
            return None
        given = n - scores.count(None)
        if given not in (0, n) or n - ranks.count(None) not in (0, n):
            return None
        try:
            rank_column = _ranks(ranks) if ranks[0] is not None else None
        except OverflowError:  # past 64 bits: left as a list
            return None
        return cls(ids, _column(docs), array("d", scores) if given else None, rank_column, _column(stages),
                   _column(types))

    def _item(self, i: int) -> RetrievedChunk:
        docs, scores, ranks, stages, types = self.docs, self.scores, self.ranks, self.stages, self.types
        chunk: RetrievedChunk = _bare(
            RetrievedChunk, chunk_id=self.ids[i], doc_id=docs[i] if docs is not None else None,
            score=scores[i] if scores is not None else None, rank=ranks[i] if ranks is not None else None,
            stage=stages[i] if stages is not None else None, type=types[i] if types is not None else None)
        return chunk

    def __reduce__(self) -> tuple[Any, ...]:
        return RetrievedColumns, (self.ids, self.docs, self.scores, self.ranks, self.stages, self.types)


def _column(values: tuple[str | None, ...]) -> tuple[str | None, ...] | None:
    return None if values.count(None) == len(values) else values


_IN_ORDER: dict[int, tuple[tuple[int, ...], range]] = {}  # n -> the ranks 1 to n, as a tuple and as a range


def _ranks(ranks: tuple[int, ...]) -> array[int] | range:
    """The ranks 1 to n as one shared range, else an array."""
    n = len(ranks)
    known = _IN_ORDER.get(n)
    if known is None:
        known = _IN_ORDER[n] = (tuple(range(1, n + 1)), range(1, n + 1))
    return known[1] if ranks == known[0] else array("q", ranks)


_RETRIEVED = attrgetter("chunk_id", "doc_id", "score", "rank", "stage", "type", "text", "offsets")


class IdColumns(_Columns[I]):
    """Context chunks or citations that carry nothing but their chunk id."""

    __slots__ = ("ids", "kind")

    def __init__(self, kind: type[I], ids: tuple[str, ...]) -> None:
        self.kind, self.ids = kind, ids

    @classmethod
    def of(cls, items: Sequence[Any]) -> IdColumns[Any] | None:
        """``items`` (all context chunks, or all citations) as ids, or None when one of them
        carries more than its id."""
        n = len(items)
        if not n:
            return None
        kind = type(items[0])
        if any(type(c) is not kind for c in items) or any(map(vars, items)):
            return None
        if any(list(map(attrgetter(name), items)).count(None) != n for name in _FIELDS[kind] if name != "chunk_id"):
            return None
        return cls(kind, tuple(map(_CHUNK_ID, items)))

    def _item(self, i: int) -> I:
        return _bare(self.kind, chunk_id=self.ids[i])  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return IdColumns, (self.kind, self.ids)


_CHUNK_ID = attrgetter("chunk_id")


def chunk_ids(items: Sequence[Any]) -> Sequence[str]:
    """The chunk ids of a trace's retrieved chunks, context chunks or citations, in order."""
    if isinstance(items, _Columns):
        return items.ids
    return [c.chunk_id for c in items]


def chunk_scores(items: Sequence[RetrievedChunk]) -> Sequence[float | None]:
    """The retrieved chunks' scores, in order (None where a chunk has none)."""
    if isinstance(items, RetrievedColumns):
        return [None] * len(items.ids) if items.scores is None else items.scores.tolist()
    return [c.score for c in items]


def chunk_docs(items: Sequence[RetrievedChunk]) -> Sequence[str | None]:
    """The retrieved chunks' document ids as the trace gives them, in order (None where it does not)."""
    if isinstance(items, RetrievedColumns):
        return (None,) * len(items.ids) if items.docs is None else items.docs
    return [c.doc_id for c in items]


def chunk_texts(items: Sequence[ContextChunk]) -> Sequence[str | None]:
    """The context chunks' texts as the trace gives them, in order (None where it does not)."""
    if isinstance(items, IdColumns):
        return (None,) * len(items.ids)
    return [c.text for c in items]


def has_offsets(items: Sequence[Citation]) -> bool:
    """Whether any citation (or retrieved chunk) carries offsets."""
    return not isinstance(items, _Columns) and any(c.offsets is not None for c in items)
