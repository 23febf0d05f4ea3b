"""Selective trust in a run: which verdicts are trusted, which go on, and who decides each item.

For each criterion (binary or ordinal) whose calibration record (for exactly this rubric, model
and decoding) holds a guaranteed cut-off lambda, every judged item with a verdict is decided by,
in order:

1. ``trusted``: the first judge, when its verdict confidence is at or above its lambda;
2. ``human``: a human label from ``[inputs] labels`` (an abstained item people already labelled
   is not sent on);
3. ``escalated``: the escalation judge, when its own record holds a lambda for the criterion and
   its verdict confidence reaches it;
4. ``queued``: nobody yet; the item waits for a person (the human queue), with the reason: each
   judge that abstained, its verdict, its confidence and its lambda.

A verdict inside its criterion's noise band (``calibrate/stability.py``) is never ``trusted``: it goes
on as one below lambda would, with that reason.

A criterion without such a record keeps today's all-or-nothing rule (``calibrate/trust.py``);
``SelectiveTrust.all_or_nothing`` says which and why. An ordinal verdict's confidence and
agreement are those of the exact grade (``calibrate/selective.py``); its rate is the mean grade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.evidence import deciding_record
from groundjudge.calibrate.ppi import ppi_mean
from groundjudge.calibrate.record import identity_hash
from groundjudge.calibrate.selective import verdict_confidence
from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, lookup
from groundjudge.judge.results import CriterionValue, JudgeRun, Label

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
    label: Label | None  # the label that decides the item (None while queued)
    confidence: float | None  # the deciding judge's verdict confidence (None for people and the queue)
    first_label: Label | None  # what the first judge said
    first_confidence: float | None


class CriterionCascade(_Frozen):
    """One criterion in one config: who decided how many items, and the rate they give."""

    criterion: str
    kind: Literal["binary", "ordinal"] = "binary"
    items: int  # judged items with a verdict for this criterion
    counts: dict[str, int]  # source -> items
    decided: int
    coverage: float | None  # decided / items
    rate: float | None  # share of decided items labelled True (ordinal: their mean grade)
    guaranteed: float | None  # agreement with people the decided items are held to (see expected_agreement)
    guarantee_risk: float | None  # the chance that guarantee fails: the sum of the judges' risks
    ppi: dict[str, Any] | None  # the rate bias-corrected by the human labels on judge-decided items
    decisions: list[ItemDecision]


class Abstention(_Frozen):
    """One judge that did not settle a queued item's criterion, and why."""

    judge: str  # model id
    role: Literal["first", "escalation"]
    label: Label | None  # its verdict (None: it gave none)
    confidence: float | None  # its verdict confidence
    cutoff: float | None  # its lambda (None: it keeps nothing, or it has no record)
    reason: str


class QueueReason(_Frozen):
    criterion: str
    abstained: list[Abstention]


class QueueItem(_Frozen):
    case_id: str
    config_id: str
    criteria: list[str]
    reasons: list[QueueReason] = []


class SelectiveTrust(_Frozen):
    first: dict[str, Cutoff]  # criterion -> the first judge's cut-off
    escalation: dict[str, Cutoff]  # criterion -> the escalation judge's cut-off (empty without one)
    escalation_model: str | None
    per_config: dict[str, dict[str, CriterionCascade]]
    queue: list[QueueItem]
    all_or_nothing: dict[str, str] = {}  # criterion without a cut-off -> why it keeps today's rule


def cutoffs_for(identity: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, Cutoff]:
    """The guaranteed cut-offs for exactly this judge identity, each from the record that decides
    its criterion (the one with the most evidence, as for trust); {} when there is none: a stale
    record never lends its cut-off to another rubric, model or decoding."""
    key = identity_hash({"rubric": identity["rubric"], "model": identity["model"], "decoding": identity["decoding"]})
    exact = [r for r in records if r.get("identity_hash") == key]
    out = {}
    for name in sorted({c for r in exact for c in r.get("criteria", {})}):
        record = deciding_record(name, exact)
        block = record.get("criteria", {}).get(name, {}).get("selective") if record is not None else None
        if not block or record is None:
            continue
        fit = block["cutoff"]
        out[name] = Cutoff(judge=identity["model"], cutoff=fit["cutoff"], target_agreement=fit["target_agreement"],
                           risk=fit["risk"], coverage=fit["coverage"], bound=fit["bound"], n=fit["n"],
                           reason=fit["reason"], record=record.get("_path"))
    return out


