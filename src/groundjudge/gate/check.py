"""The gates of a config file, checked before anything runs (SPEC 7).

A gate that cannot be evaluated never passes, and most such gates are visible in the config
alone: an unknown (say, misspelt) metric, a metric at a k the run does not compute, a judge
gate per tag (the judge's gates read whole configs), a regression gate on a value that has no
per-case form. Each is a configuration error naming the gate and the metrics that exist; bounds
that are missing or not finite are refused when the config is read (``config.Threshold``).

The metric names come from the code that computes them (``metrics.names``) and from the
rubric's declared criteria, never from a list kept here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from groundjudge.config import GatesConfig, dotted_key
from groundjudge.errors import InputError, InputProblem
from groundjudge.gate.evaluate import JUDGE_ERROR_RATE
from groundjudge.metrics.names import MetricNames


def _unknown(name: str, known: Sequence[str], names: MetricNames, kind: str) -> str:
    k = names.uncomputed_k(name)
    if k is not None:
        ks = ", ".join(map(str, names.ks))
        return (f"{name} is not computed: [metrics] ks = [{ks}] (add {k} to ks, or gate a k that is computed); "
                f"{kind} that exist: {', '.join(known)}")
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown metric {name!r}{hint}; {kind} that exist: {', '.join(known)}"


def check_gates(gates: GatesConfig, names: MetricNames, judge_metrics: Mapping[str, str], where: str, *,
                config_ids: Sequence[str] | None = None) -> None:
    """Raise :class:`InputError` (one line per bad gate) unless every gate can be evaluated.

    ``judge_metrics``: the rubric's criteria, metric name -> criterion name. ``config_ids``:
    the configs of the loaded traces, when known (regression gates must name two of them).
    """
    problems: list[tuple[str, str]] = []
    gateable = sorted(names.aggregate) + list(judge_metrics) + [JUDGE_ERROR_RATE]
    paired = sorted(names.per_case) + list(judge_metrics)

    def bad(field: tuple[object, ...], problem: str) -> None:
        problems.append((dotted_key(field), problem))

    for metric in gates.metrics:
        if metric not in judge_metrics and metric != JUDGE_ERROR_RATE and not names.is_aggregate(metric):
            bad(("gates", "metrics", metric), _unknown(metric, gateable, names, "metrics"))
    if JUDGE_ERROR_RATE in gates.metrics and gates.max_judge_error_rate is not None:
        bad(("gates", "max_judge_error_rate"), f"the judge_error-rate gate is set twice: keep max_judge_error_rate "
                                               f"or [gates.metrics] {JUDGE_ERROR_RATE}, not both")
    for tag, per in gates.tags.items():
        for metric in per:
            field: tuple[object, ...] = ("gates", "tags", tag, metric)
            if metric in judge_metrics or metric == JUDGE_ERROR_RATE:
                bad(field, f"{metric} is the judge's: judge gates read a whole config, not a tag; "
                           f"gate it under [gates.metrics]")
            elif not names.is_aggregate(metric):
                bad(field, _unknown(metric, sorted(names.aggregate), names, "metrics per tag"))
    for i, spec in enumerate(gates.regression):
        field = ("gates", "regression", i, "metric")
        if spec.metric not in judge_metrics and not names.is_per_case(spec.metric):
            if names.is_aggregate(spec.metric) or spec.metric == JUDGE_ERROR_RATE:
                bad(field, f"{spec.metric} has no per-case values to pair: regression gates compare cases "
                           f"(for a latency, gate latency_ms.<stage>, its per-case value); "
                           f"metrics that can be paired: {', '.join(paired)}")
            else:
                bad(field, _unknown(spec.metric, paired, names, "metrics that can be paired"))
        if config_ids is not None:
            for side in ("baseline", "candidate"):
                value = getattr(spec, side)
                if value not in config_ids:
                    bad(("gates", "regression", i, side),
                        f"no config {value!r} in the traces; configs: {', '.join(config_ids)}")
    if problems:
        raise InputError([InputProblem(where, None, f, p) for f, p in problems])
