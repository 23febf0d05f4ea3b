"""Per-case metric values as Arrow columns: a batch of (case, trace) pairs in, a record batch out.

A record batch holds one row per (config, case): ``config_id``, ``case_id``, ``not_recorded``
(metric -> why its input was not recorded) and one float64 column per metric, in the order the
metrics first appear. A metric that does not apply is null; a NaN a metric computed stays NaN
(Arrow keeps the two apart). The exact metric functions (``metrics.case.compute_case``) are
unchanged: this module only lays their values out as columns, batch by batch.

Code that reads one case at a time (selection, gates, the report's per-case section) gets a
:class:`MetricValues`, a read-only mapping over that case's row of its config's table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, KeysView, Mapping, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

import msgspec
import numpy as np
import pyarrow as pa

from groundjudge.contracts import Behavior, GoldenCase, Trace
from groundjudge.load.dataset import Corpus
from groundjudge.metrics.acl import AclLeak
from groundjudge.metrics.case import CaseMetrics, MetricSettings, compute_case
from groundjudge.metrics.failures import failed_checks

KEYS = ("config_id", "case_id")
NOT_RECORDED = "not_recorded"
NOT_RECORDED_TYPE = pa.map_(pa.string(), pa.string())
_KEY_FIELDS = (pa.field("config_id", pa.string(), nullable=False), pa.field("case_id", pa.string(), nullable=False),
               pa.field(NOT_RECORDED, NOT_RECORDED_TYPE))


def metric_schema(names: Iterable[str]) -> pa.Schema:
    """The schema of a batch whose metrics are ``names``: the keys, then a float64 column each."""
    return pa.schema([*_KEY_FIELDS, *(pa.field(name, pa.float64()) for name in names)])


def metric_columns(table: pa.Table | pa.RecordBatch) -> list[str]:
    """The metric columns of a batch or table (every column but the keys and ``not_recorded``)."""
    return [name for name in table.schema.names if name not in KEYS and name != NOT_RECORDED]


class CaseFacts(msgspec.Struct, frozen=True, gc=False):
    """What one case's row does not hold as a number: read by reports and gates case by case.
    One per case, made for every batch: a struct the garbage collector does not track."""

    names: tuple[str, ...]  # the metrics computed for this case, in order (absent ones are not null)
    behavior: Behavior | None
    acl_leaks: tuple[AclLeak, ...]
    content_types: tuple[str, ...]
    unknown: dict[str, str] | None  # metric -> why its input was not recorded (None: nothing)


Pair = tuple[GoldenCase, Trace, Sequence[Trace]]  # a case, its trace, the traces of its paraphrases
SLICE = 500  # pairs whose per-case values are Python dicts at one time


def metric_batch(pairs: Sequence[Pair], corpus: Corpus, settings: MetricSettings,
                 ) -> tuple[pa.RecordBatch, list[CaseFacts]]:
    """The metric values of ``pairs`` as one record batch (a row per pair, in order), with each
    row's facts beside it. The behaviour of the traces that record none is found from their
    answers for the whole batch at once (``BehaviorRules.detect_all``)."""
    detected = iter(settings.rules.detect_all([trace.answer for _, trace, _ in pairs if trace.behavior is None]))
    # ``SLICE`` rows' values at a time as Python dicts (each a few kilobytes), then as columns:
    # the memory the dicts took is reused by the next slice, not held for the whole batch
    parts = [as_batch([compute_case(case, trace, corpus, settings, paraphrases,
                                    observed=trace.behavior if trace.behavior is not None else next(detected))
                       for case, trace, paraphrases in pairs[start:start + SLICE]])
             for start in range(0, len(pairs), SLICE)]
    if len(parts) <= 1:
        return parts[0] if parts else as_batch([])
    return _joined([batch for batch, _ in parts]), [f for _, facts in parts for f in facts]


def _joined(batches: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    """Record batches (at least one row in all) as one, with the schema ``as_batch`` gives their
    rows together: the metrics in the order they first appear, null in the rows of a batch that
    lacks one."""
    table = pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="default")
    return table.combine_chunks().to_batches()[0]


def as_batch(rows: Sequence[CaseMetrics]) -> tuple[pa.RecordBatch, list[CaseFacts]]:
    """Rows made by ``compute_case`` (values as dicts) as one record batch, with their facts.

    Rows with the same metrics, in the same order (a layout; most rows of a run share one),
    are laid out together: each metric's values are taken from their mappings' values in one
    pass and made an Arrow array once. Rows of several layouts are put back in their order."""
    layouts: dict[tuple[str, ...], tuple[tuple[str, ...], list[int]]] = {}  # a layout -> itself, its rows
    types: dict[tuple[str, ...], tuple[str, ...]] = {}  # content types -> the one equal tuple of the batch
    facts = []
    for i, row in enumerate(rows):
        layout = tuple(row.values)
        group = layouts.get(layout)
        if group is None:
            group = layouts[layout] = (layout, [])
        group[1].append(i)
        # rows with the same metrics (or content types) share one tuple
        facts.append(CaseFacts(group[0], row.behavior, row.acl_leaks, types.setdefault(row.content_types, row.content_types),
                               dict(row.unknown) if row.unknown else None))
    names = dict.fromkeys(name for layout in layouts for name in layout)  # in the order they first appear
    schema = metric_schema(names)
    keys: list[Any] = [[r.config_id for r in rows], [r.case_id for r in rows],
                       [list(r.unknown.items()) if r.unknown else None for r in rows]]
    arrays = [pa.array(c, type=f.type) for c, f in zip(keys, _KEY_FIELDS, strict=True)]
    if len(layouts) == 1:
        arrays += [pa.array(column, type=pa.float64()) for column in zip(*(r.values.values() for r in rows))]
    elif layouts:
        arrays += _interleaved(rows, list(layouts.values()), names)
    return pa.RecordBatch.from_arrays(arrays, schema=schema), facts


def _interleaved(rows: Sequence[CaseMetrics], groups: list[tuple[tuple[str, ...], list[int]]],
                 names: Iterable[str]) -> list[pa.Array]:
    """The metric columns of rows of several layouts: each layout's rows as columns, one after
    the other (null where a layout lacks the metric), then taken back into the rows' order."""
    parts: list[dict[str, tuple[Any, ...]]] = [
        dict(zip(layout, zip(*(rows[i].values.values() for i in positions)), strict=True))
        for layout, positions in groups]
    sizes = [len(positions) for _, positions in groups]
    # where each row of the layouts laid one after the other goes back to
    order = pa.array(np.argsort(np.concatenate([np.asarray(p, dtype=np.int64) for _, p in groups]), kind="stable"))
    return [pa.concat_arrays([pa.array(part[name], type=pa.float64()) if name in part else pa.nulls(size, pa.float64())
                              for part, size in zip(parts, sizes, strict=True)]).take(order)
            for name in names]


