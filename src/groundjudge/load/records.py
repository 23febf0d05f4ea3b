"""Read JSONL and YAML files into validated contract records, keeping line numbers.

Every problem becomes an :class:`InputProblem` naming file, line and field; all problems of a
file are collected (up to a cap) so one run shows the user everything to fix.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import msgspec
import yaml
from pydantic import TypeAdapter, ValidationError

from groundjudge.errors import InputError, InputProblem
from groundjudge.files import jsonl_lines
from groundjudge.load.json_stream import LocatedValue, ValueProblem, layout, located_values, split_path
from groundjudge.load.plain import plain_records
from groundjudge.strict_json import NON_FINITE, TOO_DEEP, JSONProblem, non_finite_fields
from groundjudge.strict_json import loads as strict_loads


class Record(Protocol):
    """A contract record: a pydantic model, or a struct validated as one (a trace)."""

    @classmethod
    def model_validate(cls, obj: Any) -> Self: ...


M = TypeVar("M", bound=Record)

MAX_PROBLEMS = 50


def read_text(path: Path) -> str:
    """Return the file's text as UTF-8 (a BOM is accepted) or raise an InputError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError.one(path, None, None, "file not found") from None
    except IsADirectoryError:
        raise InputError.one(path, None, None, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputError.one(path, None, None, f"cannot read file: {exc.strerror}") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError.one(path, 1, None, "file is UTF-16 encoded; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError.one(
            path, line, None, f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None
    if not text or text.isspace():  # (``strip`` would copy the whole text)
        raise InputError.one(path, None, None, "file is empty")
    return text


def read_head(path: Path, size: int = 1 << 20) -> str | None:
    """The text of the file's first ``size`` bytes, when the file is longer than that and they
    read as UTF-8 (a character cut at their end left out); else None, and the caller reads the
    whole file with :func:`read_text`, which names any problem. What it finds in the head is
    what it would find at the start of the whole text."""
    try:
        with path.open("rb") as handle:
            head = handle.read(size + 1)
    except OSError:
        return None
    if len(head) <= size or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    try:
        return codecs.getincrementaldecoder("utf-8-sig")().decode(head[:size], final=False)
    except UnicodeDecodeError:
        return None


def json_document(path: Path, text: str | None = None) -> Any:
    """The JSON document in ``path`` (a report.json, say; ``text``: its text, when read
    already), or an InputError naming the line: invalid JSON, NaN or Infinity, nesting too deep."""
    try:
        return strict_loads(read_text(path) if text is None else text)
    except JSONProblem as exc:
        where = f"{exc.message} (column {exc.column})" if exc.column else exc.message
        raise InputError.one(path, exc.line, None, where) from None


def _field_name(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "(record)"


def validation_problems(path: Path, line: int, error: ValidationError,
                        line_of: Callable[[tuple[int | str, ...]], int] | None = None) -> list[InputProblem]:
    """A problem per validation error; ``line_of(field)`` names each field's own line, for a
    record that spans several lines (else every problem is on ``line``)."""
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p not in ("function-before", "function-after"))
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "tuple_type":  # a record's sequences are tuples; in the file, a list
            msg = "Input should be a valid list"
        problems.append(InputProblem(str(path), line if line_of is None else line_of(loc), _field_name(loc), msg))
    return problems


def _jsonl_objects(path: Path, text: str) -> Iterator[tuple[int, object | InputProblem]]:
    for lineno, raw in enumerate(jsonl_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            yield lineno, json.loads(raw)  # NaN and Infinity are read, then reported by field
        except json.JSONDecodeError as exc:
            yield lineno, InputProblem(str(path), lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})")
        except RecursionError:
            yield lineno, InputProblem(str(path), lineno, None, TOO_DEEP)


def _yaml_objects(path: Path, text: str) -> Iterator[tuple[int, object | InputProblem]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        yield line or 0, InputProblem(str(path), line, None, f"invalid YAML: {getattr(exc, 'problem', exc)}")
        return
    except RecursionError:
        yield 0, InputProblem(str(path), None, None, TOO_DEEP)
        return
    if isinstance(root, yaml.MappingNode):
        # Accept a top-level mapping with a single list under `cases`.
        for key, value in root.value:
            if key.value == "cases":
                root = value
                break
    if not isinstance(root, yaml.SequenceNode):
        yield 1, InputProblem(str(path), 1, None, "expected a list of cases (or a mapping with `cases:`)")
        return
    for node in root.value:
        line = node.start_mark.line + 1
        try:
            yield line, yaml.safe_load(yaml.serialize(node))
        except yaml.YAMLError as exc:
            yield line, InputProblem(str(path), line, None, f"invalid YAML: {exc}")
        except RecursionError:
            yield line, InputProblem(str(path), line, None, TOO_DEEP)


BATCH_BYTES = 1 << 17  # bytes of lines validated together: one call per batch, not per line
# Reads one JSON value and nothing after it, without making it: each line of a batch must be one
# whole value before the batch's lines are read as one array, or a line that ends inside a value
# and a line of two values could pass together as the right number of records.
_ONE_VALUE = msgspec.json.Decoder(msgspec.Raw)


@cache
def _list_of(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _batch_records(model: type[M], lines: bytes) -> list[M] | None:
    """The records of ``lines`` (a JSON array): by msgspec when every one is of the contract's
    plain shape (:mod:`groundjudge.load.plain`), else by pydantic-core against the contract's
    own schema; None when a record is bad, or a number is NaN or Infinity (pydantic reads them
    as floats: the careful path names the field)."""
    made = plain_records(model, lines)  # (msgspec refuses NaN and Infinity itself)
    if made is not None:
        return made
    if b"NaN" in lines or b"Infinity" in lines:
        return None
    try:
        return _list_of(model).validate_json(lines)
    except ValidationError:
        return None


_READ_BYTES = 1 << 22  # bytes read from a file at a time by ``_line_batches``


def _line_batches(path: Path) -> Iterator[bytes]:
    """The file's bytes (a UTF-8 BOM left out) in batches of whole lines, each about
    ``BATCH_BYTES`` long and without its last line feed (the batches of reading the whole file
    and cutting it at the first line feed ``BATCH_BYTES`` past each batch's start); the last one
    ends where the file ends. It is read a few megabytes at a time: a nightly trace file never
    sits in memory whole."""
    with path.open("rb") as f:
        rest = f.read(max(_READ_BYTES, 3))
        if rest.startswith(b"\xef\xbb\xbf"):
            rest = rest[3:] or f.read(_READ_BYTES)
        while rest:
            block = f.read(max(_READ_BYTES, len(rest)))  # a line longer than a block: read on, doubling
            data = rest + block if block else rest
            start = 0
            while (end := data.find(b"\n", start + BATCH_BYTES)) >= 0:
                yield data[start:end]
                start = end + 1
            rest = data[start:]
            if not block:
                if rest:
                    yield rest
                return


def _jsonl_fast(path: Path, model: type[M]) -> list[tuple[int, M]] | None:
    """Every line parsed and validated a batch of lines at a time (the lines of a batch made
    one JSON array, so the records come out in one call: :func:`_batch_records`); None at the
    first batch with a bad line, so that the careful path below reads the file again and names
    every problem the same way as always.

    It reads the file's bytes: msgspec and pydantic-core parse UTF-8 themselves (invalid UTF-8
    fails the batch), so the text is never decoded to Python and encoded again. A ``\n`` byte
    is a line break and nothing else in UTF-8, so the lines and their numbers are those of
    ``jsonl_lines``; a trailing ``\r`` is JSON whitespace. A batch is about ``BATCH_BYTES`` of
    whole lines; each of its non-blank lines is first read as one JSON value on its own
    (msgspec checks it and makes nothing), so every record comes from one line. A line that is
    blank only by Unicode's reckoning (not ASCII's) fails the batch: the careful path skips it,
    as always."""
    records: list[tuple[int, M]] = []
    line = 1
    try:
        for piece in _line_batches(path):
            lines = piece.split(b"\n")
            numbered = [(number, raw) for number, raw in enumerate(lines, line) if raw.strip()]
            try:
                for _, raw in numbered:
                    _ONE_VALUE.decode(raw)
            except (msgspec.DecodeError, RecursionError):  # (msgspec recurses into nested values)
                return None  # not one JSON value on a line, or one nested too deep: the careful path names it
            made = _batch_records(model, b"[" + b",".join(raw for _, raw in numbered) + b"]") if numbered else []
            if made is None or len(made) != len(numbered):
                return None
            records.extend(zip((number for number, _ in numbered), made, strict=True))
            line += len(lines)
    except OSError:
        return None  # the careful path names the problem
    return records or None


def _multiline_objects(path: Path, text: str) -> Iterator[tuple[int, object | InputProblem, LocatedValue | None]]:
    for item in located_values(text):
        if isinstance(item, ValueProblem):
            yield item.line, InputProblem(str(path), item.line, None, item.message), None
        else:
            yield item.line, item.value, item


def read_records(path: str | Path, model: type[M], *, multiline: bool = False) -> list[tuple[int, M]]:
    """Read ``path`` (JSONL, or YAML when it ends in .yaml/.yml) as records of ``model``.

    Returns ``(line, record)`` pairs. Raises :class:`InputError` listing every bad line.
    With ``multiline``, a JSON array of records or records spread over several lines each are
    read too (:mod:`groundjudge.load.json_stream`); a record's line is the one it starts on,
    and a problem names the line of its field.
    """
    path = Path(path)
    is_yaml = path.suffix.lower() in {".yaml", ".yml"}
    if not is_yaml:
        fast = _jsonl_fast(path, model)
        if fast is not None:
            return fast
    text = read_text(path)
    if multiline and not is_yaml and layout(text) != "jsonl":
        return _checked_records(path, _multiline_objects(path, text), model)
    objects = _yaml_objects(path, text) if is_yaml else _jsonl_objects(path, text)
    return _checked_records(path, ((line, obj, None) for line, obj in objects), model)


def _checked_records(path: Path, objects: Iterable[tuple[int, object | InputProblem, LocatedValue | None]],
                     model: type[M]) -> list[tuple[int, M]]:
    records: list[tuple[int, M]] = []
    problems: list[InputProblem] = []
    for lineno, obj, located in objects:
        if isinstance(obj, InputProblem):
            problems.append(obj)
        elif not isinstance(obj, dict):
            problems.append(InputProblem(str(path), lineno, None, f"expected a JSON object, got {type(obj).__name__}"))
        elif bad := non_finite_fields(obj):
            problems.extend(InputProblem(str(path), located.line_of(split_path(name)) if located else lineno, name,
                                         NON_FINITE) for name in bad)
        else:
            try:
                record = model.model_validate(obj)
            except ValidationError as exc:
                problems.extend(validation_problems(path, lineno, exc, located.line_of if located else None))
            else:
                records.append((lineno, record))
        if len(problems) >= MAX_PROBLEMS:
            problems.append(InputProblem(str(path), None, None, f"stopped after {MAX_PROBLEMS} problems"))
            break
    if problems:
        raise InputError(problems)
    if not records:
        raise InputError.one(path, None, None, "file has no records")
    return records


def index_unique(path: str | Path, records: list[tuple[int, M]], key: Callable[[M], str], field: str,
                 what: str) -> tuple[dict[str, M], dict[str, int], list[InputProblem]]:
    """Records by id, each id's line, and a problem for every repeated id (the first one wins)."""
    ids = list(map(key, map(itemgetter(1), records)))
    by_id: dict[str, M] = dict(zip(ids, map(itemgetter(1), records), strict=True))
    if len(by_id) == len(records):  # no id repeated: the maps as they are
        return by_id, dict(zip(ids, map(itemgetter(0), records), strict=True)), []
    by_id = {}
    lines: dict[str, int] = {}
    problems: list[InputProblem] = []
    for line, record in records:
        rid = key(record)
        if rid in by_id:
            problems.append(InputProblem(str(path), line, field,
                                         f"duplicate {what} {rid!r} (first on line {lines[rid]})"))
            continue
        by_id[rid] = record
        lines[rid] = line
    return by_id, lines, problems


def convert_records(path: str | Path, items: Mapping[str, Any], lines: Mapping[str, int],
                    convert: Callable[[Any], dict[str, Any]], model: type[M]) -> tuple[dict[str, M], list[InputProblem]]:
    """Validate each converted item as ``model``; a failure names the item's own file and line."""
    out: dict[str, M] = {}
    problems: list[InputProblem] = []
    for rid, item in items.items():
        try:
            out[rid] = model.model_validate(convert(item))
        except ValidationError as exc:
            problems.extend(validation_problems(Path(path), lines[rid], exc))
    return out, problems
