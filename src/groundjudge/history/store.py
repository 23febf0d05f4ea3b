"""The history store: one SQLite file (standard library), WAL mode, one row per run.

Each append is one short ``BEGIN IMMEDIATE`` transaction with a generous busy timeout, so two
runs finishing at the same moment both land (the second waits for the first's lock). WAL lets
``groundjudge history`` read while a run writes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundjudge.history.summary import Packed, RunSummary, unpack_column, unpack_ids, unpack_values

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    run_dir TEXT,
    golden_hash TEXT,
    rubric_hash TEXT,
    model TEXT,
    passed INTEGER NOT NULL,
    summary TEXT NOT NULL           -- RunSummary as JSON
);
CREATE INDEX IF NOT EXISTS runs_golden ON runs (golden_hash, id);
CREATE TABLE IF NOT EXISTS run_cases (  -- per run and config: the case ids, in column order
    run_id INTEGER NOT NULL REFERENCES runs (id),
    config TEXT NOT NULL,
    ids BLOB NOT NULL,
    PRIMARY KEY (run_id, config)
);
CREATE TABLE IF NOT EXISTS run_values (  -- per run, config and metric: one value per case
    run_id INTEGER NOT NULL REFERENCES runs (id),
    config TEXT NOT NULL,
    metric TEXT NOT NULL,
    column_data BLOB NOT NULL,
    PRIMARY KEY (run_id, config, metric)
);
"""
BUSY_TIMEOUT_S = 60.0


def _prepare(conn: sqlite3.Connection) -> None:
    """WAL mode and the tables. Two processes creating the store at once can find it locked
    while one switches the journal mode (that step does not always wait on the busy handler):
    try again for up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@dataclass(frozen=True)
class StoredRun:
    id: int
    summary: RunSummary


class HistoryStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
            _prepare(conn)
            yield conn

    def append(self, summary: RunSummary, per_case: Packed) -> int:
        """Add one run with its per-case values (``summary.pack``); returns its id (ids grow in
        the order runs were appended). One transaction: a run lands whole or not at all."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "INSERT INTO runs (started_at, run_dir, golden_hash, rubric_hash, model, passed, summary)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (summary.started_at, summary.run_dir, summary.golden_hash, summary.rubric_hash, summary.model,
                     int(summary.passed), summary.model_dump_json()))
                run_id = int(cur.lastrowid or 0)
                for config, (ids, columns) in per_case.items():
                    conn.execute("INSERT INTO run_cases VALUES (?, ?, ?)", (run_id, config, ids))
                    conn.executemany("INSERT INTO run_values VALUES (?, ?, ?, ?)",
                                     [(run_id, config, metric, blob) for metric, blob in columns.items()])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return run_id

    def runs(self, last: int | None = None) -> list[StoredRun]:
        """The last ``last`` runs (all when None), oldest first."""
        if not self.path.exists():
            return []
        with self._connect() as conn:
            query = "SELECT id, summary FROM runs ORDER BY id DESC"
            rows = conn.execute(query + (" LIMIT ?" if last else ""), (last,) if last else ()).fetchall()
        return [StoredRun(id=i, summary=RunSummary.model_validate_json(s)) for i, s in reversed(rows)]

    def get(self, run_id: int) -> StoredRun:
        with self._connect() as conn:
            row = conn.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(run_id)
        return StoredRun(id=run_id, summary=RunSummary.model_validate_json(row[0]))

    def case_ids(self, run_id: int, config: str) -> list[str] | None:
        blob = self.packed_case_ids(run_id, config)
        return unpack_ids(blob) if blob is not None else None

    def packed_case_ids(self, run_id: int, config: str) -> bytes | None:
        """``case_ids`` as stored (``summary.unpack_ids`` reads them): two runs that list the
        same cases in the same order store the same bytes."""
        with self._connect() as conn:
            row = conn.execute("SELECT ids FROM run_cases WHERE run_id = ? AND config = ?", (run_id, config)).fetchone()
        return bytes(row[0]) if row else None

    def column(self, run_id: int, config: str, metric: str) -> list[float | None] | None:
        """A metric's per-case values, in the order of ``case_ids`` (None: no value)."""
        blob = self._column_data(run_id, config, metric)
        return unpack_column(blob) if blob is not None else None

    def values(self, run_id: int, config: str, metric: str) -> npt.NDArray[np.float64] | None:
        """``column`` as a read-only float64 array, NaN for no value."""
        blob = self._column_data(run_id, config, metric)
        return unpack_values(blob) if blob is not None else None

    def _column_data(self, run_id: int, config: str, metric: str) -> bytes | None:
        with self._connect() as conn:
            row = conn.execute("SELECT column_data FROM run_values WHERE run_id = ? AND config = ? AND metric = ?",
                               (run_id, config, metric)).fetchone()
        return bytes(row[0]) if row else None
