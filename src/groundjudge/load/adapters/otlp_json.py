"""OTLP JSON as OpenTelemetry writes it to files: read line by line into compact spans.

The OpenTelemetry Collector's file exporter (and the SDK's OTLP JSON file exporter) writes one
``TracesData`` object per line::

    {"resourceSpans": [{"resource": {"attributes": [...]},
                        "scopeSpans": [{"scope": {...}, "spans": [{"traceId": "5b8e...",
                            "spanId": "eee1...", "parentSpanId": "", "name": "...",
                            "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": "...",
                            "attributes": [{"key": "input.value", "value": {"stringValue": "..."}}],
                            "status": {"code": 2, "message": "..."}}]}]}]}

Ids are hex strings (the OTLP JSON encoding, not protobuf's base64); 64-bit integers may be
strings or numbers; an attribute value is one of ``stringValue``, ``boolValue``, ``intValue``,
``doubleValue``, ``arrayValue``, ``kvlistValue``, ``bytesValue`` (``{}`` is no value).

An export of a night's traffic holds hundreds of thousands of traces, and a trace's spans may
be spread over several lines (each line is one export batch). Lines are parsed one at a time,
and of each span only what grading reads is kept (:class:`Span`, with the attributes a caller
asks for by prefix), so memory follows the kept text, not the JSON.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from sys import intern as _intern
from typing import Any

import orjson

from groundjudge.errors import InputError, InputProblem

__all__ = ["Span", "any_value", "read_spans"]

_HEX_TRACE = re.compile(r"[0-9a-fA-F]{32}")
_HEX_SPAN = re.compile(r"[0-9a-fA-F]{16}")
_MAX_PROBLEMS = 50  # a wholly broken file says enough in its first fifty problems


@dataclass(frozen=True, slots=True)
class Span:
    """One span, reduced to what grading reads. ``attributes`` holds only the keys the reader
    was asked to keep; ``resource`` the kept resource attributes; ``line`` where it was read."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    file: str
    line: int


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def any_value(value: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` as a Python value (None for ``{}``); :class:`_Bad` names ``where``."""
    if type(value) is dict and len(value) == 1:  # the common case first: one string
        text = value.get("stringValue")
        if type(text) is str:
            return text
    if not isinstance(value, dict):
        raise _Bad(where, f"expected an AnyValue object, got {type(value).__name__}")
    if not value:
        return None
    if len(value) != 1:
        raise _Bad(where, f"an AnyValue holds one of stringValue, intValue...; got {', '.join(sorted(value))}")
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "intValue":
        return _int(inner, f"{where}.intValue")
    if kind == "doubleValue" and isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return float(inner)
    if kind == "doubleValue" and inner in ("NaN", "Infinity", "-Infinity"):
        return float(inner)
    if kind == "arrayValue" and isinstance(inner, dict):
        values = inner.get("values", [])
        if not isinstance(values, list):
            raise _Bad(f"{where}.arrayValue.values", "expected a list")
        return [any_value(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    if kind == "kvlistValue" and isinstance(inner, dict):
        return _key_values(inner.get("values", []), f"{where}.kvlistValue.values")
    if kind == "bytesValue" and isinstance(inner, str):
        try:
            return base64.b64decode(inner, validate=True)
        except ValueError:
            raise _Bad(f"{where}.bytesValue", "not base64") from None
    if kind not in ("stringValue", "boolValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"):
        raise _Bad(where, f"unknown AnyValue kind {kind!r}")
    raise _Bad(f"{where}.{kind}", f"a {kind} cannot be {type(inner).__name__}")


def _int(value: Any, where: str) -> int:
    # 64-bit integers are decimal strings in OTLP JSON (JavaScript numbers lose precision), but
    # writers also send plain numbers: both are read.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise _Bad(where, f"expected an integer (a number or a decimal string), got {value!r}")


def _key_values(items: Any, where: str, keep: Callable[[str], bool] | None = None,
                shared: dict[str, str] | None = None, share: Callable[[str], bool] | None = None) -> dict[str, Any]:
    if not isinstance(items, list):
        raise _Bad(where, f"expected a list of key/value objects, got {type(items).__name__}")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        key = item.get("key") if type(item) is dict else None
        if type(key) is not str:
            raise _Bad(f"{where}[{i}].key", "each attribute needs a string key")
        if keep is not None and not keep(key):
            continue
        # the same few dozen names on every span: one string each, not one per span
        key = _intern(key)
        value = item.get("value", _EMPTY)
        text = value.get("stringValue") if type(value) is dict and len(value) == 1 else None
        # a string (most attributes) is taken as it is; anything else is decoded and checked
        if type(text) is str:
            out[key] = shared.setdefault(text, text) if shared is not None and share is not None and share(key) \
                else text
        else:
            out[key] = any_value(value, f"{where}[{i}].value")
    return out


_EMPTY: dict[str, Any] = {}


def _id(span: dict[str, Any], name: str, pattern: re.Pattern[str], where: str, optional: bool = False) -> str | None:
    value = span.get(name)
    if optional and value in (None, ""):
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        size = 32 if pattern is _HEX_TRACE else 16
        raise _Bad(f"{where}.{name}", f"expected {size} hex digits (OTLP JSON writes ids as hex), got {value!r}")
    if value.strip("0") == "":
        raise _Bad(f"{where}.{name}", "an all-zero id is not a valid id")
    return value.lower()


def _spans_of_line(data: Any, file: str, line: int, keep: Callable[[str], bool],
                   keep_resource: Callable[[str], bool], shared: dict[str, str],
                   share: Callable[[str], bool] | None) -> Iterator[Span]:
    if not isinstance(data, dict) or not isinstance(data.get("resourceSpans"), list):
        raise _Bad("resourceSpans", "expected an object with a resourceSpans list (OTLP JSON traces, one per line)")
    for r, resource_spans in enumerate(data["resourceSpans"]):
        where_r = f"resourceSpans[{r}]"
        if not isinstance(resource_spans, dict):
            raise _Bad(where_r, "expected an object")
        resource = resource_spans.get("resource") or {}
        if not isinstance(resource, dict):
            raise _Bad(f"{where_r}.resource", "expected an object")
        resource_attrs = _key_values(resource.get("attributes", []), f"{where_r}.resource.attributes", keep_resource)
        # ``instrumentationLibrarySpans`` is the name before OTLP 1.0; some old exports still use it
        scopes_key = "scopeSpans" if "scopeSpans" in resource_spans or "instrumentationLibrarySpans" not in \
            resource_spans else "instrumentationLibrarySpans"
        scopes = resource_spans.get(scopes_key, [])
        if not isinstance(scopes, list):
            raise _Bad(f"{where_r}.{scopes_key}", "expected a list")
        for s, scope in enumerate(scopes):
            where_s = f"{where_r}.{scopes_key}[{s}]"
            spans = scope.get("spans", []) if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                raise _Bad(f"{where_s}.spans", "expected a list")
            for i, span in enumerate(spans):
                where = f"{where_s}.spans[{i}]"
                if not isinstance(span, dict):
                    raise _Bad(where, "expected a span object")
                trace_id = _id(span, "traceId", _HEX_TRACE, where)
                span_id = _id(span, "spanId", _HEX_SPAN, where)
                parent = _id(span, "parentSpanId", _HEX_SPAN, where, optional=True)
                status = span.get("status") or {}
                if not isinstance(status, dict):
                    raise _Bad(f"{where}.status", "expected an object")
                code = status.get("code", 0)
                if code in ("STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"):
                    code = ("STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR").index(code)
                code = _int(code, f"{where}.status.code")
                name = span.get("name", "")
                if not isinstance(name, str):
                    raise _Bad(f"{where}.name", "expected a string")
                message = status.get("message")
                yield Span(
                    trace_id=trace_id,  # type: ignore[arg-type]  # never None: not optional
                    span_id=span_id,  # type: ignore[arg-type]
                    parent_id=parent, name=name,
                    start_ns=_int(span.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano"),
                    end_ns=_int(span.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano"),
                    status_code=code, status_message=message if isinstance(message, str) and message else None,
                    attributes=_key_values(span.get("attributes", []), f"{where}.attributes", keep, shared, share),
                    resource=resource_attrs, file=file, line=line)


def read_spans(path: Path, keep: Callable[[str], bool], keep_resource: Callable[[str], bool], *,
               share: Callable[[str], bool] | None = None, shared: dict[str, str] | None = None) -> Iterator[Span]:
    """Every span of the OTLP JSON Lines file ``path``, line by line, with the attributes
    ``keep`` accepts and the resource attributes ``keep_resource`` accepts.

    A string value of an attribute ``share`` accepts that equals one read before is that one
    string (``shared`` holds them; pass the same dict for several files): a document's text
    recurs in every trace that retrieved it, and a night's export holds it thousands of times.

    Raises :class:`InputError` once the file is read, naming file, line and field for every
    line that is not OTLP JSON traces (up to fifty of them); spans of good lines were yielded
    before that, so a caller builds nothing it keeps until the iteration ends.
    """
    problems: list[InputProblem] = []
    shared = {} if shared is None else shared
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError.one(path, None, None, "file not found") from None
    except IsADirectoryError:
        raise InputError.one(path, None, None, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputError.one(path, None, None, f"cannot read file: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                problems.append(InputProblem(str(path), number, None, f"not JSON: {exc}"))
            else:
                try:
                    yield from _spans_of_line(data, str(path), number, keep, keep_resource, shared, share)
                except _Bad as bad:
                    problems.append(InputProblem(str(path), number, bad.field, bad.problem))
            if len(problems) >= _MAX_PROBLEMS:
                problems.append(InputProblem(str(path), None, None, f"stopped reading after {_MAX_PROBLEMS} bad lines"))
                break
    if problems:
        raise InputError(problems)


def to_any_value(value: Any) -> dict[str, Any]:
    """``value`` as OTLP JSON's AnyValue, for what groundjudge writes (spans read from Phoenix,
    evaluation events): 64-bit integers as strings, as OTLP JSON writes them; a nested mapping
    as its JSON text, the way OpenInference flattens attribute objects; None as an empty string."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [to_any_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"stringValue": orjson.dumps(value).decode()}
    return {"stringValue": "" if value is None else str(value)}
