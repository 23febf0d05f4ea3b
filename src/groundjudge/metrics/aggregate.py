"""Aggregate per-case values into ``{value, n}`` summaries, overall and by group.

Means skip ``None`` (an empty denominator) and say how many cases they cover. Latencies are
summarised as p50/p95/p99 rather than means; cost also gets a total. A summary that left out
cases whose inputs were not recorded (``metrics.unrecorded``) says why in ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NotRequired, TypedDict, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from groundjudge.contracts import GoldenCase
from groundjudge.metrics.case import CaseMetrics
from groundjudge.metrics.operations import sorted_percentile
from groundjudge.metrics.table import NOT_RECORDED, metric_columns


class Summary(TypedDict):
    value: float | None
    n: int
    reason: NotRequired[str]  # why cases were left out: an input they read was not recorded


# metric -> reason -> how many cases it left out
UnknownCounts = dict[str, dict[str, int]]


PERCENTILES = (50, 95, 99)


Column = Sequence[float]


def summarize(rows: Iterable[Mapping[str, float | None]]) -> dict[str, Summary]:
    """The summaries of plain mappings (metric -> value): tests' and small callers' way in."""
    columns: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            column = columns.setdefault(name, [])
            if value is not None:
                column.append(value)
    return summaries(columns)


def present(parts: Iterable[pa.ChunkedArray | pa.Array]) -> npt.NDArray[np.float64]:
    """The values of Arrow columns that are not null, one column after the other."""
    arrays = [part.drop_null().to_numpy(zero_copy_only=False) for part in parts]
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.float64)


def table_summaries(tables: Sequence[pa.Table], names: Iterable[str]) -> dict[str, Summary]:
    """The summaries of metric ``names`` over the rows of ``tables``, one table after the other.
    Each mean adds its values in row order, as a running sum over the cases would."""
    out: dict[str, Summary] = {}
    for name in names:  # one column's values at a time
        out.update(column_summaries(name, present(t.column(name) for t in tables if name in t.column_names)))
    return out


def summaries(columns: Mapping[str, Column]) -> dict[str, Summary]:
    return _summaries(columns.items())


def _summaries(columns: Iterable[tuple[str, Column]],
               order: Callable[[Column], Column] = sorted) -> dict[str, Summary]:
    """``order``: a column's values in ascending order, as ``sorted`` gives them."""
    out: dict[str, Summary] = {}
    for name, values in columns:
        total = sum(values)  # once, for the check, the mean and the total
        _check_finite(name, values, total)
        if name.startswith("latency_ms."):
            ordered = order(values)  # once, for every percentile
            for q in PERCENTILES:
                out[f"{name}.p{q}"] = {"value": sorted_percentile(ordered, q), "n": len(values)}
            continue
        out[name] = {"value": total / len(values) if len(values) else None, "n": len(values)}
        if name == "cost_usd":
            out["cost_usd.total"] = {"value": total if len(values) else None, "n": len(values)}
    return out


def column_summaries(name: str, values: npt.NDArray[np.float64]) -> dict[str, Summary]:
    """:func:`summaries` of one metric's values (none null) as a float64 array. The sums stay
    Python's own ``sum`` (Python 3.12 adds floats differently from a loop in numpy), over a
    view of the array that hands it one Python float at a time (no list of them all). A
    latency column is sorted in numpy: a stable sort, so its order is ``sorted``'s (the values
    are finite, checked before), read back a Python float at a time."""
    return _summaries([(name, cast(Column, values.data))],
                      order=lambda _: cast(Column, np.sort(values, kind="stable").data))


def unknown_counts(tables: Iterable[pa.Table]) -> UnknownCounts:
    """Per metric, the cases left out because an input it reads was not recorded, by reason
    (from the tables' ``not_recorded`` column)."""
    metrics, reasons = [], []
    for table in tables:
        for chunk in table.column(NOT_RECORDED).chunks:
            # a map array's keys and items are those of the whole array it was sliced from
            start, end = chunk.offsets[0].as_py(), chunk.offsets[-1].as_py()
            metrics.append(chunk.keys.slice(start, end - start))
            reasons.append(chunk.items.slice(start, end - start))
    if not metrics or not sum(len(m) for m in metrics):
        return {}
    pairs = pa.table({"metric": pa.concat_arrays(metrics), "reason": pa.concat_arrays(reasons)})
    counted = pairs.group_by(["metric", "reason"], use_threads=False).aggregate([("metric", "count")])
    counts: UnknownCounts = {}
    for metric, reason, n in zip(*(counted.column(c).to_pylist() for c in ("metric", "reason", "metric_count")),
                                 strict=True):
        counts.setdefault(metric, {})[reason] = n
    return counts


def with_reasons(found: dict[str, Summary], counts: UnknownCounts, cases: int) -> dict[str, Summary]:
    """``found`` (the summaries of ``cases`` cases) with a ``reason`` on each summary that left
    cases out as not recorded: the reason(s) alone when every case was, else how many were."""
    for metric, reasons in counts.items():
        summary = found.get(metric)
        if summary is None:
            continue
        why = "; ".join(sorted(reasons, key=lambda r: (-reasons[r], r)))
        left = sum(reasons.values())
        summary["reason"] = why if left >= cases else f"{left} of {cases} cases left out: {why}"
    return found


