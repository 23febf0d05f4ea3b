"""Judge agreement with people on real RAG answers: grounded_answer v1 vs claim_check v1.

    .venv/bin/python benchmarks/judge_agreement.py [--n 120] [--seed 20261122] [--all]
        [--rubrics claim_check,claim_check/v1,grounded_answer] [--limit K] [--cache-dir cache [--cache-per-rubric]]
        [--judge-base-url URL --judge-model ID]

Data: ../shared/data/rag-faithfulness-dev (RAGTruth QA, 378 answers from six LLMs, human
hallucination labels; never copied into the package). The sample is seeded and stratified:
half faithful, half not, spread evenly over the six generating models. Every rubric judges the
same answers with the same judge (the embedded one unless a base URL is given), through the
groundjudge engine and cache, so a killed run resumes and a finished one re-reports for free.

Per rubric it prints: kappa of the judge's `faithful` against the people's, with a seeded
bootstrap 95% CI; balanced accuracy; AUROC of the judge's support score for telling faithful
from unfaithful answers (claim_check: the lowest claim support; grounded_answer: the share of
supported claims); kappa at a threshold chosen by 2-fold cross-fitting (each half's threshold is
chosen on the other half, so no item scores the threshold it chose); seconds per judged answer
(only answers that needed calls, wall time inside the engine) and requests per answer; and the
engine's wall time over all answers of the set (wall_per_answer: compare rubrics by this one,
measured from empty caches with --cache-per-rubric and a new --cache-dir).
Per-answer results go to benchmarks/results/judge_agreement_<rubric>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from groundjudge import api
from groundjudge.calibrate.agreement import agreement
from groundjudge.calibrate.verdicts import load_labels
from groundjudge.judge.run import judge_selected
from groundjudge.load.dataset import load_dataset
from groundjudge.metrics.evaluate import evaluate_dataset
from groundjudge.progress import JudgeProgress
from groundjudge.select import select_cases

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"
RESULTS = REPO / "benchmarks" / "results"


def sample(keys: list[tuple[str, str]], faithful: dict[tuple[str, str], bool], n: int, seed: int) -> list:
    """n answers, half faithful and half not, round-robin over the generating models."""
    rng = random.Random(seed)
    chosen = []
    for want in (True, False):
        by_model: dict[str, list] = {}
        for key in sorted(keys):
            if faithful[key] is want:
                by_model.setdefault(key[1], []).append(key)
        for pool in by_model.values():
            rng.shuffle(pool)
        taken, models = [], sorted(by_model)
        while len(taken) < n // 2 and any(by_model.values()):
            for model in models:
                if by_model[model] and len(taken) < n // 2:
                    taken.append(by_model[model].pop())
        chosen += taken
    return sorted(chosen)


def auroc(scores: list[float], positive: list[bool]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos = [s for s, p in zip(scores, positive) if p]
    neg = [s for s, p in zip(scores, positive) if not p]
    if not pos or not neg:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def balanced_accuracy(pred: list[bool], truth: list[bool]) -> float | None:
    rates = []
    for cls in (True, False):
        idx = [i for i, t in enumerate(truth) if t is cls]
        if idx:
            rates.append(sum(pred[i] == cls for i in idx) / len(idx))
    return sum(rates) / len(rates) if rates else None


def cross_fitted(scores: list[float], truth: list[bool], seed: int) -> tuple[list[bool], list[float]]:
    """Out-of-fold predictions: each half is cut at the threshold that maximises kappa on the other."""
    from groundjudge.calibrate.agreement import kappa

    idx = list(range(len(scores)))
    random.Random(seed).shuffle(idx)
    folds = [idx[::2], idx[1::2]]
    pred = [False] * len(scores)
    cuts = []
    for k in (0, 1):
        fit, apply = folds[1 - k], folds[k]
        candidates = sorted({scores[i] for i in fit})
        best = max(candidates, key=lambda c: (kappa([scores[i] >= c for i in fit], [truth[i] for i in fit],
                                                    [True, False]) or -1.0, -abs(c - 0.5)))
        cuts.append(best)
        for i in apply:
            pred[i] = scores[i] >= best
    return pred, cuts


def rubric_spec(spec: str) -> tuple[str, int | None, str]:
    """``claim_check`` (the newest version) or ``claim_check/v2``: id, version, file tag."""
    rubric_id, _, version = spec.partition("/v")
    return rubric_id, int(version) if version else None, rubric_id + (f"_v{version}" if version else "")


def judge_rubric(spec: str, keys: list, dataset, metrics, args) -> tuple[list[dict], float]:
    """Per-answer rows, and the engine's wall time for all of them (server start included)."""
    rubric_id, version, _ = rubric_spec(spec)
    cache_dir = args.cache_dir / spec.replace("/", "_") if args.cache_per_rubric else args.cache_dir
    flags = {"judge.rubric": rubric_id, "judge.rubric_version": version, "cache.dir": cache_dir,
             "judge.base_url": args.judge_base_url, "judge.model": args.judge_model}
    config = api.resolve_config(None, flags, environ={})
    wanted = set(keys)
    selections = [s for s in select_cases(dataset, metrics) if (s.case_id, s.config_id) in wanted]
    missing = wanted - {(s.case_id, s.config_id) for s in selections if s.judge}
    if missing:
        print(f"{rubric_id}: {len(missing)} sampled answers are not judgeable: {sorted(missing)[:5]}", file=sys.stderr)
    with api.open_judge(config) as session, JudgeProgress(False) as progress:
        started = time.monotonic()
        results, totals = judge_selected(session, selections, progress)
        wall = time.monotonic() - started
    rows = []
    for r in results:
        value = r.criteria.get("faithful")
        if rubric_id == "claim_check":  # the lowest claim support
            score = value.confidence if value and value.confidence is not None else (
                1.0 if value and value.label else 0.0)
        else:
            score = value.value if value and value.value is not None else (1.0 if value and value.label else 0.0)
        rows.append({"query_id": r.case_id, "config_id": r.config_id, "status": r.status, "reason": r.reason,
                     "source": r.source, "label": None if value is None else value.label, "score": score,
                     "claims": len(r.claims), "requests": r.usage.requests, "seconds": r.seconds,
                     "supports": [c.confidence for c in r.claims],
                     "verdicts": [c.verdict for c in r.claims], "spans": [[c.start, c.end] for c in r.claims],
                     **({"model_supports": [c.model_confidence for c in r.claims],
                         "unfound": [c.unfound_terms for c in r.claims]}
                        if any(c.unfound_terms is not None for c in r.claims) else {})})
    print(f"{spec}: {len(results)} answers in {wall:.0f}s wall, {totals.usage.requests} requests, "
          f"{totals.cache_hits} from cache", file=sys.stderr)
    return rows, wall


