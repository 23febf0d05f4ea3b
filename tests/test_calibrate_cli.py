"""`groundjudge calibrate` on the bundled example's labels, and the position-bias probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import context_ids_in_request, verdict_for_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"
LABELS = sorted((ROOT / "calibration" / "labels").glob("example_*.jsonl"))


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, str, str]:
    tmp = tmp_path_factory.mktemp("calib")
    srv = ScriptedOpenAIServer(verdict_for_request).start()
    result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                                       "--judge-model", srv.model, "--cache-dir", str(tmp / "cache"),
                                       "--out", str(tmp / "out"), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    yield tmp, srv.base_url, srv.model
    srv.stop()


def test_calibrate_writes_a_record_with_inter_rater_figures(judged):
    tmp, _, _ = judged
    args = ["calibrate", "--config", str(EXAMPLE), "--report", str(tmp / "out" / "report.json"),
            "--records-dir", str(tmp / "records"), *sum((["--labels", str(p)] for p in LABELS), [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (record_path,) = (tmp / "records").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["primary_rater"] == "rater_a" and record["raters"] == {"rater_a": 81, "rater_b": 30}
    faithful = record["criteria"]["faithful"]
    assert faithful["judge_vs_human"]["n"] == 81
    assert faithful["inter_rater"]["rater_a~rater_b"]["n"] == 30
    assert record["judge"]["rubric"]["id"] == "grounded_answer"
    # The scripted judge calls every answer unfaithful, so it cannot be trusted.
    assert "untrusted" in result.output


def order_sensitive(body, index):
    """A judge that only believes the chunk shown first: its verdicts move with the order."""
    ids = context_ids_in_request(body)
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    cited = user.rsplit("IDS CITED BY THE ANSWER: ", 1)[1].strip().split(", ")
    claims = [{"claim": "fact", "cited": cited, "verdict": "supported", "support": ids[:1]}]
    return Reply(json.dumps({"claims": claims, "correctness": 3, "reason": "r"}))


@pytest.mark.parametrize(("script", "flips"), [(verdict_for_request, False), (order_sensitive, True)])
def test_position_probe_reports_flip_rates(tmp_path, script, flips):
    with ScriptedOpenAIServer(script) as srv:
        base = ["--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                "--cache-dir", str(tmp_path / "cache")]
        assert CliRunner().invoke(main, ["run", *base, "--out", str(tmp_path / "out"), "--quiet"]).exit_code in (0, 1)
        result = CliRunner().invoke(main, ["calibrate", *base, "--report", str(tmp_path / "out" / "report.json"),
                                           "--records-dir", str(tmp_path / "records"), "--position-probe"])
    assert result.exit_code == 0, result.output
    (record_path,) = (tmp_path / "records").glob("*.json")
    probe = json.loads(record_path.read_text())["position_probe"]
    assert probe["items_probed"] > 20 and probe["judged_both_ways"] == probe["items_probed"]
    citations = probe["citations_supported"]
    assert (citations["flips"] > 0) == flips and citations["n"] > 0


def test_another_judges_verdicts_are_calibrated_under_their_own_identity(tmp_path):
    labels = [json.loads(line) for line in LABELS[0].read_text().splitlines()]
    lines = [{"query_id": l["query_id"], "config_id": l["config_id"], "faithful": l["faithful"],
              "correct": l["correct"], "citations_supported": l["citations_supported"]} for l in labels]
    lines[0]["faithful"] = not lines[0]["faithful"]  # one disagreement
    verdicts = tmp_path / "vendor.jsonl"
    verdicts.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--judge-name", "vendor-judge-3",
                                       "--records-dir", str(tmp_path / "records"),
                                       *sum((["--labels", str(p)] for p in LABELS), [])])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "records").glob("*.json")
    record = json.loads(path.read_text())
    assert record["judge"]["model"] == "vendor-judge-3" and record["judge"]["rubric"]["id"] == "external"
    faithful = record["criteria"]["faithful"]["judge_vs_human"]
    assert faithful["n"] == 81 and faithful["disagreements"] == [f"{lines[0]['config_id']}/{lines[0]['query_id']}"]


def test_verdicts_without_a_judge_name_are_refused(tmp_path):
    verdicts = tmp_path / "v.jsonl"
    verdicts.write_text('{"query_id": "q001", "faithful": true}\n')
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--labels", str(LABELS[0]),
                                       "--records-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--judge-name" in result.stderr
