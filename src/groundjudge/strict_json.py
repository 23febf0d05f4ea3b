"""JSON as groundjudge reads it from files it did not write itself (or may have been edited):
numbers are finite, and nesting is bounded.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which JSON does not have, and
a value nested a hundred thousand levels deep ends in a ``RecursionError``. Here the first is a
problem with its line and field, the second one clear problem, both as :class:`JSONProblem`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["NON_FINITE", "TOO_DEEP", "JSONProblem", "loads", "non_finite_fields"]

NON_FINITE = ("not a finite number (NaN, Infinity, or beyond the range of a double): write a number, or null for "
              "no value")
TOO_DEEP = "nested too deeply to read (arrays and objects inside each other beyond the reader's limit)"

# A NaN or Infinity where a value starts (after ``:``, ``,`` or ``[``), not inside a string.
_CONSTANT = re.compile(r'(?:^|[:,\[])\s*(-?Infinity|NaN)\b')


class JSONProblem(ValueError):
    """Text that is not JSON this tool accepts; ``line`` (1-based) and ``column`` when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _refuse(name: str) -> Any:
    raise _NonFinite(name)


class _NonFinite(ValueError):
    pass


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, but ``NaN``/``Infinity`` and runaway nesting are a
    :class:`JSONProblem` (as is any syntax error: ``message``, ``line``, ``column``)."""
    try:
        return json.loads(text, parse_constant=_refuse)
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except _NonFinite as exc:
        line, column = _constant_position(text if isinstance(text, str) else text.decode("utf-8", "replace"), str(exc))
        raise JSONProblem(f"{exc}: {NON_FINITE}", line, column) from None
    except RecursionError:
        raise JSONProblem(TOO_DEEP) from None


def _constant_position(text: str, name: str) -> tuple[int | None, int | None]:
    """Where the first ``NaN``/``Infinity`` outside a string probably is (a string holding one
    right after a comma could mislead it; the message names the constant either way)."""
    for match in _CONSTANT.finditer(text):
        if match.group(1) == name:
            start = match.start(1)
            line = text.count("\n", 0, start) + 1
            return line, start - (text.rfind("\n", 0, start) + 1) + 1
    return None, None


def non_finite_fields(value: Any) -> list[str]:
    """The paths (``latency_ms.end_to_end``, ``topk[2].score``) of every NaN or infinite float
    inside ``value``, a parsed JSON or YAML document; walked without recursion, so any depth
    the parser accepted is fine, and each container once (YAML aliases share one, and a chain
    of them would otherwise be walked an exponential number of times)."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    seen: set[int] = set()
    while stack:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                found.append(path or "(value)")
            continue
        if not isinstance(item, (dict, list)) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return found
