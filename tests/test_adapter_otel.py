"""Traces as OpenTelemetry exports them (OTLP JSON Lines), in the OpenInference and the OTel GenAI
conventions, graded without a golden set, or joined to one by an attribute.

The inputs are written from the specifications (the OTLP JSON encoding, OpenInference's
semantic conventions, the GenAI retrieval and inference spans); the last test makes them with
the OpenTelemetry SDK and its OTLP JSON file exporter."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge import api
from groundjudge.cli import main
from groundjudge.errors import InputError
from groundjudge.load.adapters import detect_format, load_any
from groundjudge.load.adapters.otel import NO_GOLDEN
from tests.support.openai_server import Reply, ScriptedOpenAIServer
from tests.support.otlp import LEAVE, line, openinference_trace, span, span_id, trace_id, traced_rag_request

CARRY = "Up to 5 unused days carry over to the next year."
pytestmark = pytest.mark.usefixtures("no_judge_environment")


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(f"{ln}\n" for ln in lines))
    return path


def one_trace(tmp_path: Path, **kw: Any) -> Path:
    spans = openinference_trace(0, question="How many days of leave do I get?",
                                answer="You get 18 days [leave-2], and 5 carry over [leave-7].",
                                docs=[("leave-2", LEAVE), ("leave-7", CARRY), ("pay-1", "Salaries are paid monthly.")],
                                **kw)
    return write(tmp_path / "traces.jsonl", line(spans))


def test_openinference_trace_becomes_a_case_without_a_golden_set(tmp_path: Path) -> None:
    path = one_trace(tmp_path)
    assert detect_format(None, [path]) == "otel"
    dataset, fmt = load_any(None, [path])
    assert fmt == "otel" and dataset.config_ids == ["v1"]
    tid = trace_id(0)
    case = dataset.cases[tid]
    assert case.question == "How many days of leave do I get?"
    assert case.not_recorded == {"expected_behavior": NO_GOLDEN, "expected_chunk_ids": NO_GOLDEN}
    trace = dataset.trace("v1", tid)
    assert trace is not None
    assert trace.answer == "You get 18 days [leave-2], and 5 carry over [leave-7]."
    assert [c.chunk_id for c in trace.context_chunks] == ["leave-2", "leave-7", "pay-1"]
    assert [c.text for c in trace.context_chunks] == [LEAVE, CARRY, "Salaries are paid monthly."]
    assert [(c.chunk_id, c.rank, c.score) for c in trace.retrieved_chunks] == [
        ("leave-2", 1, 1.0), ("leave-7", 2, 0.9), ("pay-1", 3, 0.8)]
    assert [c.chunk_id for c in trace.citations] == ["leave-2", "leave-7"]  # the bracketed ids of the answer
    assert trace.tokens == {"prompt": 120, "completion": 30, "total": 150}
    assert trace.latency_ms == {"end_to_end": 900.0, "retrieve": 50.0}
    assert trace.model_extra["otel_trace_id"] == tid and trace.model_extra["otel_span_id"] == span_id(0, 0)
    assert dataset.skipped_traces == {}


def test_without_a_golden_set_retrieval_metrics_are_null_with_the_reason(tmp_path: Path) -> None:
    path = one_trace(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--traces", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "metrics.json").read_text())
    agg = doc["per_config"]["v1"]["aggregate"]
    for name in ("hit@5", "recall@10", "mrr@10", "ndcg@10", "context_recall", "behavior_correct"):
        assert agg[name]["value"] is None and agg[name]["n"] == 0
        assert agg[name]["reason"] == NO_GOLDEN
    # what the trace itself says is measured: its citations stay within its context
    assert agg["citation_scoped"]["value"] == 1.0 and agg["citation_scoped"]["n"] == 1
    assert agg["empty_result"]["value"] == 0.0


def test_genai_conventions_across_batches_and_a_reranker(tmp_path: Path) -> None:
    tid = trace_id(1)
    root, ret, rerank, chat = (span_id(1, k) for k in range(4))
    docs = json.dumps([{"id": "a", "score": 0.7, "content": "Alpha is first."},
                       {"id": "b", "score": 0.6, "content": "Beta is second."},
                       {"id": "c", "score": 0.5, "content": "Gamma is third."}])
    output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Beta is second [b]."}],
                          "finish_reason": "stop"}])
    first = line([span(tid, ret, root, "retrieval vector-db",
                       {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "Which is second?",
                        "gen_ai.retrieval.documents": docs}, start_ms=5, end_ms=25),
                  span(tid, rerank, root, "rerank",
                       {"openinference.span.kind": "RERANKER", "reranker.query": "Which is second?",
                        "reranker.output_documents.0.document.id": "b",
                        "reranker.output_documents.0.document.content": "Beta is second.",
                        "reranker.output_documents.1.document.id": "a",
                        "reranker.output_documents.1.document.content": "Alpha is first."}, start_ms=30, end_ms=40)],
                 resource={"service.version": "v2", "deployment.environment.name": "prod"})
    # the root and the chat span come in a later export batch, as a batching processor writes them
    second = line([span(tid, chat, root, "chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": output,
                                                         "gen_ai.usage.input_tokens": 50,
                                                         "gen_ai.usage.output_tokens": 7}, start_ms=45, end_ms=90),
                   span(tid, root, "", "invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, start_ms=0, end_ms=95)],
                  resource={"service.version": "v2", "deployment.environment.name": "staging"})
    path = write(tmp_path / "genai.jsonl", first, second)
    dataset, _ = load_any(None, [path])
    trace = dataset.trace("v2", tid)
    assert trace is not None
    assert dataset.cases[tid].question == "Which is second?"  # the root has no input: the retriever's query
    assert trace.answer == "Beta is second [b]."
    assert [c.chunk_id for c in trace.retrieved_chunks] == ["a", "b", "c"]  # what the retriever returned
    assert [c.chunk_id for c in trace.context_chunks] == ["b", "a"]  # what the reranker kept: the prompt's context
    assert [c.chunk_id for c in trace.citations] == ["b"]
    assert trace.tokens == {"prompt": 50, "completion": 7, "total": 57}

    # the config is the resource attribute the run names
    config = api.resolve_config(None, {"inputs.traces": (path,), "inputs.config_attribute": "deployment.environment.name"})
    assert api.load_inputs(config).config_ids == ["staging"]  # the root span's resource


MESSY_REASONS = {
    trace_id(10): "no retriever or reranker span (nothing says what the answer was grounded on)",
    trace_id(11): "its documents were exported without content (content capture is opt-in in OpenTelemetry): "
                  "give --corpus with their text",
    trace_id(12): "no answer (neither the root span's output.value nor an LLM span's output messages)",
    trace_id(13): "the root span's status is ERROR: upstream timeout",
}


def messy_export(tmp_path: Path) -> Path:
    """A night's export as it comes: a good trace, a chain with no retriever, documents without
    content, a trace with no answer, a failed request."""
    good = openinference_trace(0, question="How many days of leave?", answer="18 days [leave-2].",
                               docs=[("leave-2", LEAVE)])
    no_retriever = [span(trace_id(10), span_id(10, 0), "", "chat", {"openinference.span.kind": "CHAIN",
                                                                      "input.value": "Hi?", "output.value": "Hello."})]
    no_content = openinference_trace(11, question="Carry over?", answer="5 days [leave-7].",
                                     docs=[("leave-7", CARRY)], with_content=False)
    no_answer = [s for s in openinference_trace(12, question="Q?", answer="A.", docs=[("leave-2", LEAVE)])
                 if s["name"] != "generate"]
    for s in no_answer:
        s["attributes"] = [a for a in s["attributes"] if a["key"] != "output.value"]
    failed = openinference_trace(13, question="Q2?", answer="", docs=[("leave-2", LEAVE)])
    failed[0]["status"] = {"code": 2, "message": "upstream timeout"}
    return write(tmp_path / "messy.jsonl", line(good + no_retriever), line(no_content), line(no_answer + failed))


def test_a_messy_export_skips_each_trace_with_its_reason(tmp_path: Path) -> None:
    path = messy_export(tmp_path)
    dataset, _ = load_any(None, [path])
    assert list(dataset.cases) == [trace_id(0)]
    assert dataset.skipped_traces == MESSY_REASONS

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--traces", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["accounting"]["skipped_traces"] == MESSY_REASONS
    md = (out / "report.md").read_text()
    assert "- cases (no golden set: one per trace): 1" in md and "cases in the golden set" not in md
    assert "- traces not graded: 4" in md
    assert "  - 1: no retriever or reranker span (nothing says what the answer was grounded on) (e.g. `" \
           f"{trace_id(10)}`)" in md


def test_documents_without_content_are_read_from_the_corpus(tmp_path: Path) -> None:
    path = messy_export(tmp_path)
    corpus = write(tmp_path / "corpus.jsonl", json.dumps({"chunk_id": "leave-7", "doc_id": "handbook", "text": CARRY}))
    dataset, _ = load_any(None, [path], corpus)
    assert trace_id(11) in dataset.cases and trace_id(11) not in dataset.skipped_traces
    trace = dataset.trace("v1", trace_id(11))
    assert trace is not None and [c.text for c in trace.context_chunks] == [None]
    assert dataset.missing_text == {}  # the corpus has the text the judge reads

    # a corpus that lacks a document names it
    other = write(tmp_path / "other.jsonl", json.dumps({"chunk_id": "x", "doc_id": "d", "text": "t"}))
    dataset, _ = load_any(None, [path], other)
    assert dataset.skipped_traces[trace_id(11)] == "documents exported without content and not in the corpus: leave-7"


@pytest.mark.parametrize(("text", "field", "problem"), [
    ("{not json", None, "not JSON"),
    ('{"resourceSpans": {}}', "resourceSpans", "expected an object with a resourceSpans list"),
    (line([{"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "eee19b7ec3c1b17", "name": "x"}]),
     "resourceSpans[0].scopeSpans[0].spans[0].spanId", "expected 16 hex digits"),
    (line([{"traceId": "XYZ", "spanId": "eee19b7ec3c1b174"}]), "resourceSpans[0].scopeSpans[0].spans[0].traceId",
     "expected 32 hex digits (OTLP JSON writes ids as hex)"),
    (line([{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "attributes": [{"key": "llm.token_count.prompt", "value": {"intValue": "many"}}]}]),
     "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue", "expected an integer"),
    (line([{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
            "startTimeUnixNano": "soon"}]),
     "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano", "expected an integer"),
])
def test_malformed_otlp_is_an_input_error_with_line_and_field(tmp_path: Path, text: str, field: str | None,
                                                              problem: str) -> None:
    good = line(openinference_trace(0, question="Q?", answer="A.", docs=[("d", "text")]))
    path = write(tmp_path / "bad.jsonl", good, "", text)
    with pytest.raises(InputError) as err:
        load_any(None, [path], fmt="otel")
    (only,) = err.value.problems
    assert (only.file, only.line, only.field) == (str(path), 3, field)
    assert problem in only.problem

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--traces", str(path), "--format", "otel", "--out", str(out)])
    assert result.exit_code == 2
    assert f"{path}:3: " in result.output
    assert not out.exists()  # nothing half-written


def test_joined_to_a_golden_set_by_an_attribute(tmp_path: Path) -> None:
    spans = [*openinference_trace(0, question="Leave?", answer="18 days [leave-2].", docs=[("leave-2", LEAVE)],
                                  case_id="q-leave"),
             *openinference_trace(1, question="Leave, again?", answer="18 [leave-2].", docs=[("leave-2", LEAVE)],
                                  case_id="q-leave"),
             *openinference_trace(2, question="Anything?", answer="No [leave-2].", docs=[("leave-2", LEAVE)])]
    path = write(tmp_path / "traces.jsonl", line(spans))
    golden = write(tmp_path / "golden.jsonl",
                   json.dumps({"id": "q-leave", "question": "How many days of leave?", "expected_chunk_ids": ["leave-2"],
                               "must_contain": ["18"]}),
                   json.dumps({"id": "q-pay", "question": "When is pay day?", "expected_chunk_ids": ["pay-1"]}))
    dataset, fmt = load_any(golden, [path], fmt="otel")
    assert fmt == "otel" and list(dataset.cases) == ["q-leave", "q-pay"]
    trace = dataset.trace("v1", "q-leave")
    assert trace is not None and trace.model_extra["otel_trace_id"] == trace_id(0)
    assert dataset.missing_trace == {"v1": ["q-pay"]}
    assert dataset.skipped_traces == {
        trace_id(1): f"case 'q-leave' config 'v1' is graded from trace {trace_id(0)}",
        trace_id(2): "no groundjudge.case_id attribute to join it to the golden set"}

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--golden", str(golden), "--traces", str(path), "--format", "otel",
                                       "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    case = json.loads((out / "metrics.json").read_text())["per_config"]["v1"]["per_case"]["q-leave"]
    assert case["hit@1"] == 1.0 and case["must_contain"] == 1.0  # with a golden set, retrieval is measured

    unknown = write(tmp_path / "unknown.jsonl", line(openinference_trace(
        3, question="?", answer="A [leave-2].", docs=[("leave-2", LEAVE)], case_id="q-none")))
    with pytest.raises(InputError) as err:
        load_any(golden, [unknown], fmt="otel")
    assert str(err.value) == f"{unknown}:1: groundjudge.case_id: unknown case 'q-none': not in the golden set"


CASH = "Unused days are paid out in cash"  # no passage says so


def judge_script(body: dict, index: int) -> Reply:
    """A claim_check judge: the passages support every claim (P(yes) = 0.9) but the cash one (0.05)."""
    p = 0.05 if CASH in body["messages"][-1]["content"] else 0.9
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=((("Yes", math.log(p)), ("No", math.log(1 - p))),))


def test_sdk_exported_spans_are_graded_by_the_judge(tmp_path: Path) -> None:
    """A small pipeline instrumented with the OpenTelemetry SDK, exported by its OTLP JSON file
    exporter, graded by `groundjudge run` with the scripted server as the judge."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    export = tmp_path / "export.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "rag", "service.version": "rag-2026.11"}))
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(export)))
    tracer = provider.get_tracer("rag-pipeline")
    store = {"leave-2": LEAVE, "leave-7": CARRY}
    for question, answer in (("How many days of leave?", "Full-time employees get 18 days of annual leave [leave-2]."),
                             ("Do unused days carry over?", f"{CASH} [leave-7].")):
        traced_rag_request(tracer, question, answer, store)
    with tracer.start_as_current_span("health-check"):
        pass  # a span of no RAG request: skipped with its reason
    provider.shutdown()

    out = tmp_path / "out"
    with ScriptedOpenAIServer(judge_script) as srv:
        result = CliRunner().invoke(main, ["run", "--traces", str(export), "--cache-dir", str(tmp_path / "cache"),
                                           "--out", str(out), "--no-history", "--judge-base-url", srv.base_url,
                                           "--judge-model", srv.model])
        asked = len(srv.requests)
    assert result.exit_code in (0, 1), result.output
    report = json.loads((out / "report.json").read_text())
    assert report["accounting"]["skipped_traces"] is not None
    assert list(report["accounting"]["skipped_traces"].values()) == [MESSY_REASONS[trace_id(10)]]
    cases = report["judge"]["per_config"]["rag-2026.11"]["cases"]
    assert len(cases) == 2 and {c["status"] for c in cases.values()} == {"judged"}
    by_answer = {c["claims"][0]["claim"]: c for c in cases.values()}
    leave, cash = by_answer["Full-time employees get 18 days of annual leave."], by_answer[f"{CASH}."]
    assert leave["criteria"]["faithful"]["label"] is True and leave["criteria"]["citations_supported"]["label"] is True
    assert cash["criteria"]["faithful"]["label"] is False and cash["criteria"]["citations_supported"]["label"] is False
    # the citation check ran on the ids the answers cite in brackets
    assert [c["cited"] for c in cash["claims"]] == [["leave-7"]] and cash["claims"][0]["verdict"] == "unsupported"
    assert asked > 0  # the cash claim's words are not in the passage: the judge was asked
    agg = report["per_config"]["rag-2026.11"]["aggregate"]
    assert agg["recall@5"]["value"] is None and agg["recall@5"]["reason"] == NO_GOLDEN
    assert agg["citation_scoped"]["value"] == 1.0 and agg["citation_scoped"]["n"] == 2
