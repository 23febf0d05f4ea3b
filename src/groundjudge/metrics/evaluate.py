"""Run every deterministic metric over a loaded dataset."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from groundjudge.load.dataset import Dataset
from groundjudge.metrics.aggregate import (
    Summary,
    UnknownCounts,
    breakdowns,
    columns_of,
    merged_counts,
    pooled,
    summaries,
    unknown_counts,
    with_reasons,
)
from groundjudge.metrics.case import CaseMetrics, MetricSettings, compute_case
from groundjudge.parallel import split_map

Breakdown = dict[str, dict[str, dict[str, Summary]]]


@dataclass(frozen=True)
class ConfigMetrics:
    config_id: str
    cases: list[CaseMetrics]
    aggregate: dict[str, Summary]
    breakdown: Breakdown


@dataclass(frozen=True)
class MetricsRun:
    configs: dict[str, ConfigMetrics]
    overall: dict[str, Summary]
    _index: dict[tuple[str, str], CaseMetrics] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Selection looks up every (config, case): a dict, not a scan, keeps it linear in cases.
        index = {(c.config_id, c.case_id): c for cfg in self.configs.values() for c in cfg.cases}
        object.__setattr__(self, "_index", index)

    def case(self, config_id: str, case_id: str) -> CaseMetrics | None:
        return self._index.get((config_id, case_id))


def evaluate_dataset(dataset: Dataset, settings: MetricSettings | None = None) -> MetricsRun:
    """Score every (case, config) that has a trace. Cases without one are in ``dataset.missing_trace``.

    On a large set the pairs are shared with forked workers (``parallel.split_map``), a round
    at a time, and then the configs' summaries, made from the rows in order. The rows, and
    every summary, are the same as in one process."""
    settings = settings or MetricSettings()
    scored = {config_id: [case_id for case_id in dataset.cases if 0 in per_case.get(case_id, {})]
              for config_id, per_case in dataset.traces.items()}

    def score(pairs: Sequence[tuple[str, str]]) -> list[CaseMetrics]:
        rows = []
        for config_id, case_id in pairs:
            variants = dataset.traces[config_id][case_id]
            paraphrases = [t for i, t in sorted(variants.items()) if i != 0]
            rows.append(compute_case(dataset.cases[case_id], variants[0], dataset.corpus, settings, paraphrases))
        return rows

    def summarized(config_ids: Sequence[str],
                   ) -> list[tuple[dict[str, Summary], Breakdown, dict[str, array], UnknownCounts]]:
        out = []
        for config_id in config_ids:
            rows = by_config[config_id]
            columns = columns_of(r.values for r in rows)
            unknown = unknown_counts(rows)
            out.append((with_reasons(summaries(columns), unknown, len(rows)), breakdowns(rows, dataset.cases), columns,
                        unknown))
        return out

    pairs = [(c, case_id) for c in scored for case_id in scored[c]]
    rows = iter(split_map(score, pairs))
    by_config = {c: [next(rows) for _ in scored[c]] for c in scored}
    ids = list(scored)
    # the configs' summaries side by side too (the rows stay here: only the summaries travel)
    made = split_map(summarized, ids, work=len(pairs))
    # every config's rows, one config after the other
    overall = with_reasons(summaries(pooled(columns for _, _, columns, _ in made)),
                           merged_counts(unknown for *_, unknown in made), len(pairs))
    return MetricsRun({c: ConfigMetrics(c, by_config[c], aggregate, breakdown)
                       for c, (aggregate, breakdown, _, _) in zip(ids, made)}, overall)
