"""Adapter for WFGY grounded-QA gold sets and traces (SPEC 3.5).

WFGY's own line shapes are modelled as they are written (unknown fields kept) and converted to
the native contracts. The ``wfgy`` profile scores the same parsed records in WFGY's own terms.

Gold line (``eval/gold.jsonl``)::

    {"qid": "A0001", "question": "...", "answerable": true, "gold_claim_substr": ["..."],
     "gold_citations": ["p1#2"], "constraints": ["..."]}

Trace line (``runs/trace.jsonl``)::

    {"qid": "A0001", "q": "...", "retrieved_ids": ["p1#1", "p1#2"],
     "answer_json": {"claim": "...", "citations": ["p1#2"], "constraints_echo": ["..."]}}

WFGY appends a new trace line every time a question is run again, and its scorer keeps the
*last* line of each qid. This adapter keeps that rule (it is the format's documented meaning,
not a mistake in the file) and records the lines it superseded in the native trace's
``superseded_lines`` field, so nothing disappears silently. A repeated qid in the *gold* file is
an input error.

Conversion to the native contracts:

- gold: ``qid`` -> ``id``; ``answerable: false`` -> ``expected_behavior: "abstain"`` (else
  ``"answer"``); ``gold_citations`` -> ``expected_chunk_ids`` and ``must_cite``;
  ``gold_claim_substr`` -> ``gold_claim_substrings``; ``constraints`` -> ``constraints``.
- trace: ``qid`` (or the ``q_id`` spelling its scorer also accepts) -> ``query_id``; ``q`` ->
  ``question``; ``retrieved_ids`` -> ``retrieved_chunks`` in order; ``answer_json.claim`` ->
  ``answer``; ``answer_json.citations`` -> ``citations``; ``answer_json.constraints_echo`` is
  kept as the extra field ``constraints_echo``; ``behavior`` is ``"abstain"`` when the claim is
  the refusal token ``not in context`` (surrounding white space and case ignored, punctuation
  not, as WFGY's scorer compares) and ``"answer"`` otherwise, WFGY's own split between
  refusals and shipped answers.
- not recorded (``not_recorded``; the metrics that read them are null with the reason, never
  0): the context chunks (WFGY's traces name what was retrieved, not what reached the prompt),
  and the answer and citations of a trace line without ``answer_json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, StrictBool

from groundjudge.contracts import GoldenCase, NonEmptyStr
from groundjudge.errors import InputError, InputProblem
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
from groundjudge.load.adapters.registry import InputFormat
from groundjudge.load.records import convert_records, read_records

__all__ = [
    "FORMAT",
    "FORMAT_NAME",
    "REFUSAL_TOKEN",
    "WfgyAnswer",
    "WfgyGold",
    "WfgyTrace",
    "config_ids_for",
    "is_refusal",
    "latest_traces",
    "looks_like",
    "read_gold",
    "read_traces",
    "to_native",
]

FORMAT_NAME = "wfgy"
REFUSAL_TOKEN = "not in context"


class WfgyGold(ForeignRecord):
    """One line of a WFGY gold set.

    ``gold_claim_substr`` and ``constraints`` stay ``None`` when the line leaves them out, so a
    report can tell "no constraints" from "constraints: []"; both mean "nothing to check".
    """

    qid: NonEmptyStr
    question: NonEmptyStr
    answerable: StrictBool
    gold_claim_substr: list[str] | None = None
    gold_citations: list[NonEmptyStr] = Field(default_factory=list)
    constraints: list[str] | None = None

    _nulls = null_as_default("gold_citations")


class WfgyAnswer(ForeignRecord):
    """The ``answer_json`` object of a WFGY trace."""

    claim: str | None = None
    citations: list[NonEmptyStr] = Field(default_factory=list)
    constraints_echo: list[str] | None = None

    _nulls = null_as_default("citations")


class WfgyTrace(ForeignRecord):
    """One line of a WFGY trace file."""

    qid: NonEmptyStr = Field(validation_alias=AliasChoices("qid", "q_id"))
    q: str | None = None
    retrieved_ids: list[NonEmptyStr] = Field(default_factory=list)
    answer_json: WfgyAnswer | None = None

    _nulls = null_as_default("retrieved_ids")

    @property
    def claim(self) -> str:
        """The shipped claim with surrounding white space removed ("" when there is none)."""
        return ((self.answer_json.claim if self.answer_json else None) or "").strip()

    @property
    def citations(self) -> list[str]:
        return list(self.answer_json.citations) if self.answer_json else []

    @property
    def constraints_echo(self) -> list[str] | None:
        return self.answer_json.constraints_echo if self.answer_json else None


def is_refusal(claim: str | None) -> bool:
    """True when ``claim`` is the refusal token ``not in context``, as WFGY's reference scorer
    decides it: white space around the claim is ignored and case is not significant (the scorer
    lower-cases the claim), punctuation is (``"not in context."`` is a shipped answer).

    >>> is_refusal(" not in context "), is_refusal("Not in context"), is_refusal("not in context.")
    (True, True, False)
    """
    return (claim or "").strip().lower() == REFUSAL_TOKEN


def looks_like(first_object: dict[str, Any], role: Literal["gold", "trace"]) -> bool:
    """Whether the first object of a file is a WFGY grounded-QA gold line or trace line."""
    if not isinstance(first_object, dict):
        return False
    has_qid = "qid" in first_object or "q_id" in first_object
    if role == "gold":
        return "qid" in first_object and "answerable" in first_object and (
            "gold_citations" in first_object or "gold_claim_substr" in first_object)
    if role == "trace":
        return has_qid and ("answer_json" in first_object or "retrieved_ids" in first_object)
    return False


def read_gold(path: str | Path) -> list[tuple[int, WfgyGold]]:
    """Read a WFGY gold file as ``(line, record)`` pairs.

    Raises :class:`InputError` naming file, line and field for every bad line and for every
    repeated qid (a frozen gold set has one line per question).
    """
    by_qid, lines = read_unique(path, WfgyGold, "qid", "qid")
    return [(lines[qid], gold) for qid, gold in by_qid.items()]


def read_traces(path: str | Path) -> list[tuple[int, WfgyTrace]]:
    """Read a WFGY trace file as ``(line, record)`` pairs, in file order, repeats included.

    Raises :class:`InputError` naming file, line and field for every bad line.
    """
    return read_records(path, WfgyTrace)


def latest_traces(traces: Sequence[WfgyTrace]) -> dict[str, WfgyTrace]:
    """The last trace of each qid, as WFGY's scorer keeps it (``traces`` in file order)."""
    latest: dict[str, WfgyTrace] = {}
    for trace in traces:
        latest[trace.qid] = trace
    return latest


