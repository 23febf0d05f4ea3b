"""Selective trust in a run: which verdicts are trusted, which go on, and who decides each item.

For each binary criterion whose calibration record (for exactly this rubric, model and decoding)
holds a guaranteed cut-off lambda, every judged item with a verdict is decided by, in order:

1. ``trusted``: the first judge, when its verdict confidence is at or above its lambda;
2. ``human``: a human label from ``[inputs] labels`` (an abstained item people already labelled
   is not sent on);
3. ``escalated``: the escalation judge, when its own record holds a lambda for the criterion and
   its verdict confidence reaches it;
4. ``queued``: nobody yet; the item waits for a person (the human queue).

A criterion without such a record keeps today's all-or-nothing rule (``calibrate/trust.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.ppi import ppi_mean
from groundjudge.calibrate.record import identity_hash
from groundjudge.calibrate.selective import verdict_confidence
from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, lookup
from groundjudge.judge.results import JudgeRun

Source = Literal["trusted", "escalated", "human", "queued"]
SOURCES: tuple[Source, ...] = ("trusted", "escalated", "human", "queued")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cutoff(_Frozen):
    """A judge's guaranteed cut-off for one criterion, as its calibration record states it."""

    judge: str  # model id
    cutoff: float | None  # None: the judge keeps nothing
    target_agreement: float
    risk: float
    coverage: float | None  # on the calibration items
    bound: float | None
    n: int
    reason: str
    record: str | None


class ItemDecision(_Frozen):
    case_id: str
    config_id: str
    source: Source
    label: bool | None  # the label that decides the item (None while queued)
    confidence: float | None  # the deciding judge's verdict confidence (None for people and the queue)
    first_label: bool | None  # what the first judge said
    first_confidence: float | None


class CriterionCascade(_Frozen):
    """One criterion in one config: who decided how many items, and the rate they give."""

    criterion: str
    items: int  # judged items with a verdict for this criterion
    counts: dict[str, int]  # source -> items
    decided: int
    coverage: float | None  # decided / items
    rate: float | None  # share of decided items labelled True
    guaranteed: float | None  # agreement with people the decided items are held to (see expected_agreement)
    guarantee_risk: float | None  # the chance that guarantee fails: the sum of the judges' risks
    ppi: dict[str, Any] | None  # the rate bias-corrected by the human labels on judge-decided items
    decisions: list[ItemDecision]


class QueueItem(_Frozen):
    case_id: str
    config_id: str
    criteria: list[str]


class SelectiveTrust(_Frozen):
    first: dict[str, Cutoff]  # criterion -> the first judge's cut-off
    escalation: dict[str, Cutoff]  # criterion -> the escalation judge's cut-off (empty without one)
    escalation_model: str | None
    per_config: dict[str, dict[str, CriterionCascade]]
    queue: list[QueueItem]


def cutoffs_for(identity: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, Cutoff]:
    """The guaranteed cut-offs in the newest record for exactly this judge identity ({} when
    there is none: a stale record never lends its cut-off to another rubric, model or decoding)."""
    key = identity_hash({"rubric": identity["rubric"], "model": identity["model"], "decoding": identity["decoding"]})
    exact = [r for r in records if r.get("identity_hash") == key]
    if not exact:
        return {}
    record = max(exact, key=lambda r: r.get("created", ""))
    out = {}
    for name, stats in record.get("criteria", {}).items():
        block = stats.get("selective")
        if not block:
            continue
        fit = block["cutoff"]
        out[name] = Cutoff(judge=identity["model"], cutoff=fit["cutoff"], target_agreement=fit["target_agreement"],
                           risk=fit["risk"], coverage=fit["coverage"], bound=fit["bound"], n=fit["n"],
                           reason=fit["reason"], record=record.get("_path"))
    return out


def _keeps(cut: Cutoff | None, label: Any, confidence: float | None) -> float | None:
    """The verdict confidence when ``cut`` keeps the verdict, else None."""
    if cut is None or cut.cutoff is None or label is None:
        return None
    conf = verdict_confidence(bool(label), confidence)
    return conf if conf is not None and conf >= cut.cutoff else None


def _human(humans: dict[ItemKey, ItemLabels] | None, key: ItemKey, criterion: str) -> bool | None:
    item = lookup(humans, key) if humans else None
    value = item.labels.get(criterion) if item else None
    return None if value is None else bool(value)


