"""Disagreement review: why the judge and people disagree, grouped by cause, with examples.

Agreement figures say how often a judge is wrong; a team fixing it needs to know why. Each
disagreement on a criterion decided by its claims (``claim_support`` or ``claim_share``: the
answer is true when every checked claim is supported) lands in exactly one cause, the first
of :data:`CAUSES` whose rule matches, read from what report.json already holds per claim (text,
span, verdict, support, unfound terms, the model's own P(yes)) and from the people's labels
(their hallucination spans where they have them). The judge is *too strict* where it said
false and people said true, *too lenient* the other way round.

Claims that are "flagged" are the checked claims whose verdict is not ``supported``: with the
criterion decided by its claims, a too-strict verdict always has one, a too-lenient never.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from groundjudge.calibrate.verdicts import ItemKey, ItemLabels, lookup
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.claims import split_claims
from groundjudge.judge.results import JudgeRun
from groundjudge.load.records import read_records
from groundjudge.metrics.behavior import BehaviorRules

# The model "leans yes" about a claim at this P(yes): it would have called the claim supported
# on its own, so the unfound terms alone sank it.
LEANS_YES = 0.5
EXAMPLES = 3  # per cause: enough to see the pattern, few enough to read
REVIEWED_SCORES = ("claim_support", "claim_share")  # criteria whose verdict is "every checked claim holds"

STRICT, LENIENT = "too_strict", "too_lenient"

# (key, title, rule), in the order the rules are tried: the first that matches takes the item.
CAUSES: tuple[tuple[str, str, str], ...] = (
    ("no_checkable_claim", "refusal or no checkable claim",
     ("the answer has no checked claim; or what decides the disagreement is a refusal (the refusal "
      "phrases of observed behaviour) or a statement about the passages (\"the passages do not say\"): "
      "too strict, a flagged claim; too lenient, the claim overlapping a human span most, or where "
      "no checked claim overlaps one, the span's own text")),
    ("number_or_name", "number or name not in the passages",
     ("too strict: a flagged claim has an unfound term that is a number (holds a digit) or a name "
      "(capitalised in the claim away from a sentence start, or all capitals)")),
    ("paraphrase_terms", "unfound terms in a paraphrase",
     (f"too strict: every flagged claim has unfound terms, all ordinary words, and the model's P(yes) "
      f"was >= {LEANS_YES} where it was asked: the words alone sank it")),
    ("model_rejected", "the model rejected a claim people accept",
     (f"too strict: a flagged claim whose model P(yes) was < {LEANS_YES} (without probabilities and "
      "without grounding: the model answered no)")),
    ("accepted_unsupported", "an unsupported claim the judge accepted",
     ("too lenient: the answer has checked claims, all supported, and people marked a hallucination; "
      "the example names the checked claim sharing most text with a span (the least supported claim "
      "where there is no span, or no claim offset and no claim containing a span's text)")),
    ("span_not_checked", "hallucination in text the judge never checked",
     ("too lenient: people's spans overlap no checked claim (the claim splitter left that text out, "
      "as it does headings and sentences about the passages)")),
    ("other", "other", "every disagreement no rule above takes"),
)
CAUSE_KEYS = tuple(key for key, _, _ in CAUSES)

_REFUSALS = BehaviorRules()
_SENTENCE_END = set(".!?:;\"'\u201c\u2018(*-\u2022#>")


class HumanSpan(BaseModel):
    """A span people marked as hallucinated: offsets in the answer, its text, its type."""

    model_config = ConfigDict(extra="allow", frozen=True)
    start: int
    end: int
    text: str | None = None
    label_type: str | None = None


class _SpansOnly(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    query_id: str
    config_id: str | None = None
    rater: str
    spans: list[HumanSpan] | None = None


def load_spans(paths: Sequence[Path]) -> dict[str, dict[ItemKey, tuple[HumanSpan, ...]]]:
    """Per rater and item, the hallucination spans the label files carry (the optional field
    ``spans``: objects with integer ``start`` and ``end``); items without spans are left out.
    A malformed span is an input error naming file, line and field (``read_records``)."""
    out: dict[str, dict[ItemKey, tuple[HumanSpan, ...]]] = {}
    for path in paths:
        for _, label in read_records(path, _SpansOnly):
            if label.spans:
                out.setdefault(label.rater, {})[(label.query_id, label.config_id)] = tuple(label.spans)
    return out


def _starts_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` opens a sentence, a line or a list item (so its capital says nothing)."""
    i = at - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] == "\n" or text[i] in _SENTENCE_END


