"""`groundjudge label` without --serve: draws and records a batch, prints the CIs, resumes an
unfinished batch, refuses bad input with exit code 2; `calibrate` reads what the page wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.contracts import HumanLabel
from groundjudge.label.store import append_label, read_batches, sidecar_path
from tests.support.label_run import make_label_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_label_run(tmp_path_factory.mktemp("labelcli"))


def label(*args: str):
    return CliRunner().invoke(main, ["label", *args], catch_exceptions=False)


def test_draw_print_resume_and_calibrate(run_dir, tmp_path):
    labels = tmp_path / "labels" / "kim.jsonl"
    first = label(str(run_dir), "--rater", "kim", "--labels", str(labels), "--batch", "4", "--seed", "9",
                  "--strategy", "stratified")
    assert first.exit_code == 0, first.output
    assert "batch 1 for kim: new (stratified, seed 9), 0/4 labelled" in first.output
    faithful_row = next(line for line in first.output.splitlines() if "│ faithful" in line)
    cells = [c.strip() for c in faithful_row.split("│")[1:-1]]
    assert cells[:3] == ["faithful", "0", "–"] and 0 < float(cells[5]) < 1  # no labels yet; expected CI after
    assert "before any label" in first.output
    assert "the judge gave no confidences" in first.output
    batches = read_batches(labels)
    assert len(batches) == 1 and len(batches[0].picks) == 4 and sidecar_path(labels).exists()

    # two labels, then the same command resumes the same batch
    for q, c, _, _ in batches[0].picks[:2]:
        append_label(labels, HumanLabel(query_id=q, config_id=c, rater="kim", faithful=True, correct=3,
                                        citations_supported=True))
    again = label(str(run_dir), "--rater", "kim", "--labels", str(labels), "--batch", "4", "--seed", "1")
    assert again.exit_code == 0 and "resumed unfinished, 2/4 labelled" in again.output
    assert len(read_batches(labels)) == 1

    result = CliRunner().invoke(main, ["calibrate", "--report", str(run_dir / "report.json"), "--labels",
                                       str(labels), "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    record = json.loads(next((tmp_path / "records").glob("*.json")).read_text())
    assert record["raters"] == {"kim": 2} and record["criteria"]["faithful"]["judge_vs_human"]["n"] == 2


def test_bad_input_exits_2(tmp_path):
    (tmp_path / "report.json").write_text('{"judge": ')
    result = CliRunner().invoke(main, ["label", str(tmp_path), "--rater", "x"])
    assert result.exit_code == 2 and "report.json:1: invalid JSON" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["label", str(empty), "--rater", "x"])
    assert result.exit_code == 2 and "no report.json" in result.output