def _native_case(gold: WfgyGold) -> dict[str, Any]:
    mapped: dict[str, Any] = {
        "id": gold.qid,
        "question": gold.question,
        "expected_behavior": "answer" if gold.answerable else "abstain",
        "expected_chunk_ids": list(gold.gold_citations),
        "must_cite": list(gold.gold_citations),
        "gold_claim_substrings": list(gold.gold_claim_substr or []),
        "constraints": list(gold.constraints or []),
    }
    return merge_extras(mapped, gold.model_extra, "wfgy_")


NO_CONTEXT = "the wfgy format records no context chunks (its traces name retrieved ids, not the prompt)"
NO_ANSWER = "this wfgy trace line has no answer_json"


def _native_trace(trace: WfgyTrace, config_id: str, superseded: list[str]) -> dict[str, Any]:
    not_recorded = {"context_chunks": NO_CONTEXT}
    if trace.answer_json is None:
        not_recorded.update(answer=NO_ANSWER, citations=NO_ANSWER)
    mapped: dict[str, Any] = {
        "query_id": trace.qid,
        "config_id": config_id,
        "question": trace.q,
        "retrieved_chunks": list(trace.retrieved_ids),
        "answer": trace.answer_json.claim if trace.answer_json else None,
        "citations": trace.citations,
        "behavior": None if trace.answer_json is None else "abstain" if is_refusal(trace.claim) else "answer",
        "not_recorded": not_recorded,
    }
    if trace.constraints_echo is not None:
        mapped["constraints_echo"] = list(trace.constraints_echo)
    if superseded:
        mapped["superseded_lines"] = superseded
    data = merge_extras(mapped, trace.model_extra, "wfgy_")
    if trace.answer_json is not None and trace.answer_json.model_extra:
        data = merge_extras(data, {f"answer_json.{k}": v for k, v in trace.answer_json.model_extra.items()},
                             "wfgy_")
    return data


def to_native(gold_path: str | Path, trace_paths: Sequence[str | Path], *, config_id: str | None = None) -> NativeData:
    """Read WFGY gold and trace files and convert them to native cases and traces.

    Each trace file is one config, named by ``config_id`` when given (then all files share it
    and are read as one stream, in order) or else by the file's stem. Within a config the last
    line of a qid wins, as in WFGY; the lines it replaced are listed in ``superseded_lines``.
    A trace whose qid is not in the gold set is an input error (SPEC 3). Returns
    ``(cases by id, traces by config id -> case id -> paraphrase index (always 0) -> trace)``.
    """
    golds, gold_lines = read_unique(gold_path, WfgyGold, "qid", "qid")
    cases, problems = convert_records(gold_path, golds, gold_lines, _native_case, GoldenCase)
    names = [config_id] * len(trace_paths) if config_id else config_ids_for(trace_paths)
    # config -> qid -> (where, trace, earlier places)
    latest: dict[str, dict[str, tuple[str, int, WfgyTrace, list[str]]]] = {}
    for path, name in zip(trace_paths, names):
        for line, trace in read_traces(path):
            if trace.qid not in cases:
                problems.append(InputProblem(str(path), line, "qid",
                                             f"unknown qid {trace.qid!r}: not in the gold set {gold_path}"))
                continue
            per_config = latest.setdefault(name, {})
            earlier = per_config.get(trace.qid)
            superseded = (earlier[3] + [f"{earlier[0]}:{earlier[1]}"]) if earlier else []
            per_config[trace.qid] = (str(path), line, trace, superseded)
    traces: NativeTraces = {}
    for name, per_qid in latest.items():
        for qid, (path, line, trace, superseded) in per_qid.items():
            native = native_trace(_native_trace(trace, name, superseded), path, line, problems)
            if native is not None:
                traces.setdefault(name, {})[qid] = {0: native}
    if problems:
        raise InputError(problems)
    return cases, traces


FORMAT = InputFormat(FORMAT_NAME, looks_like, to_native)
