"""One run's record for the history: aggregates with n, gates, trust, cost, provenance, and
the per-case values the paired test needs, stored compactly: per config the case ids once,
then one float64 column per metric (NaN for no value), each zlib-compressed."""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from groundjudge.files import file_and_part
from groundjudge.judge.results import CaseJudgement
from groundjudge.metrics.evaluate import ConfigMetrics, MetricsRun
from groundjudge.metrics.table import MetricValues, metric_columns
from groundjudge.metrics.value import MetricValue
from groundjudge.report.document import ReportDocument


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConfigSummary(_Frozen):
    aggregate: dict[str, MetricValue]  # deterministic and judge metrics, each with its n
    judge_status: dict[str, int]  # judged / skipped / judge_error counts
    gates_passed: bool | None  # None: no gate covers this config


class RunSummary(_Frozen):
    """What the history keeps of one run (its per-case values are stored beside it, see ``pack``)."""

    started_at: str
    run_dir: str | None
    golden_hash: str | None
    data_hashes: dict[str, str | None]  # golden, traces, corpus: sha256 of the file bytes
    rubric: str | None  # "id/vN"
    rubric_hash: str | None
    model: str | None
    passed: bool
    failed_gates: list[str]
    trust: dict[str, bool]  # judge metric -> trusted
    judge_metrics: list[str]  # metrics the judge feeds: comparable only under the same rubric and model
    cost_usd: float
    requests: int
    tool_version: str
    git_commit: str | None
    configs: dict[str, ConfigSummary]
    # False for a run whose judge could not be reached or stopped mid-run: kept in the history,
    # never a point of a trend nor the run another is compared with (``not_comparable`` says why)
    comparable: bool = True
    not_comparable: str | None = None


_HASH_BLOCK = 1 << 24


def file_hash(paths: Iterable[Path]) -> str | None:
    """sha256 over the bytes of the files in order (None when there are none); a path naming
    part of a file (``kb.sqlite#run_a``) hashes the file and the part's name."""
    paths = list(paths)
    if not paths:
        return None
    digest = hashlib.sha256()
    # large blocks into one buffer: reading and hashing a block let go of the interpreter, so
    # another thread runs meanwhile, and a thread that hashes waits for it once per block. The
    # buffer is a mapping of its own, given back whole when done (malloc might keep it).
    with mmap.mmap(-1, _HASH_BLOCK) as block, memoryview(block) as view:
        for path in paths:
            path, part = file_and_part(path)
            with open(path, "rb") as handle:
                while size := handle.readinto(view):
                    digest.update(view[:size])
            if part is not None:
                digest.update(b"#" + part.encode("utf-8"))
    return digest.hexdigest()


def data_hashes(golden: Path | None, traces: Iterable[Path], corpus: Path | None) -> dict[str, str | None]:
    return {"golden": file_hash([golden] if golden else []), "traces": file_hash(traces),
            "corpus": file_hash([corpus] if corpus else [])}


