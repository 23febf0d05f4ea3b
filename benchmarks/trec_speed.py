"""groundjudge vs pytrec_eval, end to end (parse + evaluate), on TREC Robust 2003.

    .venv/bin/python benchmarks/trec_speed.py [--repeat 15] [--data DIR] [--process]

With ``--process``, whole processes are timed instead, as a user meets them: the command
``groundjudge metrics --qrels Q --run R --out DIR --quiet`` (start-up, imports, metrics,
writing metrics.json and report.md) against a Python process that imports pytrec_eval, parses
both files, evaluates and writes the per-query results as JSON; plus ``groundjudge --help``.

Both sides start from the files on disk:

- groundjudge: ``read_qrels`` + ``read_run`` + ``evaluate_trec`` (every metric, per query
  and the means);
- pytrec_eval: ``parse_qrel`` + ``parse_run`` (how its README and users read files) +
  ``RelevanceEvaluator(...).evaluate`` with the equivalent measures: P, recall, success,
  ndcg_cut at the same cutoffs, recip_rank, ndcg, map, Rprec, set_recall, num_*. Its
  per-query output is not averaged inside the timing (ours is), which favours pytrec_eval.

Before timing, the script asserts that the two agree on every shared mean to 1e-9. The
repetitions alternate between the two tools so that machine noise hits both alike; the
report gives the median of each stage and of the total, and the ratio of the totals.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import pytrec_eval

from groundjudge.load.trec import read_qrels, read_run
from groundjudge.metrics.retrieval import DEFAULT_KS, evaluate_trec

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "trec" / "trectools_robust03"
QRELS = "robust03_cs_qrels.txt"
RUN = "input.uic0301"
KS = DEFAULT_KS
CUTOFFS = ",".join(map(str, KS))
PYTREC_MEASURES = {
    f"P.{CUTOFFS}",
    f"recall.{CUTOFFS}",
    f"success.{CUTOFFS}",
    f"ndcg_cut.{CUTOFFS}",
    "recip_rank",
    "ndcg",
    "map",
    "Rprec",
    "set_recall",
    "num_ret",
    "num_rel",
    "num_rel_ret",
}
# pytrec_eval measure -> groundjudge metric (set_recall is checked per query below).
SHARED = {
    "recip_rank": "mrr",
    "ndcg": "ndcg",
    "map": "map",
    "Rprec": "r_precision",
    "num_ret": "num_ret",
    "num_rel": "num_rel",
    "num_rel_ret": "num_rel_ret",
    **{f"P_{k}": f"precision@{k}" for k in KS},
    **{f"recall_{k}": f"recall@{k}" for k in KS},
    **{f"success_{k}": f"hit@{k}" for k in KS},
    **{f"ndcg_cut_{k}": f"ndcg@{k}" for k in KS},
}


def run_groundjudge(data: Path) -> tuple[list[float], tuple]:
    start = time.perf_counter()
    qrels = read_qrels(data / QRELS)
    run = read_run(data / RUN)
    parsed = time.perf_counter()
    per_query, means = evaluate_trec(qrels, run, KS)
    done = time.perf_counter()
    return [parsed - start, done - parsed, done - start], (qrels, run, per_query, means)


def run_pytrec_eval(data: Path) -> tuple[list[float], tuple]:
    start = time.perf_counter()
    with open(data / QRELS) as lines:
        qrels = pytrec_eval.parse_qrel(lines)
    with open(data / RUN) as lines:
        run = pytrec_eval.parse_run(lines)
    parsed = time.perf_counter()
    per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    done = time.perf_counter()
    return [parsed - start, done - parsed, done - start], (qrels, run, per_query)


def assert_agreement(data: Path) -> int:
    _, (_, _, ours, our_means) = run_groundjudge(data)
    _, (_, _, theirs) = run_pytrec_eval(data)
    assert set(ours) == set(theirs), "the two evaluate different queries"
    for measure, key in SHARED.items():
        reference = math.fsum(values[measure] for values in theirs.values()) / len(theirs)
        mean = our_means[key]
        assert mean["n"] == len(theirs), f"{key}: averaged over {mean['n']} queries, not {len(theirs)}"
        assert abs(mean["value"] - reference) <= 1e-9, f"{measure}: {mean['value']!r} vs {reference!r}"
    for qid, values in theirs.items():
        set_recall = ours[qid]["num_rel_ret"] / ours[qid]["num_rel"]
        assert abs(set_recall - values["set_recall"]) <= 1e-9, f"{qid} set_recall"
    return len(SHARED) + 1


PYTREC_SCRIPT = """
import json, sys, pytrec_eval
qrels_path, run_path, out = sys.argv[1:4]
with open(qrels_path) as lines:
    qrels = pytrec_eval.parse_qrel(lines)
