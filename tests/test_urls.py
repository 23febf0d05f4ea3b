"""Credentials in a judge base URL never reach disk or the terminal (SPEC 10: secrets never reach
disk, including credentials inside a base URL); the client still uses the URL as given."""

from __future__ import annotations

import base64
import doctest
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import groundjudge.urls
from groundjudge.cli import EXIT_BATCH_PENDING, main
from groundjudge.urls import redact_url
from tests.support.openai_server import BatchBackend, ScriptedOpenAIServer
from tests.test_judge_batch import _one_attempt_config
from tests.test_run_cli import example_script

SECRET = "s3cret"


def test_doctests() -> None:
    assert doctest.testmod(groundjudge.urls).failed == 0


@pytest.mark.parametrize(("url", "shown"), [
    ("http://kim:s3cret@host:8000/v1", "http://***@host:8000/v1"),
    ("http://s3cret@host/v1", "http://***@host/v1"),
    ("https://host/v1?api-key=s3cret", "https://host/v1?api-key=***"),
    ("https://host/openai?api-version=2024-06-01&key=s3cret", "https://host/openai?api-version=***&key=***"),
    ("https://host/v1?s3cret", "https://host/v1?***"),
    ("https://host/v1#s3cret", "https://host/v1#***"),
    ("http://a:b@c@host/v1", "http://***@host/v1"),  # an @ inside the password
    ("http://host:8000/v1", "http://host:8000/v1"),  # nothing to hide: unchanged
    ("http://kim:s3cret@[::1/v1", "(a URL that could not be read: ***)"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown or shown.startswith("(")


def _files_holding(root: Path, text: str) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://kim:{SECRET}-pass@")


def test_credentials_in_the_base_url_never_reach_disk_or_the_terminal(tmp_path: Path) -> None:
    config = _one_attempt_config(tmp_path)
    runner = CliRunner()
    with ScriptedOpenAIServer(example_script) as srv:
        url = _with_userinfo(srv.base_url)
        result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                      "--judge-base-url", url, "--judge-model", srv.model, "--cache-dir",
                                      str(tmp_path / "cache"), "--out", str(tmp_path / "runs" / "live")])
        auth = {r.headers.get("authorization") for r in srv.requests}
    assert result.exit_code in (0, 1), result.output
    # the client used the URL as given: the user info went out as HTTP basic authentication
    assert auth == {"Basic " + base64.b64encode(f"kim:{SECRET}-pass".encode()).decode()}
    report = json.loads((tmp_path / "runs" / "live" / "report.json").read_text())
    assert report["judge"]["base_url"] == srv.base_url.replace("http://", "http://***@")
    assert (tmp_path / "runs" / "history.sqlite").exists()
    assert _files_holding(tmp_path, SECRET) == [] and SECRET not in result.output

    # an unreachable endpoint: its error messages do not quote the secret either
    result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                  "--judge-base-url", f"http://kim:{SECRET}@127.0.0.1:9/v1", "--judge-model", "m",
                                  "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "runs" / "down")])
    assert result.exit_code == 3 and SECRET not in result.output
    # and a key in the query: the client is given it, the report shows its name only
    with ScriptedOpenAIServer(example_script) as srv:
        result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                      "--judge-base-url", f"{srv.base_url}?api-key={SECRET}", "--judge-model",
                                      srv.model, "--cache-dir", str(tmp_path / "cache2"), "--out",
                                      str(tmp_path / "runs" / "query")])
    report = json.loads((tmp_path / "runs" / "query" / "report.json").read_text())
    assert report["judge"]["base_url"] == f"{srv.base_url}?api-key=***"
    assert _files_holding(tmp_path, SECRET) == [] and SECRET not in result.output


def test_a_batch_state_stores_the_url_redacted_and_collect_asks_for_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    config = _one_attempt_config(tmp_path)
    monkeypatch.delenv("GROUNDJUDGE_BASE_URL", raising=False)
    runner = CliRunner()
    run_dir = tmp_path / "runs" / "nightly"
    with ScriptedOpenAIServer(example_script, batches=BatchBackend()) as srv:
        url = _with_userinfo(srv.base_url)
        submitted = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                         "--judge-base-url", url, "--judge-model", srv.model, "--cache-dir",
                                         str(tmp_path / "cache"), "--out", str(run_dir), "--batch"])
        assert submitted.exit_code == EXIT_BATCH_PENDING, submitted.output
        state = json.loads((run_dir / "batch" / "state.json").read_text())
        assert state["config"]["judge"]["base_url"] == srv.base_url.replace("http://", "http://***@")
        assert state["redacted"] == ["judge.base_url"]
        assert _files_holding(tmp_path, SECRET) == []

        # collect reads the settings from the state: the URL it cannot know is asked for
        refused = runner.invoke(main, ["batch", "collect", str(run_dir), "--wait", "5"])
        assert refused.exit_code == 2 and srv.batches.batches and not srv.requests
        assert refused.stderr.strip().splitlines()[-1].strip() == (
            f"{run_dir / 'batch' / 'state.json'}: judge.base_url: the URL held credentials and is stored as "
            f"{srv.base_url.replace('http://', 'http://***@')} (never in full): set GROUNDJUDGE_BASE_URL to it, "
            "then run this again")
        # another endpoint in the environment is not taken for it
        monkeypatch.setenv("GROUNDJUDGE_BASE_URL", f"http://kim:{SECRET}-pass@127.0.0.1:9/v1")
        assert runner.invoke(main, ["batch", "status", str(run_dir)]).exit_code == 2
        monkeypatch.setenv("GROUNDJUDGE_BASE_URL", url)
        status = runner.invoke(main, ["batch", "status", str(run_dir)])
        assert status.exit_code == 0 and "82 requests" in status.stdout, status.output
        done = runner.invoke(main, ["batch", "collect", str(run_dir), "--wait", "10"])
        auth = {r.headers.get("authorization") for r in srv.other_requests}
    assert done.exit_code in (0, 1), done.output
    assert auth == {"Basic " + base64.b64encode(f"kim:{SECRET}-pass".encode()).decode()}
    assert json.loads((run_dir / "report.json").read_text())["judge"]["base_url"].startswith("http://***@")
    assert _files_holding(tmp_path, SECRET) == [] and SECRET not in done.output + status.output


def test_collect_takes_a_redacted_url_back_from_the_runs_config_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUNDJUDGE_BASE_URL", raising=False)
    config = _one_attempt_config(tmp_path)
    run_dir = tmp_path / "runs" / "nightly"
    with ScriptedOpenAIServer(example_script, batches=BatchBackend()) as srv:
        text = config.read_text().replace("[judge]", f'[judge]\nbase_url = "{_with_userinfo(srv.base_url)}"\n'
                                                     f'model = "{srv.model}"', 1)
        config.write_text(text)  # the user's own file holds the secret; groundjudge writes none
        submitted = CliRunner().invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                              "--cache-dir", str(tmp_path / "cache"), "--out", str(run_dir), "--batch"])
        assert submitted.exit_code == EXIT_BATCH_PENDING, submitted.output
        done = CliRunner().invoke(main, ["batch", "collect", str(run_dir), "--wait", "10"])
    assert done.exit_code in (0, 1), done.output
    assert [p for p in _files_holding(tmp_path, SECRET)] == ["groundjudge.toml"]
