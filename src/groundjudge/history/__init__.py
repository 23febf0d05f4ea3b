"""Run history (SPEC 9): every run's summary in one store, trends over runs, real drops flagged.

``summary`` builds a run's record from its typed report; ``store`` keeps records in SQLite;
``trend`` lines runs up per config and metric, marks breaks (golden set or rubric changed)
and tests each change against the previous comparable run with the paired sign-flip test.
"""

from groundjudge.history.store import HistoryStore
from groundjudge.history.summary import RunSummary, build_summary, data_hashes
from groundjudge.history.trend import TrendPoint, default_metrics, trend, trend_view

__all__ = ["HistoryStore", "RunSummary", "TrendPoint", "build_summary", "data_hashes", "default_metrics", "trend", "trend_view"]
