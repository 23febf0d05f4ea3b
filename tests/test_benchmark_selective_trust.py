"""benchmarks/selective_trust.py runs end to end on a synthetic file of the dev-set shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "selective_trust.py"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


def test_fits_on_one_half_and_measures_on_the_other(tmp_path: Path) -> None:
    path = tmp_path / "judge_agreement_claim_check.jsonl"
    assert run("--write-synthetic", str(path), "--n", "400").returncode == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 400 and {"query_id", "status", "label", "score", "supports", "human_faithful"} <= set(rows[0])
    done = run("--file", str(path), "--splits", "5")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "halves of 200 (fit) and 200 (measure)" in out
    assert "coverage on the measure half" in out and "all-or-nothing kappa rule" in out
    assert "over 5 seeded splits" in out and "lambda" in out


def test_a_broken_line_is_named_and_a_missing_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"query_id": "a", "status": "judged", "label": true, "human_faithful": true}\n{"query_id": \n')
    done = run("--file", str(path))
    assert done.returncode == 2 and f"{path}:2: invalid JSON" in done.stderr
    assert run("--file", str(tmp_path / "none.jsonl")).returncode == 2
