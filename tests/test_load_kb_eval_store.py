"""kb-eval's SQLite storage (seed 002: "Reads: eval_runs, eval_query_results"; "Writes:
eval_runs.aggregate_json"), on real databases in the seed's schema."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from groundjudge.errors import InputError, StorageError
from groundjudge.load.adapters.kb_eval_store import chunk_ids, is_database, read_runs, split_run, store_aggregates
from tests.support.kb_eval_seed import CHUNKS, RUN_A, RUN_B, RUN_C, make_database, seed_database, stored_aggregate


def one_run(result: dict, *, run_id: str = "r1", version: str = "md-heading-v1") -> dict:
    return {"run_id": run_id, "chunker_version": version, "created_at": "2026-05-01T00:00:00Z", "results": [result]}


def test_every_run_is_read_oldest_first_and_one_by_name(tmp_path):
    _, db = seed_database(tmp_path)
    runs = read_runs(db)
    assert [r.run_id for r in runs] == ["run_a", "run_b", "run_c"]
    assert [r.chunker_version for r in runs] == ["md-heading-v1", "md-heading-v1", "md-heading-v2"]
    assert [row.query_id for row in runs[0].rows] == ["q1", "q2", "q3", "q4", "q5", "q6"]  # as the runner stored them
    assert runs[0].rows[0].result == RUN_A["results"][0]
    (only,) = read_runs(db, "run_b")
    assert only.run_id == "run_b" and len(only.rows) == len(RUN_B["results"])


def test_runs_are_ordered_by_creation_time_not_by_insertion(tmp_path):
    db = make_database(tmp_path / "kb.sqlite", [dict(RUN_C, created_at="2026-05-09T00:00:00Z"), RUN_A])
    assert [r.run_id for r in read_runs(db)] == ["run_a", "run_c"]


def test_a_run_the_database_does_not_hold_is_an_input_error_naming_those_it_does(tmp_path):
    _, db = seed_database(tmp_path)
    with pytest.raises(InputError) as err:
        read_runs(db, "run_z")
    assert str(err.value) == f"{db}: eval_runs.run_id: no run 'run_z'; the database holds 'run_a', 'run_b', 'run_c'"


def test_a_run_is_named_after_the_database_path_and_a_hash(tmp_path):
    _, db = seed_database(tmp_path)
    assert split_run(f"{db}#run_b") == (db, "run_b")
    assert split_run(db) == (db, None)
    plain = tmp_path / "results#1.jsonl"  # a file whose name holds a '#' is that file
    plain.write_text("{}\n")
    assert split_run(plain) == (plain, None)
    assert split_run(tmp_path / "notes.txt#x") == (tmp_path / "notes.txt#x", None)  # no database before the '#'


def test_the_chunker_version_comes_from_the_run_configuration_when_a_row_leaves_it_out(tmp_path):
    db = make_database(tmp_path / "kb.sqlite", [one_run({"query_id": "q1", "hits_top_k": []}, version="md-heading-v7")])
    (run,) = read_runs(db)
    assert run.chunker_version == "md-heading-v7"
    with closing(sqlite3.connect(db)) as conn, conn:  # the knowledge base's config: [chunking] chunker_version
        conn.execute("UPDATE eval_runs SET config_snapshot_json = ?",
                     (json.dumps({"chunking": {"chunker_version": "md-heading-v8"}}),))
    assert read_runs(db)[0].chunker_version == "md-heading-v8"


def test_not_a_database_of_kb_eval_is_one_line_naming_the_table(tmp_path):
    other = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(InputError) as err:
        read_runs(other)
    assert str(err.value) == (f"{other}: eval_runs: no such table: is this kb-eval's database? "
                              "(it needs eval_runs and eval_query_results)")
    text = tmp_path / "results.jsonl"
    text.write_text('{"query_id": "q1"}\n')
    assert not is_database(text) and is_database(other)


@pytest.mark.parametrize("result_json, field, fragment", [
    ("{not json", "result_json", "invalid JSON"),
    ('{"query_id": "q1", "hits_top_k": [], "latency_ms": NaN}', "result_json", "NaN"),
    ('{"query_id": "q1", "hits_top_k": [], "latency_ms": 1e999}', "result_json.latency_ms", "not a finite number"),
    ('["q1"]', "result_json", "expected a JSON object, got list"),
])
def test_a_row_that_is_not_a_result_names_database_row_and_field(tmp_path, result_json, field, fragment):
    db = make_database(tmp_path / "kb.sqlite", [one_run({"query_id": "q1", "hits_top_k": []})])
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE eval_query_results SET result_json = ?", (result_json,))
    from groundjudge.load.adapters.kb_eval import read_runs as read_kb_runs

    with pytest.raises(InputError) as err:
        read_kb_runs(db)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{db} [run_id='r1', query_id='q1']: {field}: ") and fragment in line


def test_store_aggregates_writes_compact_json_with_nulls(tmp_path):
    _, db = seed_database(tmp_path)
    store_aggregates(db, {"run_a": {"mrr": 0.5, "citation_coverage": None}})
    with closing(sqlite3.connect(db)) as conn:
        rows = dict(conn.execute("SELECT run_id, aggregate_json FROM eval_runs"))
    assert rows == {"run_a": '{"mrr":0.5,"citation_coverage":null}', "run_b": "{}", "run_c": "{}"}


def test_store_aggregates_is_one_transaction(tmp_path):
    _, db = seed_database(tmp_path)
    with pytest.raises(StorageError, match="no run was updated"):
        store_aggregates(db, {"run_a": {"mrr": 0.5}, "run_gone": {"mrr": 0.1}})
    assert stored_aggregate(db, "run_a") == {}  # the first update was rolled back with the failed one


def test_a_database_another_process_holds_is_one_line_and_left_as_it_was(tmp_path, monkeypatch):
    from groundjudge.load.adapters import kb_eval_store

    monkeypatch.setattr(kb_eval_store, "BUSY_TIMEOUT_S", 0.05)  # no need to wait the usual 5 s here
    _, db = seed_database(tmp_path)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # kb-eval's runner writing: readers read, writers wait
        assert [r.run_id for r in read_runs(db)] == ["run_a", "run_b", "run_c"]
        with pytest.raises(StorageError, match="database is locked.*no run was updated"):
            store_aggregates(db, {"run_a": {"mrr": 0.5}}, timeout_s=0.05)
        holder.execute("ROLLBACK")
        holder.execute("BEGIN EXCLUSIVE")  # nobody may read
        with pytest.raises(InputError, match="locked by another process"):
            read_runs(db)
    finally:
        holder.close()
    assert stored_aggregate(db, "run_a") == {}


def test_the_chunk_store_is_the_chunks_table(tmp_path):
    _, db = seed_database(tmp_path)
    assert chunk_ids(db) == frozenset(c for c, _ in CHUNKS)
    bare = make_database(tmp_path / "eval-only.sqlite", [RUN_A], with_chunks_table=False)
    assert chunk_ids(bare) is None  # a database of runs only is no chunk store


def test_a_mistyped_database_path_creates_nothing(tmp_path):
    with pytest.raises(InputError):
        read_runs(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()


def test_reading_leaves_the_database_unchanged(tmp_path):
    _, db = seed_database(tmp_path)
    before = Path(db).read_bytes()
    read_runs(db)
    chunk_ids(db)
    assert Path(db).read_bytes() == before
