"""Verdicts out as OpenTelemetry: `groundjudge run --otel-events FILE` writes each verdict as a
gen_ai.evaluation.result event on the graded span, as OTLP JSON that OpenTelemetry's own OTLP
JSON codec reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.otlp import CASH, LEAVE, cash_is_unsupported, line, openinference_trace, span_id, trace_id

pytestmark = pytest.mark.usefixtures("no_judge_environment")


def events_of(path: Path) -> list[dict]:
    from opentelemetry.proto_json.logs.v1.logs import LogsData

    records = []
    for raw in path.read_text().splitlines():
        data = json.loads(raw)
        LogsData.from_dict(data)  # OpenTelemetry's OTLP JSON codec accepts every line
        for resource in data["resourceLogs"]:
            for scope in resource["scopeLogs"]:
                records += scope["logRecords"]
    return records


def attrs(record: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}


def test_each_verdict_is_an_evaluation_event_on_the_graded_span(tmp_path: Path) -> None:
    spans = [*openinference_trace(0, question="How many days of leave?", answer=f"{LEAVE} [leave-2]",
                                  docs=[("leave-2", LEAVE)]),
             *openinference_trace(1, question="What happens to unused days?", answer=f"{CASH} [leave-2].",
                                  docs=[("leave-2", LEAVE)])]
    export = tmp_path / "spans.jsonl"
    export.write_text(line(spans) + "\n")
    events, out = tmp_path / "events.jsonl", tmp_path / "out"
    with ScriptedOpenAIServer(cash_is_unsupported) as srv:
        result = CliRunner().invoke(main, ["run", "--traces", str(export), "--otel-events", str(events),
                                           "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--no-history",
                                           "--judge-base-url", srv.base_url, "--judge-model", srv.model])
    assert result.exit_code in (0, 1), result.output
    assert f"wrote 4 gen_ai.evaluation.result events to {events}" in result.output
    records = events_of(events)
    assert len(records) == 4  # faithfulness and citation support for each answer; no expected answer: no correctness
    assert {r["eventName"] for r in records} == {"gen_ai.evaluation.result"}
    by = {(r["traceId"], attrs(r)["gen_ai.evaluation.name"]): r for r in records}
    assert {r["spanId"] for r in records if r["traceId"] == trace_id(0)} == {span_id(0, 0)}  # the root span
    good, bad = attrs(by[trace_id(0), "faithfulness"]), attrs(by[trace_id(1), "faithfulness"])
    report = json.loads((out / "report.json").read_text())["judge"]["per_config"]
    (cases,) = [section["cases"] for section in report.values()]
    assert good["gen_ai.evaluation.score.label"] == "pass"  # the value is the report's own, the mean claim support
    assert good["gen_ai.evaluation.score.value"] == cases[trace_id(0)]["criteria"]["faithful"]["value"] > 0.9
    assert good["gen_ai.evaluation.explanation"] == "every claim is supported by the passages"
    assert bad["gen_ai.evaluation.score.label"] == "fail" and bad["gen_ai.evaluation.score.value"] < 0.5
    assert bad["gen_ai.evaluation.explanation"] == f"unsupported claims: {CASH}."
    citation = attrs(by[trace_id(1), "citation_support"])
    assert citation["gen_ai.evaluation.score.label"] == "fail"
    assert citation["gen_ai.evaluation.explanation"] == f"cited passages that do not support the claim: {CASH}."
    assert bad["groundjudge.rubric"] == "claim_check v7" and bad["groundjudge.judge.model"] == srv.model
    assert bad["groundjudge.trusted"] is False and bad["groundjudge.trust_reason"].startswith("untrusted")
    assert bad["groundjudge.case_id"] == trace_id(1)
    assert bad["groundjudge.report"] == (out / "report.html").resolve().as_uri()


def test_traces_that_did_not_come_from_opentelemetry_are_counted_not_linked(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q1", "question": "Leave?"}) + "\n")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"query_id": "q1", "config_id": "c", "answer": f"{CASH} [leave-2].",
                                  "context_chunks": [{"chunk_id": "leave-2", "text": LEAVE}],
                                  "citations": ["leave-2"]}) + "\n")
    events = tmp_path / "events.jsonl"
    with ScriptedOpenAIServer(cash_is_unsupported) as srv:
        result = CliRunner().invoke(
            main, ["run", "--golden", str(golden), "--traces", str(traces), "--otel-events", str(events),
                   "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--no-history", "--quiet",
                   "--judge-base-url", srv.base_url, "--judge-model", srv.model])
    assert result.exit_code in (0, 1), result.output
    assert events.read_text() == ""
    assert "wrote 0 gen_ai.evaluation.result events" in result.stderr
    assert "1 judged cases have no span to link to" in result.stderr
