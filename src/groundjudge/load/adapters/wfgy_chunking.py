"""Adapter for WFGY chunking-eval gold sets and retriever traces (SPEC 3.5).

Gold line::

    {"qid": "Q-0137", "paraphrases": ["...", "...", "..."],
     "relevant": ["S.4.2.p.Bk011a", "S.4.2.p.Bk011b"], "anchor_section": "S.4.2",
     "negatives": ["S.4.1.p.Bk010"]}

Trace line (one per run of one paraphrase against one index)::

    {"qid": "Q-0137", "query": "...",
     "topk": [{"id": "S.4.2.p.Bk011a", "score": 0.83, "offsets": [204611, 205279], "type": "prose"}],
     "answer_citations": [{"id": "S.4.2.p.Bk011a", "offsets": [204611, 204790]}],
     "ΔS": [0.31], "λ_state": "→", "index_hash": "faiss:v3:hnsw:cos"}

A file holds one record per line (JSON Lines), a JSON array of records (the page's
``gold.json``), or records pretty-printed over several lines each, one after another (as the
page prints its gold row and trace); a record's line is the line it starts on.

Block ids are canonical ids such as ``S.4.2.p.Bk011a``; a block's section id is the prefix
before ``.p.`` (``S.4.2``). Offsets are byte offsets ``[start, end)`` in the normalised
canonical text. The gold shape the WFGY page shows carries no offsets, but the page asks to
"store byte offsets"; a gold line may do so in ``gold_offsets`` (block id -> ``[start, end]``),
which citation accuracy needs. ``ΔS`` (also spelled with the increment sign ``∆S``, or
``delta_s``) holds one semantic distance per ``topk`` item, in the same order.

A qid may have several trace lines: one per paraphrase and seed (the page runs "each
paraphrase against the shadow index"). Conversion to the native contracts:

- gold: ``qid`` -> ``id``; the first paraphrase -> ``question`` and the others ->
  ``paraphrases``; ``relevant`` -> ``expected_chunk_ids`` (grade 3); ``anchor_section``,
  ``negatives`` and ``gold_offsets`` are kept as extra fields.
- trace: ``qid`` -> ``query_id``; ``query`` -> ``question``; ``topk`` -> ``retrieved_chunks``
  (``chunk_id``, ``score``, ``offsets``, ``type``, ``rank`` from the order); ``answer_citations``
  -> ``citations`` with offsets; ``ΔS`` and ``λ_state`` are kept as extra fields. The runs of a
  qid are numbered as native paraphrase indexes: runs whose query is the n-th gold paraphrase
  come in gold order, runs of any other query after them, file order breaking ties; index 0 is
  the primary trace.
- not recorded (``not_recorded``; the metrics that read them are null with the reason, never
  0): the expected behaviour (the gold set has no answerable flag), the context chunks and the
  answer text, and the citations of a trace line without ``answer_citations`` (an index-only
  run).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationInfo, field_validator

from groundjudge.contracts import ContentType, GoldenCase, NonEmptyStr, Offsets
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters.foreign import (
    ForeignRecord,
    NativeData,
    NativeTraces,
    config_ids_for,
    merge_extras,
    native_trace,
    null_as_default,
)
from groundjudge.load.adapters.registry import InputFormat
from groundjudge.load.records import convert_records, index_unique, read_records

__all__ = [
    "FORMAT",
    "FORMAT_NAME",
    "AnswerCitation",
    "ChunkingGold",
    "ChunkingTrace",
    "TopkItem",
    "looks_like",
    "read_gold",
    "read_traces",
    "to_native",
]

FORMAT_NAME = "wfgy-chunking"


class ChunkingGold(ForeignRecord):
    """One line of a WFGY chunking gold set."""

    qid: NonEmptyStr
    paraphrases: list[NonEmptyStr] = Field(min_length=1)
    relevant: list[NonEmptyStr]
    anchor_section: NonEmptyStr | None = None
    negatives: list[NonEmptyStr] = Field(default_factory=list)
    gold_offsets: dict[str, Offsets] = Field(default_factory=dict)

    _nulls = null_as_default("negatives", "gold_offsets")


class TopkItem(ForeignRecord):
    id: NonEmptyStr
    score: float | None = None
    offsets: Offsets | None = None
    type: ContentType | None = None


class AnswerCitation(ForeignRecord):
    id: NonEmptyStr
    offsets: Offsets | None = None


class ChunkingTrace(ForeignRecord):
    """One retriever trace: one query (a paraphrase) of one qid against one index."""

    qid: NonEmptyStr
    query: str | None = None
    topk: list[TopkItem] = Field(default_factory=list)
    answer_citations: list[AnswerCitation] = Field(default_factory=list)
    delta_s: list[float] | None = Field(default=None, validation_alias=AliasChoices("ΔS", "∆S", "delta_s"))
    lambda_state: str | None = Field(default=None, validation_alias=AliasChoices("λ_state", "lambda_state"))

    _nulls = null_as_default("topk", "answer_citations")

    @field_validator("delta_s")
    @classmethod
    def _delta_s_per_item(cls, value: list[float] | None, info: ValidationInfo) -> list[float] | None:
        topk = info.data.get("topk")
        if value is not None and topk is not None and len(value) != len(topk):
            raise ValueError(f"has {len(value)} values for {len(topk)} topk items; "
                             "give one distance per topk item, in the same order")
        return value

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.topk]


def looks_like(first_object: dict[str, Any], role: Literal["gold", "trace"]) -> bool:
    """Whether the first object of a file is a WFGY chunking gold line or trace line."""
    if not isinstance(first_object, dict) or "qid" not in first_object:
        return False
    if role == "gold":
        return "relevant" in first_object and ("paraphrases" in first_object or "anchor_section" in first_object)
    if role == "trace":
        return isinstance(first_object.get("topk"), list)
    return False


def _gold_by_qid(path: str | Path) -> tuple[dict[str, ChunkingGold], dict[str, int]]:
    by_qid, lines, problems = index_unique(path, read_records(path, ChunkingGold, multiline=True),
                                           lambda gold: gold.qid, "qid", "qid")
    if problems:
        raise InputError(problems)
    return by_qid, lines


def read_gold(path: str | Path) -> list[tuple[int, ChunkingGold]]:
    """Read a WFGY chunking gold file (JSON Lines, a JSON array such as the page's ``gold.json``,
    or pretty-printed rows one after another); bad records and repeated qids raise
    :class:`InputError` naming the line of the field."""
    by_qid, lines = _gold_by_qid(path)
    return [(lines[qid], gold) for qid, gold in by_qid.items()]


def read_traces(path: str | Path) -> list[tuple[int, ChunkingTrace]]:
    """Read a WFGY chunking trace file, every record (several per qid are normal), in any of the
    layouts :func:`read_gold` reads; a record's line is the one it starts on."""
    return read_records(path, ChunkingTrace, multiline=True)


