"""Run every deterministic metric over a loaded dataset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groundjudge.collector import collector_paused
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


@collector_paused()  # a row per pair, no cycles: the collector's walks over them found nothing
def evaluate_dataset(dataset: Dataset, settings: MetricSettings | None = None) -> MetricsRun:
    """Score every (case, config) that has a trace. Cases without one are in ``dataset.missing_trace``.

    On a large set the work is shared with a forked worker (``parallel.split_map``): half of the
    configs each, summaries included, when that splits the pairs about evenly (a nightly run's
    two configs), else half of the pairs. The rows, and every summary, are the same as in one
    process."""
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

    def summarized(config_id: str, rows: list[CaseMetrics]) -> tuple[ConfigMetrics, dict[str, list[float]]]:
        columns = columns_of(r.values for r in rows)
        return ConfigMetrics(config_id, rows, summaries(columns), breakdowns(rows, dataset.cases)), columns

    def whole_configs(config_ids: Sequence[str]) -> list[tuple[ConfigMetrics, dict[str, list[float]]]]:
        return [summarized(c, score([(c, case_id) for case_id in scored[c]])) for c in config_ids]

    ids = list(scored)
    total = sum(len(cases) for cases in scored.values())
    first = sum(len(scored[c]) for c in ids[:len(ids) // 2])
    if len(ids) >= 2 and 0.4 * total <= first <= 0.6 * total:
        parts = split_map(whole_configs, ids, work=total)
    else:
        rows = iter(split_map(score, [(c, case_id) for c in ids for case_id in scored[c]]))
        parts = [summarized(c, [next(rows) for _ in scored[c]]) for c in ids]
    overall = summaries(pooled(columns for _, columns in parts))  # every config's rows, one config after the other
    return MetricsRun({part.config_id: part for part, _ in parts}, overall)
