"""What every adapter needs to read a foreign format: records that keep unknown fields, nulls
read as the field's default, gold files with one line per id, unknown fields carried into the
native record, native traces validated with the foreign file's line in every problem, and a
config id per trace file.

An adapter for a new system builds on these and stays a mapping of fields (see
:mod:`groundjudge.load.adapters.registry` for how it is registered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.records import index_unique, read_records, validation_problems

__all__ = [
    "ForeignRecord",
    "NativeData",
    "NativeTraces",
    "config_ids_for",
    "merge_extras",
    "native_trace",
    "null_as_default",
    "read_unique",
]

R = TypeVar("R", bound=BaseModel)

# config id -> case id -> paraphrase index -> trace (what adapters give; ``by_paraphrase`` splits it as a Dataset holds it)
NativeTraces = dict[str, dict[str, dict[int, Trace]]]
# what an adapter's ``to_native`` returns: cases by id, and their traces
NativeData = tuple[dict[str, GoldenCase], NativeTraces]


class ForeignRecord(BaseModel):
    """One line of a foreign file as its system writes it: frozen, and fields this model does
    not name are kept (``model_extra``) so they can travel into the native record."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True, allow_inf_nan=False)


def null_as_default(*fields: str) -> Any:
    """A before-validator for ``fields`` of a record: ``null`` in the file means the field's
    default (an empty list, an empty mapping, ``"unknown"``...), as the systems we read treat it.

    Use it as a class attribute: ``_nulls = null_as_default("tags", "relevance")``.
    """

    def replace_null(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
        if value is not None or info.field_name is None:
            return value
        return cls.model_fields[info.field_name].get_default(call_default_factory=True)

    return field_validator(*fields, mode="before")(replace_null)


def read_unique(path: str | Path, model: type[R], field: str, what: str,
                check: Callable[[R, int], Iterable[InputProblem]] | None = None) -> tuple[dict[str, R], dict[str, int]]:
    """Read ``path`` as records of ``model`` that must each have their own ``field`` value.

    Returns the records by that value (file order) and the line of each. Raises
    :class:`InputError` naming file, line and field for every bad line, for every repeated
    value (``duplicate {what} 'x' (first on line N)``) and for every problem ``check(record,
    line)`` finds in a kept record, all in one error.
    """
    by_id, lines, problems = index_unique(path, read_records(path, model), lambda r: getattr(r, field), field, what)
    if check is not None:
        for rid, record in by_id.items():
            problems.extend(check(record, lines[rid]))
    if problems:
        raise InputError(problems)
    return by_id, lines


def native_trace(data: dict[str, Any], path: str | Path, line: int, problems: list[InputProblem]) -> Trace | None:
    """``data`` (a converted foreign line) as a native :class:`Trace`; when it does not validate,
    its problems, named by the foreign file and line, go to ``problems`` and None is returned."""
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        problems.extend(validation_problems(Path(path), line, exc))
        return None


def merge_extras(mapped: dict[str, Any], extras: dict[str, Any] | None, prefix: str) -> dict[str, Any]:
    """``mapped`` (the fields an adapter sets) plus the record's unknown fields.

    An unknown field that collides with a mapped one is kept under ``prefix + name`` rather than
    overwriting it or being dropped, so nothing from the file disappears.
    """
    data = dict(mapped)
    for key, value in (extras or {}).items():
        data[f"{prefix}{key}" if key in mapped else key] = value
    return data


def config_ids_for(paths: Sequence[str | Path]) -> list[str]:
    """A config id per trace file: its stem, qualified by its folder when two stems collide."""
    stems = [Path(p).stem for p in paths]
    ids: list[str] = []
    for path, stem in zip(paths, stems):
        name = stem if stems.count(stem) == 1 else f"{Path(path).parent.name}/{stem}"
        while name in ids:
            name += "'"
        ids.append(name)
    return ids
