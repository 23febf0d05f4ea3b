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

from collections.abc import Iterator
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
    return concat(list(_config_tables(metrics, judge)))


def _config_tables(metrics: MetricsRun, judge: JudgeRun | None) -> Iterator[pa.Table]:
    """Each config's metric table with the judge's columns beside it, one config at a time."""
    metric_names = {name for cfg in metrics.configs.values() for name in cfg.table.column_names}
    for config_id, cfg in metrics.configs.items():
        table = cfg.table
        if judge is not None:
            for name, column in _judge_columns(judge, [judge.case(config_id, c.case_id) for c in cfg.cases]):
                if name in metric_names:
                    raise ValueError(f"cases.parquet: the judge's column {name!r} has the name of a metric column")
                table = table.append_column(name, column)
        yield table


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


_ROWS_PER_GROUP = 32_768  # a row group is put together in memory before it is written


def write_cases_parquet(path: Path, metrics: MetricsRun, judge: JudgeRun | None = None) -> None:
    """Write ``cases_table(metrics, judge)`` atomically (inside ``files.together`` it replaces the
    old file only when every report was written), a config at a time in row groups of up to
    ``_ROWS_PER_GROUP`` rows, so the run's cases never exist as one table, nor as one encoded row group. Every part is given the whole table's
    schema (``concat``'s: columns in the order they first appear, null where a config has none)."""
    schema = pa.unify_schemas([_schema_of(cfg.table.schema, judge) for cfg in metrics.configs.values()]
                              or [concat([]).schema], promote_options="default")
    with open_atomic(path) as handle, pq.ParquetWriter(handle, schema) as writer:
        for table in _config_tables(metrics, judge):
            writer.write_table(_conformed(table, schema), row_group_size=_ROWS_PER_GROUP)


def _schema_of(metric_schema: pa.Schema, judge: JudgeRun | None) -> pa.Schema:
    """The schema of a config's table in ``_config_tables``: its metrics', then the judge's columns."""
    if judge is None:
        return metric_schema
    fields = [pa.field(name, kind) for name, kind in _JUDGE_FIELDS]
    for crit in judge.criteria:
        fields += [pa.field(crit.name, pa.bool_() if crit.kind == "binary" else pa.int64()),
                   pa.field(crit.metric, pa.float64()), pa.field(f"{crit.name}_confidence", pa.float64())]
    return pa.schema([*metric_schema, *fields], metadata=metric_schema.metadata)


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order: a column it lacks as nulls, a null one cast."""
    present = set(table.column_names)
    return pa.Table.from_arrays([table.column(field.name).cast(field.type) if field.name in present
                                 else pa.nulls(table.num_rows, field.type) for field in schema], schema=schema)
