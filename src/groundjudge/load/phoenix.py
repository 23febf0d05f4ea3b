"""A Phoenix project's spans, read through Phoenix's own client and kept as an OTLP JSON file.

``groundjudge run --from-phoenix URL --project NAME [--since 24h]`` reads the project's spans
(``arize-phoenix-client``, the ``groundjudge[phoenix]`` extra) and writes them, as OTLP JSON
Lines, into the run's folder (``phoenix-spans.jsonl``): the run then grades that file in the
``otel`` format like any export, and the file records exactly what was graded. Phoenix returns
OpenInference spans with the span kind as a field of its own; it goes back into
``openinference.span.kind``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from groundjudge.errors import InputError
from groundjudge.load.adapters.otlp_json import to_any_value
from groundjudge.urls import redact_url

__all__ = ["EXTRA_MISSING", "fetch_spans", "parse_since", "phoenix_client", "to_otlp_lines"]

EXTRA_MISSING = ("--from-phoenix needs Phoenix's client, which is not installed: "
                 "pip install 'groundjudge[phoenix]'")
_SINCE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}
_BATCH = 512
_LIMIT = 10_000_000  # every span of the window: the client pages through them


def phoenix_client(url: str) -> Any:
    """Phoenix's client for ``url``; :class:`InputError` naming the extra when it is missing."""
    try:
        from phoenix.client import Client
    except ImportError:
        raise InputError.one("command line", None, "--from-phoenix", EXTRA_MISSING) from None
    return Client(base_url=url)


def parse_since(text: str) -> timedelta:
    """``24h``, ``30m``, ``7d``, ``90s``, ``2w`` as a duration; :class:`InputError` otherwise."""
    match = _SINCE.fullmatch(text.strip())
    if match is None:
        raise InputError.one("command line", None, "--since", f"expected a duration such as 24h, 30m or 7d, got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def _nanos(stamp: str) -> int:
    when = datetime.fromisoformat(stamp)  # Python 3.11 reads a trailing "Z" too
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1_000_000) * 1000


def _flat(attributes: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Phoenix may return attributes nested (``{"retrieval": {"documents": [...]}}``) or flat:
    both come back flat, lists of objects by index (``retrieval.documents.0.document.id``)."""
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flat(value, f"{name}.")
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                yield from _flat(item, f"{name}.{i}.")
        else:
            yield name, value


def to_otlp_span(span: Mapping[str, Any]) -> dict[str, Any]:
    attributes = dict(_flat(span.get("attributes") or {}))
    if span.get("span_kind") and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = span["span_kind"]
    status: dict[str, Any] = {"code": _STATUS.get(str(span.get("status_code", "UNSET")).upper(), 0)}
    if span.get("status_message"):
        status["message"] = span["status_message"]
    return {"traceId": span["context"]["trace_id"], "spanId": span["context"]["span_id"],
            "parentSpanId": span.get("parent_id") or "", "name": span.get("name", ""),
            "startTimeUnixNano": str(_nanos(span["start_time"])), "endTimeUnixNano": str(_nanos(span["end_time"])),
            "attributes": [{"key": k, "value": to_any_value(v)} for k, v in attributes.items()], "status": status}


def to_otlp_lines(spans: Iterable[Mapping[str, Any]], project: str) -> Iterable[bytes]:
    """Phoenix's spans as OTLP JSON Lines, 512 spans a line. Phoenix returns no resource
    attributes, so the project's name is the resource's ``openinference.project.name`` and its
    ``service.version``: the config the run reports is the project."""
    resource = {"attributes": [{"key": "openinference.project.name", "value": {"stringValue": project}},
                               {"key": "service.version", "value": {"stringValue": project}}]}
    batch: list[dict[str, Any]] = []
    for span in spans:
        batch.append(to_otlp_span(span))
        if len(batch) == _BATCH:
            yield orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": batch}]}]}) + b"\n"
            batch = []
    if batch:
        yield orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": batch}]}]}) + b"\n"


def fetch_spans(url: str, project: str, path: Path, *, since: timedelta | None = None) -> int:
    """Write project ``project``'s spans on the Phoenix at ``url`` (those that started within
    ``since`` of now, when given) to ``path`` as OTLP JSON Lines; returns how many. Raises
    :class:`InputError` when the extra is missing or Phoenix cannot be read."""
    client = phoenix_client(url)
    start = datetime.now(UTC) - since if since is not None else None
    try:
        spans = client.spans.get_spans(project_identifier=project, start_time=start, limit=_LIMIT)
    except Exception as exc:  # noqa: BLE001 - the client raises httpx's and its own errors; one line says which
        shown = redact_url(url)  # a URL's user info or key never reaches a message
        raise InputError.one(shown, None, "--from-phoenix", f"cannot read project {project!r}: "
                             f"{type(exc).__name__}: {str(exc).replace(url, shown)}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for chunk in to_otlp_lines(spans, project):
            handle.write(chunk)
    return len(spans)