def _check_finite(name: str, values: Column, total: float) -> None:
    """A NaN or an infinity would make a mean (and orjson's null) of a column whose n still
    counts it (``total``: the column's sum). Inputs are checked when they are read, so this never
    happens unless a metric computes one: say so rather than write a summary that hides it."""
    if len(values) and not math.isfinite(total):
        raise ValueError(f"metric {name!r}: a value that is not a finite number reached the summary "
                         "(inputs are checked when read, so a metric computed it: a bug)")


def distinct_layouts(layouts: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The distinct layouts (rows' metric names) among ``layouts``, in the order they first
    appear. Rows share a handful of layout tuples (``table.as_batch`` makes one per layout and
    batch slice): they are told apart by identity first, as a tuple's hash is worked out anew,
    over every name, each time it is looked up."""
    return list(dict.fromkeys(dict(zip(map(id, layouts), layouts)).values()))


def ordered_names(layouts: Iterable[tuple[str, ...]]) -> list[str]:
    """The metric names of rows with these layouts, in the order they first appear."""
    names: dict[str, None] = {}
    for layout in layouts:
        names.update(dict.fromkeys(layout))
    return list(names)


def breakdowns(table: pa.Table, results: Sequence[CaseMetrics], layouts: Sequence[tuple[str, ...]],
               cases: Mapping[str, GoldenCase]) -> dict[str, dict[str, dict[str, Summary]]]:
    """Summaries by tag, difficulty and content type (a case counts in each group it belongs to,
    a repeated tag twice). ``results`` and ``layouts`` (each row's metric names) are the rows of
    ``table`` in order; a group's summaries are those of its rows, in the table's order.

    Rows that fall in the same groups with the same metrics are found first (a run has a handful
    of such kinds of row); each group's rows are then read from each metric column in place: no
    copy of the table per group."""
    # the rows of each kind of row: (tags, difficulty, content types, layout), first seen first
    # (a layout by its identity, see ``distinct_layouts``: rows of one layout in several batches
    # make several kinds of row, whose rows come together again in each group)
    kinds_of_row: dict[tuple[tuple[str, ...], str | None, tuple[str, ...], int], list[int]] = {}
    for i, (r, layout) in enumerate(zip(results, layouts, strict=True)):
        case = cases[r.case_id]
        kinds_of_row.setdefault((case.tags, case.difficulty, r.content_types, id(layout)), []).append(i)
    layout_of = dict(zip(map(id, layouts), layouts))
    members: dict[tuple[str, str], list[tuple[list[int], tuple[str, ...]]]] = {}  # a group's kinds of row
    for (tags, difficulty, types, layout_id), positions in kinds_of_row.items():
        layout = layout_of[layout_id]
        places = [*(("tag", t) for t in tags or ("(untagged)",)), ("difficulty", difficulty or "(unset)"),
                  *(("content_type", t) for t in types or ("(unknown)",))]
        for place in places:  # a repeated tag: the rows twice
            members.setdefault(place, []).append((positions, layout))
    groups: list[tuple[tuple[str, str], npt.NDArray[np.int64], list[str]]] = []
    for place in sorted(members, key=lambda place: place[1]):
        parts = members[place]
        # the group's rows in the table's order, so that each mean adds its values as before
        rows = np.sort(np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in parts]), kind="stable")
        layouts_seen = dict.fromkeys(layout for _, layout in sorted(parts, key=lambda part: part[0][0]))
        groups.append((place, rows, ordered_names(layouts_seen)))
    found: list[dict[str, dict[str, Summary]]] = [{} for _ in groups]  # per group: metric -> its summaries
    wanted = {name for _, _, names in groups for name in names}
    for name in metric_columns(table):
        if name not in wanted:
            continue
        column = table.column(name)
        values = column.to_numpy(zero_copy_only=False)  # a null reads as NaN here, and is left out below
        valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else None
        for (_, rows, names), summaries_of in zip(groups, found, strict=True):
            if name in names:
                taken = values[rows] if valid is None else values[rows][valid[rows]]
                summaries_of[name] = column_summaries(name, taken)
    not_recorded = table.column(NOT_RECORDED)
    out: dict[str, dict[str, dict[str, Summary]]] = {"tag": {}, "difficulty": {}, "content_type": {}}
    for ((kind, key), rows, names), summaries_of in zip(groups, found, strict=True):
        merged: dict[str, Summary] = {}
        for name in names:
            merged.update(summaries_of[name])
        counts = (unknown_counts([pa.table({NOT_RECORDED: not_recorded.take(pa.array(rows))})])
                  if not_recorded.null_count < len(not_recorded) else {})
        out[kind][key] = with_reasons(merged, counts, len(rows))
    return out
