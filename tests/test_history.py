"""Run history: the SQLite store under concurrent writers, trends, breaks and real drops."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.history import HistoryStore, RunSummary, trend
from groundjudge.history.summary import ConfigSummary, pack, pack_column, unpack_column
from groundjudge.history.trend import sign_flip_p
from groundjudge.metrics.value import MetricValue

SRC = Path(__file__).resolve().parent.parent / "src"
CASES = [f"c{i:03d}" for i in range(200)]


def summary(values: dict[str, dict[str, float | None]], *, golden: str = "g1", rubric: str = "r1",
            model: str = "m1", config: str = "cand") -> RunSummary:
    metrics = sorted({m for row in values.values() for m in row})
    agg = {m: MetricValue.mean(row.get(m) for row in values.values()) for m in metrics}
    return RunSummary(
        started_at="2026-11-22T00:00:00Z", run_dir=None, golden_hash=golden,
        data_hashes={"golden": golden, "traces": "t", "corpus": None}, rubric="grounded_answer/v1",
        rubric_hash=rubric, model=model, passed=True, failed_gates=[], trust={"faithfulness_rate": False},
        judge_metrics=["faithfulness_rate", "judge_error_rate"], cost_usd=0.0, requests=0, tool_version="0",
        git_commit=None, configs={config: ConfigSummary(aggregate=agg, judge_status={}, gates_passed=True)})


def append(store: HistoryStore, values: dict[str, dict[str, float | None]], **kw: str) -> int:
    return store.append(summary(values, **kw), pack({kw.get("config", "cand"): values}))


def nightly(rng: random.Random, recall_drop: bool) -> dict[str, dict[str, float | None]]:
    """recall@5 is 0/1 per case with a fixed pattern (a drop loses 30 cases); mrr@10 moves a
    little on a few cases each night, up or down at random (noise)."""
    out: dict[str, dict[str, float | None]] = {}
    for i, cid in enumerate(CASES):
        out[cid] = {"recall@5": 1.0 if i % 4 else 0.0, "mrr@10": 0.5, "faithfulness_rate": 1.0 if i % 3 else 0.0}
    if recall_drop:  # 30 of the 150 hits lost
        for cid in [cid for i, cid in enumerate(CASES) if i % 4][:30]:
            out[cid]["recall@5"] = 0.0
    for cid in rng.sample(CASES, 12):
        out[cid]["mrr@10"] = 0.5 + rng.choice((-0.5, 0.5))
    return out


def test_per_case_values_round_trip_exactly_with_none(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    values = {"a": {"x": 1 / 3, "y": None}, "b": {"x": 1.0}}
    run = store.append(summary(values), pack({"cand": values}))
    assert store.case_ids(run, "cand") == ["a", "b"]
    assert store.column(run, "cand", "x") == [1 / 3, 1.0] and store.column(run, "cand", "y") == [None, None]
    assert store.column(run, "cand", "z") is None and store.case_ids(run, "base") is None
    assert unpack_column(pack_column([0.5, None, -2.0])) == [0.5, None, -2.0]


def test_planted_drop_is_flagged_and_noise_is_not(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(7)
    ids = [append(store, nightly(rng, recall_drop=(night >= 3))) for night in range(5)]
    points = trend(store, ["recall@5", "mrr@10"], last=5)
    recall = [p for p in points if p.metric == "recall@5"]
    mrr = [p for p in points if p.metric == "mrr@10"]
    assert [p.run_id for p in recall] == ids and recall[0].status == "first"
    assert [p.drop for p in recall] == [False, False, False, True, False]
    drop = recall[3]
    assert drop.against == ids[2] and drop.verdict == "real" and drop.n_paired == 200
    assert abs(drop.delta - (-30 / 200)) < 1e-9 and drop.p_value < 0.001
    assert recall[1].verdict == "noise" and recall[1].delta == 0 and recall[4].delta == 0
    # the noise metric changes every night, and is never called real
    assert max(abs(p.delta) for p in mrr[1:]) >= 0.01  # visible in the mean
    assert not any(p.drop for p in mrr) and all(p.verdict == "noise" for p in mrr[1:])


def test_golden_or_rubric_change_is_a_break_not_a_comparison(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(1)
    base = nightly(rng, recall_drop=False)
    worse = nightly(rng, recall_drop=True)
    r1 = append(store, base)
    r2 = append(store, worse, golden="g2")  # a new golden set: its drop is not a drop
    r3 = append(store, base, rubric="r2")  # a new rubric: a break for judge metrics only
    r4 = append(store, base)  # golden back to g1: compared with r3 (same golden, judge: same rubric as r1)
    points = {(p.run_id, p.metric): p for p in trend(store, ["recall@5", "faithfulness_rate"])}
    p2 = points[(r2, "recall@5")]
    assert (p2.status, p2.against, p2.drop) == ("break", None, False)
    assert "golden set changed" in p2.note and "no earlier comparable run" in p2.note
    p3 = points[(r3, "recall@5")]
    assert p3.status == "break" and p3.against == r1  # golden changed back: the matching run is r1
    p3j = points[(r3, "faithfulness_rate")]
    assert p3j.status == "break" and "rubric changed" in p3j.note and p3j.against is None
    assert points[(r4, "recall@5")].against == r3 and points[(r4, "recall@5")].status == "compared"
    p4j = points[(r4, "faithfulness_rate")]
    assert p4j.status == "break" and "rubric changed" in p4j.note and p4j.against == r1


def test_last_window_still_compares_with_older_runs(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(3)
    ids = [append(store, nightly(rng, recall_drop=(night == 2))) for night in range(3)]
    points = trend(store, ["recall@5"], last=1)
    assert [(p.run_id, p.against, p.drop) for p in points] == [(ids[2], ids[1], True)]


def test_sign_flip_p_regimes() -> None:
    assert sign_flip_p([]) is None and sign_flip_p([0.0, 0.0]) == 1.0
    small = sign_flip_p([-1.0] * 20 + [0.0] * 500)  # zeros add nothing: 20 moves all one way
    assert small is not None and small < 0.001
    big = [(-1.0 if i % 2 else 1.0) for i in range(10000)]
    assert sign_flip_p(big) == 1.0  # balanced: nothing moved on average
    assert sign_flip_p(big + [-1.0] * 400) < 0.001


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from tests.test_history import append, nightly
    from groundjudge.history import HistoryStore
    import random
    store = HistoryStore(sys.argv[1])
    while not Path(sys.argv[2]).exists():
        time.sleep(0.005)
    for i in range(15):
        append(store, nightly(random.Random(i), False))
""")


