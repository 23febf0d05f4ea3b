"""``cases.parquet``: a run's per-case results as one Arrow table, for pandas, polars and DuckDB.

One row per (config, case) that was scored: ``config_id``, ``case_id``, ``not_recorded``
(metric -> why its input was not recorded), a float64 column per deterministic metric (null
where it does not apply), and the judge's result for the case where the run has a judge
section: ``judge_status`` (judged, skipped, judge_error; null when the case was not selected),
``judge_reason`` (why skipped or errored), ``judge_selected_because``, ``judge_source`` (cache
or call), ``judge_claims`` (claims checked), the model's own one-line ``judge_model_reason``,
and per rubric criterion its label (column named for the criterion, e.g. ``faithful``: bool
for a binary criterion, integer for an ordinal one), its value (named for its metric, e.g.
``faithfulness``) and ``<criterion>_confidence``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from groundjudge.files import open_atomic
from groundjudge.judge.results import CaseJudgement, JudgeRun
from groundjudge.metrics.evaluate import MetricsRun
from groundjudge.metrics.table import concat

_JUDGE_FIELDS = (("judge_status", pa.string()), ("judge_reason", pa.string()),
                 ("judge_selected_because", pa.string()), ("judge_source", pa.string()),
                 ("judge_claims", pa.int64()), ("judge_model_reason", pa.string()))


def cases_table(metrics: MetricsRun, judge: JudgeRun | None = None) -> pa.Table:
    """Every config's metric table one after the other, with the judge's columns beside them."""
    metric_names = {name for cfg in metrics.configs.values() for name in cfg.table.column_names}
    parts = []
    for config_id, cfg in metrics.configs.items():
        table = cfg.table
        if judge is not None:
            for name, column in _judge_columns(judge, [judge.case(config_id, c.case_id) for c in cfg.cases]):
                if name in metric_names:
                    raise ValueError(f"cases.parquet: the judge's column {name!r} has the name of a metric column")
                table = table.append_column(name, column)
        parts.append(table)
    return concat(parts)


def _judge_columns(judge: JudgeRun, cases: list[CaseJudgement | None]) -> list[tuple[str, pa.Array]]:
    def column(read: Any) -> list[Any]:
        return [None if c is None else read(c) for c in cases]

    found = [column(lambda c: c.status), column(lambda c: c.reason), column(lambda c: c.selected_because),
             column(lambda c: c.source), column(lambda c: len(c.claims) if c.status == "judged" else None),
             column(lambda c: c.judge_reason)]
    out = [(name, pa.array(values, type=kind)) for (name, kind), values in zip(_JUDGE_FIELDS, found, strict=True)]
    for crit in judge.criteria:
        values = [None if c is None else c.criteria.get(crit.name) for c in cases]
        label_type = pa.bool_() if crit.kind == "binary" else pa.int64()
        out.append((crit.name, pa.array([None if v is None else v.label for v in values], type=label_type)))
        out.append((crit.metric, pa.array([None if v is None else v.value for v in values], type=pa.float64())))
        out.append((f"{crit.name}_confidence",
                    pa.array([None if v is None else v.confidence for v in values], type=pa.float64())))
    return out


def write_cases_parquet(path: Path, table: pa.Table) -> None:
    """Write ``table`` atomically (inside ``files.together`` it replaces the old file only when
    every report was written)."""
    with open_atomic(path) as handle:
        pq.write_table(table, handle)
