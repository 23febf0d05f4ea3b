"""The position probe: does the judge's verdict move when a case's passages come in another order?

A judge whose verdicts depend on where a chunk sits in the prompt is less trustworthy than its
kappa suggests. The probe judges the labelled, judged cases again with their context order
reversed (:func:`reversed_selections`) and counts, per criterion, the verdicts that flipped
(:func:`flip_rates`); ``groundjudge calibrate --position-probe`` stores the counts in the
calibration record.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import msgspec

from groundjudge.calibrate.verdicts import ItemKey, ItemLabels
from groundjudge.judge.results import CaseJudgement, CriterionInfo
from groundjudge.load.dataset import Dataset
from groundjudge.select import Selection, judge_item

__all__ = ["flip_rates", "reversed_selections"]


def reversed_selections(dataset: Dataset, keys: Collection[ItemKey]) -> list[Selection]:
    """The cases ``keys`` names (query id, config id) with their contexts in reverse order, to be
    judged; cases with no trace of that config, or fewer than two contexts, are left out (their
    order cannot change)."""
    probe: list[Selection] = []
    for case_id, config_id in sorted(keys, key=lambda k: (k[0], k[1] or "")):
        trace = dataset.trace(config_id, case_id) if config_id else None
        if trace is None or config_id is None:
            continue
        item, _ = judge_item(dataset, trace)
        if item is not None and len(item.contexts) > 1:
            flipped = msgspec.structs.replace(item, contexts=tuple(reversed(item.contexts)))
            probe.append(Selection(case_id, config_id, True, "position probe", 0, flipped))
    return probe


def flip_rates(before: dict[ItemKey, ItemLabels], criteria: Sequence[CriterionInfo],
               after: Sequence[CaseJudgement], *, probed: int, requests: int) -> dict[str, Any]:
    """Per criterion, of the items with a verdict both ways: how many, how many flipped and the
    rate (None with none); ``before``: the report's verdicts, ``after``: the probe's results
    (``probed`` items sent, ``requests`` made)."""
    again = {(r.case_id, r.config_id): r for r in after if r.status == "judged"}
    out: dict[str, Any] = {"items_probed": probed, "judged_both_ways": len(again), "requests": requests}
    for crit in criteria:
        pairs = [(before[k].labels[crit.name], r.label(crit.name)) for k, r in again.items()
                 if before[k].labels[crit.name] is not None and r.label(crit.name) is not None]
        flips = sum(1 for a, b in pairs if a != b)
        out[crit.name] = {"n": len(pairs), "flips": flips, "flip_rate": flips / len(pairs) if pairs else None}
    return out
