"""Trends over runs, per config and metric, with breaks and real drops.

A run is compared with the previous *comparable* run: the same golden set (file hash) and, for
the metrics the judge feeds, also the same rubric hash and judge model. When the run just
before differs in any of these, the point is marked a break with the reason; it is compared
only with an older run that matches (none: not compared). Each comparison is the paired
sign-flip test of ``metrics.change`` over the cases both runs scored: cases whose values are
equal add nothing to the statistic, so they are dropped first; with up to ``EXACT_MAX`` differing
cases the resampled test runs as in ``groundjudge compare`` (10,000 sign flips, seeded), above
that its normal approximation (z = |sum d| / sqrt(sum d^2)), which at that size is accurate and
takes milliseconds instead of minutes for 100,000 cases.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from groundjudge.history.store import HistoryStore, StoredRun
from groundjudge.history.summary import Packed, RunSummary, unpack_ids, unpack_values
from groundjudge.metrics.change import ALPHA, lower_is_better, sign_flip_p

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class TrendPoint:
    run_id: int
    started_at: str
    config: str
    metric: str
    value: float | None
    n: int
    status: str  # "first", "compared", "break", "not compared"
    note: str  # why a break, what was compared
    against: int | None = None  # run id compared with
    delta: float | None = None  # mean over the paired cases: this run minus that one
    n_paired: int = 0
    p_value: float | None = None
    verdict: str | None = None  # "real" or "noise"
    drop: bool = False  # a real change in the bad direction

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _key(run: StoredRun, judge_metric: bool) -> tuple[Any, ...]:
    s = run.summary
    return (s.golden_hash, s.rubric_hash, s.model) if judge_metric else (s.golden_hash,)


def _break_reason(prev: StoredRun, run: StoredRun, judge_metric: bool) -> str | None:
    a, b = prev.summary, run.summary
    reasons = []
    if a.golden_hash != b.golden_hash:
        reasons.append("golden set changed")
    if judge_metric and a.rubric_hash != b.rubric_hash:
        reasons.append("rubric changed")
    if judge_metric and a.model != b.model:
        reasons.append("judge model changed")
    return ", ".join(reasons) or None


class _Cases:
    """Per-case columns as float64 arrays (NaN: no value), read on demand; a run's case ids
    read once per config while it is being compared, and each pair of runs lined up once per
    config. Only the last few runs' ids and line-ups are kept (``KEPT``): a trend walks the runs
    oldest first, and a nightly run's ids take megabytes. Runs whose packed ids are the same
    bytes (a nightly's runs over one golden set) share one decoded list and need no line-up.
    The columns of a run not stored yet (``pending``) are read from its packed values. A run
    lists each case once (``pack`` takes the ids from a mapping)."""

    KEPT = 4

    def __init__(self, store: HistoryStore, pending: tuple[int, Packed] | None = None) -> None:
        self.store = store
        self.pending = pending
        self.packed: OrderedDict[tuple[int, str], bytes | None] = OrderedDict()
        self.ids: OrderedDict[bytes, list[str]] = OrderedDict()  # packed ids -> the ids
        self.positions: OrderedDict[tuple[int, int, str], npt.NDArray[np.intp] | None] = OrderedDict()

    def case_ids(self, run_id: int, config: str) -> list[str] | None:
        blob = self._packed_ids(run_id, config)
        return None if blob is None else _kept(self.ids, blob, lambda: unpack_ids(blob), self.KEPT)

    def _packed_ids(self, run_id: int, config: str) -> bytes | None:
        return _kept(self.packed, (run_id, config), lambda: self._read_packed(run_id, config), self.KEPT)

    def _read_packed(self, run_id: int, config: str) -> bytes | None:
        if self.pending is not None and self.pending[0] == run_id:
            packed = self.pending[1].get(config)
            return packed[0] if packed is not None else None
        return self.store.packed_case_ids(run_id, config)

    def column(self, run_id: int, config: str, metric: str) -> npt.NDArray[np.float64] | None:
        ids = self.case_ids(run_id, config)
        if ids is None:
            return None
        if self.pending is not None and self.pending[0] == run_id:
            blob = self.pending[1][config][1].get(metric)
            values = unpack_values(blob) if blob is not None else None
        else:
            values = self.store.values(run_id, config, metric)
        if values is not None and len(values) != len(ids):
            raise ValueError(f"run {run_id}, config {config}: {len(values)} values of {metric} for {len(ids)} cases")
        return values

    def diffs(self, run_id: int, prev_id: int, config: str, metric: str) -> npt.NDArray[np.float64] | None:
        """Run ``run_id``'s values of ``metric`` minus run ``prev_id``'s, over the cases both
        scored, in the order of ``run_id``'s cases; None when either run lacks the metric."""
        mine, theirs = self.column(run_id, config, metric), self.column(prev_id, config, metric)
        if mine is None or theirs is None:
            return None
        positions = _kept(self.positions, (run_id, prev_id, config),
                          lambda: self._lined_up(run_id, prev_id, config), self.KEPT)
        return paired_diffs(mine, theirs, positions)

    def _lined_up(self, run_id: int, prev_id: int, config: str) -> npt.NDArray[np.intp] | None:
        if self._packed_ids(run_id, config) == self._packed_ids(prev_id, config):
            return None  # the same ids in the same order (``case_positions`` would say so)
        mine_ids, theirs_ids = self.case_ids(run_id, config), self.case_ids(prev_id, config)
        assert mine_ids is not None and theirs_ids is not None  # a column is read only with its ids
        return case_positions(mine_ids, theirs_ids)


def _kept(held: OrderedDict[K, V], key: K, make: Callable[[], V], most: int) -> V:
    """``held[key]``, made by ``make`` when missing; only the ``most`` last used are held."""
    if key in held:
        held.move_to_end(key)
        return held[key]
    value = held[key] = make()
    if len(held) > most:
        held.popitem(last=False)
    return value


def case_positions(ids: list[str], among: list[str]) -> npt.NDArray[np.intp] | None:
    """Where each of ``ids`` is in ``among`` (-1: not there); None when both list the same ids
    in the same order (the usual case: nothing to look up)."""
    if ids == among:
        return None
    # pyarrow looks each id up in a hash table of ``among``. JSON may carry a lone surrogate,
    # which Arrow's UTF-8 strings cannot hold: then both sides go as bytes ("surrogatepass",
    # which keeps distinct ids distinct)
    try:
        found = pc.index_in(pa.array(ids, pa.string()), value_set=pa.array(among, pa.string()))
    except UnicodeEncodeError:
        found = pc.index_in(pa.array([i.encode("utf-8", "surrogatepass") for i in ids], pa.binary()),
                            value_set=pa.array([i.encode("utf-8", "surrogatepass") for i in among], pa.binary()))
    positions: npt.NDArray[np.intp] = found.fill_null(-1).to_numpy().astype(np.intp)
    return positions


def paired_diffs(mine: npt.NDArray[np.float64], theirs: npt.NDArray[np.float64],
                 positions: npt.NDArray[np.intp] | None) -> npt.NDArray[np.float64]:
    """``mine - theirs`` over the cases both scored (no NaN on either side), in ``mine``'s order.
    ``positions``: where each of ``mine``'s cases is in ``theirs`` (``case_positions``)."""
    if positions is not None:
        theirs = np.append(theirs, np.nan)[positions]  # -1 picks the NaN: a case ``theirs`` lacks
    both = ~(np.isnan(mine) | np.isnan(theirs))
    with np.errstate(all="ignore"):  # inf - inf is NaN and a huge difference inf, silently, as for floats
        return mine[both] - theirs[both]


def trend(store: HistoryStore, metrics: Sequence[str], *, config: str | None = None, last: int | None = 20,
          seed: int = 0, pending: tuple[RunSummary, Packed] | None = None) -> list[TrendPoint]:
    """Points for the last ``last`` runs, per config (all, or ``config``) and metric, oldest first.
    Comparisons may reach back beyond the window for the previous comparable run. Runs marked
    not comparable (their judge could not run) are no point and no comparison's other side.
    ``pending``: a run not stored yet (its summary and packed values), taken as the newest,
    numbered after the last stored run."""
    everything = store.runs()
    cases = _Cases(store)
    if pending is not None:
        newest = StoredRun(id=(everything[-1].id + 1) if everything else 1, summary=pending[0])
        everything = [*everything, newest]
        cases = _Cases(store, (newest.id, pending[1]))
    everything = [r for r in everything if r.summary.comparable]
    shown_ids = {r.id for r in (everything[-last:] if last else everything)}
    points: list[TrendPoint] = []
    configs = [config] if config else sorted({c for r in everything for c in r.summary.configs})
    for cfg in configs:
        series = [r for r in everything if cfg in r.summary.configs]
        # run by run, every metric of a run at once (its case ids are read while it is compared),
        # the points then listed metric by metric
        per_metric: list[list[TrendPoint]] = [[] for _ in metrics]
        for i, run in enumerate(series):
            if run.id not in shown_ids:
                continue
            for metric, out in zip(metrics, per_metric, strict=True):
                out.append(_point(series, i, cfg, metric, cases, seed))
        points += [point for out in per_metric for point in out]
    return points


def _point(series: Sequence[StoredRun], i: int, cfg: str, metric: str, cases: _Cases, seed: int) -> TrendPoint:
    """The trend's point of run ``series[i]`` for ``metric``, compared with the last earlier
    comparable run of ``series``."""
    run = series[i]
    agg = run.summary.configs[cfg].aggregate.get(metric)
    judge_metric = metric in run.summary.judge_metrics
    point: dict[str, Any] = {"run_id": run.id, "started_at": run.summary.started_at, "config": cfg,
                             "metric": metric, "value": agg.value if agg else None, "n": agg.n if agg else 0}
    if i == 0:
        return TrendPoint(**point, status="first", note="first run of the series")
    reason = _break_reason(series[i - 1], run, judge_metric)
    key = _key(run, judge_metric)
    prev = next((r for r in reversed(series[:i]) if _key(r, judge_metric) == key), None)
    if prev is None:
        return TrendPoint(**point, status="break" if reason else "not compared",
                          note=(reason or "") + ("; " if reason else "") + "no earlier comparable run")
    paired = cases.diffs(run.id, prev.id, cfg, metric)
    if paired is None:
        return TrendPoint(**point, status="break" if reason else "not compared",
                          note=(reason + "; " if reason else "") + "metric missing on one side")
    diffs = paired.tolist()  # floats, in this run's order: what sign_flip_p and fsum take
    p = sign_flip_p(diffs, seed=seed)
    delta = math.fsum(diffs) / len(diffs) if diffs else None
    verdict = None if p is None else ("real" if p < ALPHA else "noise")
    worse = delta is not None and (delta > 0 if lower_is_better(metric) else delta < 0)
    note = f"vs run {prev.id}" + (f" ({reason}; compared with the last run that matches)" if reason else "")
    return TrendPoint(**point, status="break" if reason else "compared", note=note, against=prev.id,
                      delta=delta, n_paired=len(diffs), p_value=p, verdict=verdict,
                      drop=verdict == "real" and worse)


def default_metrics(run: StoredRun, config: str, count: int = 5, prefer: Sequence[str] = ()) -> list[str]:
    """Metrics to show by default: ``prefer`` (the gated metrics) first, else the judge's headline
    metric and the deterministic headline metrics; only rates (values within [0, 1]), so one
    axis serves them all."""
    from groundjudge.report.markdown import HEADLINE

    aggregate = run.summary.configs[config].aggregate
    judge = [m for m in run.summary.judge_metrics if m != "judge_error_rate"][:1]
    chosen = [m for m in dict.fromkeys([*prefer, *judge, *HEADLINE]) if m in aggregate
              and (value := aggregate[m].value) is not None and 0 <= value <= 1]
    return chosen[:count]


def trend_view(points: Sequence[TrendPoint], config: str, store: str) -> dict[str, Any]:
    """What the HTML report's trend chart draws, for one config: run labels, one series per
    metric, breaks (indexes where any shown metric's series breaks), real drops, and notes."""
    mine = [p for p in points if p.config == config]
    run_ids = sorted({p.run_id for p in mine})
    index = {r: i for i, r in enumerate(run_ids)}
    metrics = list(dict.fromkeys(p.metric for p in mine))
    series: dict[str, list[float | None]] = {m: [None] * len(run_ids) for m in metrics}
    breaks, drops, notes = set(), [], []
    broken: dict[tuple[int, str], list[str]] = {}
    for p in mine:
        series[p.metric][index[p.run_id]] = p.value
        if p.status == "break":
            breaks.add(index[p.run_id])
            broken.setdefault((p.run_id, p.note), []).append(p.metric)
        if p.drop:
            drops.append((index[p.run_id], p.metric))
            notes.append(f"run {p.run_id}, {p.metric}: real change for the worse, {p.delta:+.4f} vs run {p.against} "
                         f"(p = {p.p_value:.4g}, n = {p.n_paired})")
    notes = [f"run {run}: break ({note}) for {', '.join(names)}" for (run, note), names in broken.items()] + notes
    return {"config": config, "store": store, "runs": [f"#{r}" for r in run_ids], "series": series,
            "breaks": sorted(breaks), "drops": drops, "notes": notes}