def _pair(offsets: Offsets | None) -> list[int] | None:
    return None if offsets is None else [offsets.start, offsets.end]


NO_BEHAVIOUR = "the wfgy-chunking format records no expected behaviour (its gold set has no answerable flag)"
NO_CONTEXT = "the wfgy-chunking format records no context chunks"
NO_ANSWER = "the wfgy-chunking format records no answer text (its traces log retrieval and citations)"
NO_CITATIONS = "this wfgy-chunking trace line has no answer_citations (an index-only run)"


def _native_case(gold: ChunkingGold) -> dict[str, Any]:
    mapped: dict[str, Any] = {
        "id": gold.qid,
        "question": gold.paraphrases[0],
        "paraphrases": list(gold.paraphrases[1:]),
        "expected_chunk_ids": list(gold.relevant),
        "anchor_section": gold.anchor_section,
        "negatives": list(gold.negatives),
        "not_recorded": {"expected_behavior": NO_BEHAVIOUR},
    }
    if gold.gold_offsets:
        mapped["gold_offsets"] = {bid: _pair(off) for bid, off in gold.gold_offsets.items()}
    return merge_extras(mapped, gold.model_extra, "wfgy_")


def _native_trace(trace: ChunkingTrace, config_id: str, index: int) -> dict[str, Any]:
    retrieved = [
        merge_extras({"chunk_id": item.id, "score": item.score, "offsets": _pair(item.offsets),
                      "type": item.type, "rank": rank}, item.model_extra, "wfgy_")
        for rank, item in enumerate(trace.topk, start=1)
    ]
    citations = [merge_extras({"chunk_id": c.id, "offsets": _pair(c.offsets)}, c.model_extra, "wfgy_")
                 for c in trace.answer_citations]
    mapped: dict[str, Any] = {
        "query_id": trace.qid,
        "config_id": config_id,
        "question": trace.query,
        "paraphrase": index,
        "retrieved_chunks": retrieved,
        "citations": citations,
        "not_recorded": {"context_chunks": NO_CONTEXT, "answer": NO_ANSWER,
                         **({} if "answer_citations" in trace.model_fields_set else {"citations": NO_CITATIONS})},
    }
    if trace.delta_s is not None:
        mapped["ΔS"] = list(trace.delta_s)
    if trace.lambda_state is not None:
        mapped["λ_state"] = trace.lambda_state
    return merge_extras(mapped, trace.model_extra, "wfgy_")


def to_native(gold_path: str | Path, trace_paths: Sequence[str | Path], *, config_id: str | None = None) -> NativeData:
    """Read WFGY chunking gold and trace files and convert them to native cases and traces.

    Each trace file is one config (one index), named by ``config_id`` when given, else by the
    file's stem (``trace``, ``trace_live``). A trace naming a qid that is not in the gold set is
    an input error. Every trace line is kept: the runs of a qid become its paraphrase traces
    (see the module docstring for the numbering).
    """
    golds, gold_lines = _gold_by_qid(gold_path)
    cases, problems = convert_records(gold_path, golds, gold_lines, _native_case, GoldenCase)
    names = [config_id] * len(trace_paths) if config_id else config_ids_for(trace_paths)
    runs: dict[str, dict[str, list[tuple[Path, int, ChunkingTrace]]]] = {}
    for path, name in zip(trace_paths, names):
        for line, trace in read_traces(path):
            if trace.qid not in golds:
                problems.append(InputProblem(str(path), line, "qid",
                                             f"unknown qid {trace.qid!r}: not in the gold set {gold_path}"))
                continue
            runs.setdefault(name, {}).setdefault(trace.qid, []).append((Path(path), line, trace))
    traces: NativeTraces = {}
    for name, per_qid in runs.items():
        for qid, qid_runs in per_qid.items():
            position = {text: i for i, text in reversed(list(enumerate(golds[qid].paraphrases)))}
            ordered = sorted(qid_runs, key=lambda run: position.get(run[2].query or "", len(position)))
            for index, (path, line, trace) in enumerate(ordered):
                native = native_trace(_native_trace(trace, name, index), path, line, problems)
                if native is not None:
                    traces.setdefault(name, {}).setdefault(qid, {})[index] = native
    if problems:
        raise InputError(problems)
    return cases, traces


FORMAT = InputFormat(FORMAT_NAME, looks_like, to_native)
