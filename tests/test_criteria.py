"""Criteria come from the rubric: a rubric with an extra criterion flows to the report, to
calibration and to the gates with no Python edit."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.judge.rubric import Criterion, lock_rubrics
from tests.support.judge_replies import context_ids_in_request, question_in_request, verdict_dict

ROOT = Path(__file__).resolve().parent.parent


def concise(question: str) -> bool:
    """The scripted judge's verdict on the new criterion: fixed per question, both values occur."""
    return hashlib.sha256(question.encode()).digest()[0] % 3 != 0


def script(body: dict, index: int) -> str:
    return json.dumps({**verdict_dict(context_ids_in_request(body)), "concise": concise(question_in_request(body))})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example with a rubric `grounded_answer_plus` v1: grounded_answer v1 plus `concise`."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    rubrics = tmp_path / "rubrics"
    shutil.copytree(ROOT / "rubrics" / "grounded_answer", rubrics / "grounded_answer")
    data = yaml.safe_load((rubrics / "grounded_answer" / "v1.yaml").read_text())
    data["id"] = "grounded_answer_plus"
    data["criteria"].append({"name": "concise", "kind": "binary", "labels": [True, False],
                             "description": "the answer says only what the question needs",
                             "metric": "conciseness", "score": "field"})
    data["system_prompt"] += 'Also give "concise": true when the ANSWER says only what the QUESTION needs.\n'
    data["output_schema"]["properties"]["concise"] = {"type": "boolean"}
    data["output_schema"]["required"].append("concise")
    (rubrics / "grounded_answer_plus").mkdir()
    (rubrics / "grounded_answer_plus" / "v1.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    lock_rubrics(rubrics)
    config = (tmp_path / "examples" / "groundjudge.toml").read_text()
    config = re.sub(r'(?m)^rubric = ".*"$', 'rubric = "grounded_answer_plus"\nrubrics_dir = "../rubrics"', config)
    config = config.replace('correctness = { min = 2.5 }', 'correctness = { min = 2.5 }\nconciseness = { min = 0.9 }')
    config = config.replace('records_dir = "../calibration/records"', 'records_dir = "../records"')
    config = config.replace('labels = [', 'labels_unused = [').replace("[inputs]", "[inputs]", 1)
    config = "\n".join(line for line in config.splitlines() if not line.startswith("labels_unused"))
    (tmp_path / "examples" / "groundjudge.toml").write_text(config)
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def run(project: Path, srv_url: str, model: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["run", "--config", str(project / "examples" / "groundjudge.toml"),
                                       "--judge-base-url", srv_url, "--judge-model", model,
                                       "--cache-dir", str(project / "cache"), "--out", str(project / "out"),
                                       "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return json.loads((project / "out" / "report.json").read_text())


def test_a_criterion_needs_a_score_unless_it_is_a_legacy_name() -> None:
    with pytest.raises(ValueError, match="must say how it is scored"):
        Criterion(name="concise", kind="binary", labels=[True, False], description="d")
    legacy = Criterion(name="faithful", kind="binary", labels=[True, False], description="d")
    assert (legacy.metric_name, legacy.score_kind) == ("faithfulness", "claim_share")


def test_an_extra_criterion_reaches_report_calibration_and_gate(project: Path) -> None:
    from tests.support.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(script) as srv:
        report = run(project, srv.base_url, srv.model)
        judge = report["judge"]
        assert [c["name"] for c in judge["criteria"]] == ["faithful", "correct", "citations_supported", "concise"]
        summary = judge["per_config"]["candidate"]["summary"]
        cases = judge["per_config"]["candidate"]["cases"]
        judged = {cid: c for cid, c in cases.items() if c["status"] == "judged"}
        share = sum(c["criteria"]["concise"]["label"] for c in judged.values()) / len(judged)
        assert summary["metrics"]["conciseness"] == {"value": pytest.approx(share), "n": len(judged)}
        assert 0 < share < 1
        gate = next(g for g in report["gates"]["results"] if g["metric"] == "conciseness")
        assert gate["status"] == "advisory" and "no calibration record" in gate["reason"]
        assert "conciseness (concise)" in (project / "out" / "report.md").read_text()

        # people label `concise` the way the judge does, on every judged item of both configs
        labels = project / "labels.jsonl"
        with labels.open("w") as out:
            for cfg, section in judge["per_config"].items():
                for cid, c in section["cases"].items():
                    if c["status"] == "judged":
                        out.write(json.dumps({"query_id": cid, "config_id": cfg, "rater": "ann",
                                              "concise": c["criteria"]["concise"]["label"]}) + "\n")
        calibrated = CliRunner().invoke(main, ["calibrate", "--config", str(project / "examples" / "groundjudge.toml"),
                                               "--report", str(project / "out" / "report.json"),
                                               "--labels", str(labels)])
        assert calibrated.exit_code == 0, calibrated.output
        record = json.loads(next((project / "records").glob("grounded_answer_plus-v1-*.json")).read_text())
        stats = record["criteria"]["concise"]["judge_vs_human"]
        assert stats["n"] == 82 and stats["kappa"] == pytest.approx(1.0)
        assert record["criteria"]["faithful"]["judge_vs_human"]["n"] == 0  # nobody labelled it

        # the gate on the new metric now counts: trusted, blocking, failing its 0.9 bar
        srv.reset()
        again = run(project, srv.base_url, srv.model)
        assert srv.call_count == 0
    gate = next(g for g in again["gates"]["results"] if g["metric"] == "conciseness")
    assert gate["blocking"] and gate["status"] == "fail" and gate["reason"].startswith("trusted")
    assert "candidate: conciseness >= 0.9" in again["gates"]["failed"]
