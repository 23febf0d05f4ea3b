"""Progress without a terminal: a start line, a steady heartbeat while calls are in flight, and a
last line with rate and ETA; nothing when quiet."""

from __future__ import annotations

import io
import time

from groundjudge.judge.engine import EngineTotals
from groundjudge.judge.results import Usage
from groundjudge.progress import JudgeProgress, plain_line


def test_a_plain_line_counts_rate_and_eta_from_fresh_items_only() -> None:
    line = plain_line(done=30, total=90, errors=2, cache_hits=10, tokens=1234, cost_usd=0.5, elapsed_s=120.0,
                      fresh_done=20)
    assert line.startswith("judging: 30/90 done, 2 errors, 10 from cache, 1234 tokens, $0.5000")
    assert "10.0 cases/min" in line and "ETA 6m00s" in line and "elapsed 2m00s" in line
    assert "ETA" not in plain_line(done=5, total=9, errors=0, cache_hits=5, tokens=0, cost_usd=0.0,
                                   elapsed_s=3.0, fresh_done=0)


def test_without_a_terminal_a_heartbeat_goes_on_while_a_call_is_in_flight() -> None:
    stream = io.StringIO()
    totals = EngineTotals()
    with JudgeProgress(stream=stream, interval_s=0.01) as progress:
        progress.start(3)
        deadline = time.monotonic() + 60
        while stream.getvalue().count("judging: 0/3") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # nothing finishes, yet lines keep coming
        totals.done, totals.cache_hits, totals.usage = 3, 1, Usage(requests=2, prompt_tokens=10)
        progress.update(totals)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "judging: 3 cases to judge (cached verdicts cost nothing)"
    assert sum(line.startswith("judging: 0/3 done") for line in lines) >= 2
    assert lines[-1].startswith("judging: 3/3 done, 0 errors, 1 from cache, 10 tokens")


def test_quiet_prints_nothing() -> None:
    stream = io.StringIO()
    with JudgeProgress(quiet=True, stream=stream, interval_s=0.01) as progress:
        progress.start(2)
        time.sleep(0.05)
        progress.update(EngineTotals(done=2))
    assert stream.getvalue() == ""
