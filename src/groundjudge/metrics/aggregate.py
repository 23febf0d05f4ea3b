"""Aggregate per-case values into ``{value, n}`` summaries, overall and by group.

Means skip ``None`` (an empty denominator) and say how many cases they cover. Latencies are
summarised as p50/p95/p99 rather than means; cost also gets a total. A summary that left out
cases whose inputs were not recorded (``metrics.unrecorded``) says why in ``reason``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NotRequired, TypedDict

from groundjudge.contracts import GoldenCase
from groundjudge.metrics.case import CaseMetrics
from groundjudge.metrics.operations import percentile


class Summary(TypedDict):
    value: float | None
    n: int
    reason: NotRequired[str]  # why cases were left out: an input they read was not recorded


# metric -> reason -> how many cases it left out
UnknownCounts = dict[str, dict[str, int]]


PERCENTILES = (50, 95, 99)


Column = Sequence[float]


def summarize(rows: Iterable[Mapping[str, float | None]]) -> dict[str, Summary]:
    return summaries(columns_of(rows))


def columns_of(rows: Iterable[Mapping[str, float | None]]) -> dict[str, array]:
    """Metric -> its values that are not None, in row order; metrics in the order they first appear.
    Each column is an ``array('d')``: the rows (``metrics.row.MetricRow``) hold no float objects
    to point at, and a nightly run's columns would otherwise make millions of them."""
    columns: dict[str, array] = {}
    for row in rows:
        for name, value in row.items():
            column = columns.get(name)
            if column is None:
                column = columns[name] = array("d")
            if value is not None:
                column.append(value)
    return columns


def pooled(parts: Iterable[Mapping[str, Column]]) -> dict[str, array]:
    """The columns of several row sets one after the other: ``columns_of`` of all their rows,
    without reading the rows again (a nightly run has hundreds of thousands)."""
    out: dict[str, array] = {}
    for columns in parts:
        for name, values in columns.items():
            if name in out:
                out[name].extend(values)
            else:
                out[name] = array("d", values)
    return out


def summaries(columns: Mapping[str, Column]) -> dict[str, Summary]:
    out: dict[str, Summary] = {}
    for name, values in columns.items():
        _check_finite(name, values)
        if name.startswith("latency_ms."):
            for q in PERCENTILES:
                out[f"{name}.p{q}"] = {"value": percentile(values, q), "n": len(values)}
            continue
        out[name] = {"value": sum(values) / len(values) if values else None, "n": len(values)}
        if name == "cost_usd":
            out["cost_usd.total"] = {"value": sum(values) if values else None, "n": len(values)}
    return out


def unknown_counts(results: Iterable[CaseMetrics]) -> UnknownCounts:
    """Per metric, the cases left out because an input it reads was not recorded, by reason."""
    counts: UnknownCounts = {}
    for r in results:
        if r.unknown:
            _count(counts, r.unknown)
    return counts


def _count(counts: UnknownCounts, unknown: Mapping[str, str]) -> None:
    for metric, reason in unknown.items():
        per_reason = counts.setdefault(metric, {})
        per_reason[reason] = per_reason.get(reason, 0) + 1


def merged_counts(parts: Iterable[UnknownCounts]) -> UnknownCounts:
    out: UnknownCounts = {}
    for counts in parts:
        for metric, reasons in counts.items():
            mine = out.setdefault(metric, {})
            for reason, n in reasons.items():
                mine[reason] = mine.get(reason, 0) + n
    return out


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


def _check_finite(name: str, values: Column) -> None:
    """A NaN or an infinity would make a mean (and orjson's null) of a column whose n still
    counts it. Inputs are checked when they are read, so this never happens unless a metric
    computes one: say so rather than write a summary that hides it."""
    if values and not math.isfinite(sum(values)):
        raise ValueError(f"metric {name!r}: a value that is not a finite number reached the summary "
                         "(inputs are checked when read, so a metric computed it: a bug)")


def breakdowns(results: Sequence[CaseMetrics], cases: dict[str, GoldenCase]) -> dict[str, dict[str, dict[str, Summary]]]:
    """Summaries by tag, difficulty and content type (a case counts in each group it belongs to).

    One pass over the rows fills every group's columns: each row's mapping is read once, not
    once per kind of group."""
    kinds: dict[str, Callable[[CaseMetrics], Iterable[str]]] = {
        "tag": lambda r: cases[r.case_id].tags or ["(untagged)"],
        "difficulty": lambda r: [cases[r.case_id].difficulty or "(unset)"],
        "content_type": lambda r: r.content_types or ["(unknown)"],
    }
    groups: dict[str, dict[str, dict[str, array]]] = {kind: {} for kind in kinds}
    unknown: dict[tuple[str, str], UnknownCounts] = {}
    sizes: dict[tuple[str, str], int] = {}
    for r in results:
        places = [(kind, key) for kind, keys in kinds.items() for key in keys(r)]
        targets = [groups[kind].setdefault(key, {}) for kind, key in places]
        for name, value in r.values.items():
            for columns in targets:
                column = columns.get(name)
                if column is None:
                    column = columns[name] = array("d")
                if value is not None:
                    column.append(value)
        for place in places:
            sizes[place] = sizes.get(place, 0) + 1
            if r.unknown:
                _count(unknown.setdefault(place, {}), r.unknown)
    return {kind: {key: with_reasons(summaries(columns), unknown.get((kind, key), {}), sizes[kind, key])
                   for key, columns in sorted(found.items())} for kind, found in groups.items()}
