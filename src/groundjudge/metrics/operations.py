"""Operations: latency, tokens and cost per query, and the percentile used to summarise latency."""

from __future__ import annotations

import math
from collections.abc import Sequence

from groundjudge.contracts import Trace


def operation_values(trace: Trace) -> dict[str, float | None]:
    values: dict[str, float | None] = {f"latency_ms.{stage}": float(v) for stage, v in trace.latency_ms.items()}
    values.update({f"tokens.{kind}": float(v) for kind, v in trace.tokens.items()})
    if trace.tokens and "total" not in trace.tokens:
        values["tokens.total"] = float(sum(trace.tokens.values()))
    values["cost_usd"] = trace.cost_usd
    return values


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default method); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
