"""Stability: how far a judge's verdicts move when the same question is asked again.

The same question can get a slightly different P(yes) from one ask to the next (a local
server's prompt cache, batching, floating-point order), enough to move a verdict near its
criterion's threshold across it. ``groundjudge calibrate --stability N`` re-asks a seeded
sample of a run's questions N times each (``calibrate/reask.py``); this module turns what came
back into figures per criterion and into the **noise band** around the criterion's threshold,
and marks the run's verdicts that lie inside it.

Per question, the observations are the run's own stored answer (when the cache holds it) and
the N re-asks. Its **support** is what the verdict reads (P(yes), times the grounding's term
factor per unfound term where the rubric grounds); its label is support >= the criterion's cut.

- **flip rate**: the share of re-asked questions whose label was not the same in every
  observation;
- **spread**: max - min over a question's observations, of P(yes) and of the support;
- **noise band**: with w the largest support spread seen on any of the criterion's questions,
  the support interval [cut - w, cut + w). A support s there can cross the cut by a move of at
  most w (s >= cut falls below when s - w < cut; s < cut reaches it when s + w >= cut); outside
  it no move seen in the sample can flip the verdict. A case's verdict reads the lowest support
  of its claims, and a minimum moves by no more than the largest move of what it is taken over,
  so the same band applies to the case's verdict. w is the largest spread seen, not a typical
  one: a band from few questions or few asks can still be too narrow, which the record shows
  with its n.

A verdict whose support lies in its criterion's band is **unstable**: reports mark it and
selective trust never trusts it (``calibrate/cascade.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.record import identity_hash
from groundjudge.judge.results import JudgeRun

__all__ = ["SUPPORT_SCORES", "Band", "Observed", "StabilityCheck", "UnstableVerdict", "bands_for", "check_run",
           "figures", "in_band", "support_of"]

#: score kinds whose verdict is a support against the criterion's threshold, and the question
#: kind that carries that support (``judge/claim_check.py``)
SUPPORT_SCORES: dict[str, str] = {"claim_support": "claim", "cited_claim_support": "cited",
                                  "answer_relevance": "relevance"}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Observed(_Frozen):
    """One re-asked question: its observations, the run's stored answer first when there is one."""

    case_id: str
    config_id: str
    criterion: str
    kind: str  # claim, cited, relevance
    index: int  # which claim of the case (0 for relevance)
    stored: bool  # whether the first observation is the run's stored answer
    p_yes: tuple[float, ...]
    support: tuple[float, ...]

    def labels(self, cut: float) -> tuple[bool, ...]:
        return tuple(s >= cut for s in self.support)


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else 0.0


def figures(observed: Sequence[Observed], cuts: dict[str, float], *, repeats: int, seed: int,
            sample: int, available: int, calls: int, failed: int, seconds: float) -> dict[str, Any]:
    """The record's ``stability`` block: per criterion its flip rate, spreads and band; the
    sampling design; every re-asked question with its observations."""
    per: dict[str, Any] = {}
    for name, cut in cuts.items():
        mine = [o for o in observed if o.criterion == name]
        flipped = [o for o in mine if len(set(o.labels(cut))) > 1]
        p_spread = [_spread(o.p_yes) for o in mine]
        s_spread = [_spread(o.support) for o in mine]
        w = max(s_spread, default=None)
        per[name] = {
            "cut": cut, "questions": len(mine), "flipped": len(flipped),
            "flip_rate": len(flipped) / len(mine) if mine else None,
            "p_yes_spread": {"max": max(p_spread, default=None),
                             "mean": sum(p_spread) / len(p_spread) if p_spread else None},
            "support_spread": {"max": w, "mean": sum(s_spread) / len(s_spread) if s_spread else None},
            "band": None if w is None else {"half_width": w, "low": cut - w, "high": cut + w},
        }
    return {
        "repeats": repeats, "seed": seed, "sample": sample, "questions_available": available,
        "calls": calls, "failed_calls": failed, "seconds": round(seconds, 1),
        "band_rule": "[cut - w, cut + w), w = the largest support spread seen on the criterion's questions",
        "criteria": per,
        "questions": [o.model_dump() for o in observed],
    }


# --- in a run ----------------------------------------------------------------------------------

class Band(_Frozen):
    """One criterion's noise band, from the calibration record that measured it."""

    criterion: str
    cut: float
    half_width: float
    low: float
    high: float
    questions: int
    flip_rate: float | None
    repeats: int