def test_two_processes_writing_at_once_both_land(tmp_path: Path) -> None:
    db, go = tmp_path / "history.sqlite", tmp_path / "go"
    root = str(SRC.parent)
    env_path = f"{SRC}"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(go), root], cwd=root,
                              env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}) for _ in range(2)]
    time.sleep(0.5)  # both started and waiting
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    runs = HistoryStore(db).runs()
    assert len(runs) == 30 and [r.id for r in runs] == list(range(1, 31))
    import sqlite3
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- end to end: `groundjudge run` appends, `groundjudge history` reads, the HTML shows the trend ---

EXAMPLES = SRC.parent / "examples"


def _example_copy(folder: Path, *, reverse_rankings: int = 0, golden_edit: bool = False) -> Path:
    """The bundled example's inputs in ``folder``; the candidate's first ``reverse_rankings``
    cases get their retrieval ranking reversed (a planted retrieval regression)."""
    import json
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "traces").mkdir(exist_ok=True)
    shutil.copy(EXAMPLES / "corpus.jsonl", folder / "corpus.jsonl")
    shutil.copy(EXAMPLES / "traces" / "baseline.jsonl", folder / "traces" / "baseline.jsonl")
    golden = (EXAMPLES / "golden.jsonl").read_text()
    if golden_edit:
        golden = golden.replace("18 days of annual leave per year", "18 days of paid annual leave per year", 1)
    (folder / "golden.jsonl").write_text(golden)
    lines = []
    for i, line in enumerate((EXAMPLES / "traces" / "candidate.jsonl").read_text().splitlines()):
        record = json.loads(line)
        if i < reverse_rankings:
            chunks = list(reversed(record["retrieved_chunks"]))
            for rank, chunk in enumerate(chunks, 1):
                chunk["rank"], chunk["score"] = rank, round(1 - rank / 100, 4)
            record["retrieved_chunks"] = chunks
        lines.append(json.dumps(record))
    (folder / "traces" / "candidate.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "groundjudge.toml").write_text((EXAMPLES / "groundjudge.toml").read_text()
                                             .replace('labels = ["../calibration', '# labels = ["../calibration')
                                             .replace('records_dir = "../calibration/records"', 'records_dir = "records"'))
    return folder / "groundjudge.toml"


