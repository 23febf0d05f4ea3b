"""kb-eval's own storage: the SQLite database its runner fills and its metrics step updates.

kb-eval keeps every evaluation run in its knowledge base's SQLite database (standard library
``sqlite3`` here, nothing else):

- ``eval_runs(run_id TEXT PRIMARY KEY, suite, config_snapshot_json, aggregate_json,
  commit_hash, created_at)``: one row per run; the runner leaves ``aggregate_json`` as ``{}``
  and the metrics step fills it (``UPDATE eval_runs SET aggregate_json = :json WHERE run_id =
  :id``);
- ``eval_query_results(run_id, query_id, result_json, PRIMARY KEY (run_id, query_id))``: what
  the run did for each golden query, one JSON object per row, in the shape of one line of a
  results file (:class:`groundjudge.load.adapters.kb_eval.KbResult`); the row's ``run_id`` and
  ``query_id`` are the result's;
- ``chunks(chunk_id TEXT PRIMARY KEY, doc_id, text, ..., source_spans_json, chunker_version,
  ...)``: the chunk store. A citation "resolves to a real chunk in the DB" when its chunk id is
  a row here.

A result row may leave out ``chunker_version``: the run's version is then taken from its
``config_snapshot_json`` (``chunker_version`` at the top, or ``chunking.chunker_version``), where
the runner records it.

A database is named where results files are (``--traces kb.sqlite``): every run in it, oldest
first, each a config of its own; ``kb.sqlite#RUN_ID`` names one run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from groundjudge.errors import InputError, InputProblem, StorageError
from groundjudge.files import file_and_part
from groundjudge.load.records import validation_problems
from groundjudge.strict_json import NON_FINITE, JSONProblem, non_finite_fields
from groundjudge.strict_json import loads as strict_loads

__all__ = [
    "RUN_SEPARATOR",
    "DatabaseRun",
    "RunRow",
    "chunk_ids",
    "is_database",
    "read_runs",
    "row_record",
    "split_run",
    "store_aggregates",
]

SQLITE_HEADER = b"SQLite format 3\x00"
RUN_SEPARATOR = "#"  # as groundjudge.files.file_and_part reads it
BUSY_TIMEOUT_S = 5.0  # how long a read waits for kb-eval's own writer to let go of the database
_REQUIRED = {"eval_runs": ("run_id", "config_snapshot_json", "aggregate_json"),
             "eval_query_results": ("run_id", "query_id", "result_json")}


@dataclass(frozen=True)
class RunRow:
    """One row of ``eval_query_results``: its result as a JSON object, and where it is (for messages)."""

    query_id: str
    result: dict[str, Any]
    where: str


@dataclass(frozen=True)
class DatabaseRun:
    """One ``eval_runs`` row and its result rows (in the order the runner stored them)."""

    run_id: str
    chunker_version: str | None  # from config_snapshot_json; None when the snapshot does not say
    rows: tuple[RunRow, ...]
    database: Path


def is_database(path: str | Path) -> bool:
    """True when ``path`` is an SQLite database file (by its 16-byte header)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def split_run(path: str | Path) -> tuple[Path, str | None]:
    """``kb.sqlite#RUN`` -> (``kb.sqlite``, ``RUN``); a path that names a file as it is, or whose
    part before the last ``#`` is no database, is returned whole with no run."""
    file, run = file_and_part(path)
    if run is not None and is_database(file):
        return file, run
    return Path(path), None


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    # Read-only and never created: a mistyped path must not leave an empty database behind.
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise InputError.one(path, None, None, f"cannot open the database: {exc}") from None
    with closing(connection):
        try:
            yield connection
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise InputError.one(path, None, None, f"the database is locked by another process ({exc}); run "
                                                       "again once it is done") from None
            raise InputError.one(path, None, None, f"cannot read the database ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise InputError.one(path, None, None, f"not a readable kb-eval database ({exc}); give kb-eval's "
                                                   "SQLite file, or its results as JSONL") from None


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _check_schema(connection: sqlite3.Connection, path: Path) -> None:
    for table, needed in _REQUIRED.items():
        have = _columns(connection, table)
        if not have:
            raise InputError.one(path, None, table, "no such table: is this kb-eval's database? (it needs "
                                                    "eval_runs and eval_query_results)")
        missing = [c for c in needed if c not in have]
        if missing:
            raise InputError.one(path, None, table, f"no column {', '.join(missing)}: not kb-eval's schema")


def _snapshot_version(snapshot: Any) -> str | None:
    if not isinstance(snapshot, dict):
        return None
    version = snapshot.get("chunker_version")
    if version is None and isinstance(snapshot.get("chunking"), dict):
        version = snapshot["chunking"].get("chunker_version")
    return version if isinstance(version, str) and version else None


def _where(path: Path, run_id: str, query_id: str | None = None) -> str:
    # The place of a problem: the file, then the row (a database has no lines to point at).
    row = f"run_id={run_id!r}" + (f", query_id={query_id!r}" if query_id is not None else "")
    return f"{path} [{row}]"


def _json_column(text: Any, where: str, column: str, problems: list[InputProblem]) -> Any:
    if not isinstance(text, (str, bytes)):
        problems.append(InputProblem(where, None, column, f"expected JSON text, got {type(text).__name__}"))
        return None
    try:
        return strict_loads(text)
    except JSONProblem as exc:
        problems.append(InputProblem(where, None, column, exc.message))
        return None