def carry_timings(rows: list[dict], tag: str) -> list[dict]:
    """Answers read from the cache keep the time and requests they cost when first judged
    (from an earlier results file of the same rubric), marked as such."""
    earlier: dict[tuple[str, str], dict] = {}
    for path in RESULTS.glob(f"judge_agreement_{tag}*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("source") == "call" and r.get("status") == "judged":
                earlier[(r["query_id"], r["config_id"])] = r
    out = []
    for r in rows:
        before = earlier.get((r["query_id"], r["config_id"]))
        if r["source"] == "cache" and before is not None:
            r = {**r, "seconds": before["seconds"], "requests": before["requests"], "source": "call",
                 "timed_in_earlier_run": True}
        out.append(r)
    return out


def summarise(rubric_id: str, rows: list[dict], human: dict, seed: int, wall: float | None = None) -> dict:
    judged = [r for r in rows if r["status"] == "judged" and r["label"] is not None]
    truth = [human[(r["query_id"], r["config_id"])] for r in judged]
    pred = [bool(r["label"]) for r in judged]
    ag = agreement(pred, truth, [f"{r['config_id']}/{r['query_id']}" for r in judged], [True, False], ordinal=False,
                   seed=seed, reps=2000)
    scores = [float(r["score"]) for r in judged]
    fitted, cuts = cross_fitted(scores, truth, seed)
    ag_cf = agreement(fitted, truth, [str(i) for i in range(len(truth))], [True, False], ordinal=False, seed=seed,
                      reps=2000)
    fresh = [r for r in rows if r["source"] == "call" and r["status"] == "judged"]
    return {
        "rubric": rubric_id, "answers": len(rows), "judged": len(judged),
        "judge_error": sum(r["status"] == "judge_error" for r in rows),
        "kappa": ag.kappa, "ci": [ag.ci_low, ag.ci_high], "observed": ag.observed,
        "balanced_accuracy": balanced_accuracy(pred, truth),
        "auroc": auroc(scores, truth),
        # claim_check: the mean claim support as the score (the faithfulness metric's per-case value)
        "auroc_mean_support": auroc([statistics.mean(s) if (s := [p for p in r["supports"] if p is not None])
                                     else float(r["score"]) for r in judged], truth),
        "kappa_cross_fitted": ag_cf.kappa, "ci_cross_fitted": [ag_cf.ci_low, ag_cf.ci_high], "cuts": cuts,
        "balanced_accuracy_cross_fitted": balanced_accuracy(fitted, truth),
        "seconds_per_answer": statistics.mean(r["seconds"] for r in fresh) if fresh else None,
        "timed_answers": len(fresh),
        # the figure to compare rubrics by, from empty caches (--cache-per-rubric, a new
        # --cache-dir): the engine's wall time over every answer of the set, those that needed
        # no call included
        "wall_seconds": wall, "wall_per_answer": wall / len(rows) if wall is not None and rows else None,
        "requests_per_answer": statistics.mean(r["requests"] for r in fresh) if fresh else None,
        "claims_per_answer": statistics.mean(r["claims"] for r in judged) if judged else None,
    }


def _f(v, digits=3):
    return "–" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=120)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--rubrics", default="claim_check,grounded_answer")
    parser.add_argument("--all", action="store_true", help="then the first of --rubrics on all 378 answers")
    parser.add_argument("--limit", type=int, help="only a balanced, model-spread subset of K answers of the sample")
    parser.add_argument("--cache-dir", type=Path, default=REPO / "cache")
    parser.add_argument("--cache-per-rubric", action="store_true",
                        help="a cache folder per rubric under --cache-dir (claim_check versions share questions: "
                             "for timing each from empty)")
    parser.add_argument("--judge-base-url")
    parser.add_argument("--judge-model")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)

    dataset = load_dataset(args.data / "golden.jsonl", sorted((args.data / "traces").glob("*.jsonl")),
                           args.data / "corpus.jsonl")
    metrics = evaluate_dataset(dataset, api.metric_settings(api.resolve_config(None, {}, environ={})))
    labels = load_labels([args.data / "labels" / "annotators.jsonl"], ["faithful"])["annotators"]
    human = {(q, c): v.labels["faithful"] for (q, c), v in labels.items() if v.labels["faithful"] is not None}
    keys = sample(list(human), human, args.n, args.seed)
    if args.limit:
        keys = sample(keys, human, args.limit, args.seed)
    print(f"sample: {len(keys)} answers ({sum(human[k] for k in keys)} faithful), seed {args.seed}, "
          f"models {sorted({k[1] for k in keys})}", file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    summaries = []
    runs = [(r, keys) for r in args.rubrics.split(",")]
    if args.all:
        runs.append((args.rubrics.split(",")[0], sorted(human)))
    for spec, chosen in runs:
        _, _, base = rubric_spec(spec)
        rows, wall = judge_rubric(spec, chosen, dataset, metrics, args)
        tag = base if chosen is keys else f"{base}_all"
        tag += f"_limit{args.limit}" if args.limit and chosen is keys else ""
        rows = carry_timings(rows, base)
        with (RESULTS / f"judge_agreement_{tag}.jsonl").open("w") as out:
            for r in rows:
                out.write(json.dumps({**r, "human_faithful": human[(r["query_id"], r["config_id"])]}) + "\n")
        summary = summarise(spec, rows, human, args.seed, wall)
        summary["set"] = f"sample of {len(keys)} (seed {args.seed})" if chosen is keys else f"all {len(chosen)}"
        (RESULTS / f"judge_agreement_{tag}.summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        summaries.append(summary)
        print(json.dumps(summary), file=sys.stderr)
    (RESULTS / "judge_agreement.json").write_text(json.dumps(summaries, indent=2) + "\n")
    cols = ["set", "answers", "judged", "judge_error", "kappa", "ci", "balanced_accuracy", "auroc", "auroc_mean_support",
            "kappa_cross_fitted", "ci_cross_fitted", "wall_per_answer", "seconds_per_answer", "timed_answers",
            "requests_per_answer",
            "claims_per_answer"]
    print("| rubric | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for s in summaries:
        cells = [(f"[{_f(s[c][0])}, {_f(s[c][1])}]" if c.startswith("ci") else _f(s[c])) for c in cols]
        print(f"| {s['rubric']} | " + " | ".join(cells) + " |")
    base = next((s for s in summaries if s["rubric"] == "grounded_answer"), None)
    for new in (s for s in summaries if s["rubric"].startswith("claim_check") and s["set"].startswith("sample")):
        if base and base["wall_per_answer"] and new["wall_per_answer"]:
            print(f"{new['rubric']} is {base['wall_per_answer'] / new['wall_per_answer']:.2f}x faster per answer "
                  f"(wall over all answers) than grounded_answer v1 on the same answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