def to_escalate(first: JudgeRun, cutoffs: dict[str, Cutoff], humans: dict[ItemKey, ItemLabels] | None,
                ) -> set[ItemKey]:
    """Judged items with a criterion the first judge abstains on and no person has labelled."""
    out: set[ItemKey] = set()
    for cfg, section in first.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            for name, cut in cutoffs.items():
                value = case.criteria.get(name)
                if value is None or value.label is None:
                    continue
                if _keeps(cut, value.label, value.confidence) is None and _human(humans, (case_id, cfg), name) is None:
                    out.add((case_id, cfg))
    return out


def expected_agreement(counts: dict[str, int], first: Cutoff, escalation: Cutoff | None) -> float | None:
    """The agreement with people that the decided items are held to: each judge's target on the
    verdicts it kept, 1 on human labels (they are the reference)."""
    decided = counts["trusted"] + counts["escalated"] + counts["human"]
    if not decided:
        return None
    level = counts["trusted"] * first.target_agreement + counts["human"]
    if counts["escalated"]:
        assert escalation is not None
        level += counts["escalated"] * escalation.target_agreement
    return level / decided


def decide(first: JudgeRun, cutoffs: dict[str, Cutoff], *, escalation: JudgeRun | None = None,
           escalation_cutoffs: dict[str, Cutoff] | None = None,
           humans: dict[ItemKey, ItemLabels] | None = None) -> SelectiveTrust:
    """Who decides each judged item of each criterion with a cut-off (see the module doc)."""
    escalation_cutoffs = escalation_cutoffs or {}
    per_config: dict[str, dict[str, CriterionCascade]] = {}
    queued: dict[ItemKey, list[str]] = {}
    for cfg, section in first.per_config.items():
        per_config[cfg] = {}
        for name, cut in cutoffs.items():
            decisions: list[ItemDecision] = []
            for case_id, case in section.cases.items():
                value = case.criteria.get(name) if case.status == "judged" else None
                if value is None or value.label is None:
                    continue
                key = (case_id, cfg)
                common = dict(case_id=case_id, config_id=cfg, first_label=bool(value.label),
                              first_confidence=verdict_confidence(bool(value.label), value.confidence))
                kept = _keeps(cut, value.label, value.confidence)
                human = _human(humans, key, name)
                later = escalation.case(cfg, case_id) if escalation is not None else None
                later_value = later.criteria.get(name) if later is not None and later.status == "judged" else None
                later_kept = (_keeps(escalation_cutoffs.get(name), later_value.label, later_value.confidence)
                              if later_value is not None else None)
                if kept is not None:
                    decisions.append(ItemDecision(**common, source="trusted", label=bool(value.label), confidence=kept))
                elif human is not None:
                    decisions.append(ItemDecision(**common, source="human", label=human, confidence=None))
                elif later_kept is not None:
                    decisions.append(ItemDecision(**common, source="escalated", label=bool(later_value.label),
                                                  confidence=later_kept))
                else:
                    decisions.append(ItemDecision(**common, source="queued", label=None, confidence=None))
                    queued.setdefault(key, []).append(name)
            per_config[cfg][name] = _summarise(name, decisions, cut, escalation_cutoffs.get(name), humans)
    queue = [QueueItem(case_id=k[0], config_id=k[1] or "", criteria=v)
             for k, v in sorted(queued.items(), key=lambda kv: (kv[0][1] or "", kv[0][0]))]
    return SelectiveTrust(first=cutoffs, escalation=escalation_cutoffs,
                          escalation_model=escalation.identity.model if escalation is not None else None,
                          per_config=per_config, queue=queue)


def _summarise(name: str, decisions: list[ItemDecision], first: Cutoff, escalation: Cutoff | None,
               humans: dict[ItemKey, ItemLabels] | None) -> CriterionCascade:
    counts = {s: sum(1 for d in decisions if d.source == s) for s in SOURCES}
    decided = [d for d in decisions if d.source != "queued"]
    labels = [float(bool(d.label)) for d in decided]
    by_judge = [d for d in decided if d.source in ("trusted", "escalated")]
    pairs = [(float(bool(d.label)), float(h)) for d in by_judge
             if (h := _human(humans, (d.case_id, d.config_id), name)) is not None]
    ppi = ppi_mean(labels, [p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
    # the guarantee fails if either judge's cut-off does (a union bound over the two records)
    risk = ((first.risk if counts["trusted"] else 0.0)
            + (escalation.risk if escalation is not None and counts["escalated"] else 0.0))
    return CriterionCascade(
        criterion=name, items=len(decisions), counts=counts, decided=len(decided),
        coverage=len(decided) / len(decisions) if decisions else None,
        rate=sum(labels) / len(labels) if labels else None,
        guaranteed=expected_agreement(counts, first, escalation), guarantee_risk=risk if decided else None,
        ppi=ppi, decisions=decisions)
