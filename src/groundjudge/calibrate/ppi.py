"""Prediction-powered inference (Angelopoulos et al. 2023; used by ARES) for a judge rate.

The judge labels every item; humans label a subset. The judge's mean over all items is
corrected by its mean error on the labelled subset, and the interval accounts for both:

    theta = mean(judge over N) + mean(human - judge over n)
    var   = var(judge over N) / N + var(human - judge over n) / n

so a judge that is biased but informative gives an unbiased estimate with a tighter interval
than the n human labels alone. :func:`bias_corrected_rates` gives these estimates for a run:
per config and criterion, with the primary rater's labels as the humans'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, variance
from typing import TYPE_CHECKING, Any

from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, items_from_judge, lookup, primary_rater

if TYPE_CHECKING:
    from groundjudge.judge.results import JudgeRun


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


def bias_corrected_rates(judge: JudgeRun, humans: dict[str, dict[ItemKey, ItemLabels]]) -> dict[str, Any]:
    """PPI estimates per config and criterion: the judge on every judged case, the primary
    rater (``verdicts.primary_rater``) on the labelled subset (binary criteria as rates, ordinal
    ones as mean grades)."""
    primary = primary_rater(humans)
    items = items_from_judge(judge)
    out: dict[str, Any] = {"primary_rater": primary}
    for cfg in judge.per_config:
        mine = {k: v for k, v in items.items() if k[1] == cfg}
        per: dict[str, Any] = {}
        for crit in judge.criteria:
            name = crit.name
            judge_all = [float(grade) for v in mine.values() if (grade := v.labels[name]) is not None]
            pairs = [(float(grade), float(human)) for k, v in mine.items()
                     if (h := lookup(humans[primary], k)) is not None
                     and (grade := v.labels[name]) is not None and (human := h.labels.get(name)) is not None]
            key = f"{name}_rate" if crit.kind == "binary" else f"{name}_mean"
            per[key] = ppi_mean(judge_all, [p[0] for p in pairs], [p[1] for p in pairs])
        out[cfg] = per
    return out
