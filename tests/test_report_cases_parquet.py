"""cases.parquet: a run's per-case metrics and judge results, read back by DuckDB and pyarrow
as they are, equal to what report.json says case by case."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import verdict_for_request
from tests.support.openai_server import DEFAULT_MODEL, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"


def _run(out: Path, cache: Path, base_url: str, model: str):
    return CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", "grounded_answer",
                                     "--judge-base-url", base_url, "--judge-model", model, "--cache-dir", str(cache),
                                     "--out", str(out), "--quiet"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Two nightly runs of the example under runs/<day>/: the first judges through the local
    scripted server, the second answers every verdict from the cache."""
    tmp = tmp_path_factory.mktemp("nightly")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR", "GITHUB_STEP_SUMMARY"):
            mp.delenv(var, raising=False)
        with ScriptedOpenAIServer(verdict_for_request) as srv:
            first = _run(tmp / "runs" / "day1", tmp / "cache", srv.base_url, srv.model)
        second = _run(tmp / "runs" / "day2", tmp / "cache", "http://127.0.0.1:9/v1", DEFAULT_MODEL)
    assert first.exception is None and second.exception is None, (first.output, second.output)
    assert first.exit_code in (0, 1) and second.exit_code == first.exit_code, (first.output, second.output)
    return tmp / "runs"


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def test_each_row_holds_the_case_metrics_and_judge_result_report_json_has(runs):
    doc = json.loads((runs / "day1" / "report.json").read_text())
    table = pq.read_table(runs / "day1" / "cases.parquet")
    rows = table.to_pylist()
    assert [(r["config_id"], r["case_id"]) for r in rows] == [(cfg, cid) for cfg, section in doc["per_config"].items()
                                                               for cid in section["per_case"]]
    criteria = doc["judge"]["criteria"]
    assert criteria and {f"{c['name']}_confidence" for c in criteria} <= set(table.column_names)
    statuses = set()
    for row in rows:
        values = doc["per_config"][row["config_id"]]["per_case"][row["case_id"]]
        assert all(_same(row[name], value) for name, value in values.items()), row["case_id"]
        judged = doc["judge"]["per_config"].get(row["config_id"], {}).get("cases", {}).get(row["case_id"])
        if judged is None:
            assert row["judge_status"] is None and all(row[c["name"]] is None for c in criteria)
            continue
        statuses.add(judged["status"])
        assert row["judge_status"] == judged["status"] and row["judge_reason"] == judged.get("reason")
        assert row["judge_claims"] == (len(judged["claims"]) if judged["status"] == "judged" else None)
        for c in criteria:
            found = judged["criteria"].get(c["name"])
            assert row[c["name"]] == (found["label"] if found else None)
            assert row[c["metric"]] == (found["value"] if found else None)
    assert "judged" in statuses
    assert table.schema.field("recall@10").type == "double"
    binary = next(c for c in criteria if c["kind"] == "binary")
    assert table.schema.field(binary["name"]).type == "bool"


def test_duckdb_reads_a_week_of_runs_with_one_query(runs):
    """The README's query: the runs' cases.parquet files by a glob, grouped by run and config,
    equal to each report.json's own means and counts."""
    found = duckdb.sql(f"""
        SELECT filename, config_id, count(*) AS cases, avg("recall@10") AS recall_10, count("recall@10") AS n
        FROM read_parquet('{runs}/*/cases.parquet', filename = true)
        GROUP BY ALL ORDER BY ALL""").fetchall()
    expected = []
    for day in sorted(p for p in runs.iterdir() if p.is_dir()):
        doc = json.loads((day / "report.json").read_text())
        for cfg, section in doc["per_config"].items():
            recall = section["aggregate"]["recall@10"]
            expected.append((str(day / "cases.parquet"), cfg, len(section["per_case"]), recall["value"], recall["n"]))
    assert len(found) == len(expected) == 4
    for got, want in zip(found, sorted(expected), strict=True):
        assert got[:3] == want[:3] and got[4] == want[4]
        assert got[3] == pytest.approx(want[3], rel=1e-12)  # DuckDB adds in its own order