def _keeps(cut: Cutoff | None, label: Any, confidence: float | None, kind: str) -> float | None:
    """The verdict confidence when ``cut`` keeps the verdict, else None."""
    if cut is None or cut.cutoff is None or label is None:
        return None
    conf = verdict_confidence(label, confidence, kind)
    return conf if conf is not None and conf >= cut.cutoff else None


def _typed(value: Any, kind: str) -> Label:
    return int(value) if kind == "ordinal" else bool(value)


def _human(humans: dict[ItemKey, ItemLabels] | None, key: ItemKey, criterion: str, kind: str) -> Label | None:
    item = lookup(humans, key) if humans else None
    value = item.labels.get(criterion) if item else None
    return None if value is None else _typed(value, kind)


def _kind(run: JudgeRun, name: str) -> str:
    info = run.criterion(name)
    return info.kind if info is not None else "binary"


def to_escalate(first: JudgeRun, cutoffs: dict[str, Cutoff], humans: dict[ItemKey, ItemLabels] | None,
                *, unstable: Mapping[tuple[str, str, str], str] | None = None) -> set[ItemKey]:
    """Judged items with a criterion the first judge abstains on and no person has labelled
    (``unstable``: (case, config, criterion) of verdicts inside their noise band, never kept)."""
    unstable = unstable or {}
    out: set[ItemKey] = set()
    for cfg, section in first.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            for name, cut in cutoffs.items():
                kind = _kind(first, name)
                value = case.criteria.get(name)
                if value is None or value.label is None:
                    continue
                kept = None if (case_id, cfg, name) in unstable else _keeps(cut, value.label, value.confidence, kind)
                if kept is None and _human(humans, (case_id, cfg), name, kind) is None:
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


def _abstention(judge: str, role: Literal["first", "escalation"], value: CriterionValue | None, why_none: str,
                cut: Cutoff | None, kind: str, unstable: str | None = None) -> Abstention:
    """Why ``judge`` did not settle the item: no verdict, no cut-off, or confidence below it."""
    label = None if value is None or value.label is None else _typed(value.label, kind)
    conf = verdict_confidence(label, value.confidence, kind) if value is not None else None
    lam = cut.cutoff if cut is not None else None
    if label is None:
        reason = why_none
    elif cut is None:
        reason = "no calibration record with a cut-off for this criterion: its verdicts are never trusted"
    elif lam is None:
        reason = "its record keeps nothing (no lambda reaches the target)"
    elif unstable is not None:
        reason = unstable
    elif conf is None:
        reason = f"its verdict carries no confidence (lambda {lam:g})"
    else:
        reason = f"verdict confidence {conf:.3f} < lambda {lam:g}"
    return Abstention(judge=judge, role=role, label=label, confidence=conf, cutoff=lam, reason=reason)