def numbers_and_names(claim: str, unfound: Sequence[str]) -> list[str]:
    """The unfound terms that are numbers or names: a term holding a digit, or one the claim
    writes capitalised away from a sentence start, or in capitals (two letters or more).
    Terms are matched on the claim as word prefixes, case-insensitively (they are folded).

    >>> numbers_and_names("Fees rose 12% at Acme. Staff were told by HMRC.", ["fees", "12", "acme", "told", "hmrc"])
    ['12', 'acme', 'hmrc']
    """
    text = unicodedata.normalize("NFKC", claim).replace("\u2019", "'")
    out = []
    for term in unfound:
        if any(ch.isdigit() for ch in term):
            out.append(term)
            continue
        for m in re.finditer(r"(?<![^\W_])" + re.escape(term) + r"[^\W_]*", text, re.IGNORECASE):
            word = m.group(0)
            letters = [ch for ch in word if ch.isalpha()]
            acronym = len(letters) >= 2 and all(ch.isupper() for ch in letters)
            if acronym or (word[:1].isupper() and not _starts_sentence(text, m.start())):
                out.append(term)
                break
    return out


def _model_p(claim: ClaimResult) -> float | None:
    """The model's own P(yes): ``model_confidence`` where grounding lowered it, else the
    support itself (no grounding); None where the model was not asked or gave no probability."""
    return claim.model_confidence if claim.unfound_terms is not None else claim.confidence


def _is_refusal(text: str) -> bool:
    """A refusal by the refusal phrases of observed behaviour, or a statement about the
    passages themselves that the claim splitter leaves unchecked ("The passages do not say")."""
    return _REFUSALS.detect(text) != "answer" or any(s.rule == "meta_refusal" for s in split_claims(text))


def _overlap(claim: ClaimResult, span: HumanSpan) -> int:
    """Characters the claim and the span share: by offsets where the claim has them, else
    (a judge that restates its claims) the shorter text where one contains the other."""
    if claim.start is None or claim.end is None:
        a, b = claim.claim.casefold(), (span.text or "").casefold()
        return min(len(a), len(b)) if a and b and (a in b or b in a) else 0
    return max(0, min(claim.end, span.end) - max(claim.start, span.start))


@dataclass(frozen=True)
class Classified:
    """One disagreement's cause, and the claim and human span that show it (None where none does)."""

    cause: str
    claim: ClaimResult | None = None
    span: HumanSpan | None = None


def classify(direction: str, claims: Sequence[ClaimResult], spans: Sequence[HumanSpan]) -> Classified:
    """The cause of one disagreement (the first rule of :data:`CAUSES` that matches) and the
    claim and human span that show it."""
    checked = [c for c in claims if c.verdict != "unchecked"]
    if not checked:
        return Classified("no_checkable_claim")
    if direction == STRICT:
        flagged = [c for c in checked if c.verdict != "supported"]
        refusal = next((c for c in flagged if _is_refusal(c.claim)), None)
        if refusal is not None:
            return Classified("no_checkable_claim", refusal)
        named = next((c for c in flagged if numbers_and_names(c.claim, c.unfound_terms or [])), None)
        if named is not None:
            return Classified("number_or_name", named)
        if flagged and all(c.unfound_terms and ((p := _model_p(c)) is None or p >= LEANS_YES) for c in flagged):
            return Classified("paraphrase_terms", min(flagged, key=lambda c: c.confidence or 0.0))
        rejected = [c for c in flagged if ((p := _model_p(c)) is not None and p < LEANS_YES)
                    or (p is None and c.confidence is None and c.unfound_terms is None)]
        if rejected:
            return Classified("model_rejected", min(rejected, key=lambda c: _model_p(c) or 0.0))
        return Classified("other", min(flagged, key=lambda c: c.confidence or 0.0) if flagged else None)
    # too lenient: people marked a hallucination in an answer whose checked claims all hold
    hits = sorted(((_overlap(c, s), -i, c, s) for s in spans for i, c in enumerate(checked)), key=lambda t: t[:2])
    if hits and hits[-1][0] > 0:  # the claim that shares most text with a span
        _, _, overlapping, span = hits[-1]
        cause = "no_checkable_claim" if _is_refusal(overlapping.claim) else "accepted_unsupported"
        return Classified(cause, overlapping, span)
    if not spans or all(c.start is None for c in checked):
        # no span to place (or no offsets to place it by): the least supported claim is the best
        # guess at what slipped
        return Classified("accepted_unsupported", min(checked, key=lambda c: c.confidence or 0.0))
    said_nothing = next((s for s in spans if s.text and _is_refusal(s.text)), None)
    if said_nothing is not None:  # a false "the passages do not say": the splitter never makes it a claim
        return Classified("no_checkable_claim", None, said_nothing)
    return Classified("span_not_checked", None, spans[0])


