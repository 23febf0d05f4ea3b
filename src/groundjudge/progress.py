"""Judging progress: done/total, cache hits, errors, tokens, spend, rate and ETA.

On a terminal, a live bar. Anywhere else (CI logs, a pipe), one plain line at a steady interval,
so a long run never looks like a hang; nothing at all when quiet.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any, Self

PLAIN_INTERVAL_S = 30.0


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def plain_line(done: int, total: int, errors: int, cache_hits: int, tokens: int | str, cost_usd: float,
               elapsed_s: float, fresh_done: int) -> str:
    """One progress line; the rate and ETA count only items that needed a call, not cache hits.
    ``tokens``: a count, or the text of :meth:`Usage.tokens_text`."""
    tokens = f"{tokens} tokens" if isinstance(tokens, int) else tokens
    line = f"judging: {done}/{total} done, {errors} errors, {cache_hits} from cache, {tokens}, ${cost_usd:.4f}"
    if fresh_done and elapsed_s > 0:
        rate = fresh_done / elapsed_s
        line += f", {rate * 60:.1f} cases/min, ETA {_duration((total - done) / rate)}"
    return line + f", elapsed {_duration(elapsed_s)}"


class JudgeProgress:
    def __init__(self, quiet: bool = False, *, stream: IO[str] | None = None, interval_s: float = PLAIN_INTERVAL_S,
                 clock: Any = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = not quiet and self.stream.isatty()
        self.interval_s = interval_s
        self.clock = clock
        self._progress: Any = None
        self._task: Any = None
        self._total = 0
        self._started = 0.0
        self._last: Any = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("judging"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"), TimeRemainingColumn(), transient=False,
                console=Console(file=self.stream),
            )
            self._progress.start()
        return self

    def start(self, total: int) -> None:
        self._total = total
        self._started = self.clock()
        if self._progress is not None:
            self._task = self._progress.add_task("judge", total=total, detail="")
        elif not self.quiet and total:
            print(f"judging: {total} cases to judge (cached verdicts cost nothing)", file=self.stream, flush=True)
            # A steady heartbeat, even while one slow call is in flight.
            self._ticker = threading.Thread(target=self._tick, name="groundjudge-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._print(self._last, self.clock())

    def update(self, totals: Any) -> None:
        self._last = totals
        if self._progress is not None and self._task is not None:
            detail = (f"cache {totals.cache_hits} · errors {totals.errors} · "
                      f"{totals.usage.tokens_text()} · ${totals.usage.cost_usd:.4f}")
            self._progress.update(self._task, completed=totals.done, detail=detail)
            return
        if not self.quiet and totals.done == self._total:
            self._print(totals, self.clock())

    def _print(self, totals: Any, now: float) -> None:
        if totals is None:
            line = plain_line(0, self._total, 0, 0, 0, 0.0, now - self._started, 0)
        else:
            line = plain_line(totals.done, self._total, totals.errors, totals.cache_hits, totals.usage.tokens_text(),
                              totals.usage.cost_usd, now - self._started, totals.done - totals.cache_hits)
        print(line, file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._progress is not None:
            self._progress.stop()
