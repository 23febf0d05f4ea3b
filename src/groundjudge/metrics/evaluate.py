"""Run every deterministic metric over a loaded dataset, batch by batch, into Arrow tables."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import pyarrow as pa

from groundjudge import distributed
from groundjudge.load.dataset import Dataset
from groundjudge.metrics.aggregate import (
    Summary,
    breakdowns,
    distinct_layouts,
    ordered_names,
    table_summaries,
    unknown_counts,
    with_reasons,
)
from groundjudge.metrics.case import CaseMetrics, MetricSettings
from groundjudge.metrics.table import CaseFacts, Pair, concat, metric_batch, views

Breakdown = dict[str, dict[str, dict[str, Summary]]]

_NOTHING_UNKNOWN: MappingProxyType[str, str] = MappingProxyType({})
BATCH = 2_000  # pairs per record batch: big enough that Arrow's per-batch cost does not show


@dataclass(frozen=True)
class ConfigMetrics:
    config_id: str
    cases: list[CaseMetrics]
    aggregate: dict[str, Summary]
    breakdown: Breakdown
    # a row per case of ``cases``, in order: config_id, case_id, not_recorded, a float64 column per metric
    table: pa.Table = field(default_factory=lambda: concat([]), repr=False, compare=False)


@dataclass(frozen=True)
class MetricsRun:
    configs: dict[str, ConfigMetrics]
    overall: dict[str, Summary]

    @cached_property
    def _index(self) -> dict[str, dict[str, CaseMetrics]]:
        # Selection looks up every (config, case): a dict per config, not a scan, keeps it
        # linear in cases (and needs no key object per pair)
        return {config_id: {c.case_id: c for c in cfg.cases} for config_id, cfg in self.configs.items()}

    def case(self, config_id: str, case_id: str) -> CaseMetrics | None:
        cases = self._index.get(config_id)
        return None if cases is None else cases.get(case_id)


def workers_from_environment() -> int:
    """``GROUNDJUDGE_WORKERS``: how many processes score a run's metrics (default 1, this one)."""
    value = os.environ.get("GROUNDJUDGE_WORKERS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def evaluate_dataset(dataset: Dataset, settings: MetricSettings | None = None, *,
                     workers: int | None = None) -> MetricsRun:
    """Score every (case, config) that has a trace. Cases without one are in ``dataset.missing_trace``.

    The pairs are scored ``BATCH`` at a time into Arrow record batches (``metrics.table``);
    each config's summaries and breakdowns are computed from its table. ``workers`` > 1 (by
    default ``GROUNDJUDGE_WORKERS``, else 1) scores the batches in a pool of that many
    processes: opt-in, for large sets on several cores; inside ``distributed.ray_engine`` the
    batches are scored on the Ray cluster (``metrics.on_ray``). The results are the same."""
    settings = settings or MetricSettings()
    workers = workers_from_environment() if workers is None else workers
    scored = {config_id: [case_id for case_id in dataset.cases if case_id in per_case]
              for config_id, per_case in dataset.traces.items()}
    pairs = [(c, case_id) for c in scored for case_id in scored[c]]
    batches = [pairs[start:start + BATCH] for start in range(0, len(pairs), BATCH)]
    if (ray_session := distributed.current()) is not None:  # --engine ray: the same batches, on the cluster
        from groundjudge.metrics.on_ray import STAGE, score_batches

        done, nodes = score_batches(dataset, settings, batches)
        ray_session.ran_on(STAGE, nodes)
    elif workers > 1 and len(batches) > 1:
        with ProcessPoolExecutor(min(workers, len(batches)), initializer=_share, initargs=(dataset, settings)) as pool:
            done = list(pool.map(_score_shared, batches))
    else:
        done = [score_pairs(dataset, settings, batch) for batch in batches]

    per_config: dict[str, tuple[list[pa.RecordBatch], list[CaseFacts]]] = {c: ([], []) for c in scored}
    for batch, (table, facts) in zip(batches, done, strict=True):
        # a batch may span two configs: split it where the config changes
        start = 0
        while start < len(batch):
            config_id = batch[start][0]
            end = start
            while end < len(batch) and batch[end][0] == config_id:
                end += 1
            per_config[config_id][0].append(table.slice(start, end - start))
            per_config[config_id][1].extend(facts[start:end])
            start = end

    configs: dict[str, ConfigMetrics] = {}
    for config_id, (parts, facts) in per_config.items():
        table = concat(parts)
        cases = [CaseMetrics(case_id, config_id, values, f.behavior, f.acl_leaks, f.content_types,
                             MappingProxyType(f.unknown) if f.unknown else _NOTHING_UNKNOWN)
                 for case_id, values, f in zip(scored[config_id], views(table, facts), facts, strict=True)]
        layouts = [f.names for f in facts]
        aggregate = with_reasons(table_summaries([table], ordered_names(distinct_layouts(layouts))),
                                 unknown_counts([table]), len(cases))
        configs[config_id] = ConfigMetrics(config_id, cases, aggregate,
                                           breakdowns(table, cases, layouts, dataset.cases), table)
    tables = [c.table for c in configs.values()]
    names = ordered_names(distinct_layouts([f.names for _, facts in per_config.values() for f in facts]))
    overall = with_reasons(table_summaries(tables, names), unknown_counts(tables), len(pairs))
    return MetricsRun(configs, overall)


def score_pairs(dataset: Dataset, settings: MetricSettings, pairs: Sequence[tuple[str, str]],
                ) -> tuple[pa.RecordBatch, list[CaseFacts]]:
    """One record batch of the (config, case) ``pairs``' metrics, and each row's facts."""
    found: list[Pair] = []
    for config_id, case_id in pairs:
        found.append((dataset.cases[case_id], dataset.traces[config_id][case_id],
                      dataset.paraphrase_traces(config_id, case_id)))
    return metric_batch(found, dataset.corpus, settings)


# What a pool's worker scores against: set once per worker by ``_share``.
_SHARED: tuple[Dataset, MetricSettings] | None = None


def _share(dataset: Dataset, settings: MetricSettings) -> None:
    global _SHARED  # one dataset per worker process, for all its batches
    _SHARED = dataset, settings


def _score_shared(pairs: Sequence[tuple[str, str]]) -> tuple[pa.RecordBatch, list[CaseFacts]]:
    assert _SHARED is not None, "a pool worker scores only after its initializer ran"
    return score_pairs(*_SHARED, pairs)
