"""A run's history record: built before the run's reports are written, appended after they all
landed, so a run whose reports failed leaves no row; a history that cannot be read or written
costs the run nothing but its row, and says how to recover in one line."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.history.store import HistoryStore, StoredRun
from groundjudge.history.summary import Packed, RunSummary, build_summary, pack_report
from groundjudge.history.trend import default_metrics, trend, trend_view
from groundjudge.metrics.evaluate import MetricsRun
from groundjudge.report.document import ReportDocument

__all__ = ["PendingHistory", "append_history", "pending_record"]


@dataclass
class PendingHistory:
    """A run's history record, built before the reports are written and appended after they
    all landed (``append_history``): a run whose reports failed leaves no row."""

    path: Path
    summary: RunSummary
    packed: Packed
    trend: dict[str, Any] | None  # the HTML report's trend chart, this run included
    problem: str | None = None  # the history could not be read: nothing is appended


def pending_record(document: ReportDocument, out_dir: str | Path, path: str | Path, *,
                   hashes: Mapping[str, str | None], not_comparable: str | None, gated_configs: Sequence[str],
                   prefer: Sequence[str], last: int | None, metrics: MetricsRun | None = None) -> PendingHistory:
    """The run's record and the trend chart's data for the last gated config (else the run's
    last config) over the ``last`` runs, this run included; nothing is written. ``hashes``: the
    input files' (``summary.data_hashes``); ``not_comparable``: why the run is kept but never a
    point of a trend nor the run another is compared with; ``prefer``: the metrics to chart
    first; ``metrics``: the run's metrics, whose tables the per-case columns are read from. A
    history that cannot be read gives a record with ``problem`` set."""
    summary = build_summary(document, hashes, out_dir, not_comparable=not_comparable)
    packed = pack_report(document, metrics)
    config = (list(gated_configs) or list(summary.configs))[-1]
    charted = (default_metrics(StoredRun(id=0, summary=summary), config, prefer=list(prefer))
               if config in summary.configs else [])
    try:
        points = trend(HistoryStore(path), charted, config=config, last=last, pending=(summary, packed))
    except (sqlite3.DatabaseError, OSError, ValueError) as exc:
        return PendingHistory(Path(path), summary, packed, None, _history_problem(Path(path), exc))
    return PendingHistory(Path(path), summary, packed, trend_view(points, config, str(path)) if points else None)


def _history_problem(path: Path, exc: BaseException) -> str:
    """The one line that says the run history cannot be used, and how to recover."""
    return (f"{path}: the run history cannot be read or written ({exc}); this run was not added to it. Move it aside "
            f"(mv {path} {path}.broken) to start a new history, or run with --no-history")


def append_history(pending: PendingHistory) -> int | None:
    """Append the record; its run id, or None when the history could not take it (``problem``
    names why: the reports are already written, so the run itself is not lost)."""
    if pending.problem is not None:
        return None
    try:
        return HistoryStore(pending.path).append(pending.summary, pending.packed)
    except (sqlite3.DatabaseError, OSError) as exc:
        pending.problem = _history_problem(pending.path, exc)
        return None
