"""The labelling page in headless Chromium (Debian's, driven by Playwright): three items labelled
with keys and clicks, the server killed and restarted, the labels in the file, the fourth item
next, hostile text inert, and `groundjudge calibrate` reading the labels as they are."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.label.store import read_batches
from tests.support.label_run import HOSTILE, make_label_run

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Screenshots go to GROUNDJUDGE_SCREENSHOTS when set (to look at them), else the test's own
# temporary folder: a fixed shared path may belong to another user.
SCREENSHOTS_ENV = os.environ.get("GROUNDJUDGE_SCREENSHOTS")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent: "
                                "`apt-get install -y chromium` installs Debian's Chromium, which this test drives")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabelProcess:
    """`groundjudge label ... --serve` as a real process, so that it can be killed."""

    def __init__(self, run_dir: Path, labels: Path, port: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "groundjudge.cli", "label", str(run_dir), "--rater", "tester", "--labels",
             str(labels), "--strategy", "random", "--batch", "6", "--seed", "4", "--serve", "--port", str(port),
             "--idle-minutes", "5"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stderr], daemon=True).start()
        while True:
            line = lines.get(timeout=60)
            if line.startswith("labelling page: "):
                self.url = line.split()[2]
                return

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_label_run(tmp_path_factory.mktemp("labelbrowser"))


def shown_item(page) -> tuple[str, str]:
    config_id, query_id = page.locator("#item-id").inner_text().split(" / ")
    return query_id, config_id


def check_inert(page) -> None:
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None
    assert page.locator("#item img, #item script").count() == 0


def test_label_three_kill_restart_resume_and_calibrate(run_dir, tmp_path):
    SCREENSHOTS = Path(SCREENSHOTS_ENV) if SCREENSHOTS_ENV else tmp_path / "screens"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    labels = tmp_path / "labels" / "tester.jsonl"
    port = free_port()
    server = LabelProcess(run_dir, labels, port)
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1100, "height": 1300})
        try:
            page = context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            page.goto(server.url)
            page.wait_for_selector("#item:not([hidden])")
            picks = [(q, c) for q, c, _, _ in read_batches(labels)[0].picks]
            assert len(picks) == 6
            assert page.locator("#progress-text").inner_text().startswith("0 / 6")
            assert shown_item(page) == picks[0]
            assert page.locator("#reveal").is_hidden()
            assert "an extra detail" not in page.content()  # the judge's claims stay hidden
            page.screenshot(path=str(SCREENSHOTS / "1-first-item.png"), full_page=True)

            # item 1: keys only
            page.keyboard.press("y")
            page.keyboard.press("3")
            page.keyboard.press("c")
            page.keyboard.press("s")
            page.locator("#note").fill("fine <script>alert(1)</script>")
            page.locator("#note").press("Escape")
            page.keyboard.press("Enter")
            page.wait_for_selector("#reveal:not([hidden])")
            assert "faithful:" in page.locator("#judge-summary").inner_text()
            check_inert(page)
            page.screenshot(path=str(SCREENSHOTS / "2-verdict-revealed.png"), full_page=True)
            page.keyboard.press("Enter")
            page.wait_for_function("document.querySelector('#reveal').hidden")
            assert shown_item(page) == picks[1]

            # item 2: clicks only
            page.click("#faithful-no")
            page.click("#correct-1")
            page.click("#citations-no")
            page.locator("#claims li.claim .claim-no").first.click()
            page.click("#submit")
            page.wait_for_selector("#reveal:not([hidden])")
            page.click("#next")
            page.wait_for_function("document.querySelector('#reveal').hidden")
            assert shown_item(page) == picks[2]

            # item 3: keys, with a claim picked by j/k
            page.keyboard.press("n")
            page.keyboard.press("0")
            page.keyboard.press("x")
            page.keyboard.press("j")
            page.keyboard.press("k")
            page.keyboard.press("u")
            page.keyboard.press("Enter")
            page.wait_for_selector("#reveal:not([hidden])")
            assert page.locator("#progress-text").inner_text().startswith("3 / 6")

            server.kill()
            rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
            assert [(r["query_id"], r["config_id"]) for r in rows] == picks[:3]
            assert [(r["faithful"], r["correct"], r["citations_supported"]) for r in rows] == [
                (True, 3, True), (False, 1, False), (False, 0, False)]
            assert rows[0]["note"] == "fine <script>alert(1)</script>" and rows[0]["claims"][0]["supported"] is True
            assert rows[1]["claims"][0]["supported"] is False and rows[1]["note"] is None
            assert rows[2]["claims"] == [{"text": rows[2]["claims"][0]["text"], "supported": False}]
            assert all(r["rater"] == "tester" for r in rows)

            server = LabelProcess(run_dir, labels, port)
            page.goto(server.url)
            page.wait_for_selector("#item:not([hidden])")
            assert shown_item(page) == picks[3]  # resumes at the fourth item
            assert page.locator("#progress-text").inner_text().startswith("3 / 6")
            page.screenshot(path=str(SCREENSHOTS / "3-after-restart.png"), full_page=True)
            assert page.evaluate("document.querySelectorAll('script').length") == 1  # ours only

            # the rest of the batch; the hostile case is among the six and must stay text
            for position in range(3, 6):
                assert shown_item(page) == picks[position]
                check_inert(page)
                if picks[position][0] == "h1":
                    visible = HOSTILE.replace("\u202e", "[U+202E]").replace("\u202d", "[U+202D]")
                    assert visible in page.locator("#question").inner_text()  # as text, bidi overrides shown
                    assert page.locator("#chunks .chunk .text").first.inner_text().endswith(visible)
                    page.locator("#chunks").scroll_into_view_if_needed()
                    page.screenshot(path=str(SCREENSHOTS / "4-hostile-item.png"), full_page=True)
                    link = page.locator("#claims a.cite").first
                    assert link.get_attribute("href") == "#chunk-0"
                page.keyboard.press("y")
                page.keyboard.press("2")
                page.keyboard.press("c")
                page.keyboard.press("Enter")
                page.wait_for_selector("#reveal:not([hidden])")
                check_inert(page)
                page.keyboard.press("Enter")
            page.wait_for_function("document.querySelector('#form').hidden")
            assert "This batch is done" in page.locator("#status").inner_text()
            page.screenshot(path=str(SCREENSHOTS / "5-batch-done.png"), full_page=True)
        finally:
            context.close()
            if server.proc.poll() is None:
                server.kill()
    assert not problems, problems

    rows = labels.read_text(encoding="utf-8").splitlines()
    assert len(rows) == 6
    result = CliRunner().invoke(main, ["calibrate", "--report", str(run_dir / "report.json"), "--labels",
                                       str(labels), "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    record = json.loads(next((tmp_path / "records").glob("*.json")).read_text())
    assert record["raters"] == {"tester": 6}
    assert record["criteria"]["faithful"]["judge_vs_human"]["n"] == 6
    assert record["criteria"]["correct"]["judge_vs_human"]["n"] == 6