def read_runs(path: str | Path, run_id: str | None = None) -> list[DatabaseRun]:
    """The runs in kb-eval's database ``path`` (oldest first, by ``created_at`` then ``run_id``),
    or only ``run_id``. Raises :class:`InputError` naming the database, the row and the field:
    not an SQLite file of kb-eval's schema, an unknown run, a row whose ``result_json`` is not a
    JSON object (non-finite numbers included)."""
    path = Path(path)
    problems: list[InputProblem] = []
    runs: list[DatabaseRun] = []
    with _read_only(path) as connection:
        _check_schema(connection, path)
        order = "created_at, run_id" if "created_at" in _columns(connection, "eval_runs") else "rowid"
        headers = connection.execute(f"SELECT run_id, config_snapshot_json FROM eval_runs ORDER BY {order}").fetchall()
        known = [r[0] for r in headers]
        if run_id is not None:
            if run_id not in known:
                raise InputError.one(path, None, "eval_runs.run_id",
                                     f"no run {run_id!r}; the database holds {', '.join(map(repr, known)) or 'none'}")
            headers = [h for h in headers if h[0] == run_id]
        for rid, snapshot_text in headers:
            snapshot = _json_column(snapshot_text, _where(path, rid), "config_snapshot_json", problems)
            try:
                rows = connection.execute("SELECT query_id, result_json FROM eval_query_results WHERE run_id = ? "
                                          "ORDER BY rowid", (rid,)).fetchall()
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: keep the key's order
                rows = connection.execute("SELECT query_id, result_json FROM eval_query_results WHERE run_id = ? "
                                          "ORDER BY query_id", (rid,)).fetchall()
            kept = []
            for qid, text in rows:
                where = _where(path, rid, qid)
                value = _json_column(text, where, "result_json", problems)
                if value is None:
                    continue
                if not isinstance(value, dict):
                    problems.append(InputProblem(where, None, "result_json",
                                                 f"expected a JSON object, got {type(value).__name__}"))
                    continue
                kept.append(RunRow(str(qid), value, where))
            runs.append(DatabaseRun(str(rid), _snapshot_version(snapshot), tuple(kept), path))
    if problems:
        raise InputError(problems)
    return runs


def row_record(row: RunRow, run: DatabaseRun, model: type[BaseModel], problems: list[InputProblem]) -> Any:
    """``row``'s result as a ``model`` record, its run id and query id from the row's key and its
    chunker version, when the result does not give one, from the run's configuration snapshot.
    Problems (named by database, row and ``result_json.<field>``) go to ``problems``."""
    data = dict(row.result)
    for key, value in (("run_id", run.run_id), ("query_id", row.query_id)):
        if data.get(key) is not None and data[key] != value:
            problems.append(InputProblem(row.where, None, f"result_json.{key}",
                                         f"{data[key]!r} differs from the row's {key} {value!r}"))
            return None
        data[key] = value
    if data.get("chunker_version") is None:
        if run.chunker_version is None:
            problems.append(InputProblem(row.where, None, "result_json.chunker_version",
                                         "required field is missing, and the run's config_snapshot_json does not "
                                         "name a chunker_version either"))
            return None
        data["chunker_version"] = run.chunker_version
    bad = non_finite_fields(data)
    if bad:
        problems.extend(InputProblem(row.where, None, f"result_json.{name}", NON_FINITE) for name in bad)
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(InputProblem(row.where, None, f"result_json.{p.field}", p.problem)
                        for p in validation_problems(Path(row.where), 0, exc))
        return None


def chunk_ids(path: str | Path) -> frozenset[str] | None:
    """The chunk ids of the database's ``chunks`` table; None when it has no such table (a
    database that holds only evaluation runs is no chunk store)."""
    path = Path(path)
    with _read_only(path) as connection:
        if "chunk_id" not in _columns(connection, "chunks"):
            return None
        return frozenset(str(r[0]) for r in connection.execute("SELECT chunk_id FROM chunks"))


def store_aggregates(path: str | Path, aggregates: Mapping[str, Mapping[str, Any]], *,
                     timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Write each run's ``AggregateMetrics`` into ``eval_runs.aggregate_json`` (compact JSON,
    null for an empty denominator), as kb-eval's metrics step does, all in one transaction: a
    failure leaves every row as it was. Raises :class:`StorageError` when the database cannot be
    written (read-only file, locked by another process for more than ``timeout_s``, a run no
    longer there)."""
    path = Path(path)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=timeout_s)
    except sqlite3.Error as exc:
        raise StorageError(f"{path}: cannot open the database to write aggregate_json ({exc})") from None
    with closing(connection):
        try:
            with connection:  # one transaction: committed whole, or rolled back
                for run_id, aggregate in aggregates.items():
                    text = json.dumps(aggregate, separators=(",", ":"), allow_nan=False)
                    cursor = connection.execute("UPDATE eval_runs SET aggregate_json = ? WHERE run_id = ?",
                                                (text, run_id))
                    if cursor.rowcount != 1:
                        raise sqlite3.IntegrityError(f"run {run_id!r} is no longer in eval_runs")
        except sqlite3.Error as exc:
            raise StorageError(f"{path}: could not write eval_runs.aggregate_json ({exc}); no run was updated. "
                               "Make the database writable (or close what holds it), or leave it as it is "
                               "(--keep-aggregate-json)") from None

