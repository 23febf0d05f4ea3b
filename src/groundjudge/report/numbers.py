"""One way to print a number in every report: None is a dash (never 0, never "nan")."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groundjudge.report.document_view import ValueView

MISSING = "–"


def number(value: float | None, digits: int | None = None, *, missing: str = MISSING) -> str:
    """``value`` with ``digits`` decimals; by default 4 below 10 and 1 above (counts, latencies)."""
    if value is None:
        return missing
    if digits is None:
        digits = 4 if abs(value) < 10 else 1
    return f"{value:.{digits}f}"


def summary(value: ValueView | None, digits: int | None = None) -> str:
    """A mean with its denominator: the value and n; ``null (n=0)`` when undefined, a dash when
    there is no such metric."""
    if value is None:
        return MISSING
    if value.value is None:
        return f"null (n={value.n})"
    return f"{number(value.value, digits)} (n={value.n})"
