"""A synthetic nightly run at scale (issue 15, SPEC 9): cases x 2 configs, every verdict cached.

Generates a nightly set (default 100,000 cases x 2 configs; 10 retrieved chunks, 4 in context,
about 100-word answers with citations, a corpus of every chunk's text), pre-fills the judge
cache with a valid verdict for every item the run will judge, then measures each stage of a
run in this process: load, deterministic metrics, selection, the all-cached judge pass, gates,
report writing (with the run history). Finally it runs the whole cached re-run as the CLI does,
`groundjudge run` in a fresh process, and measures that end to end. Wall time per stage and
peak memory (the process's max RSS after the stage, and the RSS growth within it).

Usage (from the worktree root):
  PYTHONPATH=src python benchmarks/nightly_scale.py --cases 5000 [--dir /tmp/nightly_scale] [--keep]
  PYTHONPATH=src python benchmarks/nightly_scale.py --cases 100000 --json /tmp/nightly_scale.json

The judge here is ``grounded_answer`` (one cached verdict per item); ``nightly_claim_check.py``
measures the default rubric, ``claim_check``, on a set this script left (``--keep``).

The SPEC 9 goal it is measured against: the cached nightly re-run of 100,000 cases under 60 s
and under 2 GiB on this 2-core machine. Add ``--src OTHER/src`` to measure another checkout on
the same data (a before/after in one session). How it measures (PSS of the process and its
workers) is in docs/nightly.md; the current figures are the table in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import compileall
import gc
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("policy employee leave annual service band contract remote office tenant access role days year month "
         "manager approval request travel expense limit receipt claim device laptop security password reset "
         "network account review quarter budget report audit vendor invoice payment term notice period").split()
CONFIGS = ("baseline", "candidate")
POOL = 20_000  # distractor chunks shared by all cases


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def generate(folder: Path, cases: int, seed: int) -> None:
    """golden.jsonl, traces/<config>.jsonl, corpus.jsonl, groundjudge.toml in ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "traces").mkdir(exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as corpus:
        corpus.writelines(json.dumps({"chunk_id": f"pool{p}#1", "doc_id": f"pool{p}", "text": words(rng, 60)}) + "\n" for p in range(POOL))
        for i in range(cases):
            corpus.writelines(json.dumps({"chunk_id": f"d{i}#{k}", "doc_id": f"d{i}", "text": words(rng, 60)}) + "\n" for k in (1, 2))
    with open(folder / "golden.jsonl", "w") as golden:
        for i in range(cases):
            golden.write(json.dumps({
                "id": f"n{i:06d}", "question": words(rng, 12) + "?", "expected_answer": words(rng, 20),
                "expected_chunk_ids": [f"d{i}#1"], "relevance": {f"d{i}#1": 3, f"d{i}#2": 1},
                "must_cite": [f"d{i}#1"], "must_contain": [], "tags": [rng.choice(("hr", "it", "finance", "legal"))],
                "difficulty": rng.choice(("easy", "medium", "hard")), "expected_behavior": "answer"}) + "\n")
    for c, cfg in enumerate(CONFIGS):
        with open(folder / "traces" / f"{cfg}.jsonl", "w") as traces:
            for i in range(cases):
                own = [f"d{i}#1", f"d{i}#2"]
                ranked = [*rng.sample([f"pool{p}#1" for p in rng.sample(range(POOL), 8)], 8)]
                hit_at = rng.randrange(0, 6 if c else 9)  # the candidate ranks the relevant chunk higher
                ranked.insert(hit_at, own[0])
                ranked.insert(min(hit_at + rng.randrange(1, 3), len(ranked)), own[1])
                ranked = ranked[:10]
                context = ranked[:4]
                cited = [cid for cid in context if cid.startswith("d")][:1] or context[:1]
                answer = words(rng, 48) + f" [{cited[0]}] " + words(rng, 48) + "."
                traces.write(json.dumps({
                    "query_id": f"n{i:06d}", "config_id": cfg,
                    "retrieved_chunks": [{"chunk_id": cid, "doc_id": cid.split("#")[0], "score": round(1 - r / 20, 3),
                                          "rank": r + 1} for r, cid in enumerate(ranked)],
                    "context_chunks": context, "answer": answer, "citations": [{"chunk_id": cited[0]}],
                    "latency_ms": {"end_to_end": round(rng.uniform(400, 2500), 1)},
                    "versions": {"chunking": "v1"}}) + "\n")
    (folder / "groundjudge.toml").write_text(
        '[inputs]\ngolden = "golden.jsonl"\ntraces = ["traces/baseline.jsonl", "traces/candidate.jsonl"]\n'
        'corpus = "corpus.jsonl"\n\n[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "bench-judge"\n'
        'rubric = "grounded_answer"\n\n[cache]\ndir = "cache"\n\n[gates]\nconfigs = ["candidate"]\n\n'
        '[gates.metrics]\n"recall@10" = { min = 0.9 }\nfaithfulness = { min = 0.9 }\n\n'
        f'[trust]\nrecords_dir = "{folder / "records"}"\n')


def verdict(context_ids: list[str]) -> str:
    first = context_ids[0]
    return json.dumps({"claims": [
        {"claim": "the main fact", "cited": [first], "verdict": "supported", "support": [first]},
        {"claim": "an extra detail", "cited": [], "verdict": "unsupported", "support": []}],
        "correctness": 3, "reason": "the main fact is in the context"})


def cpu_seconds() -> float:
    """User + system time of this process and of its workers that have ended (forked ones)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Stages:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def run(self, name: str, fn: Any) -> Any:
        before = rss_mb()
        started, cpu_started, wall_from = time.perf_counter(), cpu_seconds(), time.time()
        out = fn()
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        self.rows.append({"stage": name, "wall_from": round(wall_from, 2), "wall_to": round(time.time(), 2),
                          "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                          "rss_growth_mb": round(rss_mb() - before), "max_rss_mb": round(max_rss_mb())})
        print(f"  {name:34s} {seconds:8.2f} s  (CPU {cpu:6.2f} s)   max RSS {max_rss_mb():7.0f} MB   "
              f"(+{rss_mb() - before:.0f} MB)", flush=True)
        return out


# The cached re-run as a user runs it, in a fresh process; its CPU time and peak RSS come from
# the kernel's accounting of that one child (os.wait4). CPU time is beside wall time because
# this machine is shared: on a busy machine wall time says as much about the neighbours.
CLI_WRAPPER = ("import sys\n"
               "sys.argv = ['groundjudge', *sys.argv[1:]]\n"
               "from groundjudge.cli import main\n"
               "main()\n")


def tree_memory_mb(pid: int) -> tuple[float, float, int]:
    """(PSS, RSS) in MB summed over ``pid`` and its children (a run's forked workers), and how
    many processes that was: the kernel's max RSS of one process does not count a worker's own
    memory (the pages it copied on writing, what it made)."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            pids += [int(p) for p in handle.read().split()]
    except OSError:
        return 0.0, 0.0, 0
    pss = rss = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) / 1024
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1]) / 1024
        except OSError:
            pass
    return pss, rss, len(pids)


