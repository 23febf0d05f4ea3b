"""benchmarks/otlp_load.py: an OTLP export and the same cases as native JSONL give the same
metrics and the same verdicts (here with the judge, on a small set), and the script runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import claim_answer
from tests.support.openai_server import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "otlp_load.py"
pytestmark = pytest.mark.usefixtures("no_judge_environment")


def bench():  # the script, imported as a module
    spec = importlib.util.spec_from_file_location("otlp_load", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(tmp_path: Path, name: str, *inputs: str) -> dict:
    out = tmp_path / name
    with ScriptedOpenAIServer(claim_answer) as srv:
        # v4: the scripted P(yes) gives it both verdicts (the fitted default reads this judge as sure of every claim)
        result = CliRunner().invoke(main, ["run", *inputs, "--rubric", "claim_check/v4", "--cache-dir", str(tmp_path / f"cache-{name}"),
                                           "--out", str(out), "--no-history", "--judge-base-url", srv.base_url,
                                           "--judge-model", srv.model, "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return json.loads((out / "report.json").read_text())


def test_the_export_and_the_same_cases_as_jsonl_get_the_same_verdicts(tmp_path: Path) -> None:
    paths = bench().generate(40, tmp_path / "data")
    otlp = run(tmp_path, "otlp", "--traces", str(paths["export"]))
    native = run(tmp_path, "native", "--golden", str(paths["golden"]), "--traces", str(paths["traces"]))
    assert otlp["accounting"]["skipped_traces"] is None  # one trace in a hundred is skipped: none of these 40
    (config,) = otlp["configs"]
    assert native["configs"] == [config]
    assert otlp["per_config"][config]["per_case"] == native["per_config"][config]["per_case"]
    assert otlp["per_config"][config]["aggregate"] == native["per_config"][config]["aggregate"]
    mine, theirs = otlp["judge"]["per_config"][config]["cases"], native["judge"]["per_config"][config]["cases"]
    assert len(mine) == 40 and mine.keys() == theirs.keys()
    labels = set()
    for case_id, case in mine.items():
        other = theirs[case_id]
        assert case["status"] == other["status"] == "judged"
        assert case["criteria"] == other["criteria"] and case["claims"] == other["claims"]
        labels.add(case["criteria"]["faithful"]["label"])
    assert labels == {True, False}  # the scripted judge supports some claims and not others


def test_the_script_loads_and_compares_both_forms(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--traces", "300", "--dir", str(tmp_path / "d")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[1]: json.loads(line.split(None, 2)[2]) for line in done.stdout.splitlines()
            if line.startswith(str(ROOT / "src"))}
    assert rows["otlp"]["format"] == "otel" and rows["native"]["format"] == "native"
    assert rows["otlp"]["cases"] == rows["native"]["cases"] == 297 and rows["otlp"]["skipped"] == 3
    compared = json.loads(done.stdout.split("compared: ", 1)[1].split(" (", 1)[0])
    assert compared["cases"] == 297 and compared["judge_items_equal"] == 297 and compared["skipped"] == 3
    assert not (tmp_path / "d").exists()  # removed without --keep
