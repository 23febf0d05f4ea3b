"""Observed behaviour (answer / abstain / permission_denied / escalate) and refusal metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from groundjudge.contracts import Behavior, GoldenCase, Trace
from groundjudge.metrics.text import normalize, strip_accents

# Phrases are matched on normalised text with diacritics removed, so each Vietnamese phrase
# also matches its unaccented spelling.
DEFAULT_PHRASES: dict[str, dict[str, list[str]]] = {
    "abstain": {
        "en": ["i don't know", "i do not know", "not in context", "no information", "cannot find",
               "can't find", "could not find", "couldn't find", "not mentioned in", "not covered by",
               "unable to answer", "no relevant information", "does not contain information",
               "do not contain information", "don't contain information", "not enough information"],
        "vi": ["không tìm thấy thông tin", "không có thông tin", "tôi không biết", "không đủ thông tin",
               "không thể trả lời", "tài liệu không đề cập"],
    },
    "permission_denied": {
        "en": ["do not have permission", "don't have permission", "not authorized", "not authorised",
               "access denied", "not allowed to access", "restricted document", "you lack access"],
        "vi": ["không có quyền", "không được phép truy cập", "từ chối truy cập"],
    },
    "escalate": {
        "en": ["escalate this", "escalating this", "escalating your", "i will escalate", "forwarded to a human", "hand this over to", "human agent will"],
        "vi": ["chuyển cho nhân viên", "liên hệ bộ phận hỗ trợ", "chuyển tiếp"],
    },
}


@dataclass(frozen=True)
class BehaviorRules:
    """How refusals are recognised: per-behaviour phrases per locale, and an exact refusal token."""

    phrases: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=lambda: DEFAULT_PHRASES)
    refusal_token: str | None = None

    def detect(self, answer: str | None) -> Behavior:
        """Classify an answer's text. An empty or missing answer counts as an abstention."""
        if answer is None or not answer.strip():
            return "abstain"
        if self.refusal_token is not None and answer.strip() == self.refusal_token:
            return "abstain"
        folded = strip_accents(normalize(answer))
        for behavior, phrases in self._folded:
            if any(map(folded.__contains__, phrases)):  # map: no Python frame per phrase
                return behavior  # type: ignore[return-value]
        return "answer"

    @cached_property
    def _folded(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Each behaviour's phrases of every locale, folded once per rules, not once per answer.
        Permission refusals are checked first: they often also say "cannot find"."""
        return tuple((behavior, tuple(_fold(p) for phrases in self.phrases.get(behavior, {}).values()
                                      for p in phrases))
                     for behavior in ("permission_denied", "abstain", "escalate"))


@lru_cache(maxsize=4096)
def _fold(phrase: str) -> str:
    """A phrase as answers are compared: folded once, not once per answer."""
    return strip_accents(normalize(phrase))


def observed_behavior(trace: Trace, rules: BehaviorRules) -> Behavior:
    """The trace's own ``behavior`` field wins; otherwise the answer text decides."""
    return trace.behavior if trace.behavior is not None else rules.detect(trace.answer)


def behavior_metrics(case: GoldenCase, observed: Behavior) -> dict[str, float | None]:
    expected = case.expected_behavior
    should_answer = expected == "answer"
    answered = observed == "answer"
    return {
        "behavior_correct": float(observed == expected),
        # Under-refusal: answered although it should have refused (defined on should-refuse cases).
        "under_refusal": None if should_answer else float(answered),
        # Over-refusal: refused although it should have answered (defined on should-answer cases).
        "over_refusal": float(not answered) if should_answer else None,
        "abstention_accuracy": float(observed == "abstain") if expected == "abstain" else None,
    }