def per_case_values(doc: ReportDocument) -> dict[str, dict[str, dict[str, float | None]]]:
    """config -> case -> metric -> value: deterministic metrics and judge criterion values."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for cfg, section in doc.per_config.items():
        cases = {cid: dict(values) for cid, values in section.per_case.items()}
        judged = doc.judge.per_config.get(cfg)
        if judged is not None:
            for cid, case in judged.cases.items():
                row = cases.setdefault(cid, {})
                for crit in doc.judge.criteria:
                    value = case.criteria.get(crit.name)
                    row[crit.metric] = value.value if value is not None else None
        out[cfg] = cases
    return out


def build_summary(doc: ReportDocument, hashes: Mapping[str, str | None], run_dir: str | Path | None = None,
                  *, started_at: datetime | None = None, not_comparable: str | None = None) -> RunSummary:
    gated = set(doc.gates.gated_configs)
    configs: dict[str, ConfigSummary] = {}
    for cfg, section in doc.per_config.items():
        aggregate = dict(section.aggregate)
        judged = doc.judge.per_config.get(cfg)
        if judged is not None:
            aggregate.update(judged.summary.metrics)
            aggregate["judge_error_rate"] = judged.summary.judge_error_rate
        mine = [r for r in doc.gates.results if r.config_id == cfg]
        configs[cfg] = ConfigSummary(
            aggregate=aggregate, judge_status=dict(judged.summary.status_counts) if judged else {},
            gates_passed=(not any(r.failed for r in mine) if cfg in gated else None))
    ident = doc.judge.identity
    when = started_at or datetime.now(UTC)
    return RunSummary(
        started_at=when.strftime("%Y-%m-%dT%H:%M:%SZ"), run_dir=str(run_dir) if run_dir is not None else None,
        golden_hash=hashes.get("golden"), data_hashes=dict(hashes),
        rubric=f"{ident.rubric.id}/v{ident.rubric.version}", rubric_hash=ident.rubric.hash, model=ident.model,
        passed=doc.gates.passed, failed_gates=list(doc.gates.failed),
        trust={metric: status.trusted for metric, status in doc.gates.trust.items()},
        judge_metrics=[c.metric for c in doc.judge.criteria] + ["judge_error_rate"],
        cost_usd=doc.judge.totals.usage.cost_usd, requests=doc.judge.totals.usage.requests,
        tool_version=doc.provenance.tool_version, git_commit=doc.provenance.git_commit, configs=configs,
        comparable=not_comparable is None, not_comparable=not_comparable)


Packed = dict[str, tuple[bytes, dict[str, bytes]]]  # config -> (case ids, metric -> column)


def pack(values: Mapping[str, Mapping[str, Mapping[str, float | None]]]) -> Packed:
    """config -> case -> metric -> value, as one blob of case ids per config and one column per
    metric (float64, NaN for no value, zlib): a trend reads only the columns it shows."""
    out: Packed = {}
    for cfg, cases in values.items():
        ids = list(cases)
        columns: dict[str, list[float | None]] = {}
        for i, row in enumerate(cases.values()):  # one pass over the rows, each value set once
            for name, value in row.items():
                column = columns.get(name)
                if column is None:
                    column = columns[name] = [None] * len(ids)
                column[i] = value
        packed = {name: pack_column(columns[name]) for name in sorted(columns)}
        out[cfg] = (zlib.compress(json.dumps(ids, separators=(",", ":")).encode(), 6), packed)
    return out


def pack_report(doc: ReportDocument, metrics: MetricsRun | None = None) -> Packed:
    """``pack(per_case_values(doc))`` without copying every case's values first: a nightly
    report has hundreds of thousands of rows. With the run's ``metrics``, each metric column is
    read from its config's Arrow table whole (null as NaN), not row by row. Each column is made
    when its turn comes and compressed in a thread (zlib lets go of the interpreter while it
    compresses), a few at a time: a run's columns never all exist at once."""
    with ThreadPoolExecutor(2) as pool:
        return {cfg: _packed_config(doc, cfg, metrics, pool) for cfg in doc.per_config}


Column = Callable[[], "array[float]"]  # makes a float column of a config's cases when called
_IN_FLIGHT = 4  # columns made and not yet compressed, at most


def _packed_config(doc: ReportDocument, cfg: str, metrics: MetricsRun | None, pool: ThreadPoolExecutor,
                   ) -> tuple[bytes, dict[str, bytes]]:
    """One config's blob of case ids and its compressed columns (``pack_report``)."""
    section = doc.per_config[cfg]
    ids = list(section.per_case)
    judged = doc.judge.per_config.get(cfg)
    index: dict[str, int] = {}
    if judged is not None:
        index = {cid: i for i, cid in enumerate(ids)}
        for cid in judged.cases:
            if cid not in index:
                index[cid] = len(ids)
                ids.append(cid)
    columns = _metric_columns(section.per_case, len(ids), metrics.configs.get(cfg) if metrics else None)
    if judged is not None:
        for crit in doc.judge.criteria:
            made = columns.get(crit.metric)
            if made is None and not judged.cases:
                continue
            columns[crit.metric] = partial(_with_judged, made, len(ids), judged.cases, crit.name, index)
    packed: dict[str, bytes] = {}
    pending: deque[tuple[str, Future[bytes]]] = deque()
    for name in sorted(columns):
        pending.append((name, pool.submit(pack_column, columns[name]())))
        if len(pending) > _IN_FLIGHT:
            done, future = pending.popleft()
            packed[done] = future.result()
    packed.update((name, future.result()) for name, future in pending)
    return zlib.compress(json.dumps(ids, separators=(",", ":")).encode(), 6), packed


