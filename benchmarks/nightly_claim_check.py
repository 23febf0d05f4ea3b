"""The nightly cached re-run with the default rubric, ``claim_check`` (issue 15).

``nightly_scale.py`` measures the re-run with ``grounded_answer``: one cached verdict per item.
``claim_check`` caches one answer per question instead (a claim, its citation, a nugget), and a
re-run used to split every answer into claims, find their terms in the passages and read every
answer again to rebuild each case, in one process. A judged case now also
keeps a case memo (``judge.claim_questions.CaseMemo``): the next re-run of an unchanged case reads one
entry.

This script takes a set that ``nightly_scale.py --keep`` left, fills a question cache once
(every question the default rubric asks, answered yes or no with token probabilities, a fifth
of them no), then times ``groundjudge run --rubric claim_check`` twice, in fresh processes, on
a fresh copy of that cache: the first run rebuilds every case from its questions' answers (and
keeps the memos), the second reads the memos. Both make no request.

Usage (from the checkout root; the set first, with nightly_scale.py):
  PYTHONPATH=src python benchmarks/nightly_scale.py --cases 20000 --keep
  PYTHONPATH=src python benchmarks/nightly_claim_check.py --cases 20000 [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nightly_scale import CLI_WRAPPER, ROOT, run_child


def fill_questions(folder: Path, cache_dir: Path) -> int:
    """Answer every question the rubric asks about the set's judged items; returns how many."""
    from groundjudge import api
    from groundjudge.judge.batch import plan_questions
    from groundjudge.judge.cache import CachedReply
    from groundjudge.judge.session import JudgeSession
    from groundjudge.metrics.evaluate import evaluate_dataset

    config = api.resolve_config(folder / "groundjudge.toml", {"judge.rubric": "claim_check", "cache.dir": cache_dir})
    dataset = api.load_inputs(config)
    selections = api.select(config, dataset, evaluate_dataset(dataset, api.metric_settings(config)))
    rubric = api.rubric_for(config)
    session = JudgeSession(config, rubric, log=None)
    items = [s.item for s in selections if s.judge and s.item is not None]
    filled = 0
    try:
        while planned := plan_questions(rubric, session.settings, session.decoding(), session.cache, items):
            for n, line in enumerate(planned):  # a later round asks what depends on these answers
                yes = n % 5 != 0
                raw = json.dumps({"text": "Yes" if yes else "No",
                                  "tokens": [[["Yes", -0.1 if yes else -2.3], ["No", -2.3 if yes else -0.1]]]})
                session.cache.put(line.info.key, CachedReply(raw=raw, model=session.model, prompt_tokens=400,
                                                             completion_tokens=1, created=time.time()))
            filled += len(planned)
    finally:
        session.close()
    return filled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/nightly_scale"))
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the groundjudge sources to measure")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    folder = args.dir / f"n{args.cases}"
    if not (folder / "groundjudge.toml").exists():
        print(f"no set in {folder}: make one with nightly_scale.py --cases {args.cases} --keep", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.src.resolve()))
    questions = folder / "cache_claim_check_questions"
    if not (questions / "done").exists():
        shutil.rmtree(questions, ignore_errors=True)
        started = time.perf_counter()
        filled = fill_questions(folder, questions)
        (questions / "done").write_text(str(filled))
        print(f"question cache: {filled} answers in {time.perf_counter() - started:.0f} s (setup)", flush=True)
    run_cache = folder / "cache_claim_check_run"
    shutil.rmtree(run_cache, ignore_errors=True)
    shutil.copytree(questions, run_cache)
    env = {"PYTHONPATH": str(args.src.resolve()), "PATH": "/usr/bin:/bin"}
    rows = []
    for name in ("first re-run (cases rebuilt from their answers)", "second re-run (case memos)"):
        out = folder / "runs" / "claim_check"
        cli = [sys.executable, "-c", CLI_WRAPPER, "run", "--config", str(folder / "groundjudge.toml"), "--rubric",
               "claim_check", "--cache-dir", str(run_cache), "--out", str(out), "--no-history", "--quiet"]
        code, seconds, cpu, _rss, stderr, pss, _, _ = run_child(cli, folder, env)
        if code not in (0, 1):
            print(stderr[-3000:], file=sys.stderr)
            return 1
        totals = json.loads((out / "report.json").read_text())["judge"]["totals"]
        assert totals["usage"]["requests"] == 0, totals
        rows.append({"run": name, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "peak_pss_mb": round(pss),
                     "cache_hits": totals["cache_hits"], "judge_errors": totals["judge_errors"]})
        print(f"  {name:50s} {seconds:7.2f} s (CPU {cpu:6.2f} s)  peak PSS {pss:6.0f} MB  "
              f"{totals['cache_hits']} cases from the cache, 0 requests", flush=True)
    shutil.rmtree(run_cache, ignore_errors=True)
    print(f"load average {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps({"cases": args.cases, "src": str(args.src), "runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
