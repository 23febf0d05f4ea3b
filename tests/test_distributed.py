"""``groundjudge run --engine ray``: the metric batches and the judge's cache lookup on a real Ray
cluster (a head and two worker nodes on 127.0.0.1) give exactly the single-process run's
report.json and cases.parquet; without Ray installed the engine is a one-line input error."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import verdict_for_request
from tests.support.openai_server import DEFAULT_MODEL, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"
NOWHERE = "http://127.0.0.1:9/v1"  # nothing listens: a run that needed a judge call would fail


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray cluster started for this module (``tests/support/ray_cluster.py``); its address."""
    pytest.importorskip("ray.data", reason="the ray extra is not installed: pip install 'groundjudge[ray]'")
    temp = tmp_path_factory.mktemp("ray")
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.ray_cluster", str(temp)], cwd=ROOT, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: lines.put(proc.stdout.readline() if proc.stdout else ""), daemon=True).start()
    try:
        address = lines.get(timeout=180).strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", address), f"the cluster did not start: {address!r}"
        yield address
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the helper stops the cluster it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # its own process group: the helper and the nodes it started
            proc.wait()


# Small batches, the same for both engines, so that the example's 82 pairs make several
# batches for the cluster to spread over its nodes.
SMALL_BATCHES = ("import groundjudge.metrics.evaluate as e, groundjudge.judge.on_ray as o\n"
                 "e.BATCH = o.LOOKUP_BATCH = 10\n"
                 "from groundjudge.cli import main; main()")


def _run(cwd: Path, out: Path, cache: Path, base_url: str, model: str, *extra: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", SMALL_BATCHES, "run", "--config", str(EXAMPLE),
                           "--rubric", "grounded_answer", "--judge-base-url", base_url, "--judge-model", model,
                           "--cache-dir", str(cache), "--out", str(out), "--no-history", *extra],
                          cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_ray_engine_on_two_worker_nodes_gives_the_single_process_results(
        cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR", "GITHUB_STEP_SUMMARY",
                "RAY_ADDRESS", "GROUNDJUDGE_WORKERS"):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(verdict_for_request) as srv:  # warm the cache
        first, output = _run(tmp_path, tmp_path / "first", cache, srv.base_url, srv.model, "--quiet")
        assert first in (0, 1), output
        assert srv.requests, "the first run judged through the scripted server"

    local, local_output = _run(tmp_path, tmp_path / "local", cache, NOWHERE, DEFAULT_MODEL)
    ray, ray_output = _run(tmp_path, tmp_path / "ray", cache, NOWHERE, DEFAULT_MODEL, "--engine", "ray",
                           "--ray-address", cluster)
    assert ray == local == first, ray_output

    local_doc = json.loads((tmp_path / "local" / "report.json").read_text())
    ray_doc = json.loads((tmp_path / "ray" / "report.json").read_text())
    assert local_doc["judge"]["totals"]["cache_hits"] == 82 and local_doc["judge"]["cache"]["hits"] == 82
    assert ray_doc == local_doc
    assert pq.read_table(tmp_path / "ray" / "cases.parquet").equals(pq.read_table(tmp_path / "local" / "cases.parquet"))
    for name in ("report.md", "triage.jsonl", "triage.md"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name

    # the batches ran on the cluster, on both worker nodes (its head node runs no tasks)
    assert f"ray: metrics ran on 2 node(s) of {cluster}" in ray_output, ray_output
    assert f"ray: judge cache lookup ran on 2 node(s) of {cluster}" in ray_output, ray_output
    assert "ray:" not in local_output


def test_without_ray_installed_the_ray_engine_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    script = ("import sys; sys.modules['ray'] = None  # as if Ray were not installed\n"
              "from groundjudge.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", script, "run", "--config", str(EXAMPLE), "--engine", "ray",
                           "--judge-base-url", NOWHERE, "--judge-model", DEFAULT_MODEL,
                           "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    # the usual input error: its heading, then one line naming the option and the install command
    assert proc.stderr.strip().splitlines() == [
        "error: bad input",
        "  command line: --engine: the ray engine needs Ray Data, which is not installed: pip install "
        + "'groundjudge[ray]'"], proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_ray_address_without_the_ray_engine_is_an_input_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--ray-address", "127.0.0.1:6379",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "--ray-address" in result.output and "only with --engine ray" in result.output
    assert not (tmp_path / "out").exists()
