"""Prediction-powered inference (Angelopoulos et al. 2023; used by ARES) for a judge rate.

The judge labels every item; humans label a subset. The judge's mean over all items is
corrected by its mean error on the labelled subset, and the interval accounts for both:

    theta = mean(judge over N) + mean(human - judge over n)
    var   = var(judge over N) / N + var(human - judge over n) / n

so a judge that is biased but informative gives an unbiased estimate with a tighter interval
than the n human labels alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, variance


def ppi_mean(judge_all: Sequence[float], judge_labelled: Sequence[float], human_labelled: Sequence[float],
             *, level: float = 0.95) -> dict[str, float | int | None]:
    """Bias-corrected mean with a normal-approximation interval; None where undefined."""
    if len(judge_labelled) != len(human_labelled):
        raise ValueError("judge_labelled and human_labelled must pair up item by item")
    n_all, n = len(judge_all), len(human_labelled)
    raw = fmean(judge_all) if n_all else None
    if n_all < 2 or n < 2:
        return {"raw": raw, "corrected": None, "ci_low": None, "ci_high": None, "n_all": n_all, "n_labelled": n}
    residual = [h - j for h, j in zip(human_labelled, judge_labelled)]
    corrected = fmean(judge_all) + fmean(residual)
    se = math.sqrt(variance(judge_all) / n_all + variance(residual) / n)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return {"raw": raw, "corrected": corrected, "ci_low": corrected - z * se, "ci_high": corrected + z * se,
            "n_all": n_all, "n_labelled": n}