with open(run_path) as lines:
    run = pytrec_eval.parse_run(lines)
measures = set(json.loads(sys.argv[4]))
per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
with open(out, "w") as handle:
    json.dump(per_query, handle)
"""


def time_processes(data: Path, repeat: int) -> int:
    import compileall
    import json
    import subprocess
    import tempfile

    import groundjudge

    # the package the processes import, compiled once: no run pays for compiling it (a
    # PYTHONDONTWRITEBYTECODE environment would otherwise compile changed modules every time)
    compileall.compile_dir(Path(groundjudge.__file__).parent, quiet=1)
    exe = Path(sys.executable).parent / "groundjudge"
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "groundjudge metrics": [str(exe), "metrics", "--qrels", str(data / QRELS), "--run", str(data / RUN),
                                    "--out", tmp, "--quiet"],
            "pytrec_eval script": [sys.executable, "-c", PYTREC_SCRIPT, str(data / QRELS), str(data / RUN),
                                   f"{tmp}/pytrec.json", json.dumps(sorted(PYTREC_MEASURES))],
            "groundjudge --help": [str(exe), "--help"],
        }
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for name, command in commands.items():  # warm-up: file cache
            subprocess.run(command, check=True, capture_output=True)
        for repetition in range(repeat):
            order = list(commands.items()) if repetition % 2 == 0 else list(reversed(commands.items()))
            for name, command in order:
                start = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                seconds[name].append(time.perf_counter() - start)
    print(f"whole processes, {repeat} repetitions alternating, median wall seconds")
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, value in medians.items():
        print(f"{name:<20} {value:8.3f}")
    print(f"ratio groundjudge metrics / pytrec_eval script: {medians['groundjudge metrics'] / medians['pytrec_eval script']:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed repetitions of each tool (default 15)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the Robust03 qrels and run")
    parser.add_argument("--process", action="store_true", help="time whole processes (start-up included)")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if args.process:
        return time_processes(data, args.repeat)

    checked = assert_agreement(data)
    print(f"agreement: {checked} mean measures equal to 1e-9 on {data.name} ({QRELS}, {RUN})")

    tools = {"groundjudge": run_groundjudge, "pytrec_eval": run_pytrec_eval}
    timings: dict[str, list[list[float]]] = {name: [] for name in tools}
    for tool in tools.values():  # warm-up: imports, file cache, allocator
        tool(data)
    for repetition in range(args.repeat):
        order = list(tools.items()) if repetition % 2 == 0 else list(reversed(tools.items()))
        for name, tool in order:
            seconds, results = tool(data)
            timings[name].append(seconds)
            del results  # freed outside the timed region, for both tools alike

    print(
        f"python {platform.python_version()}, pytrec_eval {pytrec_eval.__version__}, "
        f"{args.repeat} repetitions, medians in seconds"
    )
    print(f"{'':<12} {'parse':>8} {'evaluate':>9} {'total':>8}")
    medians = {}
    for name, rows in timings.items():
        parse, evaluate, total = (statistics.median(column) for column in zip(*rows))
        medians[name] = total
        print(f"{name:<12} {parse:8.4f} {evaluate:9.4f} {total:8.4f}")
    ratio = medians["groundjudge"] / medians["pytrec_eval"]
    print(f"ratio groundjudge / pytrec_eval (total): {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
