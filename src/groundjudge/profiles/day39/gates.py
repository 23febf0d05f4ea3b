"""The release gate of the day-39 report: each gate of the chosen set checked per config, and
the lesson's release decision, PASS, FAIL or PASS_WITH_RISK.

A gate is ``pass`` or ``fail`` against its bound (inclusive), ``advisory`` (a judge gate of a
judge no calibration record vouches for: "would pass" or "would fail", never blocking) or
``no_data`` (no value: no case defines the metric, no judge ran, the judge judged nothing).
A gate that cannot be evaluated never passes (docs/gates.md): ``no_data`` fails the config
unless the gate says ``on_missing = "skip"``.

The decision of a config: FAIL when a blocking gate failed or had no data; PASS_WITH_RISK
when none did but a gate held only as advisory or was skipped (a skipped gate is not a held
gate); PASS when every gate was evaluated and held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundjudge.profiles.day39.settings import JUDGE_METRICS, Bound, GateSpec

__all__ = ["check_gates", "decide"]


def _holds(value: float, bound: Bound) -> bool:
    return (bound.min is None or value >= bound.min) and (bound.max is None or value <= bound.max)


def _check(spec: GateSpec, value: float | None, n: int, *, judge: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"gate": spec.name, "label": spec.label, "metric": spec.metric, "tag": spec.tag,
                           "bound": spec.bound.text(), "value": value, "n": n}
    skip = spec.bound.on_missing == "skip"
    if value is None:
        why = judge["reason"] if judge is not None else (
            f"no case tagged {spec.tag} defines {spec.metric}" if spec.tag else f"no case defines {spec.metric}")
        return {**out, "status": "no_data", "blocking": not skip,
                "reason": ("skipped (on_missing = skip): " if skip else "not evaluated, so it does not hold: ") + why}
    held = _holds(value, spec.bound)
    if judge is not None and judge["state"] != "trusted":
        return {**out, "status": "advisory", "blocking": False,
                "reason": f"would {'pass' if held else 'fail'}; advisory: {judge['reason']}"}
    shown = f"{value:.3f}" if isinstance(value, float) else str(value)
    return {**out, "status": "pass" if held else "fail", "blocking": True,
            "reason": f"{shown} {'meets' if held else 'misses'} {spec.bound.text()}"}


def check_gates(specs: Sequence[GateSpec], summary: Mapping[str, float | None], counts: Mapping[str, int],
                by_tag: Mapping[str, Mapping[str, float | None]], tag_counts: Mapping[str, Mapping[str, int]],
                judge: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every gate of one config. ``summary``: its per-config values; ``counts``: how many cases
    each value covers; ``by_tag``, ``tag_counts``: the same per tag; ``judge``: its judge cells
    (:mod:`.judged`)."""
    out = []
    for spec in specs:
        if spec.metric in JUDGE_METRICS:
            cell = judge[spec.metric]
            out.append(_check(spec, cell["value"], cell["n"], judge=cell))
        elif spec.tag is not None:
            out.append(_check(spec, by_tag.get(spec.tag, {}).get(spec.metric),
                              tag_counts.get(spec.tag, {}).get(spec.metric, 0)))
        else:
            out.append(_check(spec, summary.get(spec.metric), counts.get(spec.metric, 0)))
    return out


def decide(config: str, checks: Sequence[Mapping[str, Any]], *, baseline: str | None = None,
           baseline_status: str | None = None) -> dict[str, Any]:
    """The release decision of ``config`` from its gate checks, with what to do next."""
    failed = [c["label"] for c in checks if c["blocking"] and c["status"] in ("fail", "no_data")]
    risky = [c["label"] for c in checks
             if c["status"] == "advisory" or (c["status"] == "no_data" and not c["blocking"])]
    if failed:
        back = (f"; keep {baseline}, which passes its gates" if baseline and baseline != config
                and baseline_status in ("PASS", "PASS_WITH_RISK") else "")
        return {"status": "FAIL", "failed": failed, "risks": risky,
                "text": f"Do not release {config}{back}: fix what fails ({'; '.join(failed)}) and run the eval again."}
    if risky:
        return {"status": "PASS_WITH_RISK", "failed": [], "risks": risky,
                "text": f"{config} holds every blocking gate; these held only as advisory or were not evaluated: "
                        f"{'; '.join(risky)}. Release only accepting that risk; a calibrated judge "
                        "(groundjudge calibrate) or the missing data makes them count."}
    return {"status": "PASS", "failed": [], "risks": [],
            "text": f"Release {config}: every gate was evaluated and held."}
