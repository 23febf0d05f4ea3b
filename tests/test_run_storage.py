"""What `groundjudge run` leaves behind when its judge dies, its history is damaged or its disk
is full: an honest exit code, every report or none, and no history row that is not a data point.

A judge that dies mid-run ends with exit 3 and its run is kept in the history as not
comparable (no trend point, no comparison's other side); a history database that cannot be
read costs one warning line and nothing else; reports that cannot be written (a full disk)
give one line and exit 2, leave the old reports as they were and add nothing to the history.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.history import HistoryStore
from tests.support.judge_replies import claim_answer
from tests.support.openai_server import Disconnect, ScriptedOpenAIServer
from tests.test_run_faults import example_config, not_a_crash

ROOT = Path(__file__).resolve().parent.parent


def run(config: Path, srv: ScriptedOpenAIServer, tmp_path: Path, out: str, history: Path, *extra: str) -> Any:
    return CliRunner().invoke(main, ["run", "--config", str(config), "--judge-base-url", srv.base_url,
                                     "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
                                     "--out", str(tmp_path / out), "--history", str(history), *extra])


def dies_after(calls: int):
    """A judge that answers ``calls`` questions, then goes away for good (its port closes)."""
    box: dict[str, ScriptedOpenAIServer] = {}

    def script(body: dict, index: int) -> Any:
        if index < calls:
            return claim_answer(body, index)
        threading.Thread(target=box["srv"].stop, daemon=True).start()
        return Disconnect()

    return box, script


def test_a_judge_that_dies_mid_run_exits_3_and_its_run_is_no_data_point(tmp_path: Path) -> None:
    config = example_config(tmp_path)
    history = tmp_path / "history.sqlite"
    with ScriptedOpenAIServer(claim_answer) as srv:
        first = run(config, srv, tmp_path, "first", history, "--cache-dir", str(tmp_path / "first-cache"))
    assert first.exit_code in (0, 1) and not_a_crash(first), first.output
    box, script = dies_after(12)
    with ScriptedOpenAIServer(script) as srv:
        box["srv"] = srv
        died = run(config, srv, tmp_path, "died", history)
    assert died.exit_code == 3, died.output
    assert "judge stopped" in died.output and "connection failed" in died.output
    judge = json.loads((tmp_path / "died" / "report.json").read_text())["judge"]
    statuses = [c["status"] for s in judge["per_config"].values() for c in s["cases"].values()]
    assert "judged" in statuses and "judge_error" in statuses  # some answers came before it died

    store = HistoryStore(history)
    runs = store.runs()
    assert [r.summary.comparable for r in runs] == [True, False]
    assert "could not judge every case" in (runs[1].summary.not_comparable or "")
    cli = CliRunner().invoke(main, ["history", "--history", str(history), "--config", "candidate",
                                    "--metric", "faithfulness", "--json"])
    assert cli.exit_code == 0, cli.output
    points = [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")]
    assert [p["run_id"] for p in points] == [runs[0].id]  # the dead run is no point
    assert f"run {runs[1].id}" in cli.stderr and "not comparable" in cli.stderr


def test_a_damaged_history_costs_one_warning_line_and_never_the_reports(tmp_path: Path) -> None:
    config = example_config(tmp_path)
    history = tmp_path / "history.sqlite"
    history.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"\xff" * 8000)  # a header, then garbage
    with ScriptedOpenAIServer(claim_answer) as srv:
        result = run(config, srv, tmp_path, "out", history)
    assert result.exit_code in (0, 1) and not_a_crash(result), result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(history) in warnings[0] and "mv " in warnings[0], result.stderr
    for name in ("report.json", "report.md", "report.html", "triage.md", "triage.jsonl"):
        assert (tmp_path / "out" / name).exists(), name
    # the same history asked for later: one line, exit 2
    cli = CliRunner().invoke(main, ["history", "--history", str(history)])
    assert cli.exit_code == 2 and "cannot be read" in cli.output and "Traceback" not in cli.output


def _can_mount_a_small_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_a_small_tmpfs(), reason="needs user and mount namespaces (unshare -rm)")
def test_a_full_disk_is_one_line_keeps_the_old_reports_and_adds_no_history_row(tmp_path: Path) -> None:
    """The run folder on a 64 kB file system (a tmpfs in a mount namespace of the test's own):
    the first run's reports fit nowhere near. Its old report.md, planted there, must survive."""
    config = example_config(tmp_path)
    history = tmp_path / "history.sqlite"
    mount = tmp_path / "small"
    mount.mkdir()
    with ScriptedOpenAIServer(claim_answer) as srv:
        command = [sys.executable, "-m", "groundjudge.cli", "run", "--config", str(config), "--judge-base-url",
                   srv.base_url, "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
                   "--out", str(mount / "run"), "--history", str(history), "--quiet"]
        script = (f"mount -t tmpfs -o size=64k tmpfs {mount} && mkdir {mount}/run && "
                  f"echo 'old report' > {mount}/run/report.md && "
                  f"{' '.join(command)}; code=$?; echo \"exit=$code\"; ls -A {mount}/run; cat {mount}/run/report.md")
        proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                              cwd=ROOT)
    lines = proc.stdout.splitlines()
    assert "exit=2" in lines, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "Traceback" not in proc.stderr, proc.stderr
    assert "not added to the history" in errors[0]
    assert lines[lines.index("exit=2") + 1:] == ["report.md", "old report"]  # no temporary file, the old report
    assert not history.exists() or HistoryStore(history).runs() == []
    if history.exists():
        with sqlite3.connect(history) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