def decide(first: JudgeRun, cutoffs: dict[str, Cutoff], *, escalation: JudgeRun | None = None,
           escalation_cutoffs: dict[str, Cutoff] | None = None,
           humans: dict[ItemKey, ItemLabels] | None = None,
           unstable: Mapping[tuple[str, str, str], str] | None = None,
           escalation_unstable: Mapping[tuple[str, str, str], str] | None = None) -> SelectiveTrust:
    """Who decides each judged item of each criterion with a cut-off (see the module doc).
    ``unstable``: (case, config, criterion) -> why the first judge's verdict lies inside its noise
    band (``calibrate.stability``); such a verdict is never trusted, whatever its confidence.
    ``escalation_unstable``: the same for the escalation judge's verdicts (its own bands)."""
    escalation_cutoffs = escalation_cutoffs or {}
    unstable = unstable or {}
    escalation_unstable = escalation_unstable or {}
    per_config: dict[str, dict[str, CriterionCascade]] = {}
    queued: dict[ItemKey, list[QueueReason]] = {}
    for cfg, section in first.per_config.items():
        per_config[cfg] = {}
        for name, cut in cutoffs.items():
            kind = _kind(first, name)
            decisions: list[ItemDecision] = []
            for case_id, case in section.cases.items():
                value = case.criteria.get(name) if case.status == "judged" else None
                if value is None or value.label is None:
                    continue
                key = (case_id, cfg)
                said = _typed(value.label, kind)
                common: dict[str, Any] = {"case_id": case_id, "config_id": cfg, "first_label": said,
                                          "first_confidence": verdict_confidence(said, value.confidence, kind)}
                shaky = unstable.get((case_id, cfg, name))
                kept = None if shaky is not None else _keeps(cut, said, value.confidence, kind)
                human = _human(humans, key, name, kind)
                later = escalation.case(cfg, case_id) if escalation is not None else None
                later_value = later.criteria.get(name) if later is not None and later.status == "judged" else None
                later_shaky = escalation_unstable.get((case_id, cfg, name))
                later_kept = (_keeps(escalation_cutoffs.get(name), later_value.label, later_value.confidence, kind)
                              if later_value is not None and later_shaky is None else None)
                if kept is not None:
                    decisions.append(ItemDecision(**common, source="trusted", label=said, confidence=kept))
                elif human is not None:
                    decisions.append(ItemDecision(**common, source="human", label=human, confidence=None))
                elif later_kept is not None and later_value is not None:
                    decisions.append(ItemDecision(**common, source="escalated", label=_typed(later_value.label, kind),
                                                  confidence=later_kept))
                else:
                    decisions.append(ItemDecision(**common, source="queued", label=None, confidence=None))
                    abstained = [_abstention(first.identity.model, "first", value, "no verdict", cut, kind, shaky)]
                    if escalation is not None:
                        why = ("not judged: " + (later.reason or later.status)) if later is not None and \
                            later.status != "judged" else "no verdict for this criterion" if later is not None \
                            else "not sent to it"
                        abstained.append(_abstention(escalation.identity.model, "escalation", later_value, why,
                                                     escalation_cutoffs.get(name), kind, later_shaky))
                    queued.setdefault(key, []).append(QueueReason(criterion=name, abstained=abstained))
            per_config[cfg][name] = _summarise(name, kind, decisions, cut, escalation_cutoffs.get(name), humans)
    queue = [QueueItem(case_id=k[0], config_id=k[1] or "", criteria=[r.criterion for r in v], reasons=v)
             for k, v in sorted(queued.items(), key=lambda kv: (kv[0][1] or "", kv[0][0]))]
    kept_rule = {c.name: "no confidence per verdict in the calibration record (the judge gives none for it, or the "
                         "record predates it): the all-or-nothing kappa rule applies"
                 for c in first.criteria if c.name not in cutoffs}
    return SelectiveTrust(first=cutoffs, escalation=escalation_cutoffs,
                          escalation_model=escalation.identity.model if escalation is not None else None,
                          per_config=per_config, queue=queue, all_or_nothing=kept_rule)


def _summarise(name: str, kind: str, decisions: list[ItemDecision], first: Cutoff, escalation: Cutoff | None,
               humans: dict[ItemKey, ItemLabels] | None) -> CriterionCascade:
    counts: dict[str, int] = {s: sum(1 for d in decisions if d.source == s) for s in SOURCES}
    decided = [d for d in decisions if d.source != "queued"]
    labels = [float(d.label) for d in decided if d.label is not None]
    by_judge = [d for d in decided if d.source in ("trusted", "escalated")]
    pairs = [(float(d.label), float(h)) for d in by_judge if d.label is not None
             and (h := _human(humans, (d.case_id, d.config_id), name, kind)) is not None]
    ppi = ppi_mean(labels, [p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
    # the guarantee fails if either judge's cut-off does (a union bound over the two records)
    risk = ((first.risk if counts["trusted"] else 0.0)
            + (escalation.risk if escalation is not None and counts["escalated"] else 0.0))
    return CriterionCascade(
        criterion=name, kind="ordinal" if kind == "ordinal" else "binary", items=len(decisions), counts=counts,
        decided=len(decided), coverage=len(decided) / len(decisions) if decisions else None,
        rate=sum(labels) / len(labels) if labels else None,
        guaranteed=expected_agreement(counts, first, escalation), guarantee_risk=risk if decided else None,
        ppi=ppi, decisions=decisions)
