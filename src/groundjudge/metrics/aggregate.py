"""Aggregate per-case values into ``{value, n}`` summaries, overall and by group.

Means skip ``None`` (an empty denominator) and say how many cases they cover. Latencies are
summarised as p50/p95/p99 rather than means; cost also gets a total.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypedDict

from groundjudge.contracts import GoldenCase
from groundjudge.metrics.case import CaseMetrics
from groundjudge.metrics.operations import percentile


class Summary(TypedDict):
    value: float | None
    n: int


PERCENTILES = (50, 95, 99)


def summarize(rows: Iterable[dict[str, float | None]]) -> dict[str, Summary]:
    columns: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            column = columns.setdefault(name, [])
            if value is not None:
                column.append(value)
    out: dict[str, Summary] = {}
    for name, values in columns.items():
        if name.startswith("latency_ms."):
            for q in PERCENTILES:
                out[f"{name}.p{q}"] = {"value": percentile(values, q), "n": len(values)}
            continue
        out[name] = {"value": sum(values) / len(values) if values else None, "n": len(values)}
        if name == "cost_usd":
            out["cost_usd.total"] = {"value": sum(values) if values else None, "n": len(values)}
    return out


def _grouped(
    results: Sequence[CaseMetrics], keys: Callable[[CaseMetrics], Iterable[str]]
) -> dict[str, dict[str, Summary]]:
    groups: dict[str, list[dict[str, float | None]]] = {}
    for r in results:
        for key in keys(r):
            groups.setdefault(key, []).append(r.values)
    return {key: summarize(rows) for key, rows in sorted(groups.items())}


def breakdowns(results: Sequence[CaseMetrics], cases: dict[str, GoldenCase]) -> dict[str, dict[str, dict[str, Summary]]]:
    """Summaries by tag, difficulty and content type (a case counts in each group it belongs to)."""
    return {
        "tag": _grouped(results, lambda r: cases[r.case_id].tags or ["(untagged)"]),
        "difficulty": _grouped(results, lambda r: [cases[r.case_id].difficulty or "(unset)"]),
        "content_type": _grouped(results, lambda r: r.content_types or ["(unknown)"]),
    }
