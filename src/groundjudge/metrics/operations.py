"""Operations: latency, tokens and cost per query, and the percentile used to summarise latency."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from groundjudge.contracts import Trace


@lru_cache(maxsize=1024)
def _name(group: str, part: str) -> str:
    # one key string per stage or token kind for the whole run, shared by every case's mapping
    return f"{group}.{part}"


def operation_values(trace: Trace) -> dict[str, float | None]:
    values: dict[str, float | None] = {_name("latency_ms", stage): float(v) for stage, v in trace.latency_ms.items()}
    values.update({_name("tokens", kind): float(v) for kind, v in trace.tokens.items()})
    if trace.tokens and "total" not in trace.tokens:
        values["tokens.total"] = float(sum(trace.tokens.values()))
    values["cost_usd"] = trace.cost_usd
    return values


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default method); None for no values."""
    return sorted_percentile(sorted(values), q)


def sorted_percentile(ordered: Sequence[float], q: float) -> float | None:
    """:func:`percentile` of values sorted already."""
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
