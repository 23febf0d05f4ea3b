"""OTLP JSON lines for tests, written by hand from the OTLP JSON encoding: hex ids, 64-bit
integers as decimal strings, attributes as typed key/value lists, one ``TracesData`` a line."""

from __future__ import annotations

import json
import math
from typing import Any

from tests.support.openai_server import Reply


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


# Two facts the scripted judge decides on: the leave policy's text, and a claim it does not support.
LEAVE = "Full-time employees get 18 days of annual leave."
CASH = "Unused days are paid out in cash"


def cash_is_unsupported(body: dict[str, Any], index: int) -> Reply:
    """A scripted claim_check judge: "No" (P(yes) 0.05) to any question about the cash claim,
    "Yes" (0.9) to the rest."""
    p = 0.05 if CASH in body["messages"][-1]["content"] else 0.9
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=((("Yes", math.log(p)), ("No", math.log(1 - p))),))


def traced_rag_request(tracer: Any, question: str, answer: str, documents: dict[str, str]) -> str:
    """One RAG request traced with the OpenTelemetry SDK in the OpenInference conventions: a
    CHAIN root (question in, answer out), a RETRIEVER span with ``documents`` (id -> content,
    scores falling from 0.9) and an LLM span with the answer. Returns the root span's id (hex)."""
    with tracer.start_as_current_span("rag") as root:
        root.set_attribute("openinference.span.kind", "CHAIN")
        root.set_attribute("input.value", question)
        with tracer.start_as_current_span("retrieve") as ret:
            ret.set_attribute("openinference.span.kind", "RETRIEVER")
            ret.set_attribute("input.value", question)
            for i, (doc, text) in enumerate(documents.items()):
                ret.set_attribute(f"retrieval.documents.{i}.document.id", doc)
                ret.set_attribute(f"retrieval.documents.{i}.document.content", text)
                ret.set_attribute(f"retrieval.documents.{i}.document.score", 0.9 - i / 10)
        with tracer.start_as_current_span("generate") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
            llm.set_attribute("llm.output_messages.0.message.role", "assistant")
            llm.set_attribute("llm.output_messages.0.message.content", answer)
        root.set_attribute("output.value", answer)
        return format(root.get_span_context().span_id, "016x")
