"""Arize Phoenix as a real component: a small pipeline instrumented with the OpenTelemetry SDK
sends its spans to a real Phoenix server; `groundjudge run --from-phoenix` reads them through
Phoenix's client, grades them (the scripted server as the judge) and writes the verdicts back
as span annotations on each root span; they are read back through Phoenix's API, and a re-run
updates them rather than adding more."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.errors import InputError
from groundjudge.load.phoenix import EXTRA_MISSING, parse_since
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.otlp import CASH, LEAVE, cash_is_unsupported, traced_rag_request
from tests.support.phoenix_server import phoenix_executable, phoenix_server

PROJECT = "rag-nightly"
pytestmark = pytest.mark.usefixtures("no_judge_environment")


def send_pipeline_spans(url: str) -> dict[str, str]:
    """Two questions through a retrieve-then-generate pipeline, traced with the SDK and sent
    to Phoenix over OTLP/HTTP; returns answer -> root span id."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    tracer = provider.get_tracer("rag-pipeline")
    roots = {}
    for question, answer in (("How many days of leave?", f"{LEAVE} [leave-2]"),
                             ("What happens to unused days?", f"{CASH} [leave-2].")):
        roots[answer] = traced_rag_request(tracer, question, answer, {"leave-2": LEAVE})
    provider.shutdown()
    return roots


def wait_for_spans(url: str, count: int, timeout_s: float = 60.0) -> list[dict]:
    """Phoenix stores received spans in the background (its project exists once the first is in)."""
    import httpx
    from phoenix.client import Client

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            spans = Client(base_url=url).spans.get_spans(project_identifier=PROJECT, limit=100)
        except httpx.HTTPStatusError:
            spans = []
        if len(spans) >= count:
            return spans
        assert time.monotonic() < deadline, f"Phoenix holds {len(spans)} spans, {count} were sent"
        time.sleep(0.5)


def annotations_of(url: str, span_ids: list[str]) -> list[dict]:
    from phoenix.client import Client

    return list(Client(base_url=url).spans.get_span_annotations(span_ids=span_ids, project_identifier=PROJECT))


def grade(url: str, tmp_path: Path, name: str) -> tuple[object, Path]:
    out = tmp_path / name
    with ScriptedOpenAIServer(cash_is_unsupported) as srv:
        result = CliRunner().invoke(main, ["run", "--from-phoenix", url, "--project", PROJECT, "--since", "24h",
                                           "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--no-history",
                                           "--judge-base-url", srv.base_url, "--judge-model", srv.model])
    return result, out


@pytest.mark.skipif(phoenix_executable() is None, reason="Phoenix's server is not installed: scripts/test.sh installs "
                                                         "it into .venv-phoenix (or set GROUNDJUDGE_PHOENIX)")
def test_verdicts_go_back_to_phoenix_as_root_span_annotations(tmp_path: Path) -> None:
    pytest.importorskip("phoenix.client", reason="needs groundjudge[phoenix]")
    workdir = tmp_path / "phoenix"
    workdir.mkdir()
    with phoenix_server(workdir) as url:
        roots = send_pipeline_spans(url)
        wait_for_spans(url, 6)
        result, out = grade(url, tmp_path, "first")
        assert result.exit_code in (0, 1), result.output
        assert "read 6 spans of Phoenix project 'rag-nightly'" in result.output
        assert f"wrote 4 span annotations to Phoenix at {url}" in result.output
        assert (out / "phoenix-spans.jsonl").exists() and (out / "report.json").exists()

        first = annotations_of(url, list(roots.values()))
        by = {(a["span_id"], a["name"]): a for a in first}
        assert len(first) == 4 and {a["identifier"] for a in first} == {"groundjudge"}
        assert {a["annotator_kind"] for a in first} == {"LLM"}
        good = by[roots[f"{LEAVE} [leave-2]"], "faithfulness"]
        bad = by[roots[f"{CASH} [leave-2]."], "faithfulness"]
        report = json.loads((out / "report.json").read_text())["judge"]["per_config"]
        scores = {c["criteria"]["faithful"]["value"] for section in report.values() for c in section["cases"].values()
                  if c["criteria"]["faithful"]["label"] is True}
        # the value is the report's own (the mean claim support of the default rubric)
        assert good["result"]["label"] == "pass" and good["result"]["score"] in scores and good["result"]["score"] > 0.9
        assert good["metadata"]["faithful"] is True and good["metadata"]["unsupported_claims"] == []
        assert bad["result"]["label"] == "fail" and bad["result"]["score"] < 0.5
        assert bad["result"]["explanation"] == f"unsupported claims: {CASH}."
        assert bad["metadata"]["faithful"] is False and bad["metadata"]["unsupported_claims"] == [f"{CASH}."]
        citation = by[roots[f"{CASH} [leave-2]."], "citation_support"]
        assert citation["result"]["label"] == "fail"
        assert bad["metadata"]["rubric"] == "claim_check v7" and bad["metadata"]["judge_model"]
        assert bad["metadata"]["trusted"] is False and bad["metadata"]["trust_reason"].startswith("untrusted")
        assert bad["metadata"]["report"] == (out / "report.html").resolve().as_uri()

        # a re-run updates the same annotations: none is added
        again, out2 = grade(url, tmp_path, "second")
        assert again.exit_code in (0, 1), again.output
        second = annotations_of(url, list(roots.values()))
        assert len(second) == 4
        assert {a["id"] for a in second} == {a["id"] for a in first}
        assert {a["metadata"]["report"] for a in second} == {(out2 / "report.html").resolve().as_uri()}


def test_without_the_extra_the_message_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "phoenix.client", None)  # import fails as when it is not installed
    result = CliRunner().invoke(main, ["run", "--from-phoenix", "http://127.0.0.1:9", "--project", PROJECT,
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert EXTRA_MISSING in result.output
    assert "pip install 'groundjudge[phoenix]'" in EXTRA_MISSING


def test_since_reads_durations() -> None:
    assert parse_since("24h").total_seconds() == 86400 and parse_since("30m").total_seconds() == 1800
    assert parse_since("7d").days == 7
    with pytest.raises(InputError, match="expected a duration such as 24h"):
        parse_since("yesterday")