def test_runs_append_and_history_flags_the_planted_drop(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from groundjudge.cli import main
    from tests.support.judge_replies import verdict_for_request
    from tests.support.openai_server import ScriptedOpenAIServer

    history = tmp_path / "runs" / "history.sqlite"
    plans = [{}, {}, {"reverse_rankings": 25}, {"reverse_rankings": 25, "golden_edit": True}]
    runner = CliRunner()
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        for night, plan in enumerate(plans):
            config = _example_copy(tmp_path / f"inputs{night}", **plan)
            result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                                          "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
                                          "--out", str(tmp_path / "runs" / f"night{night}"), "--quiet"])
            assert result.exit_code in (0, 1), result.output
        # --no-history: nothing appended
        result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                                      "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
                                      "--out", str(tmp_path / "runs" / "off"), "--quiet", "--no-history"])
        assert result.exit_code in (0, 1), result.output
    assert len(HistoryStore(history).runs()) == 4
    stored = HistoryStore(history).runs()[-1].summary
    assert stored.model == srv.model and stored.rubric == "grounded_answer/v1" and stored.configs["candidate"]
    assert stored.data_hashes["golden"] == stored.golden_hash and stored.data_hashes["traces"]
    assert stored.configs["candidate"].aggregate["faithfulness"].n > 0  # judge metric, with its n

    shown = runner.invoke(main, ["history", "--history", str(history), "--config", "candidate",
                                 "--metric", "mrr@10", "--metric", "faithfulness", "--json"])
    assert shown.exit_code == 0, shown.output
    points = [json.loads(line) for line in shown.stdout.splitlines() if line.startswith("{")]
    mrr = [p for p in points if p["metric"] == "mrr@10"]
    assert [p["status"] for p in mrr] == ["first", "compared", "compared", "break"]
    assert [p["drop"] for p in mrr] == [False, False, True, False]
    assert mrr[2]["verdict"] == "real" and mrr[2]["delta"] < 0 and mrr[1]["delta"] == 0
    assert "golden set changed" in mrr[3]["note"] and mrr[3]["against"] is None
    assert not any(p["drop"] for p in points if p["metric"] == "faithfulness")  # cached verdicts: unchanged

    table = runner.invoke(main, ["history", "--history", str(history), "--config", "candidate", "--metric", "mrr@10"])
    assert table.exit_code == 0 and "DROP (real)" in table.stdout and "BREAK: golden set changed" in table.stdout

    html = (tmp_path / "runs" / "night3" / "report.html").read_text()
    assert "Trend over the last 4 runs" in html and "real drop: mrr@10 at #3" in html
    assert "series break before #4" in html
    assert "Trend over" not in (tmp_path / "runs" / "off" / "report.html").read_text()


