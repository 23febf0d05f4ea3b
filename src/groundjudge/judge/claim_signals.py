"""What a judged claim says about itself: the signals an aligned rubric combines into support.

Every signal comes from what a claim_check judgement records per claim (its text, unfound
terms, the model's P(yes) or that the model was not asked, its citations), so the same
function serves when a rubric is fitted from a report (``groundjudge align``) and when the
fitted rubric scores a case at run time: the two can never compute a signal differently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.grounding import terms

# The order of the feature vector; an aligned rubric names its weights by these.
FEATURES = ("asked", "p_yes_logit", "unfound", "unfound_numbers", "unfound_names", "found_share", "length", "cited")
# The sign each feature's weight may take (+1: never lowers support, -1: never raises it, 0: free).
SIGNS = {"asked": 0, "p_yes_logit": 1, "unfound": -1, "unfound_numbers": -1, "unfound_names": -1,
         "found_share": 1, "length": 0, "cited": 0}
_P_CLIP = 1e-4  # P(yes) of exactly 0 or 1 would make the logit infinite
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*(?:[-*\u2022]|\d+[.)])?\s*)$")


@dataclass(frozen=True)
class ClaimSignals:
    p_yes: float | None  # the model's own P(yes); None: the model was not asked
    unfound: int  # terms the passages never mention
    unfound_numbers: int  # of those, numbers
    unfound_names: int  # of those, names (capitalised in the claim, not only where a sentence starts)
    found_share: float  # share of the claim's distinct terms the passages mention
    length: int  # the claim's terms
    cited: bool

    def features(self) -> list[float]:
        """The feature vector, in the order of ``FEATURES``."""
        asked = self.p_yes is not None
        logit = 0.0
        if self.p_yes is not None:
            p = min(1 - _P_CLIP, max(_P_CLIP, self.p_yes))
            logit = math.log(p / (1 - p))
        return [float(asked), logit, float(self.unfound), float(self.unfound_numbers), float(self.unfound_names),
                self.found_share, math.log1p(self.length), float(self.cited)]


def is_name(term: str, text: str) -> bool:
    """Whether ``term`` (lower case, as ``terms`` gives it) is written capitalised somewhere in
    ``text`` other than where a sentence or list item starts."""
    for match in re.finditer(re.escape(term), text, flags=re.IGNORECASE):
        first = text[match.start()]
        if first.isupper() and not _SENTENCE_START.search(text[: match.start()]):
            return True
    return False


def claim_signals(claim: ClaimResult) -> ClaimSignals:
    """The signals of one judged claim. Needs the rubric's grounding (``unfound_terms``): a
    claim judged without it has none of the term signals, so it raises ``ValueError``."""
    if claim.unfound_terms is None:
        raise ValueError("the claim carries no unfound terms: its rubric has no grounding")
    unfound = claim.unfound_terms
    distinct = set(terms(claim.claim))
    found = len(distinct - set(unfound))
    return ClaimSignals(
        p_yes=claim.model_confidence,
        unfound=len(unfound),
        unfound_numbers=sum(1 for t in unfound if t[:1].isdigit()),
        unfound_names=sum(1 for t in unfound if not t[:1].isdigit() and is_name(t, claim.claim)),
        found_share=found / len(distinct) if distinct else 1.0,
        length=len(distinct),
        cited=bool(claim.cited),
    )