class UnstableVerdict(_Frozen):
    case_id: str
    config_id: str
    criterion: str
    label: bool | int | None
    support: float  # the lowest claim support (the relevance question's, for relevance)
    low: float
    high: float

    @property
    def reason(self) -> str:
        return f"verdict unstable: support {self.support:.3f} inside the noise band [{self.low:.3f}, {self.high:.3f})"


class StabilityCheck(_Frozen):
    """report.json's ``stability``: which verdicts lie inside their criterion's noise band, or
    why none could be checked."""

    status: Literal["checked", "no_figures"]
    reason: str
    record: str | None = None
    bands: dict[str, Band] = {}
    checked: dict[str, int] = {}  # criterion -> verdicts with a support that were checked
    unstable: list[UnstableVerdict] = []

    def unstable_keys(self) -> dict[tuple[str, str, str], str]:
        """(case id, config id, criterion) -> why it is unstable."""
        return {(u.case_id, u.config_id, u.criterion): u.reason for u in self.unstable}


def in_band(support: float, band: Band) -> bool:
    return band.low <= support < band.high


def support_of(confidence: float | None, cut: float) -> float | None:
    """The support behind a verdict, from its confidence: the lowest support centred on the cut
    (``judge.scoring.centred``), undone. None without a confidence."""
    if confidence is None:
        return None
    if cut <= 0 or cut >= 1:
        return confidence
    return confidence * 2 * cut if confidence < 0.5 else cut + (confidence - 0.5) * 2 * (1 - cut)


def bands_for(identity: dict[str, Any], records: Sequence[dict[str, Any]]) -> tuple[dict[str, Band], str | None]:
    """The bands of exactly this judge identity, from its record with the most re-asks (then the
    newest); ({}, None) when none of its records measured stability."""
    key = identity_hash({"rubric": identity["rubric"], "model": identity["model"], "decoding": identity["decoding"]})
    measured = [r for r in records if r.get("identity_hash") == key and isinstance(r.get("stability"), dict)]
    if not measured:
        return {}, None
    best = max(measured, key=lambda r: (sum(c.get("questions", 0) for c in r["stability"]["criteria"].values())
                                        * r["stability"].get("repeats", 0), r.get("created") or ""))
    block = best["stability"]
    bands = {name: Band(criterion=name, cut=c["cut"], half_width=c["band"]["half_width"], low=c["band"]["low"],
                        high=c["band"]["high"], questions=c["questions"], flip_rate=c["flip_rate"],
                        repeats=block["repeats"])
             for name, c in block["criteria"].items() if c.get("band") is not None}
    return bands, best.get("_path")


def check_run(run: JudgeRun, supported: Sequence[str], records: Sequence[dict[str, Any]]) -> StabilityCheck | None:
    """Mark the run's verdicts inside their criterion's band. ``supported``: the rubric's
    criteria whose verdict is a support against a threshold (None when it has none: nothing to
    mark). A judge with no stability figures gets a ``no_figures`` check saying so."""
    if not supported:
        return None
    ident = run.identity.model_dump()
    bands, record = bands_for(ident, records)
    if not bands:
        rubric = ident["rubric"]
        return StabilityCheck(status="no_figures", reason=(
            f"no stability figures for this judge ({rubric['id']} v{rubric['version']} {rubric['hash'][:12]}, "
            f"{ident['model']}): verdicts near a threshold are not marked unstable; measure them with "
            "`groundjudge calibrate --report <run>/report.json --labels ... --stability 3`"))
    unstable: list[UnstableVerdict] = []
    checked = {name: 0 for name in supported if name in bands}
    for cfg, section in run.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            for name in checked:
                value = case.criteria.get(name)
                if value is None or value.label is None:
                    continue
                band = bands[name]
                support = support_of(value.confidence, band.cut)
                if support is None:
                    continue
                checked[name] += 1
                if in_band(support, band):
                    unstable.append(UnstableVerdict(case_id=case_id, config_id=cfg, criterion=name,
                                                    label=value.label, support=support, low=band.low, high=band.high))
    missing = [n for n in supported if n not in bands]
    reason = (f"{len(unstable)} of {sum(checked.values())} verdicts inside their criterion's noise band"
              + (f"; no band for {', '.join(missing)}" if missing else ""))
    return StabilityCheck(status="checked", reason=reason, record=record, bands=bands, checked=checked,
                          unstable=unstable)
