"""A fifth replaced system, made up for tests: a help-desk bot's "ticket eval".

Everything groundjudge needs to read it, convert it and report in its terms is in this one
module, built on the shared adapter scaffolding; :func:`register` is its whole registration.
No file under ``src/`` names it.

Gold line::

    {"ticket": "T-1", "ask": "How do I reset my password?", "answers_in": ["kb-12"]}

Reply line (one file per bot)::

    {"ticket": "T-1", "looked_at": ["kb-12", "kb-3"], "reply": "Use the reset link."}

Its own report: ``first_look`` is the share of tickets with an answer article whose first
article looked at is one of them (a ticket with no reply counts as a miss); its gate passes
when ``first_look >= min_first_look`` (default ``MIN_FIRST_LOOK``).

Its knobs (:class:`ToySettings`): ``min_first_look`` (``--min-first-look``, or
``[profile.toy] min_first_look``) and the switch ``only_replied`` (``--only_replied`` /
``--only-replied``: tickets without a reply are left out rather than counted as misses).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from groundjudge.contracts import GoldenCase, NonEmptyStr
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters import InputFormat, register_format, unregister_format
from groundjudge.load.adapters.foreign import (
    ForeignRecord,
    NativeData,
    NativeTraces,
    config_ids_for,
    merge_extras,
    native_trace,
    null_as_default,
    read_unique,
)
from groundjudge.load.records import convert_records, read_records
from groundjudge.profiles import Flag, Profile, ProfileResult, ProfileSettings, register_profile, unregister_profile

NAME = "toy"
MIN_FIRST_LOOK = 0.6


class TicketGold(ForeignRecord):
    ticket: NonEmptyStr
    ask: NonEmptyStr
    answers_in: list[NonEmptyStr] = Field(default_factory=list)

    _nulls = null_as_default("answers_in")


class TicketReply(ForeignRecord):
    ticket: NonEmptyStr
    looked_at: list[NonEmptyStr] = Field(default_factory=list)
    reply: str | None = None

    _nulls = null_as_default("looked_at")


def looks_like(first_object: dict[str, Any], role: str) -> bool:
    if role == "gold":
        return {"ticket", "ask"} <= first_object.keys()
    return {"ticket", "looked_at"} <= first_object.keys()


def read_gold(path: Path) -> tuple[dict[str, TicketGold], dict[str, int]]:
    return read_unique(path, TicketGold, "ticket", "ticket")


def read_replies(path: Path, gold: dict[str, TicketGold]) -> list[tuple[int, TicketReply]]:
    replies, seen, problems = [], set(), []
    for line, reply in read_records(path, TicketReply):
        if reply.ticket not in gold:
            problems.append(InputProblem(str(path), line, "ticket", f"unknown ticket {reply.ticket!r}"))
        elif reply.ticket in seen:
            problems.append(InputProblem(str(path), line, "ticket", f"second reply to {reply.ticket!r}"))
        else:
            seen.add(reply.ticket)
            replies.append((line, reply))
    if problems:
        raise InputError(problems)
    return replies


def _case(gold: TicketGold) -> dict[str, Any]:
    mapped = {"id": gold.ticket, "question": gold.ask, "expected_chunk_ids": list(gold.answers_in),
              "expected_behavior": "answer" if gold.answers_in else "escalate"}
    return merge_extras(mapped, gold.model_extra, "toy_")


def to_native(gold_path: Path, trace_paths: Sequence[Path]) -> NativeData:
    golds, lines = read_gold(gold_path)
    cases, problems = convert_records(gold_path, golds, lines, _case, GoldenCase)
    traces: NativeTraces = {}
    for path, config in zip(trace_paths, config_ids_for(trace_paths)):
        for line, reply in read_replies(path, golds):
            mapped = {"query_id": reply.ticket, "config_id": config, "retrieved_chunks": list(reply.looked_at),
                      "answer": reply.reply}
            trace = native_trace(merge_extras(mapped, reply.model_extra, "toy_"), path, line, problems)
            if trace is not None:
                traces.setdefault(config, {})[reply.ticket] = {0: trace}
    if problems:
        raise InputError(problems)
    return cases, traces


class ToySettings(ProfileSettings):
    min_first_look: Annotated[float, Field(ge=0, le=1, description="The gate's lower bound on first_look.")] = \
        MIN_FIRST_LOOK
    only_replied: Annotated[bool, Flag("--only_replied", "--only-replied"),
                            Field(description="Leave tickets without a reply out of first_look.")] = False


def report(gold: dict[str, TicketGold], replies: Sequence[TicketReply], settings: ToySettings | None = None,
           ) -> dict[str, Any]:
    settings = settings or ToySettings()
    first = {r.ticket: r.looked_at[0] for r in replies if r.looked_at}
    answerable = [g for g in gold.values() if g.answers_in and (g.ticket in first or not settings.only_replied)]
    hits = sum(first.get(g.ticket) in g.answers_in for g in answerable)
    rate = hits / len(answerable) if answerable else None
    return {"first_look": rate, "n": len(answerable), "min_first_look": settings.min_first_look,
            "pass": rate is not None and rate >= settings.min_first_look}


def from_files(golden: Path, traces: Sequence[Path], live: Sequence[Path] = (), *,
               settings: ToySettings) -> ProfileResult:
    gold, _ = read_gold(golden)
    replies = [reply for path in traces for _, reply in read_replies(path, gold)]
    own = report(gold, replies, settings)
    verdict = "PASS" if own["pass"] else "FAIL"
    markdown = f"first look: {own['first_look']} (n={own['n']}, gate >= {own['min_first_look']}): {verdict}\n"
    return ProfileResult(NAME, own, markdown, own["pass"])


def register() -> None:
    register_format(InputFormat(NAME, looks_like, to_native))
    register_profile(Profile(NAME, from_files, ToySettings))


def unregister() -> None:
    unregister_profile(NAME)
    unregister_format(NAME)
