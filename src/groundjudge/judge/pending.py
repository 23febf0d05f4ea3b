"""One item while the engine judges it, whatever the protocol, and how its result is frozen.

Both protocols (:mod:`.one_call_json`, :mod:`.claim_questions`) fill a :class:`Pending` and
the engine (:mod:`.engine`) turns it into a :class:`~groundjudge.judge.results.CaseJudgement`
once the item is settled: judged, ``judge_error`` with a reason, or ``skipped``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.results import NO_USAGE, CaseJudgement, CriterionValue, NuggetResult, Status, Usage

__all__ = ["NO_USAGE", "NotSent", "Pending", "shared_values"]


@dataclass(slots=True)
class Pending:
    """One item while it is being judged (mutable); :meth:`result` freezes it. Slotted: a
    nightly run holds one per item until the last is judged."""

    item: JudgeItem
    status: Status = "judge_error"
    reason: str | None = None
    source: Literal["cache", "call"] | None = None
    criteria: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimResult] = field(default_factory=list)
    nuggets: list[NuggetResult] = field(default_factory=list)
    judge_reason: str | None = None
    raw: str | None = None
    cache_key: str | None = None
    usage: Usage = field(default=NO_USAGE)  # frozen: one shared zero for the (many) items that cost nothing
    seconds: float = 0.0

    def result(self, selected_because: str | None = None) -> CaseJudgement:
        """The frozen result; its values were made and checked by the protocol that filled it,
        and the result checks what ties them together (``CaseJudgement``)."""
        judged = self.status == "judged"
        return CaseJudgement(
            case_id=self.item.case_id, config_id=self.item.config_id, status=self.status,
            reason=None if judged else self.reason, selected_because=selected_because, source=self.source,
            criteria=self.criteria if judged else {}, claims=tuple(self.claims) if judged else (),
            nuggets=tuple(self.nuggets) if judged else (), judge_reason=self.judge_reason if judged else None,
            usage=self.usage,
            # an item that took no time (a cache hit) holds the one 0.0, not a float of its own
            seconds=round(self.seconds, 3) if self.seconds else 0.0, cache_key=self.cache_key, raw=self.raw)

    @staticmethod
    def results(pending: Sequence[Pending], selected_because: Sequence[str | None]) -> list[CaseJudgement]:
        """:meth:`result` of each."""
        return [p.result(because) for p, because in zip(pending, selected_because, strict=True)]


class NotSent(Exception):
    """A question that was not sent: the run stopped, or the budget ran out."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def shared_values(values: dict[str, CriterionValue]) -> dict[str, CriterionValue]:
    """The same (frozen) criterion value object for equal values (``CriterionValue.held``): a
    nightly run holds hundreds of thousands of verdicts, and their criterion values come from
    a handful of shares."""
    return {name: value.held() for name, value in values.items()}