def run_child(command: list[str], cwd: Path, env: dict[str, str], *, show_output: bool = False,
              ) -> tuple[int, float, float, float, str, float, float, list[list[float]]]:
    """(exit code, wall s, CPU s (user + system, workers included), max RSS MB of the largest
    process, stderr, peak summed PSS MB, peak summed RSS MB, samples [time.time(), PSS MB,
    processes]) of one child process and its workers. The sums are sampled every 0.5 s, so a
    peak shorter than that can be missed."""
    import threading

    peaks = [0.0, 0.0]
    timeline: list[list[float]] = []
    done = threading.Event()

    def sample(pid: int) -> None:
        while not done.wait(0.5):
            pss, rss, n = tree_memory_mb(pid)
            peaks[0], peaks[1] = max(peaks[0], pss), max(peaks[1], rss)
            timeline.append([round(time.time(), 2), round(pss), n])

    with open(cwd / "cli.stderr", "w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=None if show_output else subprocess.DEVNULL,
                                 stderr=None if show_output else err)
        sampler = threading.Thread(target=sample, args=(child.pid,), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return (child.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err.read(),
                peaks[0], peaks[1], timeline)


def in_process(folder: Path, gc_freeze: bool) -> dict[str, Any]:
    """Pre-fill the cache, then every stage of a run in this process; returns the figures."""
    from groundjudge import api
    from groundjudge.judge.cache import CachedReply, cache_key
    from groundjudge.judge.run import judge_run
    from groundjudge.judge.session import JudgeSession
    from groundjudge.metrics.evaluate import evaluate_dataset

    config = api.resolve_config(folder / "groundjudge.toml")
    setup, stages = Stages(), Stages()
    def load() -> Any:
        if not gc_freeze:
            return api.load_inputs(config)
        # as `groundjudge run` does (cli._run_and_report): the collector's raised thresholds for
        # the whole run, set before loading, and the loaded inputs frozen (they live to the end)
        from groundjudge import cli

        gc.set_threshold(*getattr(cli, "RUN_GC_THRESHOLDS", (100_000, 50, 1000)))  # (sources without the constant: its value since 81033db)
        loaded = api.load_inputs(config)
        gc.freeze()
        return loaded

    dataset = stages.run("load (parse + validate)", load)
    settings = api.metric_settings(config)
    metrics = stages.run("deterministic metrics", lambda: evaluate_dataset(dataset, settings))
    selections = stages.run("selection", lambda: api.select(config, dataset, metrics))
    rubric = api.rubric_for(config)
    session = JudgeSession(config, rubric, log=None)
    chosen = [s for s in selections if s.judge and s.item is not None]

    def prefill() -> None:
        decoding, rubric_hash = session.decoding(), rubric.content_hash
        for s in chosen:
            key = cache_key(rubric, session.model, decoding, s.item, rubric_hash=rubric_hash)
            session.cache.put(key, CachedReply(raw=verdict([cid for cid, _ in s.item.contexts]), model=session.model,
                                               prompt_tokens=900, completion_tokens=80, created=time.time()))

    setup.run(f"pre-fill cache ({len(chosen)} replies, setup)", prefill)
    judged = stages.run("judge pass (every verdict cached)", lambda: judge_run(session, dataset, selections))
    assert judged.totals.cache_hits == len(chosen) and judged.totals.usage.requests == 0, judged.totals
    session.close()

    def gates_and_result() -> Any:
        from groundjudge.calibrate.record import find_records
        from groundjudge.gate import evaluate_gates

        gates = evaluate_gates(metrics, judged, config.gates, api.trust_rules(config),
                               find_records(config.trust.records_dir))
        return api.RunResult(config=config, dataset=dataset, settings=settings, metrics=metrics,
                             selections=tuple(selections), judge=judged, gates=gates, calibration=None,
                             bias_corrected=None, exit_code=0 if gates.passed else 1)

    result = stages.run("gates", gates_and_result)
    out = folder / "runs" / "in-process"
    stages.run("reports + history append", lambda: api.write_run_reports(
        result, out, history=folder / "runs" / "history.sqlite"))
    sizes = {p.name: round(p.stat().st_size / 2**20, 1) for p in out.iterdir() if p.is_file()}
    print(f"  report files (MB): {sizes}", flush=True)
    return {"judged_items": len(chosen), "setup": setup.rows, "stages": stages.rows, "report_files_mb": sizes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/nightly_scale"))
    parser.add_argument("--keep", action="store_true", help="keep the generated set and cache")
    parser.add_argument("--reuse", action="store_true",
                        help="use the set a --keep run left in --dir (same --cases and --seed); the cache is made again")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                        help="in-process stages without the CLI's collector settings (for comparison)")
    parser.add_argument("--src", type=Path, default=ROOT / "src",
                        help="the groundjudge sources to measure (default: this checkout's; another checkout's "
                             "src measures it on the same data, for a before/after in one session)")
    parser.add_argument("--workers", type=int, default=1,
                        help="GROUNDJUDGE_WORKERS of both measured processes: how many processes score the metrics "
                             "(default 1, no forked worker: the time and memory of one core)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="the cached re-run's `groundjudge run --engine` (ray: a local Ray started by the run; "
                             "needs groundjudge[ray])")
    parser.add_argument("--in-process", type=Path, help=argparse.SUPPRESS)  # internal: the child's figures file
    args = parser.parse_args()
    folder = args.dir / f"n{args.cases}"
    if args.in_process:
        args.in_process.write_text(json.dumps(in_process(folder, args.gc_freeze)))
        return 0

    # Compiled once here, so that no run pays for compiling the sources it measures (a
    # PYTHONDONTWRITEBYTECODE environment would otherwise compile every changed module on every run).
    compileall.compile_dir(args.src, quiet=1)
    setup = Stages()
    if args.reuse and (folder / "groundjudge.toml").exists():
        print(f"nightly set: {args.cases} cases x {len(CONFIGS)} configs in {folder} (reused)", flush=True)
        shutil.rmtree(folder / "runs", ignore_errors=True)
        shutil.rmtree(folder / "cache", ignore_errors=True)
    else:
        if folder.exists():
            shutil.rmtree(folder)
        print(f"nightly set: {args.cases} cases x {len(CONFIGS)} configs in {folder}", flush=True)
        setup.run("generate (setup)", lambda: generate(folder, args.cases, args.seed))
    size = sum(p.stat().st_size for p in folder.rglob("*.jsonl"))
    print(f"  input files: {size / 2**20:.0f} MB", flush=True)
    env = {"PYTHONPATH": str(args.src.resolve()), "PATH": "/usr/bin:/bin"}
    env["GROUNDJUDGE_WORKERS"] = str(args.workers)  # the environment above is all the children get

    # each measured process on its own, so that one's memory never inflates the other's
    figures = folder / "in_process.json"
    child = [sys.executable, __file__, "--cases", str(args.cases), "--dir", str(args.dir), "--in-process", str(figures)]
    if not args.gc_freeze:
        child.append("--no-gc-freeze")
    code, *_, inner_timeline = run_child(child, folder, env, show_output=True)
    if code != 0:
        return 1
    inner = json.loads(figures.read_text())
    for row in inner["stages"]:  # the peak summed PSS of the process and its workers during each stage
        during = [pss for t, pss, _ in inner_timeline if row["wall_from"] <= t <= row["wall_to"]]
        row["tree_peak_pss_mb"] = max(during) if during else None
        print(f"  {row['stage']:34s} peak PSS of the process and its workers: {row['tree_peak_pss_mb']} MB",
              flush=True)
    in_process_s = sum(r["seconds"] for r in inner["stages"])

    cli = [sys.executable, "-c", CLI_WRAPPER, "run", "--config", str(folder / "groundjudge.toml"),
           "--out", str(folder / "runs" / "cli"), "--quiet",
           *(["--engine", "ray"] if args.engine == "ray" else [])]  # (a --src checkout may predate --engine)
    code, cli_seconds, cli_cpu, cli_rss, stderr, tree_pss, tree_rss, timeline = run_child(cli, folder, env)
    timeline = [[round(t - timeline[0][0] + 0.5, 1), pss, n] for t, pss, n in timeline] if timeline else []
    if code not in (0, 1):
        print(stderr[-3000:], file=sys.stderr)
        return 1
    report = json.loads((folder / "runs" / "cli" / "report.json").read_text())
    assert report["judge"]["totals"]["usage"]["requests"] == 0
    print(f"  {'cached re-run, `groundjudge run`':34s} {cli_seconds:8.2f} s  (CPU {cli_cpu:6.2f} s)   max RSS "
          f"{cli_rss:7.0f} MB (exit {code}, {report['judge']['totals']['cache_hits']} cache hits, 0 requests)",
          flush=True)
    print(f"  {'':34s} {'':8s}    peak memory of the process and its workers (sampled every 0.5 s): "
          f"PSS {tree_pss:.0f} MB, RSS {tree_rss:.0f} MB (shared pages counted in each)", flush=True)
    print(f"\nin-process stages: {in_process_s:.1f} s; cached re-run (CLI): {cli_seconds:.1f} s (CPU {cli_cpu:.1f} s), "
          f"{cli_rss:.0f} MB; goal at 100,000 x 2: < 60 s and < 2048 MB; load average {os.getloadavg()}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "cases": args.cases, "configs": len(CONFIGS), "input_mb": round(size / 2**20),
            "setup": setup.rows + inner["setup"], "stages": inner["stages"], "judged_items": inner["judged_items"],
            "report_files_mb": inner["report_files_mb"],
            "cached_rerun_cli": {"seconds": round(cli_seconds, 2), "cpu_seconds": round(cli_cpu, 2),
                                 "max_rss_mb": round(cli_rss), "exit_code": code,
                                 "tree_peak_pss_mb": round(tree_pss), "tree_peak_rss_mb": round(tree_rss),
                                 "tree_pss_timeline_s_mb_processes": timeline},
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
