"""An aligned rubric against its base on the dev set: out-of-fold figures beside the base's.

    .venv/bin/python benchmarks/align_dev.py --cache-dir C [--rubric claim_check] [--rubric-version 4]
        [--folds 5] [--seed 0] [--models logistic,grounded] [--out-dir DIR] [--report report.json]

Data: ../shared/data/rag-faithfulness-dev (378 answers to 64 questions, human hallucination
spans; never copied into the package). First the base rubric judges every dev answer through
`groundjudge run` with the judge cache given (a copy of a cache that holds its answers: no call;
an empty one: the embedded judge answers, several seconds per answer), unless `--report` names
that run's report.json. Then `groundjudge align` fits on the report and the labels with no call,
once per claim model, and this prints, per model, kappa, balanced accuracy and AUROC of the
confidence on the same answers: the aligned rubric out of fold (5 folds by question) with
bootstrap 95% CIs that resample questions, in sample, and the base rubric; the learning curve;
the fitted values. With `--out-dir` the derived rubrics (and their out-of-fold records, in
DIR/records) are written there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from groundjudge.calibrate.align import run_alignment

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"


def judge_dev(rubric: str, version: int | None, cache_dir: Path, out: Path) -> Path:
    """The base rubric's report over every dev answer."""
    traces = ", ".join(f'"{p}"' for p in sorted((DATA / "traces").glob("*.jsonl")))
    config = out / "groundjudge.toml"
    out.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[inputs]\ngolden = "{DATA / "golden.jsonl"}"\ntraces = [{traces}]\n'
                      f'corpus = "{DATA / "corpus.jsonl"}"\n[judge]\nrubric = "{rubric}"\n'
                      + (f"rubric_version = {version}\n" if version else "")
                      + f'[cache]\ndir = "{cache_dir.resolve()}"\n[output]\nout = "{out / "run"}"\n')
    done = subprocess.run([sys.executable, "-m", "groundjudge.cli", "run", "--config", str(config), "--quiet",
                           "--no-history"], check=False)
    if done.returncode not in (0, 1):  # 1: a gate failed, the report is written
        raise SystemExit(f"groundjudge run exited {done.returncode}")
    return out / "run" / "report.json"


def cell(figure) -> str:  # type: ignore[no-untyped-def]
    if figure.value is None:
        return "–"
    ci = "" if figure.ci_low is None else f" ({figure.ci_low:.3f}–{figure.ci_high:.3f})"
    return f"{figure.value:.3f}{ci}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, help="judge cache holding the base rubric's answers (a copy)")
    parser.add_argument("--report", type=Path, help="the base rubric's report.json over the dev set, if made already")
    parser.add_argument("--rubric", default="claim_check")
    parser.add_argument("--rubric-version", type=int, default=4)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="logistic,grounded")
    parser.add_argument("--out-dir", type=Path, help="also write the derived rubrics here (groundjudge align)")
    args = parser.parse_args()
    labels = DATA / "labels" / "annotators.jsonl"
    if args.report is None:
        if args.cache_dir is None:
            parser.error("give --cache-dir (a copy of a judge cache) or --report")
        work = Path(tempfile.mkdtemp(prefix="align-dev-"))
        args.report = judge_dev(args.rubric, args.rubric_version, args.cache_dir, work)
    for model in args.models.split(","):
        if args.out_dir is not None:
            subprocess.run([sys.executable, "-m", "groundjudge.cli", "align", "--report", str(args.report),
                            "--labels", str(labels), "--folds", str(args.folds), "--seed", str(args.seed),
                            "--model", model, "--out-dir", str(args.out_dir), "--name",
                            f"{args.rubric}_aligned_{model}", "--records-dir", str(args.out_dir / "records")],
                           check=True, stdout=subprocess.DEVNULL)
        done = run_alignment(args.report, [labels], k=args.folds, seed=args.seed, model=model)  # type: ignore[arg-type]
        base = f"{args.rubric}/v{args.rubric_version}"
        print(f"\n{model} claim model: {done.oof.n} answers, "
              f"{len({i.query_id for i in done.labelled.items})} questions, {done.k} folds by question, seed {done.seed}")
        print(f"{'figure':<18} {'aligned, out-of-fold (95% CI)':<32} {'aligned, in-sample':<32} base {base} (95% CI)")
        for metric in ("kappa", "balanced_accuracy", "auroc"):
            print(f"{metric:<18} {cell(done.oof.by_metric[metric]):<32} {cell(done.in_sample.by_metric[metric]):<32} "
                  f"{cell(done.base.by_metric[metric])}")
        print("learning curve (out-of-fold kappa): "
              + ", ".join(f"{int(f * 100)}% {k:.3f}" if k is not None else f"{int(f * 100)}% –" for f, k in done.curve))
        final = done.final
        print(f"fitted on {'claim labels (spans)' if final.claim_labels else 'answer labels'}: "
              f"{final.claim_model.model_dump(exclude_defaults=True)}; combine {final.combine} "
              f"(temperature {final.temperature:g}); threshold {final.threshold}")


if __name__ == "__main__":
    main()
