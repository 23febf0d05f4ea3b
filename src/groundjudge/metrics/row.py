"""One case's metric values, held compactly: a read-only mapping over an array of floats.

A nightly run holds a row of about sixty values for each of hundreds of thousands of (case,
config) pairs. As a dict each row paid for its own table and a float object per value; as a
:class:`MetricRow` it pays for neither: the names live once, in a layout shared by every
row with the same names in the same order, and the values are one ``array('d')``. A value that
does not apply (``None``) is stored as NaN with its bit set in ``_none``, so a metric that
really computed NaN still reads back as NaN.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping
from typing import Any

_LAYOUTS: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, int]]] = {}


def _layout(names: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, int]]:
    """The shared names and name -> position map for rows with exactly these names, in order."""
    found = _LAYOUTS.get(names)
    if found is None:
        found = _LAYOUTS[names] = (names, {name: i for i, name in enumerate(names)})
    return found


class MetricRow(Mapping[str, "float | None"]):
    """metric name -> value (a float, or None where the metric does not apply), read-only.

    Equal to a dict with the same items (``row == {...}``); ``dict(row)`` copies it. An int or
    bool value is held as the float it equals, as the JSON documents write it.
    """

    __slots__ = ("_index", "_names", "_none", "_values", "failed_checks")

    def __init__(self, values: Mapping[str, float | None]) -> None:
        self._names, self._index = _layout(tuple(values))
        items = list(values.values())
        none = 0
        if None in items:
            for i, value in enumerate(items):
                if value is None:
                    none |= 1 << i
                    items[i] = math.nan
        self._values = array("d", items)
        self._none = none
        # metrics.failures keeps the row's failed checks here once found: every report reads them
        self.failed_checks: tuple[str, ...] | None = None

    @classmethod
    def _from_parts(cls, names: tuple[str, ...], values: array, none: int) -> MetricRow:
        row = object.__new__(cls)
        row._names, row._index = _layout(names)
        row._values = values
        row._none = none
        row.failed_checks = None
        return row

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled with its names as one shared tuple: a worker's chunk of rows sends them once
        return MetricRow._from_parts, (self._names, self._values, self._none)

    def __getitem__(self, name: str) -> float | None:
        i = self._index[name]
        value = self._values[i]
        if value != value and self._none >> i & 1:  # noqa: PLR0124  NaN: None, or a NaN the metric computed
            return None
        return value

    def get(self, name: str, default: Any = None) -> Any:
        i = self._index.get(name)
        if i is None:
            return default
        value = self._values[i]
        return None if value != value and self._none >> i & 1 else value  # noqa: PLR0124  (NaN first)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def _decoded(self) -> list[float | None]:
        values = self._values.tolist()
        none = self._none
        while none:  # one step per None, lowest bit first
            low = none & -none
            values[low.bit_length() - 1] = None
            none ^= low
        return values

    def items(self) -> Any:  # a list of pairs: what every reader iterates, built in one pass
        return list(zip(self._names, self._decoded()))

    def values(self) -> Any:
        return self._decoded()

    def to_dict(self) -> dict[str, float | None]:
        return dict(zip(self._names, self._decoded()))

    json_value = to_dict  # as report.json and metrics.json write it (``files``)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by its items

    def __repr__(self) -> str:
        return f"MetricRow({self.to_dict()!r})"

