"""`groundjudge run` end to end against a scripted judge: reports, exit codes, kill and resume."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.judge.rubric import read_lock
from tests.support.judge_replies import claim_answer, question_in_request, verdict_for_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"
GOLDEN_IDS = [json.loads(line)["id"] for line in (ROOT / "examples" / "golden.jsonl").read_text().splitlines()
              if line.strip()]
LOCKED_HASH = read_lock(ROOT / "rubrics")["grounded_answer/v1"]


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDJUDGE_")}
    env.pop("OPENAI_API_KEY", None)
    return env


def groundjudge_run(srv_url: str, model: str, tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "groundjudge.cli", "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer",
            "--judge-base-url", srv_url, "--judge-model", model, "--cache-dir", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out"), *extra]


def check_report(report: dict[str, Any]) -> Counter:
    """Every case of every config is judged, skipped or judge_error, with a reason when not judged."""
    judge = report["judge"]
    counts: Counter = Counter()
    assert list(judge["per_config"]) == ["baseline", "candidate"]
    for cfg, section in judge["per_config"].items():
        per_case = section["cases"]
        assert list(per_case) == GOLDEN_IDS, cfg
        for cid, record in per_case.items():
            assert record["status"] in ("judged", "skipped", "judge_error"), (cfg, cid)
            if record["status"] == "judged":
                assert len(record["claims"]) >= 1 and set(record["criteria"]) == {
                    "faithful", "correct", "citations_supported"}
            else:
                assert record["reason"], (cfg, cid)
                assert record["criteria"] == {} and record["claims"] == []
            counts[record["status"]] += 1
        assert section["summary"]["status_counts"] == dict(Counter(r["status"] for r in per_case.values()))
    ident = judge["identity"]
    assert ident["rubric"] == {"id": "grounded_answer", "version": 1, "hash": LOCKED_HASH}
    return counts


BAD_QUESTION = next(json.loads(line)["question"] for line in (ROOT / "examples" / "golden.jsonl").read_text()
                    .splitlines() if '"q002"' in line)


def example_script(body: dict, index: int) -> Any:
    """A judge that answers every case well, except q002: an off-menu verdict, even on repair."""
    if question_in_request(body) == BAD_QUESTION:
        return Reply('{"claims": [{"claim": "x", "cited": [], "verdict": "plausible", "support": []}], '
                     '"correctness": 2, "reason": "?"}')
    return verdict_for_request(body)


def test_run_example_reports_every_case(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(example_script) as srv:
        proc = subprocess.run(groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet"), cwd=ROOT,
                              env=cli_env(), capture_output=True, text=True, timeout=120)
        calls = srv.call_count
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    counts = check_report(report)
    # 51 cases x 2 configs: 20 refusals decided without a judge, q002 x 2 invalid, the rest judged
    assert counts == {"judged": 80, "skipped": 20, "judge_error": 2}
    assert calls == 80 + 2 * 2  # one call per case, plus one repair for each invalid verdict
    judge = report["judge"]
    assert judge["identity"]["model"] == srv.model and judge["base_url"] == srv.base_url
    assert judge["identity"]["decoding"]["temperature"] == 0.0
    assert judge["totals"]["usage"]["requests"] == calls and judge["totals"]["judge_errors"] == 2
    for cfg in ("baseline", "candidate"):
        record = judge["per_config"][cfg]["cases"]["q002"]
        assert record["status"] == "judge_error" and record["reason"].startswith("invalid verdict after one repair")
    skipped = judge["per_config"]["baseline"]["cases"]["q009"]
    assert (skipped["status"], skipped["reason"], skipped["usage"]["requests"]) == (
        "skipped", "decided deterministically: abstain has no claims to judge", 0)
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "## Judge" in markdown and "| judged / skipped / judge_error | 41 / 9 / 1 | 39 / 11 / 1 |" in markdown
    assert "`q002` (baseline): invalid verdict after one repair" in markdown

    # an unchanged re-run with --keep-errors: zero calls, the same verdicts
    with ScriptedOpenAIServer(example_script) as srv:
        again = subprocess.run(groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet", "--keep-errors"),
                               cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
        assert srv.call_count == 0
    assert again.returncode == 0, again.stderr
    rerun = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(rerun) == counts
    assert rerun["judge"]["totals"]["cache_hits"] == 82

    # by default a re-run asks the errored cases again (call + repair each), judged ones cost nothing
    with ScriptedOpenAIServer(example_script) as srv:
        third = subprocess.run(groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet"), cwd=ROOT,
                               env=cli_env(), capture_output=True, text=True, timeout=120)
        assert srv.call_count == 4
        assert {question_in_request(r.body) for r in srv.requests} == {BAD_QUESTION}
    assert third.returncode == 0, third.stderr
    rerun = json.loads((tmp_path / "out" / "report.json").read_text())
    assert check_report(rerun) == counts and rerun["judge"]["totals"]["cache_hits"] == 80
    assert rerun["judge"]["per_config"]["candidate"]["summary"] == judge["per_config"]["candidate"]["summary"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_judge_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from groundjudge.judge import session
    monkeypatch.setattr(session, "ClientSettings", functools.partial(session.ClientSettings, backoff_initial_s=0.0))
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", url,
                                       "--judge-model", "m", "--cache-dir", str(tmp_path / "cache"),
                                       "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "judge stopped" in result.output and "connection failed" in result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    counts = check_report(report)
    assert counts == {"judge_error": 82, "skipped": 20}
    reasons = Counter(r["reason"].split(":")[0] for s in report["judge"]["per_config"].values()
                      for r in s["cases"].values() if r["status"] == "judge_error")
    assert set(reasons) == {"connection failed after 4 attempt(s)", "not sent"}


def test_killed_run_resumes_without_repeating_answered_calls(tmp_path: Path) -> None:
    cases, answered_before_kill = 6, 3
    with ScriptedOpenAIServer(verdict_for_request, delay_s=0.3) as srv:
        command = groundjudge_run(srv.base_url, srv.model, tmp_path, "--concurrency", "1",
                                  "--max-cases", str(cases), "--quiet")
        proc = subprocess.Popen(command, cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            # the (k+1)-th call arrives only after the k-th reply was stored: kill it mid-call
            wait_for(lambda: srv.call_count > answered_before_kill or proc.poll() is not None)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        first_run = srv.requests
        answered = [r for r in first_run if r.responded_at is not None]
        assert len(first_run) == answered_before_kill + 1 and len(answered) == answered_before_kill
        assert not (tmp_path / "out" / "report.json").exists()  # nothing half-written

        srv.reset()
        srv.delay_s = 0.0
        restart = subprocess.run(command, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
        second_run = srv.requests
    assert restart.returncode == 0, restart.stderr
    answered_questions = {question_in_request(r.body) for r in answered}
    assert not answered_questions & {question_in_request(r.body) for r in second_run}
    assert len(answered) + len(second_run) == cases

    report = json.loads((tmp_path / "out" / "report.json").read_text())
    counts = check_report(report)
    assert counts["judged"] == cases and counts["judge_error"] == 0
    assert report["judge"]["totals"]["cache_hits"] == answered_before_kill
    assert report["judge"]["skip_reasons"]["budget"] == 82 - cases


@pytest.mark.parametrize("args", [[], ["--golden", "missing.jsonl", "--traces", "missing-too.jsonl"]])
def test_bad_inputs_are_reported_before_the_embedded_judge_is_touched(tmp_path: Path, args: list[str]) -> None:
    """No judge configured means the embedded one, yet bad inputs stop the run first: the model is
    not assembled, no server starts, nothing is written."""
    env = {**cli_env(), "GROUNDJUDGE_MODELS_DIR": str(tmp_path / "models")}
    proc = subprocess.run([sys.executable, "-m", "groundjudge.cli", "run", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "error: bad input" in proc.stderr
    assert ("give --golden" in proc.stderr) if not args else ("missing.jsonl" in proc.stderr)
    assert not (tmp_path / "models").exists() and not (tmp_path / "cache").exists()
    assert not (tmp_path / "runs").exists()
    assert "embedded judge" not in proc.stderr


def test_a_fully_cached_run_never_starts_the_embedded_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verdicts cached under the embedded judge's model id: a re-run needs no call, so the
    session never starts a server (here one could not even start: its parts are not found)."""
    from groundjudge.judge import local

    with ScriptedOpenAIServer(verdict_for_request) as srv:
        srv.model = local.MODEL_ID
        first = subprocess.run(groundjudge_run(srv.base_url, local.MODEL_ID, tmp_path, "--quiet", "--max-cases", "4"),
                               cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
    env = {**cli_env(), "GROUNDJUDGE_MODELS_DIR": str(tmp_path / "no-models")}
    # no base URL: the embedded judge, with the same pinned model id and decoding as above
    cmd = [sys.executable, "-m", "groundjudge.cli", "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--cache-dir",
           str(tmp_path / "cache"), "--out", str(tmp_path / "again"), "--max-cases", "4", "--concurrency", "4"]
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    report = json.loads((tmp_path / "again" / "report.json").read_text())
    assert report["judge"]["totals"]["cache_hits"] == 4 and report["judge"]["base_url"] is None
    assert not (tmp_path / "no-models").exists()


def test_the_program_leaves_at_once_with_everything_written(tmp_path: Path) -> None:
    """`groundjudge run` as a program ends with os._exit once the reports are written (no
    seconds spent freeing a nightly run's objects): its printed summary, every report file, the
    history row and the exit code are all there, as in a run that ends normally (CliRunner)."""
    import sqlite3

    with ScriptedOpenAIServer(example_script) as srv:
        command = groundjudge_run(srv.base_url, srv.model, tmp_path, "--history", str(tmp_path / "h.sqlite"))
        proc = subprocess.run(command, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "verdict: PASS" in proc.stdout and proc.stdout.rstrip().endswith("and triage.md"), proc.stdout
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["cases.parquet", "report.html", "report.json", "report.md",
                                                      "triage.jsonl", "triage.md"]
    check_report(json.loads((out / "report.json").read_text()))
    with sqlite3.connect(tmp_path / "h.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM run_values").fetchone()[0] > 0
    again = CliRunner().invoke(main, [
        "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", "http://127.0.0.1:9/v1",
        "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "again"),
        "--no-history", "--quiet", "--keep-errors"], env={"GROUNDJUDGE_BASE_URL": None, "GROUNDJUDGE_MODEL": None})
    assert again.exit_code == proc.returncode and (tmp_path / "again" / "report.json").exists(), again.output


# --- Ctrl-C ---------------------------------------------------------------------------------------

# Starts a Python program with SIGINT at its default, then becomes that program (exec keeps a
# default disposition). A shell without job control starts background commands with SIGINT
# ignored, the ignore is inherited, and a Python that starts with it ignored leaves it so: the
# suite run in the background (a CI runner's shell) would otherwise send these tests' Ctrl-C to
# a process that cannot receive it. (Not preexec_fn: the scripted server's threads are running.)
SIGINT_AS_AT_A_TERMINAL = [sys.executable, "-c", ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                                                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")]


def test_ctrl_c_ends_a_run_with_130_and_the_next_run_resumes(tmp_path: Path) -> None:
    """SIGINT while the run waits on a slow judge: exit code 130 (1 would read as a failed
    gate), one line, no traceback, nothing half-written; the judge session closed cleanly, so
    the replies stored before the interrupt serve the next run."""
    cases, answered_before = 6, 2
    with ScriptedOpenAIServer(verdict_for_request, delay_s=0.5) as srv:
        command = groundjudge_run(srv.base_url, srv.model, tmp_path, "--concurrency", "1", "--max-cases", str(cases),
                                  "--no-history")
        proc = subprocess.Popen([*SIGINT_AS_AT_A_TERMINAL, *command[1:]], cwd=ROOT, env=cli_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: srv.call_count > answered_before or proc.poll() is not None)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        answered = [r for r in srv.requests if r.responded_at is not None]
        assert proc.returncode == 130, stderr
        assert stderr.rstrip().endswith("interrupted") and "Traceback" not in stderr and "Aborted" not in stderr
        assert not (tmp_path / "out" / "report.json").exists()

        srv.reset()
        srv.delay_s = 0.0
        again = subprocess.run(command, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)
        asked_again = {question_in_request(r.body) for r in srv.requests}
    assert again.returncode == 0, again.stderr
    assert len(answered) >= answered_before and not asked_again & {question_in_request(r.body) for r in answered}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["judge"]["totals"]["cache_hits"] == len(answered)


FAKE_EMBEDDED_SERVER = '''
import sys, time
from pathlib import Path
from tests.support.openai_server import Reply, ScriptedOpenAIServer

port, model, asked = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def script(body, index):
    asked.write_text("asked")
    return Reply("{}", delay_s=120)  # the judge is slow: the run waits on it

with ScriptedOpenAIServer(script, model=model, port=port) as srv:
    while srv.running:
        time.sleep(0.1)
'''

EMBEDDED_DRIVER = '''
import sys, types
from pathlib import Path
import groundjudge.judge.local as local

marker, fake_server, asked = sys.argv[1], sys.argv[2], sys.argv[3]
# the embedded judge's server and model, stood in for by a slow scripted server
sys.modules["llama_cpp"] = types.ModuleType("llama_cpp")
sys.modules["llama_cpp.server"] = types.ModuleType("llama_cpp.server")
local.assemble_model = lambda models_dir, log=None: Path(models_dir) / "model.gguf"
local.LocalJudge.command = lambda self, model_path: [sys.executable, fake_server, str(self.port), self.model_id, asked]
stop = local.LocalJudge.stop

def recorded_stop(self):
    stop(self)
    if self.process is not None:
        Path(marker).write_text(f"{self.process.pid} {self.process.returncode}")

local.LocalJudge.stop = recorded_stop
from groundjudge.cli import main
main(sys.argv[4:])
'''


def test_ctrl_c_stops_the_embedded_judge_before_exiting_130(tmp_path: Path) -> None:
    """No judge base URL: the run starts the embedded judge (here a slow scripted server in its
    place) and is interrupted while it waits on it. The session stops the server on the way
    out, and the exit code is 130."""
    (tmp_path / "models").mkdir()
    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_EMBEDDED_SERVER)
    driver = tmp_path / "driver.py"
    driver.write_text(EMBEDDED_DRIVER)
    marker, asked = tmp_path / "stopped", tmp_path / "asked"
    env = {**cli_env(), "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "GROUNDJUDGE_MODELS_DIR": str(tmp_path / "models")}
    command = [sys.executable, str(driver), str(marker), str(fake), str(asked), "run", "--config", str(EXAMPLE),
               "--rubric", "grounded_answer", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
               "--max-cases", "2", "--no-history", "--quiet"]
    proc = subprocess.Popen([*SIGINT_AS_AT_A_TERMINAL, *command[1:]], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: asked.exists() or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    pid, code = marker.read_text().split()
    assert code != "None"  # the session stopped the server: it had exited when stop() returned
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
    assert not (tmp_path / "out" / "report.json").exists()


# --- an --out the reports could not be written to: said before any judge call ---------------------

@contextlib.contextmanager
def unwritable(folder: Path) -> Any:
    """``folder`` made unwritable for this process: by its mode, and for root (whom modes do not
    stop) by the immutable attribute; the test is skipped where neither can be set."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    immutable = False
    try:
        if os.access(folder, os.W_OK):
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
            if not immutable:
                pytest.skip("cannot make a folder unwritable for this user here")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def _run_into(srv: ScriptedOpenAIServer, tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet", *extra)
    args[args.index("--out") + 1] = str(out)
    return subprocess.run(args, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120)


def test_an_out_that_is_a_file_or_unwritable_stops_before_any_judge_call(tmp_path: Path) -> None:
    afile = tmp_path / "taken"
    afile.write_text("not a folder\n")
    with ScriptedOpenAIServer(example_script) as srv:
        results = {"a file": _run_into(srv, tmp_path, afile), "inside a file": _run_into(srv, tmp_path, afile / "run"),
                   "junit a folder": _run_into(srv, tmp_path, tmp_path / "out", "--junit", str(tmp_path))}
        with unwritable(tmp_path / "locked") as locked:
            results["unwritable"] = _run_into(srv, tmp_path, locked / "run")
            results["history unwritable"] = _run_into(srv, tmp_path, tmp_path / "out",
                                                      "--history", str(locked / "history.sqlite"))
        calls = srv.call_count
    expected = {"a file": f"{afile}: out: {afile} is a file, not a folder",
                "inside a file": f"{afile / 'run'}: out: {afile} is a file, not a folder",
                "junit a folder": f"{tmp_path}: {tmp_path} is a folder: give a file name",
                "unwritable": f"{tmp_path / 'locked' / 'run'}: out: {tmp_path / 'locked'} cannot be written",
                "history unwritable": f"{tmp_path / 'locked' / 'history.sqlite'}: {tmp_path / 'locked'} cannot be"}
    for name, proc in results.items():
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and lines[0] == "error: bad input" and len(lines) == 2, (name, proc.stderr)
        assert lines[1].startswith(expected[name]), (name, lines[1])
    assert calls == 0 and not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
    assert afile.read_text() == "not a folder\n"


def test_metrics_and_compare_refuse_an_out_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "taken"
    afile.write_text("x")
    result = CliRunner().invoke(main, ["metrics", "--config", str(EXAMPLE), "--out", str(afile)])
    assert result.exit_code == 2 and f"{afile}: out: {afile} is a file, not a folder" in result.stderr
    run = CliRunner().invoke(main, ["metrics", "--config", str(EXAMPLE), "--out", str(tmp_path / "m")])
    assert run.exit_code == 0, run.output
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "m"), "--out", str(afile / "cmp")])
    assert result.exit_code == 2 and f"{afile} is a file, not a folder" in result.stderr


def test_a_judge_reply_nested_100000_deep_is_a_judge_error_not_a_crash(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000

    def script(body: dict, index: int) -> Any:
        return Reply('{"claims": ' + deep + "}") if question_in_request(body) == BAD_QUESTION else \
            verdict_for_request(body)

    with ScriptedOpenAIServer(script) as srv:
        proc = subprocess.run(groundjudge_run(srv.base_url, srv.model, tmp_path, "--quiet"), cwd=ROOT,
                              env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for cfg in ("baseline", "candidate"):
        case = report["judge"]["per_config"][cfg]["cases"]["q002"]
        assert case["status"] == "judge_error" and "not a JSON object" in case["reason"]


@pytest.mark.parametrize("given", ["claim_check/4", "claim_check/v0", "/v4", "claim_check/v4x"])
def test_a_rubric_version_that_is_not_id_slash_vn_is_one_line_and_exit_2(tmp_path: Path, given: str) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", given,
                                       "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2 and "--rubric" in result.output and given in result.output
    assert not (tmp_path / "out").exists()


def test_rubric_id_slash_version_pins_that_version(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(claim_answer) as srv:
        result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", "claim_check/v3",
                                           "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                                           "--cache-dir", str(tmp_path / "cache"), "--max-cases", "2",
                                           "--out", str(tmp_path / "out"), "--no-history", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    rubric = json.loads((tmp_path / "out" / "report.json").read_text())["judge"]["identity"]["rubric"]
    assert (rubric["id"], rubric["version"]) == ("claim_check", 3)


def test_a_run_leaves_pythons_collector_as_it_found_it(tmp_path: Path) -> None:
    """The run raises the collector's thresholds before loading and freezes what it loaded; a
    run that stops at bad inputs, like any other, leaves both as they were (a notebook that
    calls it keeps its own settings)."""
    import gc

    from groundjudge.api import resolve_config
    from groundjudge.cli import run_and_report
    from groundjudge.errors import InputError

    config = resolve_config(EXAMPLE, {"inputs.golden": str(tmp_path / "missing.jsonl"), "judge.base_url": "http://127.0.0.1:9/v1"})
    before = gc.get_threshold()
    gc.set_threshold(701, 11, 12)
    try:
        with pytest.raises(InputError, match="missing.jsonl"):
            run_and_report(config, tmp_path / "out", quiet=True, junit=None)
        assert gc.get_threshold() == (701, 11, 12) and gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)
    assert not (tmp_path / "out").exists()
