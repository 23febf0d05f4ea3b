"""Where the cyclic garbage collector's time goes in a nightly run, stage by stage.

Runs load, metrics, selection, the judge pass, gates and report writing in this process on a
set that ``nightly_scale.py --keep`` left (its judge cache must be filled: every verdict cached),
and prints per stage the wall time, the collector's time and its collections by generation
(``gc.callbacks``). At the end, a full ``gc.collect()`` says how much cyclic garbage the stages
left.

By default the collector is set as ``groundjudge run`` sets it (its thresholds raised before
loading, the loaded inputs frozen). ``--default`` leaves Python's own settings, as a notebook
calling ``run_eval`` has them. Run it once with each tree's sources for a before/after:

  PYTHONPATH=src python benchmarks/nightly_gc.py /tmp/nightly_scale/n100000 [--default]
  PYTHONPATH=/path/to/other/src python benchmarks/nightly_gc.py /tmp/nightly_scale/n100000 [--default]
"""

from __future__ import annotations

import gc
import shutil
import sys
import time
from pathlib import Path

from groundjudge import api
from groundjudge.calibrate.record import find_records
from groundjudge.gate import evaluate_gates
from groundjudge.judge.run import judge_run
from groundjudge.judge.session import JudgeSession
from groundjudge.metrics.evaluate import evaluate_dataset

spent = {"s": 0.0, "n": 0, "started": 0.0, "by_gen": {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}}


def on_collection(phase: str, info: dict) -> None:
    if phase == "start":
        spent["started"] = time.perf_counter()
        return
    took = time.perf_counter() - spent["started"]
    spent["s"] += took
    spent["n"] += 1
    spent["by_gen"][info["generation"]][0] += 1
    spent["by_gen"][info["generation"]][1] += took


last = {"t": 0.0, "s": 0.0, "n": 0}


def mark(stage: str) -> None:
    now = time.perf_counter()
    by_gen = ", ".join(f"gen{g}: {n} ({s:.2f} s)" for g, (n, s) in spent["by_gen"].items())
    print(f"{stage:9s} {now - last['t']:6.2f} s   collector {spent['s'] - last['s']:5.2f} s in "
          f"{spent['n'] - last['n']} collections ({by_gen})", flush=True)
    last.update(t=now, s=spent["s"], n=spent["n"])
    for row in spent["by_gen"].values():
        row[:] = [0, 0.0]


def main() -> int:
    folder = Path(sys.argv[1])
    as_run = "--default" not in sys.argv[2:]
    gc.callbacks.append(on_collection)
    config = api.resolve_config(folder / "groundjudge.toml")
    last["t"] = time.perf_counter()
    if as_run:
        from groundjudge import cli

        gc.set_threshold(*getattr(cli, "RUN_GC_THRESHOLDS", (100_000, 50, 1000)))  # (sources without the constant: its value since 81033db)
    dataset = api.load_inputs(config)
    if as_run:
        gc.freeze()
    mark("load")
    settings = api.metric_settings(config)
    metrics = evaluate_dataset(dataset, settings)
    mark("metrics")
    selections = api.select(config, dataset, metrics)
    mark("select")
    session = JudgeSession(config, api.rubric_for(config), log=None)
    judged = judge_run(session, dataset, selections)
    session.close()
    assert judged.totals.usage.requests == 0, "fill the judge cache first (nightly_scale.py --keep)"
    mark("judge")
    gates = evaluate_gates(metrics, judged, config.gates, api.trust_rules(config),
                           find_records(config.trust.records_dir))
    result = api.RunResult(config=config, dataset=dataset, settings=settings, metrics=metrics,
                           selections=tuple(selections), judge=judged, gates=gates, calibration=None,
                           bias_corrected=None, exit_code=0)
    mark("gates")
    out = folder / "runs" / "nightly_gc"
    shutil.rmtree(out, ignore_errors=True)
    (folder / "runs" / "nightly_gc_history.sqlite").unlink(missing_ok=True)
    api.write_run_reports(result, out, history=folder / "runs" / "nightly_gc_history.sqlite")
    mark("reports")
    started = time.perf_counter()
    found = gc.collect()
    print(f"a full collection after the reports: {found} objects freed, {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
