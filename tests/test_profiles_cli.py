"""The replaced systems end to end: formats detected, files read unchanged, their own reports and
gates beside the native metrics, one README command per system."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.load.adapters import detect_format

EX = Path(__file__).resolve().parent.parent / "examples"

SYSTEMS = {
    "wfgy": (EX / "wfgy" / "gold.jsonl", [EX / "wfgy" / "trace.jsonl"], []),
    "wfgy-chunking": (EX / "wfgy-chunking" / "gold.jsonl", [EX / "wfgy-chunking" / "trace.jsonl"],
                      ["--live", str(EX / "wfgy-chunking" / "trace_live.jsonl")]),
    "kb-eval": (EX / "kb-eval" / "golden.jsonl", [EX / "kb-eval" / "results_a.jsonl", EX / "kb-eval" / "results_b.jsonl"], []),
    "day39": (EX / "day39" / "golden.jsonl", [EX / "day39" / "outputs.jsonl"], []),
}


@pytest.mark.parametrize("name", SYSTEMS)
def test_format_is_detected(name):
    golden, traces, _ = SYSTEMS[name]
    assert detect_format(golden, traces) == name
    assert detect_format(EX / "golden.jsonl", [EX / "traces" / "baseline.jsonl"]) == "native"


@pytest.mark.parametrize("name", SYSTEMS)
def test_profile_reports_beside_native_metrics(name, tmp_path):
    golden, traces, extra = SYSTEMS[name]
    args = ["metrics", "--profile", name, "--golden", str(golden), *sum((["--traces", str(t)] for t in traces), []),
            *extra, "--out", str(tmp_path), "--quiet"]
    result = CliRunner().invoke(main, args)
    own = json.loads((tmp_path / f"profile-{name}.json").read_text())
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["inputs"]["format"] == name and doc["profile"]["name"] == name
    assert doc["aggregate"]  # the native metrics of the converted data
    report = (tmp_path / "report.md").read_text()
    assert "## Aggregate metrics per config" in report and f"## Profile `{name}`" in report
    expected_exit = {True: 0, False: 1, None: 0}[doc["profile"]["passed"]]
    assert result.exit_code == expected_exit, result.output
    if name == "wfgy":
        assert set(own) >= {"precision", "chr", "under_refusal", "over_refusal", "pass"}
    if name == "day39":
        assert own["exit_code"] == result.exit_code


def test_wfgy_worked_example_passes_its_gates(tmp_path):
    gold = tmp_path / "gold.jsonl"
    trace = tmp_path / "trace.jsonl"
    gold.write_text("".join((EX / "wfgy" / "gold.jsonl").read_text().splitlines(keepends=True)[:3]))
    trace.write_text("".join((EX / "wfgy" / "trace.jsonl").read_text().splitlines(keepends=True)[:3]))
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold), "--traces", str(trace),
                                       "--out", str(tmp_path / "out"), "--quiet"])
    own = json.loads((tmp_path / "out" / "profile-wfgy.json").read_text())
    assert result.exit_code == 0 and own["pass"] is True
    assert (own["precision"], own["chr"], own["under_refusal"], own["over_refusal"]) == (1.0, 1.0, 0.0, 0.0)


def test_profile_needs_inputs_in_its_own_format(tmp_path):
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(EX / "golden.jsonl"),
                                       "--traces", str(EX / "traces" / "baseline.jsonl"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "golden.jsonl:1" in result.stderr
