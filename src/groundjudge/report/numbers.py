"""One way to print a number in every report: None is a dash (never 0, never "nan")."""

from __future__ import annotations

from typing import Any

MISSING = "–"


def number(value: float | None, digits: int | None = None, *, missing: str = MISSING) -> str:
    """``value`` with ``digits`` decimals; by default 4 below 10 and 1 above (counts, latencies)."""
    if value is None:
        return missing
    if digits is None:
        digits = 4 if abs(value) < 10 else 1
    return f"{value:.{digits}f}"


def summary(value: dict[str, Any] | None, digits: int | None = None) -> str:
    """A ``{value, n}`` mean: the value and its denominator; ``null (n=0)`` when undefined."""
    if not value:
        return MISSING
    if value["value"] is None:
        return f"null (n={value['n']})"
    return f"{number(value['value'], digits)} (n={value['n']})"
