"""Selective trust on real judge verdicts: fit the cut-off on one half, measure on the other.

    .venv/bin/python benchmarks/selective_trust.py [--file benchmarks/results/judge_agreement_claim_check_v4_all.jsonl]
        [--seed 20261122] [--alpha 0.1] [--delta 0.1] [--splits 500] [--write-synthetic PATH --n 120]

Input: one line per answer, as ``benchmarks/judge_agreement.py`` writes it (``query_id``,
``config_id``, ``status``, ``label``: the judge's ``faithful``, ``score``: the answer's confidence,
its lowest claim support centred on the rubric's threshold, ``supports``: each claim's
support, ``human_faithful``). Only judged answers with a
label and a human label count. The verdict confidence is the lowest claim support for a
faithful verdict and 1 minus it for an unfaithful one; an answer whose claims lack a support
probability (or that has no claim) has no confidence and is never kept.

One seeded split into halves: the cut-off lambda is fitted on the first half at
target_agreement = 1 - alpha and risk = delta (groundjudge.calibrate.selective.fit_cutoff), and
on the second half the script reports the coverage (share of answers at or above lambda) and the
realised agreement with people on the covered answers. Beside it, the all-or-nothing rule on
the same halves: the calibration record built from the first half (kappa, bootstrap CI) and the
trust rule's verdict with the default [trust] settings; where it trusts, it keeps every answer,
so its realised agreement is that of the whole second half. ``--splits`` repeats the split with
seeds seed, seed + 1, ... and summarises the spread, because one split of 120 answers is small.
The splits share one pool of answers: a half that looks better than the pool leaves a worse
one to measure on, so split-half figures understate what the guarantee promises for fresh
answers; they show coverage and order of magnitude, not a check of the guarantee (that is
``tests/test_calibrate_selective.py``, on independent draws).
``--write-synthetic`` writes a file of the same shape from a known confidence-to-accuracy curve
(to check the script where no real file exists yet).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from groundjudge.calibrate.agreement import agreement
from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.selective import fit_cutoff, kappa_threshold, reliability, verdict_confidence
from groundjudge.calibrate.trust import TrustRules, trust_status
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.judge.results import CriterionInfo

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILE = REPO / "benchmarks" / "results" / "judge_agreement_claim_check_v4_all.jsonl"
FAITHFUL = CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness")
IDENTITY = {"rubric": {"id": "claim_check", "version": 1, "hash": "benchmark"}, "model": "dev-set-judge",
            "decoding": {}}


def _fail(message: str) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(2)


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            _fail(f"{path}:{number}: invalid JSON: {exc.msg}")
        for field in ("query_id", "status", "label", "human_faithful"):
            if field not in row:
                _fail(f"{path}:{number}: {field}: missing")
        if row["status"] == "judged" and row["label"] is not None and row["human_faithful"] is not None:
            rows.append(row)
    return rows


def confidence_of(row: dict[str, Any]) -> float | None:
    """P(faithful) as the judge reports it: the answer's confidence (``score``: its lowest claim
    support, centred on the rubric's threshold), None where a checked claim has no support
    probability (an endpoint without token probabilities); unchecked claims (claim_check v4)
    have none by design and do not count."""
    supports = row.get("supports")
    verdicts = row.get("verdicts") or [None] * len(supports or [])
    if supports is not None and (not supports or any(s is None and v != "unchecked"
                                                     for s, v in zip(supports, verdicts))):
        return None
    return None if row.get("score") is None else float(row["score"])


def all_or_nothing(fit: list[dict[str, Any]], rules: TrustRules) -> tuple[Any, dict[str, Any]]:
    """The trust rule's verdict from a record built on ``fit``, exactly as `calibrate` builds it."""
    judge = {(r["query_id"], r.get("config_id")): ItemLabels({"faithful": bool(r["label"])}) for r in fit}
    human = {(r["query_id"], r.get("config_id")): ItemLabels({"faithful": bool(r["human_faithful"])}) for r in fit}
    record = build_record(judge, IDENTITY, {"people": human}, [FAITHFUL], seed=0)
    return trust_status("faithful", IDENTITY, [record], rules), record["criteria"]["faithful"]["judge_vs_human"]


