"""Appending labels: whole lines only, under concurrency and when a writer is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from groundjudge.calibrate.verdicts import load_labels
from groundjudge.contracts import HumanLabel
from groundjudge.label.session import CRITERIA
from groundjudge.label.store import append_label, append_line, read_labels, sidecar_path

ROOT = Path(__file__).resolve().parent.parent


def _append_many(path: str, writer: int, count: int) -> None:
    for i in range(count):
        append_label(Path(path), HumanLabel(query_id=f"w{writer}-{i}", config_id="cfg", rater=f"r{writer}",
                                            faithful=i % 2 == 0, note="x" * (i * 37 % 3000)))


def test_concurrent_appends_keep_every_line_whole(tmp_path):
    path = tmp_path / "labels" / "shared.jsonl"
    with ProcessPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(_append_many, str(path), w, 25) for w in range(4)]:
            f.result()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 100
    ids = {json.loads(line)["query_id"] for line in lines}
    assert len(ids) == 100
    by_rater = load_labels([path], CRITERIA)
    assert sorted(by_rater) == ["r0", "r1", "r2", "r3"] and all(len(v) == 25 for v in by_rater.values())
    assert not list(path.parent.glob(".shared.jsonl.*.tmp"))


WRITER = """
import sys
from pathlib import Path
from groundjudge.contracts import HumanLabel
from groundjudge.label.store import append_label
path = Path(sys.argv[1])
i = 0
while True:
    append_label(path, HumanLabel(query_id=f"k{i}", rater="killed", faithful=True, note="n" * 5000))
    i += 1
    if i == 5:
        print("ready", flush=True)
"""


def test_a_killed_writer_leaves_only_whole_lines(tmp_path):
    path = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05 * (attempt + 1))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        data = path.read_bytes()
        assert data.endswith(b"\n")
        labels = read_labels(path)  # every line parses as a whole label
        assert len(labels) == data.count(b"\n") >= 5
    before = len(read_labels(path))
    append_label(path, HumanLabel(query_id="after", rater="killed", faithful=False))
    assert len(read_labels(path)) == before + 1
    assert not list(tmp_path.glob(".killed.jsonl.*.tmp"))  # a killed writer's temporary file is cleared


def test_a_file_without_a_final_newline_gets_one_before_the_new_line(tmp_path):
    path = tmp_path / "hand.jsonl"
    path.write_text('{"query_id": "q1", "rater": "r", "faithful": true}', encoding="utf-8")
    append_label(path, HumanLabel(query_id="q2", rater="r", faithful=False, claims=None))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1]) == {
        "query_id": "q2", "config_id": None, "rater": "r", "faithful": False, "correct": None,
        "citations_supported": None}


def test_records_are_one_line_and_the_sidecar_is_not_a_labels_glob(tmp_path):
    path = tmp_path / "a.jsonl"
    append_line(path, {"note": "line one\nline two \u2028 \u2029 \x85 \u202e"})
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1
    assert json.loads(path.read_text(encoding="utf-8"))["note"] == "line one\nline two \u2028 \u2029 \x85 \u202e"
    assert sidecar_path(path).name == "a.jsonl.selection" and not sidecar_path(path).match("*.jsonl")
