"""Parse a ``grounded_answer`` reply into a validated verdict (scores: ``judge.scoring``).

An off-menu verdict, an id that is not in the context, no claims for an answer that states
something, or text that is not JSON is a :class:`VerdictError` (which earns one repair retry),
never a score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Json, StrictInt, TypeAdapter, ValidationError, field_validator

from groundjudge.errors import GroundjudgeError

ClaimVerdict = Literal["supported", "partially_supported", "unsupported", "contradicted"]
ClaimClass = Literal["cited_support", "misattributed", "uncited", "partial", "unsupported", "contradicted"]


class VerdictError(GroundjudgeError, ValueError):
    """The reply cannot be used; the message says why (it is shown to the model on repair)."""


class JudgedClaim(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    claim: str = Field(min_length=1)
    cited: list[str] = Field(default_factory=list)
    verdict: ClaimVerdict
    support: list[str] = Field(default_factory=list)

    @property
    def triage_class(self) -> ClaimClass:
        """supported by its citation / misattributed (supported, but not by what it cites) / ..."""
        if self.verdict == "contradicted":
            return "contradicted"
        if self.verdict == "unsupported":
            return "unsupported"
        if self.verdict == "partially_supported":
            return "partial"
        if not self.cited:
            return "uncited"
        return "cited_support" if set(self.cited) & set(self.support) else "misattributed"


# Correctness as words (for rubrics that ask for a word): small models misread a bare 0..3 scale.
CORRECTNESS_WORDS = {"wrong": 0, "partial": 1, "incomplete": 2, "complete": 3}


class RawVerdict(BaseModel):
    """A ``grounded_answer`` reply: claims with verdicts, plus whatever fields the rubric's
    criteria read (``correctness`` and any other, kept as extra fields)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    claims: list[JudgedClaim]
    correctness: StrictInt | Literal["wrong", "partial", "incomplete", "complete"] | None = None  # true/1.0 are not grades
    reason: str = ""

    @field_validator("correctness")
    @classmethod
    def _on_scale(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and not 0 <= value <= 3:
            raise ValueError("correctness must be 0..3")
        return value

    @property
    def fields(self) -> dict[str, object]:
        """Reply fields a criterion may read, by name."""
        out: dict[str, object] = dict(self.model_extra or {})
        if self.correctness is not None:
            out["correctness"] = self.correctness
        return out


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(raw: str) -> dict[str, Any]:
    """Lenient extraction: the whole text, else a fenced block, else the first balanced object.
    Each candidate is looked for only when the ones before it did not parse (a well-formed reply,
    the usual case, is read in one ``json.loads``)."""
    for text in _candidates(raw):
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):  # nested beyond reading: no verdict in it
            continue
        if isinstance(value, dict):
            return value
    raise VerdictError("the reply is not a JSON object (it may be cut off)")


def _candidates(raw: str) -> Iterator[str]:
    yield raw.strip()
    for m in _FENCE.finditer(raw):
        yield m.group(1).strip()
    start = raw.find("{")
    if start >= 0:
        depth, in_str, escaped = 0, False, False
        for i, ch in enumerate(raw[start:], start):
            if in_str:
                # An escaped character (\" included) never ends the string.
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield raw[start:i + 1]
                    return


def parse_verdict(raw: str, context_ids: Collection[str], *, answer_has_text: bool = True,
                  read: RawVerdict | None = None) -> RawVerdict:
    """The verdict in ``raw``, validated; :class:`VerdictError` says what is wrong with it.

    The usual reply, one valid JSON object and nothing else, is read and validated in one step
    by pydantic's JSON reader, which accepts no text that ``json.loads`` refuses and reads what
    both accept as the same values. Any other reply (prose around the object, a fence, an
    invalid field) takes the lenient reading, :func:`read_verdict`, whose error is the one shown.
    ``read``: the one-step reading of ``raw`` when the caller has it already (:func:`read_replies`)."""
    if read is None:
        try:
            read = RawVerdict.model_validate_json(raw)
        except ValidationError:
            read = read_verdict(raw)
    return checked_verdict(read, context_ids, answer_has_text=answer_has_text)


# Each element a reply's text, read by the same JSON reader as ``RawVerdict.model_validate_json``.
_REPLIES: TypeAdapter[list[RawVerdict]] = TypeAdapter(list[Json[RawVerdict]])


def read_replies(raws: Sequence[str]) -> list[RawVerdict | None]:
    """The one-step reading of each reply (``RawVerdict.model_validate_json``), all in one
    validation; None for a reply it does not read, which :func:`parse_verdict` then reads
    leniently (and so says what is wrong with it). Each reply is read on its own: one reply
    never changes how another is read."""
    try:
        return list(_REPLIES.validate_python(raws))
    except ValidationError as exc:
        unread = {error["loc"][0] for error in exc.errors(include_url=False)}
    rest = [i for i in range(len(raws)) if i not in unread]
    out: list[RawVerdict | None] = [None] * len(raws)
    for i, verdict in zip(rest, _REPLIES.validate_python([raws[i] for i in rest]), strict=True):
        out[i] = verdict
    return out


def checked_verdict(verdict: RawVerdict, context_ids: Collection[str], *, answer_has_text: bool = True) -> RawVerdict:
    """``verdict`` if its claims hold together with the case; else :class:`VerdictError`."""
    if answer_has_text and not verdict.claims:
        raise VerdictError("claims is empty, but the ANSWER states something: list its claims")
    known = context_ids if isinstance(context_ids, (set, frozenset)) else set(context_ids)
    for i, claim in enumerate(verdict.claims):
        if not known.issuperset(claim.support):
            strays = [cid for cid in claim.support if cid not in known]
            raise VerdictError(f"claims[{i}].support names ids that are not in the CONTEXT: {strays}")
        # Which chunk supports a claim matters only for a claim that cites: it tells a good
        # citation from a misattributed one. An uncited supported claim needs no support ids.
        if claim.verdict == "supported" and claim.cited and not claim.support:
            raise VerdictError(f"claims[{i}] is 'supported' and cites {claim.cited} but names no supporting "
                               "CONTEXT id")
    return verdict


def read_verdict(raw: str) -> RawVerdict:
    """The lenient reading of a reply (:func:`extract_json`), then validation; the reference
    for what :func:`parse_verdict` reads from a reply, before its own checks."""
    data = extract_json(raw)
    try:
        return RawVerdict.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise VerdictError(f"field {where}: {first['msg']}") from None