def concat(parts: Sequence[pa.RecordBatch | pa.Table]) -> pa.Table:
    """Record batches or tables as one table: a column some part lacks is null in its rows."""
    if not parts:
        return metric_schema(()).empty_table()
    tables = [p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts]
    return pa.concat_tables(tables, promote_options="default")  # no copy: a chunk per part


def views(table: pa.Table, facts: Sequence[CaseFacts]) -> list[MetricValues]:
    """Each row's values, read from ``table``: the rows of ``facts``, in order."""
    reader = RowReader(table)
    out: list[MetricValues] = []
    for chunk, size in enumerate(reader.sizes):
        start = len(out)
        out += [MetricValues(reader, chunk, i, f.names) for i, f in enumerate(facts[start:start + size])]
    return out


class RowReader:
    """A table's metric columns read in place, so that a case's values come back as Python
    floats one at a time without copying the table into per-case dicts: per column and chunk
    (every column of a table made by ``concat`` has the same chunks), a float view of Arrow's
    value buffer and, where the chunk has nulls, a validity mask. The checks each row failed
    (``metrics.failures``) are found for the whole table when a row is first asked for them."""

    __slots__ = ("_failed", "_starts", "_table", "columns", "sizes")

    def __init__(self, table: pa.Table) -> None:
        self.columns: dict[str, list[tuple[Sequence[float], Sequence[bool] | None]]] = {}
        self.sizes: list[int] = []
        for name in metric_columns(table):
            chunks = table.column(name).chunks
            self.columns[name] = [_readable(chunk) for chunk in chunks]
            self.sizes = [len(chunk) for chunk in chunks]
        if not self.columns:
            self.sizes = [table.num_rows]
        self._table = table
        self._starts = [0, *accumulate(self.sizes)]  # each chunk's first row in the table
        self._failed: list[tuple[str, ...]] | None = None

    def failed_checks(self, chunk: int, row: int) -> tuple[str, ...]:
        """The deterministic checks the ``row`` of ``chunk`` failed, most serious first."""
        if self._failed is None:
            self._failed = failed_checks(self._table)
        return self._failed[self._starts[chunk] + row]


def as_dicts(rows: Sequence[Mapping[str, float | None]]) -> list[dict[str, float | None]]:
    """Each row as a dict (a :class:`MetricValues`' ``to_dict()``), read a run of rows at a time
    (:func:`row_runs`); a row of another mapping type as ``dict(row)``."""
    out: list[dict[str, float | None]] = []
    for names, columns, size in row_runs(rows):
        if columns:
            out += [dict(zip(names, row_values, strict=True)) for row_values in zip(*columns, strict=True)]
        else:  # rows without a metric
            out += [{} for _ in range(size)]
    return out


