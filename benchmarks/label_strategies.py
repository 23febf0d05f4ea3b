"""How many labels each picking strategy needs, and whether the weighted kappa stays unbiased.

    PYTHONPATH=src .venv/bin/python benchmarks/label_strategies.py --synthetic-judge [--seeds 200]
    PYTHONPATH=src .venv/bin/python benchmarks/label_strategies.py --report runs/dev/report.json

On ``../shared/data/rag-faithfulness-dev/`` (378 answers), the human labels
(``labels/annotators.jsonl``, rater ``annotators``, criterion ``faithful``) stand in for the
rater: every picked item is "labelled" with its human label. For each strategy and seed, batches
of ``--batch`` items are drawn by the real picker and the weighted judge-vs-human kappa of
``faithful`` is re-estimated after each batch, as ``groundjudge label`` does. Reported:

- labels needed until the estimated 95% CI half-width is under ``--target`` (median and
  quartiles over seeds);
- bias of the weighted kappa against the kappa of the full set (all 378 items), after a fixed
  number of labels, with its Monte Carlo standard error, the empirical standard deviation and
  the coverage of the 95% CI.

The judge: ``--report`` takes verdicts and confidences from a `groundjudge run` report over the
dev set; ``--synthetic-judge`` makes them from the human labels with a stated, seeded noise
model (printed, and every figure from it is marked SYNTHETIC).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from groundjudge.contracts import HumanLabel
from groundjudge.label.estimate import agreement_weights, kappa_from_matrix
from groundjudge.label.run_source import JudgedItem, LabelRun, read_run
from groundjudge.label.session import LabelSession, agreement_estimates, plan_next_batch
from groundjudge.load.adapters import load_any
from groundjudge.load.records import read_records

REPO = Path(__file__).resolve().parents[1]
DEV = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"
if not DEV.is_dir():
    DEV = Path("/work/shared/data/rag-faithfulness-dev")

NOISE_MODEL = ("SYNTHETIC judge: per item a confidence c = 0.5 + 0.5 * Beta(2, 1) (mean 0.83); the verdict "
               "equals the human label with probability c, else the opposite; the judge reports c as its "
               "faithful_confidence (so it is calibrated); seed {seed}")


def human_labels() -> dict[tuple[str, str], bool]:
    out = {}
    for _, label in read_records(DEV / "labels" / "annotators.jsonl", HumanLabel):
        if label.faithful is not None and label.config_id is not None:
            out[(label.query_id, label.config_id)] = label.faithful
    return out


def synthetic_run(humans: dict[tuple[str, str], bool], seed: int) -> LabelRun:
    dataset, _ = load_any(DEV / "golden.jsonl", sorted((DEV / "traces").glob("*.jsonl")), DEV / "corpus.jsonl")
    rng = np.random.default_rng(seed)
    items = []
    for key in sorted(humans):
        c = 0.5 + 0.5 * rng.beta(2.0, 1.0)
        verdict = humans[key] if rng.uniform() < c else not humans[key]
        items.append(JudgedItem(key=key, labels={"faithful": verdict, "correct": None, "citations_supported": None},
                                confidence=float(c), confidence_source="synthetic faithful_confidence", spread=0.0))
    return LabelRun(DEV, DEV / "synthetic", f"synthetic-{seed}", items, dataset)


def full_kappa(run: LabelRun, humans: dict[tuple[str, str], bool]) -> tuple[float, int]:
    matrix = np.zeros((2, 2))
    n = 0
    for item in run.items:
        if item.key in humans and item.labels["faithful"] is not None:
            matrix[0 if item.labels["faithful"] else 1, 0 if humans[item.key] else 1] += 1
            n += 1
    return float(kappa_from_matrix(matrix, agreement_weights(2, None))), n


def simulate(run: LabelRun, humans: dict[tuple[str, str], bool], strategy: str, seed: int, batch: int,
             target: float, checkpoints: list[int]) -> dict:
    population = {item.key for item in run.items if item.key in humans}
    judged_run = LabelRun(run.run_dir, run.report_path, run.report_digest,
                          [i for i in run.items if i.key in population], run.dataset)
    session = LabelSession(judged_run, "annotators", Path("/nonexistent/labels.jsonl"), [], {}, [],
                           {i.key: i for i in judged_run.items})
    needed = None
    at: dict[int, tuple[float | None, float | None, float | None]] = {}
    step = 0
    while len(session.labelled) < len(population):
        record = plan_next_batch(session, strategy=strategy, size=batch, double_share=0.0,
                                 seed=seed * 1000 + step)
        session.batches.append(record)
        for q, c, _, _ in record.picks:
            session.mine.append(HumanLabel(query_id=q, config_id=c, rater="annotators", faithful=humans[(q, c)]))
        step += 1
        est = agreement_estimates(session)["faithful"]
        n = len(session.mine)
        if needed is None and est.half_width is not None and est.half_width < target:
            needed = n
        if n in checkpoints:
            at[n] = (est.kappa, est.ci_low, est.ci_high)
        if needed is not None and all(c in at or c > len(population) for c in checkpoints):
            break
    return {"needed": needed if needed is not None else len(population), "at": at}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--report", type=Path, help="report.json of `groundjudge run` over the dev set")
    source.add_argument("--synthetic-judge", action="store_true", help="verdicts from the human labels plus noise")
    parser.add_argument("--judge-seed", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.1, help="wanted CI half-width")
    parser.add_argument("--checkpoints", default="60,100,200")
    parser.add_argument("--strategies", default="random,stratified,uncertain")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    humans = human_labels()
    if args.synthetic_judge:
        run = synthetic_run(humans, args.judge_seed)
        mark = "SYNTHETIC "
        print(NOISE_MODEL.format(seed=args.judge_seed))
    else:
        run = read_run(args.report)
        mark = ""
        print(f"judge verdicts from {args.report}")
    kappa_all, n_all = full_kappa(run, humans)
    checkpoints = [int(c) for c in args.checkpoints.split(",") if c]
    prevalence = sum(humans.values()) / len(humans)
    print(f"{mark}full-set faithful kappa (judge vs annotators): {kappa_all:.4f} on n={n_all} "
          f"(human faithful share {prevalence:.3f}); batch {args.batch}, target half-width {args.target}, "
          f"{args.seeds} seeds")
    results: dict[str, dict] = {}
    for strategy in args.strategies.split(","):
        started = time.perf_counter()
        runs = [simulate(run, humans, strategy, seed, args.batch, args.target, checkpoints) for seed in range(args.seeds)]
        needed = [r["needed"] for r in runs]
        q1, med, q3 = np.percentile(needed, [25, 50, 75])
        row = {"labels_needed": {"median": float(med), "q1": float(q1), "q3": float(q3),
                                 "mean": statistics.fmean(needed)}, "checkpoints": {},
               "seconds": time.perf_counter() - started}
        for c in checkpoints:
            values = [r["at"][c] for r in runs if c in r["at"] and r["at"][c][0] is not None]
            if not values:
                continue
            ks = np.array([v[0] for v in values])
            covered = [v[1] is not None and v[1] <= kappa_all <= v[2] for v in values]
            row["checkpoints"][c] = {
                "n_runs": len(values), "mean_kappa": float(ks.mean()), "bias": float(ks.mean() - kappa_all),
                "bias_se": float(ks.std(ddof=1) / np.sqrt(len(ks))) if len(ks) > 1 else None,
                "sd": float(ks.std(ddof=1)) if len(ks) > 1 else None, "coverage": sum(covered) / len(covered)}
        results[strategy] = row
    print()
    print(f"{mark}labels until the faithful-kappa 95% CI half-width < {args.target} (over {args.seeds} seeds)")
    print(f"{'strategy':<12} {'median':>7} {'q1':>6} {'q3':>6} {'mean':>7}")
    for strategy, row in results.items():
        ln = row["labels_needed"]
        print(f"{strategy:<12} {ln['median']:>7.0f} {ln['q1']:>6.0f} {ln['q3']:>6.0f} {ln['mean']:>7.1f}")
    print()
    print(f"{mark}weighted kappa vs full-set kappa {kappa_all:.4f}: bias (Monte Carlo SE), SD, 95% CI coverage")
    print(f"{'strategy':<12} {'labels':>6} {'runs':>5} {'bias':>8} {'(se)':>7} {'sd':>7} {'coverage':>8}")
    for strategy, row in results.items():
        for c, v in row["checkpoints"].items():
            print(f"{strategy:<12} {c:>6} {v['n_runs']:>5} {v['bias']:>+8.4f} {v['bias_se'] or 0:>7.4f} "
                  f"{v['sd'] or 0:>7.4f} {v['coverage']:>8.3f}")
    if args.json:
        args.json.write_text(json.dumps({"synthetic": bool(args.synthetic_judge),
                                         "noise_model": NOISE_MODEL.format(seed=args.judge_seed)
                                         if args.synthetic_judge else None,
                                         "full_kappa": kappa_all, "n": n_all, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
