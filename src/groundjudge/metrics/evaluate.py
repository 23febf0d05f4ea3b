"""Run every deterministic metric over a loaded dataset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groundjudge.load.dataset import Dataset
from groundjudge.metrics.aggregate import Summary, breakdowns, columns_of, pooled, summaries
from groundjudge.metrics.case import CaseMetrics, MetricSettings, compute_case
from groundjudge.parallel import split_map


@dataclass(frozen=True)
class ConfigMetrics:
    config_id: str
    cases: list[CaseMetrics]
    aggregate: dict[str, Summary]
    breakdown: dict[str, dict[str, dict[str, Summary]]]


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

    On a large set the pairs are scored on two cores (``parallel.split_map``); the rows, and so
    every summary, are the same as in one process."""
    settings = settings or MetricSettings()
    pairs = [(config_id, case_id) for config_id, per_case in dataset.traces.items()
             for case_id in dataset.cases if 0 in per_case.get(case_id, {})]

    def score(chunk: Sequence[tuple[str, str]]) -> list[CaseMetrics]:
        rows = []
        for config_id, case_id in chunk:
            variants = dataset.traces[config_id][case_id]
            paraphrases = [t for i, t in sorted(variants.items()) if i != 0]
            rows.append(compute_case(dataset.cases[case_id], variants[0], dataset.corpus, settings, paraphrases))
        return rows

    scored = iter(split_map(score, pairs))
    configs: dict[str, ConfigMetrics] = {}
    parts: list[dict[str, list[float]]] = []
    for config_id in dataset.traces:
        rows = [next(scored) for _ in range(sum(1 for c, _ in pairs if c == config_id))]
        columns = columns_of(r.values for r in rows)
        parts.append(columns)
        configs[config_id] = ConfigMetrics(config_id, rows, summaries(columns), breakdowns(rows, dataset.cases))
    overall = summaries(pooled(parts))  # every config's rows, one config after the other
    return MetricsRun(configs, overall)
