"""The names of the deterministic metrics a run computes, read off the code that computes them.

Gates are checked against these names before anything runs (a misspelt metric, or a k that is
not computed, is a configuration error, never a gate that silently has no data). The names are
not kept in a list here: a probe case goes through :func:`~groundjudge.metrics.case.compute_case`
and :func:`~groundjudge.metrics.aggregate.summaries` with the run's settings, so a metric added
there is a known name at once. Names that carry a part taken from the traces (a latency stage,
a token kind) are families: the probe uses a placeholder for that part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.load.dataset import Corpus
from groundjudge.metrics.aggregate import summaries
from groundjudge.metrics.case import MetricSettings, compute_case

_STAGE, _KIND = "<stage>", "<kind>"
# a cut-off no one configures: the names that carry it are the metrics computed "at k"
_PROBE_K = 987_654


def _row_names(settings: MetricSettings) -> tuple[str, ...]:
    case = GoldenCase(id="probe", question="probe", paraphrases=("probe again",))
    trace = Trace.model_validate({"query_id": "probe", "config_id": "probe", "latency_ms": {_STAGE: 1.0},
                                  "tokens": {_KIND: 1}})
    again = Trace(query_id="probe", config_id="probe", paraphrase=1)
    return tuple(compute_case(case, trace, Corpus(), settings, [again]).values)


@dataclass(frozen=True)
class MetricNames:
    """What a run with these settings can compute, per case and as aggregates."""

    per_case: frozenset[str]  # the values of one case (what paired comparisons use)
    aggregate: frozenset[str]  # the summaries a gate reads (latencies as percentiles, cost also as a total)
    cut: frozenset[str]  # the metrics computed at each k of ``ks`` (``recall`` for ``recall@10``)
    ks: tuple[int, ...]

    def is_aggregate(self, name: str) -> bool:
        return name in self.aggregate or any(p.match(name) for p in _patterns(self.aggregate))

    def is_per_case(self, name: str) -> bool:
        return name in self.per_case or any(p.match(name) for p in _patterns(self.per_case))

    def uncomputed_k(self, name: str) -> int | None:
        """The k of ``name`` when it is a metric computed at k, but not at this one."""
        base, sep, k = name.rpartition("@")
        if sep and base in self.cut and k.isdigit() and int(k) not in self.ks:
            return int(k)
        return None

    def shown(self, names: frozenset[str]) -> list[str]:
        """``names`` for a message: placeholders for the parts that come from the traces."""
        return sorted(names)


@lru_cache(maxsize=16)
def _patterns(names: frozenset[str]) -> tuple[re.Pattern[str], ...]:
    out = []
    for name in names:
        if _STAGE in name or _KIND in name:
            parts = re.split(f"({re.escape(_STAGE)}|{re.escape(_KIND)})", name)
            out.append(re.compile("".join("[^.]+" if p in (_STAGE, _KIND) else re.escape(p) for p in parts) + "$"))
    return tuple(out)


def metric_names(settings: MetricSettings) -> MetricNames:
    """The deterministic metric names of a run with ``settings`` (``ks``, ``stability_k``)."""
    ks = tuple(settings.ks)
    row = _row_names(settings)
    probe = _row_names(replace(settings, ks=(_PROBE_K,)))
    cut = frozenset(name.rpartition("@")[0] for name in probe if name.endswith(f"@{_PROBE_K}"))
    return MetricNames(per_case=frozenset(row), aggregate=frozenset(summaries({name: [] for name in row})),
                       cut=cut, ks=ks)
