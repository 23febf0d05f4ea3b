"""Do two checkouts write the same outputs? `groundjudge run` on a generated nightly set, once
with each tree's sources, every output compared (a change made for speed must change no output).

Generates a set with ``nightly_scale.generate`` and fills the judge cache with tree A's code:
a valid verdict for most items, an invalid reply for every 50th (a judge_error from the cache)
and no entry for every 77th (the endpoint is unreachable: a judge_error after the call fails).
Then runs both trees on it and compares report.json (content and key order; git provenance and
per-case ``seconds`` left out), triage.jsonl record by record, the other report files byte for
byte (a 40-hex commit id shown as "unknown", as for a tree outside git), the history rows (less
start time and run folder) and the exit codes.

Usage (from the worktree root):
  python benchmarks/nightly_scale_compare.py CASES SRC_A SRC_B WORK_DIR [ENV=VALUE ...]

ENV=VALUE pairs are set for tree B only (e.g. GROUNDJUDGE_WORKERS=2: the metrics scored in a
pool of two processes).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nightly_scale as ns

PREFILL = """
import sys
sys.path.insert(0, {bench!r})
from pathlib import Path
import nightly_scale as ns
from groundjudge import api
from groundjudge.judge.cache import CachedReply, cache_key
from groundjudge.judge.session import JudgeSession
from groundjudge.metrics.evaluate import evaluate_dataset
folder = Path({folder!r})
config = api.resolve_config(folder / 'groundjudge.toml')
dataset = api.load_inputs(config)
selections = api.select(config, dataset, evaluate_dataset(dataset, api.metric_settings(config)))
rubric = api.rubric_for(config)
session = JudgeSession(config, rubric, log=None)
for i, s in enumerate(x for x in selections if x.judge and x.item is not None):
    if i % 77 == 5:
        continue
    raw = 'not json' if i % 50 == 3 else ns.verdict([cid for cid, _ in s.item.contexts])
    session.cache.put(cache_key(rubric, session.model, session.decoding(), s.item),
                      CachedReply(raw=raw, model=session.model, prompt_tokens=900, completion_tokens=80,
                                  created=1.0, repaired=True))
session.close()
"""


def history_rows(path: Path) -> tuple[list, list, list]:
    with sqlite3.connect(path) as conn:
        runs = [json.loads(s) for (s,) in conn.execute("SELECT summary FROM runs ORDER BY id")]
        for r in runs:
            for key in ("started_at", "run_dir", "git_commit"):
                r.pop(key, None)
        cases = conn.execute("SELECT config, ids FROM run_cases ORDER BY config").fetchall()
        values = conn.execute("SELECT config, metric, column_data FROM run_values ORDER BY config, metric").fetchall()
    return runs, cases, values


def comparable(doc: dict) -> dict:
    doc["provenance"].pop("git_commit", None)
    doc["provenance"].pop("git_dirty", None)
    for section in doc["judge"]["per_config"].values():
        for case in section["cases"].values():
            case["seconds"] = 0
    return doc


def main() -> int:
    cases, src_a, src_b, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    extra_env = dict(x.split("=", 1) for x in sys.argv[5:])
    if work.exists():
        shutil.rmtree(work)
    folder = work / "set"
    ns.generate(folder, cases, 15)
    code = PREFILL.format(bench=str(Path(__file__).resolve().parent), folder=str(folder))
    subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": src_a, "PATH": "/usr/bin:/bin"}, check=True)
    results = {}
    for name, src in (("a", src_a), ("b", src_b)):
        env = {"PYTHONPATH": src, "PATH": "/usr/bin:/bin", **(extra_env if name == "b" else {})}
        out = work / f"run_{name}"
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", ns.CLI_WRAPPER, "run", "--config", str(folder / "groundjudge.toml"),
                               "--out", str(out), "--quiet", "--keep-errors", "--history", str(work / "history.sqlite")],
                              cwd=folder, env=env, capture_output=True, text=True, check=False)
        print(f"{name}: exit {proc.returncode}, {time.perf_counter() - started:.1f} s; {proc.stderr[-300:].strip()}")
        results[name] = (proc.returncode, out)
        (work / "history.sqlite").rename(work / f"history_{name}.sqlite")  # the same path for both runs
        for leftover in work.glob("history.sqlite-*"):
            leftover.unlink()
    (code_a, out_a), (code_b, out_b) = results["a"], results["b"]
    assert code_a == code_b, "exit codes differ"
    doc_a = comparable(json.loads((out_a / "report.json").read_text()))
    doc_b = comparable(json.loads((out_b / "report.json").read_text()))
    assert doc_a == doc_b and json.dumps(doc_a) == json.dumps(doc_b), "report.json differs"
    def masked(data: bytes) -> bytes:
        return re.sub(rb"[0-9a-f]{40}( \(dirty\))?", b"unknown", data)  # a git archive has no commit

    for name in sorted(p.name for p in out_a.iterdir()):
        if name == "triage.jsonl":  # JSON lines: the same records, whatever the encoder's spacing
            lines_a, lines_b = ((out / name).read_text().splitlines() for out in (out_a, out_b))
            assert [json.loads(x) for x in lines_a] == [json.loads(x) for x in lines_b], f"{name} differs"
            print(f"{name}: same records ({len(lines_a)} lines)")
        elif name != "report.json":
            assert masked((out_a / name).read_bytes()) == masked((out_b / name).read_bytes()), f"{name} differs"
            print(f"{name}: same bytes")
    if (out_b / "cases.parquet").exists():  # a tree that writes it: each row as report.json has the case
        import pyarrow.parquet as pq

        rows = pq.read_table(out_b / "cases.parquet").to_pylist()
        per_case = [(c, cid, values) for c, section in doc_b["per_config"].items()
                    for cid, values in section["per_case"].items()]
        assert [(r["config_id"], r["case_id"]) for r in rows] == [(c, cid) for c, cid, _ in per_case]
        assert all(all(r[k] == v for k, v in values.items()) for r, (*_, values) in zip(rows, per_case)), \
            "cases.parquet differs from report.json"
        print(f"cases.parquet (tree b): the same values as report.json ({len(rows)} rows)")
    rows_a, rows_b = history_rows(work / "history_a.sqlite"), history_rows(work / "history_b.sqlite")
    assert rows_a == rows_b, "history rows differ"
    totals = doc_a["judge"]["totals"]
    print(f"every output identical for {cases} cases: report.json content, triage.jsonl records, "
          f"{len(list(out_a.iterdir())) - 2} files byte for byte, history ({len(rows_a[2])} value columns), exit code {code_a}; "
          f"{totals['cache_hits']} cache hits, {totals['judge_errors']} judge errors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
