"""OTLP JSON lines for tests, written by hand from the OTLP JSON encoding: hex ids, 64-bit
integers as decimal strings, attributes as typed key/value lists, one ``TracesData`` a line."""

from __future__ import annotations

import json
from typing import Any


def any_value(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": attributes(value)}}
    return {"stringValue": value}


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in values.items()]


def span(trace_id: str, span_id: str, parent: str, name: str, attrs: dict[str, Any], *, start_ms: int = 0,
         end_ms: int = 100, status: dict[str, Any] | None = None) -> dict[str, Any]:
    base = 1_764_000_000_000_000_000
    return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": str(base + start_ms * 1_000_000), "endTimeUnixNano": str(base + end_ms * 1_000_000),
            "attributes": attributes(attrs), "status": status or {}}


def line(spans: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> str:
    resource = {"service.name": "rag-api", "service.version": "v1"} if resource is None else resource
    return json.dumps({"resourceSpans": [{"resource": {"attributes": attributes(resource)},
                                          "scopeSpans": [{"scope": {"name": "rag"}, "spans": spans}]}]})


def trace_id(n: int) -> str:
    return f"{n + 1:032x}"


def span_id(n: int, k: int) -> str:
    return f"{(n + 1) * 16 + k + 1:016x}"


def openinference_trace(n: int, *, question: str, answer: str, docs: list[tuple[str, str | None]],
                        case_id: str | None = None, with_content: bool = True) -> list[dict[str, Any]]:
    """A CHAIN root, a RETRIEVER child with ``docs`` (id, content) and an LLM child: the shape
    OpenInference's instrumentations give a retrieve-then-generate pipeline."""
    tid = trace_id(n)
    root, ret, llm = span_id(n, 0), span_id(n, 1), span_id(n, 2)
    root_attrs: dict[str, Any] = {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer}
    if case_id is not None:
        root_attrs["groundjudge.case_id"] = case_id
    doc_attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i, (doc, content) in enumerate(docs):
        doc_attrs[f"retrieval.documents.{i}.document.id"] = doc
        doc_attrs[f"retrieval.documents.{i}.document.score"] = round(1.0 - i / 10, 2)
        if with_content and content is not None:
            doc_attrs[f"retrieval.documents.{i}.document.content"] = content
    return [
        span(tid, root, "", "rag", root_attrs, start_ms=0, end_ms=900),
        span(tid, ret, root, "retrieve", doc_attrs, start_ms=10, end_ms=60),
        span(tid, llm, root, "generate", {"openinference.span.kind": "LLM",
                                          "llm.output_messages.0.message.role": "assistant",
                                          "llm.output_messages.0.message.content": answer,
                                          "llm.token_count.prompt": 120, "llm.token_count.completion": 30},
             start_ms=70, end_ms=880),
    ]