def one_split(rows: list[dict[str, Any]], seed: int, alpha: float, delta: float, rules: TrustRules,
              ) -> dict[str, Any]:
    order = np.random.default_rng(seed).permutation(len(rows))
    half = len(rows) // 2
    fit_rows = [rows[i] for i in order[:half]]
    test_rows = [rows[i] for i in order[half:]]

    def columns(part: list[dict[str, Any]]) -> tuple[list[float | None], list[bool]]:
        conf = [verdict_confidence(bool(r["label"]), confidence_of(r)) for r in part]
        right = [bool(r["label"]) == bool(r["human_faithful"]) for r in part]
        return conf, right

    fit_conf, fit_right = columns(fit_rows)
    test_conf, test_right = columns(test_rows)
    fitted = fit_cutoff(fit_conf, fit_right, target_agreement=1 - alpha, risk=delta)
    kept = [ok for c, ok in zip(test_conf, test_right)
            if fitted.cutoff is not None and c is not None and c >= fitted.cutoff]
    status, stats = all_or_nothing(fit_rows, rules)
    test_kappa = agreement([bool(r["label"]) for r in test_rows], [bool(r["human_faithful"]) for r in test_rows],
                           [r["query_id"] for r in test_rows], [True, False], ordinal=False, reps=200)
    return {
        "seed": seed, "fit_n": len(fit_rows), "test_n": len(test_rows),
        "lambda": fitted.cutoff, "fit_coverage": fitted.coverage, "fit_bound": fitted.bound, "reason": fitted.reason,
        "test_covered": len(kept), "test_coverage": len(kept) / len(test_rows) if test_rows else None,
        "test_agreement_covered": sum(kept) / len(kept) if kept else None, "test_agree_covered": sum(kept),
        "aon_trusted": status.trusted, "aon_reason": status.reason, "fit_kappa": stats["kappa"],
        "fit_ci": [stats["ci_low"], stats["ci_high"]], "test_agreement_all": sum(test_right) / len(test_right),
        "test_kappa": test_kappa.kappa,
    }


def write_synthetic(path: Path, n: int, seed: int) -> None:
    """Answers whose lowest claim support is uniform on [0, 1]; the judge is right with
    probability 1 - 2 * (1 - c)**2 at verdict confidence c: a coin at 0.5, 0.98 at 0.9."""
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            low = float(rng.uniform())
            label = low >= 0.5
            right = rng.uniform() < 1 - 2 * (1 - (low if label else 1 - low)) ** 2
            out.write(json.dumps({"query_id": f"s{i:03d}", "config_id": "synthetic", "status": "judged",
                                  "label": label, "score": low, "supports": [low, min(1.0, low + 0.1)],
                                  "human_faithful": label if right else not label}) + "\n")


