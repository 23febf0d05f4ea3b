"""Kappa bootstrap: groundjudge's vectorised numpy vs a loop over scikit-learn's cohen_kappa_score.

    .venv/bin/python benchmarks/kappa_speed.py [--repeat 5] [--reps 2000]

The reference is what calibration did before: for each of ``reps`` resamples drawn with the
same seeded generator, one ``cohen_kappa_score`` call. Both sides get the same label pairs
(81 items, the size of the bundled example's primary rater): binary unweighted, and 0..3
with quadratic weights. Before timing, the script asserts that both give the same interval
to 1e-12. The report gives the best of ``--repeat`` runs of each, and the ratio.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
import warnings
from functools import partial

import numpy as np
from sklearn.metrics import cohen_kappa_score

from groundjudge.calibrate.agreement import bootstrap_ci


def sklearn_bootstrap_ci(a, b, labels, weights, *, seed=0, reps=2000, level=0.95):
    """The scikit-learn reference: one cohen_kappa_score call per resample."""
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    values = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            idx = rng.integers(0, len(a), len(a))
            k = cohen_kappa_score(xa[idx].tolist(), xb[idx].tolist(), labels=labels, weights=weights)
            if not np.isnan(k):
                values.append(k)
    if len(values) < reps / 2:
        return None, None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def data(n: int = 81) -> dict[str, tuple[list, list, list, str | None]]:
    rng = random.Random(0)
    a = [rng.random() < 0.7 for _ in range(n)]
    b = [x if rng.random() < 0.8 else not x for x in a]
    grades = [0, 1, 2, 3]
    ga = [rng.choice(grades) for _ in range(n)]
    gb = [x if rng.random() < 0.6 else rng.choice(grades) for x in ga]
    return {"binary": (a, b, [True, False], None), "0..3 quadratic": (ga, gb, grades, "quadratic")}


def best_of(repeat: int, call) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, reps {args.reps}")
    print(f"{'data':16s} {'scikit-learn loop':>18s} {'groundjudge':>12s} {'ratio':>8s}")
    for name, (a, b, labels, weights) in data().items():
        ours = bootstrap_ci(a, b, labels, weights, reps=args.reps)
        reference = sklearn_bootstrap_ci(a, b, labels, weights, reps=args.reps)
        assert all(abs(x - y) <= 1e-12 for x, y in zip(ours, reference)), (ours, reference)
        slow = best_of(args.repeat, partial(sklearn_bootstrap_ci, a, b, labels, weights, reps=args.reps))
        fast = best_of(args.repeat, partial(bootstrap_ci, a, b, labels, weights, reps=args.reps))
        print(f"{name:16s} {slow * 1e3:15.1f} ms {fast * 1e3:9.2f} ms {slow / fast:7.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