def _example(item: str, key: ItemKey, direction: str, found: Classified) -> dict[str, Any]:
    claim = found.claim
    return {
        "item": item, "case_id": key[0], "config_id": key[1], "direction": direction,
        "claim": claim.claim if claim else None,
        "unfound_terms": list(claim.unfound_terms) if claim and claim.unfound_terms is not None else None,
        "numbers_or_names": numbers_and_names(claim.claim, claim.unfound_terms or []) if claim else [],
        "support": claim.confidence if claim else None,
        "p_yes": _model_p(claim) if claim else None,
        "human_span": found.span.text if found.span else None,
        "human_span_type": found.span.label_type if found.span else None,
    }


def review_criterion(judge: JudgeRun, human: dict[ItemKey, ItemLabels],
                     spans: Mapping[ItemKey, Sequence[HumanSpan]], criterion: str, *,
                     examples: int = EXAMPLES) -> dict[str, Any]:
    """Every disagreement of ``criterion`` (binary, decided by its claims) between the judge
    and one rater, in exactly one cause: counts per cause and direction, the items of each
    cause, a few examples each; and, for the two term-based causes, how often people agreed
    with the judge where the rule's signal flagged an answer (``flag_agreement``)."""
    counts = {key: {STRICT: 0, LENIENT: 0} for key in CAUSE_KEYS}
    items: dict[str, list[str]] = {key: [] for key in CAUSE_KEYS}
    shown: dict[str, list[dict[str, Any]]] = {key: [] for key in CAUSE_KEYS}
    flag_agreement = {key: {"judge_false": 0, "human_false": 0, "human_true": 0}
                      for key in ("number_or_name", "paraphrase_terms")}
    for config_id, section in sorted(judge.per_config.items()):
        for case_id, case in sorted(section.cases.items()):
            if case.status != "judged":
                continue
            key: ItemKey = (case_id, config_id)
            other = lookup(human, key)
            said, truth = case.label(criterion), other.labels.get(criterion) if other else None
            if said is None or truth is None:
                continue
            item_spans = spans.get(key) or spans.get((case_id, None)) or ()
            if said is False:  # the same rules on every answer the judge failed: did people agree?
                cause = classify(STRICT, case.claims, ()).cause
                if cause in flag_agreement:
                    tally = flag_agreement[cause]
                    tally["judge_false"] += 1
                    tally["human_false" if truth is False else "human_true"] += 1
            if said == truth:
                continue
            direction = STRICT if said is False else LENIENT
            found = classify(direction, case.claims, item_spans)
            item = f"{config_id}/{case_id}"
            counts[found.cause][direction] += 1
            items[found.cause].append(item)
            if len(shown[found.cause]) < examples:
                shown[found.cause].append(_example(item, key, direction, found))
    total = sum(sum(c.values()) for c in counts.values())
    return {
        "disagreements": total,
        "order": list(CAUSE_KEYS),
        "leans_yes": LEANS_YES,
        "causes": {key: {"title": title, "rule": rule, "n": counts[key][STRICT] + counts[key][LENIENT],
                         STRICT: counts[key][STRICT], LENIENT: counts[key][LENIENT],
                         "items": items[key], "examples": shown[key]}
                   for key, title, rule in CAUSES},
        "flag_agreement": flag_agreement,
    }


def review(judge: JudgeRun, human: dict[ItemKey, ItemLabels], spans: Mapping[ItemKey, Sequence[HumanSpan]],
           criteria: Sequence[str]) -> dict[str, dict[str, Any]]:
    """:func:`review_criterion` for each criterion named (binary, decided by its claims)."""
    binary = {c.name for c in judge.criteria if c.kind == "binary"}
    return {name: review_criterion(judge, human, spans, name) for name in criteria if name in binary}
