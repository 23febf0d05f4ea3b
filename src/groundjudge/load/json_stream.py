"""JSON records as people lay them out: one object per line (JSON Lines), a JSON array of
objects (a ``gold.json``), or objects written one after another over several lines each
(pretty-printed, as WFGY's chunking page shows its gold rows and traces).

Which layout a text has is read from its start: a first non-blank character ``[`` is an array;
a first non-blank line that is a JSON value on its own is JSON Lines (read line by line
elsewhere, so that every bad line is reported); anything else is a stream of values. Each value
keeps the line it starts on and can name the line of any field inside it, so a problem in a
pretty-printed record points at the field's own line.

A syntax error in an array or a stream ends the reading: where the next record starts cannot be
known after it. The problem names the line and column of the error and the line on which the
record it broke began.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Layout", "LocatedValue", "ValueProblem", "first_object", "layout", "located_values", "split_path"]

Layout = Literal["jsonl", "array", "stream"]

_SPACE = re.compile(r"[ \t\n\r]*")
# NaN and Infinity are read here (as Python's json does) and refused later by field, with the
# field's line; a syntax error is a problem at once.
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ValueProblem:
    """A place where the text stops being readable JSON: 1-based line (and column when known)."""

    line: int
    message: str


@dataclass(frozen=True)
class LocatedValue:
    """One top-level record: the value, the line it starts on, and where to find its fields."""

    line: int
    value: Any
    text: str
    start: int

    def line_of(self, loc: Sequence[str | int]) -> int:
        """The line of the field at ``loc`` (keys and list indexes, as pydantic names a field);
        as deep as the path can be followed, else the record's own line."""
        pos = self.start
        try:
            for key in loc:
                found = _member(self.text, _skip(self.text, pos), key)
                if found is None:
                    break
                pos = found
        except (ValueError, IndexError, RecursionError):
            pass  # the text is valid JSON here, but be safe: the record's line is still right
        return _line_at(self.text, pos)


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _member(text: str, pos: int, key: str | int) -> int | None:
    """Where the value of ``key`` (an object key or an array index) of the value at ``pos`` starts."""
    opener = text[pos]
    if opener not in "[{" or (opener == "[") != isinstance(key, int):
        return None
    closer = "]" if opener == "[" else "}"
    pos = _skip(text, pos + 1)
    index = 0
    while text[pos] != closer:
        if opener == "{":
            name, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, _skip(text, pos) + 1)  # past the colon
            if name == key:
                return pos
        elif index == key:
            return pos
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
        index += 1
    return None


def split_path(path: str) -> tuple[str | int, ...]:
    """``"topk[2].score"`` (a field as :func:`groundjudge.strict_json.non_finite_fields` names
    it) as ``("topk", 2, "score")``; good enough to find a line, which is all it is used for."""
    parts: list[str | int] = []
    for piece in path.split("."):
        name, *indexes = piece.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i.rstrip("]")) for i in indexes if i.rstrip("]").isdigit())
    return tuple(parts)


def layout(text: str) -> Layout:
    """How the records of ``text`` are laid out (see the module docstring)."""
    start = _skip(text, 0)
    if text.startswith("[", start):
        return "array"
    end = text.find("\n", start)
    first = text[start:] if end < 0 else text[start:end]
    try:
        json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        return "stream"
    return "jsonl"


def _decode(text: str, pos: int) -> tuple[Any, int] | ValueProblem:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        began = _line_at(text, pos)
        where = f"column {exc.colno}" if exc.lineno == began else f"column {exc.colno}, in the record from line {began}"
        return ValueProblem(exc.lineno, f"invalid JSON: {exc.msg} ({where}); nothing after it was read")
    except RecursionError:
        return ValueProblem(_line_at(text, pos), "nested too deeply to read (arrays and objects inside each other "
                                                  "beyond the reader's limit); nothing after it was read")


def located_values(text: str) -> Iterator[LocatedValue | ValueProblem]:
    """The top-level records of an array or a stream of values, in order; a problem ends them.

    For JSON Lines text (see :func:`layout`) this reads it as a stream, which gives the same
    records; the line-by-line reader reports bad lines better.
    """
    pos = _skip(text, 0)
    line, counted = 1, 0
    in_array = text.startswith("[", pos)
    if in_array:
        pos = _skip(text, pos + 1)
        if text.startswith("]", pos):
            pos = _skip(text, pos + 1)
            in_array = False
    while pos < len(text):
        decoded = _decode(text, pos)
        if isinstance(decoded, ValueProblem):
            yield decoded
            return
        value, end = decoded
        line += text.count("\n", counted, pos)  # counted up to here once: a long file stays linear
        counted = pos
        yield LocatedValue(line, value, text, pos)
        pos = _skip(text, end)
        if not in_array:
            continue
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif text.startswith("]", pos):
            pos = _skip(text, pos + 1)
            in_array = False
        else:
            what = "the file ends" if pos >= len(text) else f"found {text[pos]!r}"
            yield ValueProblem(_line_at(text, pos), f"invalid JSON: expected ',' or ']' after the array's record, "
                                                    f"{what}")
            return
        if not in_array and pos < len(text):
            yield ValueProblem(_line_at(text, pos), "invalid JSON: text after the array's closing ']'; give one "
                                                    "array, or one record per line")
            return
    if in_array:
        yield ValueProblem(_line_at(text, len(text.rstrip())),
                           "invalid JSON: the file ends inside the array (a ']' is missing)")


def first_object(text: str) -> dict[str, Any] | None:
    """The first record of ``text`` in whichever layout it has, if it is a JSON object; None
    when it is something else or cannot be read (the loader reports that with its line)."""
    if layout(text) == "jsonl":
        start = _skip(text, 0)
        end = text.find("\n", start)
        first: Any = json.loads(text[start:] if end < 0 else text[start:end])
    else:
        item = next(located_values(text), None)
        if not isinstance(item, LocatedValue):
            return None
        first = item.value
    return first if isinstance(first, dict) else None


def head_first_object(head: str) -> tuple[bool, dict[str, Any] | None]:
    """``(True, first_object(text))`` for a text that begins with ``head``, where ``head`` alone
    decides it: JSON Lines whose first record's line ends inside ``head``; else ``(False, None)``."""
    start = _skip(head, 0)
    if head.find("\n", start) < 0 or layout(head) != "jsonl":
        return False, None
    return True, first_object(head)