def _with_judged(made: Column | None, size: int, cases: Mapping[str, CaseJudgement], criterion: str,
                 index: Mapping[str, int],
                 ) -> array[float]:
    """The column ``made`` makes (NaN throughout where None) with each judged case's value of
    ``criterion`` put in its place (NaN for no value)."""
    nan = math.nan
    column = made() if made is not None else array("d", [nan]) * size
    for cid, case in cases.items():
        judged_value = case.criteria.get(criterion)
        column[index[cid]] = nan if judged_value is None or judged_value.value is None else judged_value.value
    return column


def _itself(column: array[float]) -> array[float]:
    return column


def _table_column(table: pa.Table, name: str, size: int) -> array[float]:
    """A metric's column of a config's Arrow table as floats (null as NaN), NaN past its rows."""
    whole = array("d", table.column(name).to_numpy().tobytes())
    whole.extend(array("d", [math.nan]) * (size - len(whole)))
    return whole


def _metric_columns(rows: Mapping[str, Mapping[str, float | None]], size: int, scored: ConfigMetrics | None,
                    ) -> dict[str, Column]:
    """The metric columns of a config's per-case rows, ``size`` long (NaN past the rows and
    for no value), each as what makes it: float arrays, not lists, which would hold a float
    object per value. A column is made for each metric some row has, as ``pack`` makes them."""
    nan = math.nan
    if scored is not None and _rows_of(scored, rows):
        # the rows are views of the config's Arrow table: a column at a time, for the metrics
        # some row has (another config's metric is a column of nulls here)
        layouts: dict[int, tuple[str, ...]] = {}  # the rows share a handful of tuples of names
        for case in scored.cases:
            names = cast(MetricValues, case.values).names
            layouts.setdefault(id(names), names)
        named = {name for layout in layouts.values() for name in layout}
        return {name: partial(_table_column, scored.table, name, size)
                for name in metric_columns(scored.table) if name in named}
    columns: dict[str, array[float]] = {}
    for i, row in enumerate(rows.values()):  # one pass over the rows, each value set once
        for name, value in row.items():
            column = columns.get(name)
            if column is None:
                column = columns[name] = array("d", [nan]) * size
            if value is not None:
                column[i] = value
    return {name: partial(_itself, column) for name, column in columns.items()}


def _rows_of(scored: ConfigMetrics, rows: Mapping[str, Mapping[str, float | None]]) -> bool:
    """Whether ``rows`` are the config's table rows themselves, in its order."""
    return (len(scored.cases) == len(rows) and all(type(c.values) is MetricValues for c in scored.cases)
            and scored.table.column("case_id").to_pylist() == list(rows))


def pack_column(values: Iterable[float | None]) -> bytes:
    """The values as float64 (NaN for None), zlib-compressed; an ``array("d")`` is taken as it is."""
    if isinstance(values, array) and values.typecode == "d":
        return zlib.compress(values, 6)
    # array("d") converts an int or bool as float() would: the same bytes, without a call per value
    nan = math.nan
    return zlib.compress(array("d", [nan if v is None else v for v in values]).tobytes(), 6)


def unpack_ids(blob: bytes) -> list[str]:
    text = zlib.decompress(blob)
    try:
        ids: list[str] = orjson.loads(text)
    except orjson.JSONDecodeError:  # a lone surrogate ("\udc80"), which JSON allows and orjson refuses
        ids = json.loads(text)
    return ids


def unpack_values(blob: bytes) -> npt.NDArray[np.float64]:
    """A packed column as a read-only float64 array, NaN for no value."""
    return np.frombuffer(zlib.decompress(blob), dtype=np.float64)


def unpack_column(blob: bytes) -> list[float | None]:
    """A packed column as a list, None for no value."""
    column = unpack_values(blob)
    values: list[float | None] = column.tolist()
    for i in np.flatnonzero(np.isnan(column)).tolist():
        values[i] = None
    return values
