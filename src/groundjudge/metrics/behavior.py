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
        return self._classify(strip_accents(normalize(answer)))

    def detect_all(self, answers: Sequence[str | None]) -> list[Behavior]:
        """:meth:`detect` of each answer, in order: the same results, with the phrases searched
        for in the whole column of answers at once (one pass of one pattern that matches any
        phrase, in Arrow). Only the answers it finds a phrase in are classified one by one.

        An ASCII answer is searched as it is, not folded (most of the cost, and most answers
        are ASCII): the pattern finds a phrase wherever folding would have let it be found
        (``_any_phrase``), and an answer it finds one in is folded and classified as
        :meth:`detect` does."""
        out: list[Behavior] = []
        texts: list[str] = []
        at: list[tuple[int, str]] = []  # the answers searched: position in ``out``, the answer
        for answer in answers:
            if answer is None or not answer.strip() or (
                    self.refusal_token is not None and answer.strip() == self.refusal_token):
                out.append("abstain")
            else:
                at.append((len(out), answer))
                texts.append(answer if answer.isascii() else strip_accents(normalize(answer)))
                out.append("answer")
        if not texts or self._any_phrase is None:
            return out
        import pyarrow as pa  # not at import time: the TREC path never loads Arrow
        import pyarrow.compute as pc

        try:
            found = pc.match_substring_regex(pa.array(texts, pa.string()), self._any_phrase).to_pylist()
        except (UnicodeEncodeError, pa.ArrowException):
            # text UTF-8 cannot hold (a lone surrogate), or a phrase list too large for one
            # pattern: every answer is searched phrase by phrase instead
            found = [True] * len(texts)
        for (i, answer), hit in zip(at, found, strict=True):
            if hit:
                out[i] = self._classify(strip_accents(normalize(answer)))
        return out

    def _classify(self, folded: str) -> Behavior:
        for behavior, phrases in self._folded:
            if any(map(folded.__contains__, phrases)):  # map: no Python frame per phrase
                return behavior  # type: ignore[return-value]
        return "answer"

    @cached_property
    def _any_phrase(self) -> str | None:
        """One RE2 pattern matching where any phrase occurs in a folded answer, or would occur
        once an ASCII answer is folded: case is ignored, and a phrase's space matches any run of
        the white space ``str.split`` splits ASCII text on (folding leaves one space of each run,
        and changes no other ASCII character but by its case). Each word is a literal (every
        character but an ASCII letter or digit written by its code point). It may find a phrase
        that folding would not (the answer is then classified to no effect); it misses none.
        None when there is no phrase."""
        phrases = dict.fromkeys(p for _, group in self._folded for p in group)
        if not phrases:
            return None
        return "(?i)" + "|".join(_ASCII_SPACE.join(_literal(word) for word in p.split(" ")) for p in phrases)

    @cached_property
    def _folded(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Each behaviour's phrases of every locale, folded once per rules, not once per answer.
        Permission refusals are checked first: they often also say "cannot find"."""
        return tuple((behavior, tuple(_fold(p) for phrases in self.phrases.get(behavior, {}).values()
                                      for p in phrases))
                     for behavior in ("permission_denied", "abstain", "escalate"))


_ASCII_SPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f ]+"  # the ASCII characters str.isspace holds white space


def _literal(text: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


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