def row_runs(rows: Sequence[Mapping[str, float | None]],
             ) -> Iterator[tuple[tuple[str, ...], list[list[float | None]], int]]:
    """``rows`` in runs, in order, each as its metrics' names, each metric's values over the run
    and the run's length. A run of views of one chunk's consecutive rows with the same metrics
    (how a config's rows come, in order) is read a column at a time: a slice of each column's
    values, a Python float each, None where a row has no value. A row that is not a view is a
    run of its own, its values as they are."""
    i = 0
    while i < len(rows):
        first = rows[i]
        if not isinstance(first, MetricValues):
            yield tuple(first), [[value] for value in first.values()], 1
            i += 1
            continue
        end, last = i + 1, first
        while end < len(rows) and isinstance(row := rows[end], MetricValues) and row._follows(last):
            end, last = end + 1, row
        start, size, columns = first._row, end - i, first._reader.columns
        read: list[list[float | None]] = []
        for name in first._names:
            values, valid = columns[name][first._chunk]
            part = values[start:start + size]
            if valid is None:
                # (a view cast to "d" lists floats; typeshed says int)
                read.append(cast("list[float | None]", part.tolist()) if isinstance(part, memoryview) else list(part))
            else:
                column = np.asarray(part).astype(object)  # each value a Python float
                column[~np.asarray(valid[start:start + size])] = None
                read.append(column.tolist())
        yield first._names, read, size
        i = end


def _readable(chunk: pa.Array) -> tuple[Sequence[float], Sequence[bool] | None]:
    data = chunk.buffers()[1]
    values: Sequence[float] = (memoryview(data).cast("d")[chunk.offset:chunk.offset + len(chunk)]
                               if data is not None else [math.nan] * len(chunk))
    # a view of numpy's bool array: format "?", so each item reads as a bool
    valid = (cast("Sequence[bool]", memoryview(chunk.is_valid().to_numpy(zero_copy_only=False)))
             if chunk.null_count else None)
    return values, valid


if TYPE_CHECKING:  # a mapping to type checkers; at run time a struct registered as one (``Mapping.register``)
    class _Struct(msgspec.Struct, Mapping[str, "float | None"], frozen=True):
        pass
else:
    _Struct = msgspec.Struct


class MetricValues(_Struct, frozen=True, gc=False):
    """One case's metric values: name -> float, or None where the metric does not apply.

    A read-only view of the case's row in its config's table; equal to a dict with the same
    items. A mapping (registered as a :class:`~collections.abc.Mapping`) in a frozen struct the
    garbage collector does not track: a run holds one per case, and nothing it holds refers
    back to it.
    """

    _reader: RowReader
    _chunk: int
    _row: int
    _names: tuple[str, ...]

    def __getitem__(self, name: str) -> float | None:
        if name not in self._names:
            raise KeyError(name)
        values, valid = self._reader.columns[name][self._chunk]
        return values[self._row] if valid is None or valid[self._row] else None

    def get(self, name: str, default: Any = None) -> Any:
        column = self._reader.columns.get(name)
        if column is None:
            return default
        values, valid = column[self._chunk]
        if valid is None or valid[self._row]:
            return values[self._row]
        # null: a metric that does not apply here, or one this case's row does not have
        return None if name in self._names else default

    def __contains__(self, name: object) -> bool:
        return name in self._names

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The deterministic checks this case failed (``metrics.failures.deterministic_failures``,
        which reads this), found column by column for the whole table."""
        return self._reader.failed_checks(self._chunk, self._row)

    @property
    def names(self) -> tuple[str, ...]:
        """The metrics of this case, in order: one tuple shared by the rows that have the same."""
        return self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def keys(self) -> KeysView[str]:
        return KeysView(self)

    def __len__(self) -> int:
        return len(self._names)

    def to_dict(self) -> dict[str, float | None]:
        row, chunk, columns = self._row, self._chunk, self._reader.columns
        out: dict[str, float | None] = {}
        for name in self._names:
            values, valid = columns[name][chunk]
            out[name] = values[row] if valid is None or valid[row] else None
        return out

    def items(self) -> Any:
        return self.to_dict().items()

    def _follows(self, other: MetricValues) -> bool:
        """Whether this is the row after ``other`` in the same chunk, with the same metrics."""
        return (self._reader is other._reader and self._chunk == other._chunk and self._row == other._row + 1
                and self._names is other._names)

    def values(self) -> Any:
        return self.to_dict().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other.items())
        return NotImplemented

    def __ne__(self, other: object) -> bool:  # (a struct's own ``!=`` compares its fields)
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by its items

    def __repr__(self) -> str:
        return f"MetricValues({self.to_dict()!r})"


Mapping.register(MetricValues)