def test_fail_on_drop_exits_1_only_when_the_newest_run_dropped(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from groundjudge.cli import main

    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(11)
    for night in range(3):
        append(store, nightly(rng, recall_drop=(night == 2)))
    args = ["history", "--history", str(tmp_path / "history.sqlite"), "--config", "cand", "--metric", "recall@5",
            "--fail-on-drop"]
    dropped = CliRunner().invoke(main, args)
    assert dropped.exit_code == 1 and "real drops in the newest run: cand:recall@5" in dropped.output
    append(store, nightly(rng, recall_drop=True))  # stays down: no new drop
    assert CliRunner().invoke(main, args).exit_code == 0
    missing = CliRunner().invoke(main, ["history", "--history", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and "no runs recorded here yet" in missing.output


def test_pack_column_stores_float64_bytes_ints_and_bools_as_floats():
    import math
    import zlib
    from array import array

    values = [None, 1, True, False, 0.5, 1e-05, -0.0, 2**53 + 1, 3]
    blob = pack_column(values)
    expected = array("d", [math.nan if v is None else float(v) for v in values]).tobytes()
    assert zlib.decompress(blob) == expected
    assert unpack_column(blob) == [None, 1.0, 1.0, 0.0, 0.5, 1e-05, -0.0, float(2**53 + 1), 3.0]


def test_pack_report_packs_what_pack_of_the_copied_values_packs():
    """pack_report reads the rows and verdicts in place into float columns: the same blobs as
    ``pack(per_case_values(doc))``, with None, ints, bools, a missing criterion, a None
    criterion value and a judged case without a row."""
    from types import SimpleNamespace as NS

    from groundjudge.history.summary import pack_report, per_case_values
    from groundjudge.judge.results import CriterionValue
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_batch, concat, views

    rows = [CaseMetrics(cid, "cfg", values, None, (), ()) for cid, values in
            (("a", {"recall@5": 1.0, "mrr@10": None, "acl_leak": True}), ("c", {"recall@5": 0.5, "mrr@10": 0.5}))]
    batch, facts = as_batch(rows)
    read = views(concat([batch]), facts)  # as a run's rows: views of a config's Arrow table
    rows = {"a": read[0], "b": {"recall@5": 0, "mrr@10": 0.25, "latency_ms.end_to_end": 12.5}, "c": read[1]}
    criteria = [NS(name="faithful", metric="faithfulness"), NS(name="correct", metric="correctness")]
    cases = {"a": NS(criteria={"faithful": CriterionValue(label=True, value=1.0),
                               "correct": CriterionValue(label=None, value=None)}),
             "c": NS(criteria={"faithful": CriterionValue(label=False, value=0.0)}),
             "z": NS(criteria={"correct": CriterionValue(label=2, value=2.0)})}
    doc = NS(per_config={"cfg": NS(per_case=rows), "other": NS(per_case={"a": {"recall@5": 0.75}})},
             judge=NS(per_config={"cfg": NS(cases=cases)}, criteria=criteria))
    assert pack_report(doc) == pack(per_case_values(doc))  # type: ignore[arg-type]


def test_pack_report_reads_a_runs_metric_columns_from_its_tables_as_it_reads_the_rows():
    """With the run's metrics, pack_report reads each metric column from the config's Arrow
    table: the same blobs as row by row, where a batch held two configs (a column of the other
    config's metric is all null here and makes no column) and a value is NaN, null or absent."""
    from types import SimpleNamespace as NS

    from groundjudge.history import summary
    from groundjudge.history.summary import pack_report, per_case_values
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.evaluate import ConfigMetrics, MetricsRun
    from groundjudge.metrics.table import as_batch, concat, views

    rows = [CaseMetrics("a", "one", {"x": 1.0, "shared": None}, None, (), ()),
            CaseMetrics("b", "one", {"x": math.nan}, None, (), ()),
            CaseMetrics("a", "two", {"y": 0.5, "shared": 2.0}, None, (), ())]
    batch, facts = as_batch(rows)  # one batch over both configs, as a run scores them
    configs = {}
    for cfg, start, size in (("one", 0, 2), ("two", 2, 1)):
        table = concat([batch.slice(start, size)])
        read = views(table, facts[start:start + size])
        configs[cfg] = ConfigMetrics(cfg, [CaseMetrics(r.case_id, cfg, v, None, (), ())
                                           for r, v in zip(rows[start:start + size], read, strict=True)], {}, {},
                                     table)  # type: ignore[arg-type]
    run = MetricsRun(configs, {})
    doc = NS(per_config={cfg: NS(per_case={c.case_id: c.values for c in m.cases}) for cfg, m in configs.items()},
             judge=NS(per_config={}, criteria=[]))
    assert all(summary._rows_of(m, {c.case_id: c.values for c in m.cases}) for m in configs.values())
    packed = pack_report(doc, run)  # type: ignore[arg-type]
    assert packed == pack_report(doc) == pack(per_case_values(doc))  # type: ignore[arg-type]
    assert sorted(packed["one"][1]) == ["shared", "x"] and sorted(packed["two"][1]) == ["shared", "y"]


def test_pack_report_makes_a_column_only_when_its_turn_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly run has a hundred metric columns of hundreds of thousands of cases: each is
    made when its turn comes and compressed, a few at a time, never all at once; the blobs are
    those of ``pack``, judged values in their places."""
    from types import SimpleNamespace as NS

    from groundjudge.history import summary
    from groundjudge.history.summary import pack_report, per_case_values
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.evaluate import ConfigMetrics, MetricsRun
    from groundjudge.metrics.table import as_batch, concat, views

    names = [f"m{i:02d}" for i in range(40)]
    rows = [CaseMetrics(f"c{j}", "one", {name: (j * i) % 7 / 7 for i, name in enumerate(names)}, None, (), ())
            for j in range(30)]
    batch, facts = as_batch(rows)
    table = concat([batch])
    scored = ConfigMetrics("one", [CaseMetrics(r.case_id, "one", v, None, (), ())
                                   for r, v in zip(rows, views(table, facts), strict=True)], {}, {}, table)
    verdict = NS(criteria={"faithful": NS(value=0.25)})
    doc = NS(per_config={"one": NS(per_case={c.case_id: c.values for c in scored.cases})},
             judge=NS(per_config={"one": NS(cases={"c3": verdict, "late": verdict})},
                      criteria=[NS(name="faithful", metric="m05"), NS(name="faithful", metric="faithfulness")]))
    live, most = [0], [0]
    made, packed_one = summary._table_column, summary.pack_column

    def making(*args: object) -> object:
        live[0] += 1
        most[0] = max(most[0], live[0])
        return made(*args)  # type: ignore[arg-type]

    def packing(values: object) -> bytes:
        live[0] -= 1
        return packed_one(values)  # type: ignore[arg-type]

    monkeypatch.setattr(summary, "_table_column", making)
    monkeypatch.setattr(summary, "pack_column", packing)
    packed = pack_report(doc, MetricsRun({"one": scored}, {}))  # type: ignore[arg-type]
    monkeypatch.undo()
    assert packed == pack(per_case_values(doc))  # type: ignore[arg-type]
    assert len(packed["one"][1]) == 41 and 0 < most[0] <= summary._IN_FLIGHT + 1


def test_a_trace_input_naming_one_run_of_a_database_is_hashed_with_its_run(tmp_path):
    # `--traces kb.sqlite#run_a`: the database file and the run's name; another run hashes apart.
    from groundjudge.history.summary import file_hash

    db = tmp_path / "kb.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    a, b = file_hash([Path(f"{db}#run_a")]), file_hash([Path(f"{db}#run_b")])
    assert a and b and a != b and a != file_hash([db])
    assert file_hash([Path(f"{db}#run_a")]) == a


# Pairing two runs' columns case by case: the arrays against the mappings it was written with.
ID_POOL = ["a", "b", "c", "d", "e", "f", "g", "h", "a\udc80", "\U0001f600", "é"]  # a lone surrogate, non-ASCII


def mapped_diffs(mine_ids: list[str], mine: list[float | None], theirs_ids: list[str],
                 theirs: list[float | None]) -> list[float]:
    """The plain reference: a mapping from case id to value per run (no value: left out), and
    this run's value minus that run's over the cases both have, in this run's order."""
    m = {c: v for c, v in zip(mine_ids, mine, strict=True) if v is not None}
    t = {c: v for c, v in zip(theirs_ids, theirs, strict=True) if v is not None}
    return [v - t[c] for c, v in m.items() if c in t]


def vector_diffs(mine_ids: list[str], mine: list[float | None], theirs_ids: list[str],
                 theirs: list[float | None]) -> list[float]:
    from groundjudge.history.summary import unpack_values
    from groundjudge.history.trend import case_positions, paired_diffs

    positions = case_positions(mine_ids, theirs_ids)
    diffs: list[float] = paired_diffs(unpack_values(pack_column(mine)), unpack_values(pack_column(theirs)),
                                      positions).tolist()
    return diffs


def exact(values: list[float]) -> list[str]:
    return [v.hex() for v in values]  # tells -0.0 from 0.0, and compares NaN


@st.composite
def two_runs(draw: st.DrawFn) -> tuple[list[str], list[float | None], list[str], list[float | None]]:
    value = st.one_of(st.none(), st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, 0.5]))
    mine_ids = draw(st.lists(st.sampled_from(ID_POOL), unique=True))
    how = draw(st.sampled_from(["same", "reordered", "other"]))
    if how == "same":
        theirs_ids = list(mine_ids)
    elif how == "reordered":
        theirs_ids = draw(st.permutations(mine_ids))
    else:
        theirs_ids = draw(st.lists(st.sampled_from(ID_POOL), unique=True))
    return (mine_ids, draw(st.lists(value, min_size=len(mine_ids), max_size=len(mine_ids))),
            theirs_ids, draw(st.lists(value, min_size=len(theirs_ids), max_size=len(theirs_ids))))


@settings(max_examples=400, deadline=None)
@given(two_runs())
def test_vectorised_pairing_agrees_with_the_mapping_reference(runs) -> None:
    assert exact(vector_diffs(*runs)) == exact(mapped_diffs(*runs))


def test_pairing_by_id_when_the_runs_list_other_cases_in_another_order() -> None:
    from groundjudge.history.trend import case_positions

    mine_ids, theirs_ids = ["a", "b", "c", "d", "e"], ["e", "x", "c", "b", "d"]
    mine, theirs = [1.0, 0.5, None, 0.25, -0.0], [0.0, 9.0, 0.5, 1.0, None]
    assert case_positions(mine_ids, list(mine_ids)) is None  # the usual case: nothing looked up
    assert case_positions(mine_ids, theirs_ids).tolist() == [-1, 3, 2, 4, 0]
    assert exact(vector_diffs(mine_ids, mine, theirs_ids, theirs)) == exact([0.5 - 1.0, -0.0 - 0.0])
    assert exact(vector_diffs(["a\udc80", "b"], [1.0, 2.0], ["b", "a\udc80"], [0.5, 0.25])) == exact([0.75, 1.5])
    assert vector_diffs([], [], ["a"], [1.0]) == [] and vector_diffs(["a"], [1.0], [], []) == []


def test_trend_pairs_reordered_and_partial_runs_as_the_mapping_reference(tmp_path: Path) -> None:
    """Runs whose case lists differ (order, cases added and dropped, values missing), stored and
    pending: every comparison's delta, n and p as the plain reference computes them, in the
    exact regime (few differing cases) and the normal one (many)."""
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(11)

    def night(ids: list[str]) -> dict[str, dict[str, float | None]]:
        return {c: {"few": 0.5 if rng.random() < 0.9 else rng.choice((0.0, 1.0, None)),
                    "many": rng.choice((0.0, 0.25, 1.0, None)), "rare": None if rng.random() < 0.7 else 1.0}
                for c in ids}

    lists = [CASES, CASES[::-1], CASES[50:] + [f"n{i}" for i in range(40)], CASES[50:] + [f"n{i}" for i in range(40)]]
    nights = [night(ids) for ids in lists]
    for values in nights[:-1]:
        append(store, values)
    pending = (summary(nights[-1]), pack({"cand": nights[-1]}))
    metrics = ["few", "many", "rare"]
    points = [p for p in trend(store, metrics, last=None, pending=pending) if p.status == "compared"]
    assert len(points) == 9
    for p in points:
        mine, theirs = nights[p.run_id - 1], nights[p.run_id - 2]
        diffs = mapped_diffs(list(mine), [v[p.metric] for v in mine.values()],
                             list(theirs), [v[p.metric] for v in theirs.values()])
        assert p.n_paired == len(diffs) and p.p_value == sign_flip_p(diffs)
        assert p.delta == (math.fsum(diffs) / len(diffs) if diffs else None)
    assert {p.metric for p in points if p.n_paired > 100 and p.delta != 0} >= {"many"}  # the normal regime


def test_columns_unpack_as_arrays_and_lists_alike_and_ids_with_a_lone_surrogate_round_trip(tmp_path: Path) -> None:
    import numpy as np

    from groundjudge.history.summary import unpack_values

    values = [0.5, None, -0.0, 1e-300, None, float("inf")]
    blob = pack_column(values)
    array = unpack_values(blob)
    assert not array.flags.writeable and array.dtype == np.float64
    assert exact([v for v in array.tolist() if not math.isnan(v)]) == exact([0.5, -0.0, 1e-300, float("inf")])
    assert unpack_column(blob) == values and pack_column(array) == blob
    assert unpack_column(pack_column([])) == [] and len(unpack_values(pack_column([]))) == 0
    store = HistoryStore(tmp_path / "history.sqlite")
    rows = {"a\udc80": {"x": 1.0}, "é": {"x": None}}
    run = store.append(summary(rows), pack({"cand": rows}))
    assert store.case_ids(run, "cand") == ["a\udc80", "é"] and store.column(run, "cand", "x") == [1.0, None]
    assert exact(store.values(run, "cand", "x").tolist()) == exact([1.0, math.nan])


@pytest.mark.parametrize("block", [1, 7, 4096, 1 << 24])
def test_file_hash_is_the_sha256_of_the_files_bytes_whatever_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      block: int) -> None:
    import hashlib

    from groundjudge.history import summary

    files = []
    for i, size in enumerate([0, 1, 4095, 4096, 4097, 10_000]):
        path = tmp_path / f"f{i}"
        path.write_bytes(random.Random(i).randbytes(size))
        files.append(path)
    monkeypatch.setattr(summary, "_HASH_BLOCK", block)
    assert summary.file_hash(files) == hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


