"""A progress bar for judging: done/total, cache hits, errors, tokens, spend and ETA.

Quiet when asked, or when standard error is not a terminal (CI logs stay clean).
"""

from __future__ import annotations

import sys
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class JudgeProgress:
    def __init__(self, quiet: bool = False) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> JudgeProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("judging"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"), TimeRemainingColumn(), transient=False,
            )
            self._progress.start()
        return self

    def start(self, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("judge", total=total, detail="")

    def update(self, totals: Any) -> None:
        if self._progress is None or self._task is None:
            return
        detail = (f"cache {totals.cache_hits} · errors {totals.errors} · "
                  f"tokens {totals.prompt_tokens + totals.completion_tokens} · ${totals.cost_usd:.4f}")
        self._progress.update(self._task, completed=totals.done, detail=detail)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