def f(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--splits", type=int, default=500)
    parser.add_argument("--write-synthetic", type=Path, default=None)
    parser.add_argument("--n", type=int, default=120)
    args = parser.parse_args(argv)
    if args.write_synthetic:
        write_synthetic(args.write_synthetic, args.n, args.seed)
        print(f"wrote {args.n} synthetic answers to {args.write_synthetic}")
        return 0
    if not args.file.exists():
        print(f"{args.file}: not found (run benchmarks/judge_agreement.py first)", file=sys.stderr)
        return 2
    rows = read_rows(args.file)
    rules = TrustRules()
    first = one_split(rows, args.seed, args.alpha, args.delta, rules)
    print(f"{args.file.name}: {len(rows)} judged answers with a human label; halves of {first['fit_n']} "
          f"(fit) and {first['test_n']} (measure), seed {args.seed}; alpha {args.alpha}, delta {args.delta}")
    sel_decision = f"lambda {first['lambda']:g}" if first["lambda"] is not None else "no lambda: keeps nothing"
    aon_decision = f"{'trusted' if first['aon_trusted'] else 'untrusted'}, kappa {f(first['fit_kappa'])}"
    sel_coverage = f"{f(first['test_coverage'])} ({first['test_covered']}/{first['test_n']})"
    aon_coverage = f"1.000 ({first['test_n']}/{first['test_n']})" if first["aon_trusted"] else "0 (advisory)"
    sel_agreement = f(first["test_agreement_covered"])
    aon_agreement = (f(first["test_agreement_all"]) if first["aon_trusted"]
                     else f"- (advisory; all: {f(first['test_agreement_all'])})")
    print()
    print(f"{'':34} {'selective trust':>30}   {'all-or-nothing kappa rule':>30}")
    for name, left, right in (("decision on the fit half", sel_decision, aon_decision),
                              ("coverage on the measure half", sel_coverage, aon_coverage),
                              ("realised agreement, kept answers", sel_agreement, aon_agreement)):
        print(f"{name:34} {left:>30}   {right:>30}")
    print(f"  selective: {first['reason']}")
    print(f"  all-or-nothing: {first['aon_reason']}; kappa on the measure half {f(first['test_kappa'])}")
    conf = [verdict_confidence(bool(r["label"]), confidence_of(r)) for r in rows]
    right = [bool(r["label"]) == bool(r["human_faithful"]) for r in rows]
    table = reliability(conf, right)
    scored = [(confidence_of(r), bool(r["human_faithful"])) for r in rows if confidence_of(r) is not None]
    kt = kappa_threshold([c for c, _ in scored], [h for _, h in scored], seed=args.seed)  # type: ignore[misc]
    print()
    print(f"all {len(rows)} answers: {table.n} with a confidence; expected calibration error {f(table.ece)}; "
          "reliability (verdict confidence bin: n, agreement): " + ", ".join(
              f"{b.low:g}-{b.high:g}: {b.n}, {f(b.agreement)}" for b in table.bins if b.n))
    print(f"  kappa-maximising threshold on the lowest claim support: {f(kt['threshold'], 2)}, cross-fitted kappa "
          f"{f(kt['cross_fitted_kappa'])} ({kt['folds']} folds) against {f(kt['kappa_at_default'])} at "
          f"{kt['default']:g}")
    if args.splits > 1:
        runs = [first] + [one_split(rows, args.seed + i, args.alpha, args.delta, rules) for i in range(1, args.splits)]
        found = [r for r in runs if r["lambda"] is not None]
        kept = [r for r in found if r["test_covered"]]
        held = [r for r in kept if r["test_agreement_covered"] >= 1 - args.alpha]
        pooled = (sum(r["test_agree_covered"] for r in kept) / sum(r["test_covered"] for r in kept)) if kept else None
        trusted = [r for r in runs if r["aon_trusted"]]
        print()
        print(f"over {len(runs)} seeded splits (of the same {len(rows)} answers, so not independent draws):")
        print(f"  selective: a lambda in {len(found)} ({len(found) / len(runs):.1%}); mean coverage on the measure "
              f"half {np.mean([r['test_coverage'] or 0.0 for r in runs]):.3f} (0 where none); realised agreement on "
              f"kept answers, pooled over the {len(kept)} splits that kept some: {f(pooled)} "
              f"({sum(r['test_agree_covered'] for r in kept)}/{sum(r['test_covered'] for r in kept)}); "
              f">= {1 - args.alpha:g} in {len(held)}/{len(kept)} single splits (each on a few dozen answers)")
        when_trusted = float(np.mean([r["test_agreement_all"] for r in trusted])) if trusted else None
        print(f"  all-or-nothing: trusted in {len(trusted)} ({len(trusted) / len(runs):.1%}); where trusted it keeps "
              f"every answer, realised agreement {f(when_trusted)} "
              f"on average; on all measured answers {np.mean([r['test_agreement_all'] for r in runs]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