@pytest.mark.parametrize("kept", [1, 2, 100])
def test_a_trend_holds_a_few_runs_case_ids_and_lists_its_points_metric_by_metric(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int) -> None:
    """A trend walks the runs oldest first, every metric of a run at once, keeping only the
    last few runs' case ids (a nightly run's take megabytes): its points, breaks and p-values are
    those of one metric at a time, listed metric by metric, however few runs it keeps."""
    import importlib

    trend_module = importlib.import_module("groundjudge.history.trend")  # (the package exports its function)
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(5)
    for night in range(9):
        ids = CASES[::-1] if night % 3 == 1 else CASES[night * 5:] + [f"new{night}"]
        values = {c: {"recall@5": rng.choice((0.0, 1.0)), "faithfulness_rate": rng.choice((0.0, 1.0, None)),
                      **({"mrr@10": rng.random()} if night != 4 else {})} for c in ids}
        append(store, values, golden="g2" if night >= 6 else "g1", rubric="r2" if night >= 3 else "r1")
    metrics = ["recall@5", "mrr@10", "faithfulness_rate", "recall@5"]
    monkeypatch.setattr(trend_module._Cases, "KEPT", 100)
    one_at_a_time = [p for metric in metrics for p in trend(store, [metric], last=6)]
    held: list[int] = []
    case_ids = trend_module._Cases.case_ids

    def counted(self: trend_module._Cases, run_id: int, config: str) -> list[str] | None:
        found = case_ids(self, run_id, config)
        held.append(len(self.ids))
        return found

    monkeypatch.setattr(trend_module._Cases, "KEPT", kept)
    monkeypatch.setattr(trend_module._Cases, "case_ids", counted)
    points = trend(store, metrics, last=6)
    assert points == one_at_a_time
    assert {p.status for p in points} >= {"compared", "break", "not compared"} and max(held) <= kept


