"""The judge cache on disk is data only: JSON rows, no pickle ever decoded, no file outside it
touched; a damaged cache is one line and never costs the run's report."""

from __future__ import annotations

import json
import pickle
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.judge.cache import CachedReply, JudgeCache
from groundjudge.judge.cache_disk import CacheUnreadable
from tests.support.judge_replies import claim_answer
from tests.support.openai_server import ScriptedOpenAIServer
from tests.test_run_faults import example_config, not_a_crash


class Boom:
    """Unpickling this runs ``marker.touch()``: what a planted cache value could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


def rows(directory: Path) -> list[tuple]:
    with sqlite3.connect(directory / "cache.db") as conn:
        return conn.execute("SELECT key, raw, mode, filename, value FROM Cache ORDER BY key").fetchall()


def plant(directory: Path, key: str, value: bytes, *, mode: int = 4, filename: str | None = None) -> None:
    """Write a row as someone with access to the file could, in diskcache's own layout."""
    with sqlite3.connect(directory / "cache.db") as conn:
        conn.execute("INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, "
                     "mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, ?, ?, ?)",
                     (key, time.time(), time.time(), mode, filename, value))


def test_entries_are_json_rows(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    cache.put("k", CachedReply("{\"ok\": true}", "m", 3, 1, 1.5, repaired=True, history=["bad"]))
    cache.put_many([("k2", CachedReply("x" * 100_000, "m", 1, 1, 2.0))])  # large: still in the row, no file
    cache.close()
    stored = rows(tmp_path)
    assert [(key, raw, mode, filename) for key, raw, mode, filename, _ in stored] == [
        ("k", 1, 1, None), ("k2", 1, 1, None)]
    assert json.loads(stored[0][4]) == {"raw": "{\"ok\": true}", "model": "m", "prompt_tokens": 3,
                                        "completion_tokens": 1, "created": 1.5, "repaired": True, "history": ["bad"]}
    assert not [p for p in tmp_path.rglob("*") if p.suffix == ".val"]
    again = JudgeCache(tmp_path)
    assert again.get("k") == CachedReply("{\"ok\": true}", "m", 3, 1, 1.5, repaired=True, history=["bad"])
    again.close()


def test_the_cache_never_evicts_a_reply_of_its_own_accord(tmp_path: Path) -> None:
    """A cache past diskcache's size limit keeps every reply (its default would drop the oldest
    past 1 GiB, and a large nightly set would be asked again every night); a cache an older
    version opened with that default is opened without eviction too."""
    import diskcache

    diskcache.Cache(str(tmp_path), size_limit=4096, cull_limit=1).close()  # as a small, evicting cache
    cache = JudgeCache(tmp_path)
    replies = {f"k{i}": CachedReply("y" * 1000, "m", 1, 1, float(i)) for i in range(40)}  # far past 4096 bytes
    for key, reply in replies.items():
        cache.put(key, reply)
    cache.close()
    again = JudgeCache(tmp_path)
    assert all(again.get(key) == reply for key, reply in replies.items())
    assert again.get_many(list(replies)) == list(replies.values())
    again.close()


def test_a_planted_pickle_is_never_run_and_migrate_keeps_only_plain_replies(tmp_path: Path) -> None:
    JudgeCache(tmp_path).close()
    marker = tmp_path / "pwned"
    plant(tmp_path, "evil", pickle.dumps(Boom(marker)))
    plant(tmp_path, "old", pickle.dumps({"raw": "Yes", "model": "m", "prompt_tokens": 1, "completion_tokens": 1,
                                         "created": 1.0, "repaired": False, "history": []}))
    plant(tmp_path, "odd", json.dumps({"raw": 1, "model": "m"}).encode(), mode=1)  # JSON, not a reply
    cache = JudgeCache(tmp_path)
    assert cache.get("evil") is None and cache.get("old") is None and cache.get("odd") is None
    assert cache.stats()["legacy_entries_skipped"] == 3 and cache.prune(older_than_days=0) == 3
    cache.close()
    assert not marker.exists()

    plant(tmp_path, "evil", pickle.dumps(Boom(marker)))
    plant(tmp_path, "old", pickle.dumps({"raw": "Yes", "model": "m", "prompt_tokens": 1, "completion_tokens": 1,
                                         "created": 1.0, "repaired": False, "history": []}))
    result = CliRunner().invoke(main, ["cache", "migrate", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0 and "1 entries converted to JSON, 1 dropped unread" in result.output, result.output
    assert not marker.exists()
    cache = JudgeCache(tmp_path)
    assert cache.get("old") == CachedReply("Yes", "m", 1, 1, 1.0) and cache.get("evil") is None
    cache.close()


def test_a_row_naming_a_file_outside_the_cache_neither_reads_nor_deletes_it(tmp_path: Path) -> None:
    outside = tmp_path / "keep" / "precious.txt"
    outside.parent.mkdir()
    outside.write_text("mine")
    folder = tmp_path / "cache"
    JudgeCache(folder).close()
    plant(folder, "f", b"", mode=2, filename="../keep/precious.txt")
    cache = JudgeCache(folder)
    assert cache.get("f") is None
    assert cache.prune(older_than_days=0) == 1 and cache.clear() == 0
    cache.close()
    assert outside.read_text() == "mine"


def test_a_settings_table_diskcache_never_writes_is_refused_before_any_pragma(tmp_path: Path) -> None:
    JudgeCache(tmp_path).close()
    with sqlite3.connect(tmp_path / "cache.db") as conn:
        conn.execute("INSERT INTO Settings VALUES ('sqlite_writable_schema', 1)")
    with pytest.raises(CacheUnreadable, match="unknown setting 'sqlite_writable_schema'"):
        JudgeCache(tmp_path)


def test_a_corrupt_cache_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "cache.db").write_bytes(b"this is not a database" * 100)
    with ScriptedOpenAIServer(claim_answer) as srv:
        result = CliRunner().invoke(main, ["run", "--config", str(example_config(tmp_path)), "--judge-base-url",
                                           srv.base_url, "--judge-model", srv.model, "--cache-dir", str(folder),
                                           "--out", str(tmp_path / "out"), "--no-history", "--quiet"])
        assert srv.call_count == 0
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(folder / "cache.db") in lines[0] and "move it aside" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_cache_damaged_on_disk_after_it_opened_costs_no_report(tmp_path: Path) -> None:
    """A cache whose pages are destroyed under the run: the run goes on without it (asking
    again), says so in one line and in report.json, and writes every report."""
    folder = tmp_path / "cache"
    config = example_config(tmp_path)
    args = ["run", "--config", str(config), "--cache-dir", str(folder), "--no-history", "--quiet"]
    with ScriptedOpenAIServer(claim_answer) as srv:
        first = CliRunner().invoke(main, [*args, "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                                          "--out", str(tmp_path / "first")])
        calls = srv.call_count
    assert first.exit_code in (0, 1) and not_a_crash(first) and calls > 100, first.output
    database = folder / "cache.db"
    data = bytearray(database.read_bytes())
    page = 4096
    for start in range(len(data) // page // 2 * page, len(data), page):  # the second half: entries only
        data[start:start + page] = b"\xff" * min(page, len(data) - start)
    database.write_bytes(bytes(data))
    with ScriptedOpenAIServer(claim_answer) as srv:
        second = CliRunner().invoke(main, [*args, "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                                           "--out", str(tmp_path / "second")])
    assert second.exit_code == first.exit_code and not_a_crash(second), second.output
    report = json.loads((tmp_path / "second" / "report.json").read_text())
    assert "the judge cache is damaged" in report["judge"]["cache"]["problem"]
    assert "the judge cache is damaged" in second.output
    for name in ("report.md", "report.html", "triage.md", "triage.jsonl"):
        assert (tmp_path / "second" / name).exists()
    before = json.loads((tmp_path / "first" / "report.json").read_text())["judge"]["per_config"]
    assert {cfg: {cid: c["criteria"] for cid, c in s["cases"].items()} for cfg, s in before.items()} == {
        cfg: {cid: c["criteria"] for cid, c in s["cases"].items()} for cfg, s in report["judge"]["per_config"].items()}


# ------------------------------------------------------------------- many keys in one read


def _mixed_cache(directory: Path) -> list[str]:
    """A cache with every kind of row a lookup meets; the keys to look up (with repeats and misses)."""
    cache = JudgeCache(directory)
    cache.put_many([(f"k{i}", CachedReply(f"reply {i}", "m", i, 1, float(i), history=["h"] * (i % 2)))
                    for i in range(40)])
    cache.close()
    plant(directory, "pickled", pickle.dumps({"raw": "Yes", "model": "m"}))
    plant(directory, "in-a-file", b"", mode=2, filename="../elsewhere.val")
    plant(directory, "odd", json.dumps({"raw": 1, "model": "m"}).encode(), mode=1)
    plant(directory, "not-json", b"{nope", mode=1)
    with sqlite3.connect(directory / "cache.db") as conn:  # a row past its expiry, as diskcache writes one
        conn.execute("INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, "
                     "mode, filename, value) VALUES ('expired', 1, 1, 2, 1, 0, NULL, 0, 1, NULL, ?)",
                     (json.dumps({"raw": "old", "model": "m"}).encode(),))
    return ["k3", "missing", "k0", "pickled", "k3", "in-a-file", "odd", "not-json", "expired",
            *[f"k{i}" for i in range(39, 4, -1)], "k41"]


@pytest.mark.parametrize("located", [False, True], ids=["by-key", "by-row-id"])
def test_many_keys_in_one_read_find_and_count_what_one_key_at_a_time_does(tmp_path: Path, located: bool) -> None:
    """Keys looked up by key, or at the rows ``locate`` found in one pass over the index (a
    run's keys that are most of the cache): what ``get`` finds, with the same counts."""
    keys = _mixed_cache(tmp_path)
    one, many = JudgeCache(tmp_path), JudgeCache(tmp_path)
    try:
        rowids = many.locate(keys) if located else None
        assert (rowids is not None) == located
        assert many.get_many(keys, rowids) == [one.get(key) for key in keys]
        assert (many.hits, many.misses, many.legacy) == (one.hits, one.misses, one.legacy) == (38, 7, 4)
        assert many.get_many([]) == [] and many.get_many(["k1"]) == [one.get("k1")]
    finally:
        one.close()
        many.close()


def test_rows_located_then_changed_are_read_as_they_are_now(tmp_path: Path) -> None:
    """Rows found by ``locate`` that another process then deleted, replaced (a new row id) or
    let expire before they were read: each key gives what ``get`` gives now."""
    keys = _mixed_cache(tmp_path)
    many = JudgeCache(tmp_path)
    try:
        rowids = many.locate(keys)
        assert rowids is not None and rowids[keys.index("k0")] and rowids[keys.index("missing")] == 0
        with sqlite3.connect(tmp_path / "cache.db") as conn:
            conn.execute("DELETE FROM Cache WHERE key IN ('k5', 'k6', 'k7')")
            conn.execute("UPDATE Cache SET expire_time = 1 WHERE key = 'k8'")
        writer = JudgeCache(tmp_path)
        writer.put_many([("k6", CachedReply("again", "m", 1, 1, 1.0)), ("missing", CachedReply("now", "m", 1, 1, 1.0))])
        writer.close()
        one = JudgeCache(tmp_path)
        got = many.get_many(keys, rowids)
        assert got == [one.get(key) for key in keys]
        assert got[keys.index("k6")] is not None and got[keys.index("k6")].raw == "again"
        assert got[keys.index("missing")] is not None and got[keys.index("k5")] is None and got[keys.index("k8")] is None
        one.close()
    finally:
        many.close()


def test_keys_a_few_of_a_large_cache_are_looked_up_by_key(tmp_path: Path) -> None:
    """One pass over the index is for keys that are most of the cache; a few keys of a large
    one are looked up by key."""
    cache = JudgeCache(tmp_path)
    try:
        cache.put_many([(f"k{i}", CachedReply(f"reply {i}", "m", 1, 1, 1.0)) for i in range(50)])
        assert cache.locate(["k1", "k2", "k3"]) is None
        assert cache.locate([f"k{i}" for i in range(30)]) is not None
        assert cache.locate(["k1"]) is None  # one key: nothing to gain
    finally:
        cache.close()


def test_a_cache_that_counts_or_orders_on_reading_is_read_one_key_at_a_time(tmp_path: Path) -> None:
    """diskcache writes on a lookup with statistics on, or an eviction policy that records use:
    those lookups stay diskcache's own, and count as they do one key at a time."""
    import diskcache

    from groundjudge.judge.cache_disk import JsonDisk

    counted = []
    for name, lookup in (("one", lambda c, keys: [c.get(k) for k in keys]), ("many", JudgeCache.get_many)):
        keys = _mixed_cache(tmp_path / name)
        diskcache.Cache(str(tmp_path / name), disk=JsonDisk, statistics=1,
                        eviction_policy="least-recently-used").close()
        cache = JudgeCache(tmp_path / name)
        try:
            replies = lookup(cache, keys)
            assert cache._cache is not None
            counted.append((replies, cache.hits, cache.misses, cache.legacy, cache._cache.stats()))
        finally:
            cache.close()
    assert counted[0] == counted[1] and counted[0][1] == 38 and counted[0][4][0] > 0


def test_a_cache_broken_under_a_read_of_many_keys_is_switched_off_with_its_reason(tmp_path: Path) -> None:
    keys = _mixed_cache(tmp_path)
    cache = JudgeCache(tmp_path)
    try:
        database = tmp_path / "cache.db"
        database.write_bytes(b"\xff" * database.stat().st_size)
        assert cache.get_many(keys) == [None] * len(keys)
        assert cache.misses == len(keys) and cache.hits == 0
        assert cache.problem is not None and "the judge cache is damaged" in cache.problem
        assert cache.get_many(keys) == [None] * len(keys) and cache.misses == 2 * len(keys)
    finally:
        cache.close()