def test_runs_over_the_same_cases_decode_their_ids_once_and_pair_case_by_case(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nights over one golden set store the same packed ids: the trend decodes them once and
    lines nothing up, and each comparison still pairs every case with itself (its mean change is
    the one worked out here by case id); a night that lists the cases in another order is
    decoded and lined up."""
    import importlib

    trend_module = importlib.import_module("groundjudge.history.trend")
    store = HistoryStore(tmp_path / "history.sqlite")
    rng = random.Random(7)
    nights = []
    for night in range(5):
        ids = CASES[::-1] if night == 3 else CASES
        values: dict[str, dict[str, float | None]] = {c: {"recall@5": rng.random()} for c in ids}
        nights.append(values)
        append(store, values)
    decoded: list[bytes] = []
    unpack = trend_module.unpack_ids
    monkeypatch.setattr(trend_module, "unpack_ids", lambda blob: decoded.append(blob) or unpack(blob))
    lined_up: list[int] = []
    positions = trend_module.case_positions
    monkeypatch.setattr(trend_module, "case_positions", lambda ids, among: lined_up.append(1) or positions(ids, among))
    points = trend(store, ["recall@5"], last=None)
    assert len(set(decoded)) == len(decoded) == 2 and len(lined_up) == 2  # nights 3 and 4 against their previous
    assert [p.status for p in points] == ["first"] + ["compared"] * 4
    for point, before, after in zip(points[1:], nights[:-1], nights[1:], strict=True):
        changes = [after[c]["recall@5"] - before[c]["recall@5"] for c in after]  # type: ignore[operator]
        assert point.n_paired == len(CASES) and point.delta == pytest.approx(sum(changes) / len(changes))
