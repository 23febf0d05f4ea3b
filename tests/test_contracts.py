"""Contract records: a trace's chunks and citations are slotted records that keep unknown fields."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping
from typing import Any

import pytest

from groundjudge.contracts import CorpusChunk, GoldenCase, RetrievedChunk, Trace


def test_trace_items_keep_unknown_fields_through_pickle_and_copy() -> None:
    trace = Trace.model_validate({"query_id": "q", "config_id": "c", "answer": "a",
                                  "retrieved_chunks": [{"chunk_id": "k1", "score": 0.5, "kb_source": [1, 2]}, "k2"],
                                  "citations": [{"chunk_id": "k1", "offsets": [0, 4], "note": "x"}]})
    first, second = trace.retrieved_chunks
    assert isinstance(first, RetrievedChunk) and first.model_extra == {"kb_source": (1, 2)}
    assert second.model_extra == {} and second.chunk_id == "k2" and second.score is None
    for again in (pickle.loads(pickle.dumps(trace)), copy.deepcopy(trace), copy.copy(trace)):
        assert again == trace
        assert again.retrieved_chunks[0].model_extra == {"kb_source": (1, 2)}
        assert again.citations[0].model_extra == {"note": "x"} and again.citations[0].offsets.end == 4
    assert not hasattr(RetrievedChunk, "__pydantic_fields_set__")  # a dataclass with slots, not a model


def test_loaded_labels_dump_as_given(tmp_path):
    """Labels (models) read from a file dump with exclude_unset as the lines they came from, and
    a copy with an update is a new record (the loaded one unchanged)."""
    import json as _json

    from groundjudge.contracts import HumanLabel
    from groundjudge.load.records import read_records

    lines = [{"query_id": "a", "rater": "r"}, {"query_id": "b", "rater": "r"},
             {"query_id": "c", "rater": "r", "faithful": True}, {"query_id": "d", "rater": "r", "faithful": False}]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(_json.dumps(line) + "\n" for line in lines))
    labels = [label for _, label in read_records(path, HumanLabel)]
    assert labels[0].model_fields_set == {"query_id", "rater"}
    assert labels[2].model_fields_set == {"query_id", "rater", "faithful"}
    assert labels[0].model_fields_set is labels[1].model_fields_set  # one set for the same names
    assert [label.model_dump(mode="json", exclude_unset=True) for label in labels] == lines
    assert labels == [HumanLabel.model_validate(line) for line in lines]
    copied = labels[0].model_copy(update={"faithful": True})
    assert copied.model_fields_set == {"query_id", "rater", "faithful"} and labels[0].faithful is None


TRACE_PROBLEMS = [  # (line, the problems pydantic names for it, as `file:line: field: message`)
    ({"query_id": "q1", "config_id": "c", "not_recorded": ["answer", "bogus"]},
     [("not_recorded: Value error, 'bogus' is not a field that can be unrecorded; one of retrieved_chunks, "
      "context_chunks, answer, citations")]),
    ({"query_id": "q2", "config_id": "c", "not_recorded": {"citations": "x", "tokens": "y"}},
     [("not_recorded: Value error, 'tokens' is not a field that can be unrecorded; one of retrieved_chunks, "
      "context_chunks, answer, citations")]),
    ({"query_id": "q3", "config_id": "c", "not_recorded": ["answer"], "answer": "said anyway"},
     ["(record): Value error, answer is listed in not_recorded but holds a value; leave it out or empty"]),
    ({"query_id": "q4", "config_id": "c", "not_recorded": [1]}, ["not_recorded: Input should be a valid dictionary"]),
    ({"query_id": "q5", "config_id": "c", "retrieved_chunks": ["a", ""], "citations": [{"chunk_id": ""}]},
     ["retrieved_chunks[1].chunk_id: String should have at least 1 character",
      "citations[0].chunk_id: String should have at least 1 character"]),
    ({"query_id": "q6", "config_id": "c", "context_chunks": "a"}, ["context_chunks: Input should be a valid list"]),
    ({"query_id": "q7", "config_id": "c", "tokens": -3, "latency_ms": 1e13},
     ["latency_ms.end_to_end: Input should be less than or equal to 1000000000000",
      "tokens.total: Input should be greater than or equal to 0"]),
    ({"query_id": "q8", "config_id": "c", "tokens": True, "latency_ms": {"x": -1}},
     ["latency_ms.x: Input should be greater than or equal to 0", "tokens: Input should be a valid dictionary"]),
    ({"query_id": "q9", "config_id": "c", "paraphrase": -1, "cost_usd": 1e13},
     ["paraphrase: Input should be greater than or equal to 0",
      "cost_usd: Input should be less than or equal to 1000000000000"]),
    ({"query_id": "", "config_id": "c", "behavior": "maybe"},
     ["query_id: String should have at least 1 character",
      "behavior: Input should be 'answer', 'abstain', 'permission_denied' or 'escalate'"]),
    ({"config_id": "c", "versions": {"index": 3}},
     ["query_id: required field is missing", "versions.index: Input should be a valid string"]),
    ({"query_id": "q12", "config_id": "c", "retrieved_chunks": [{"chunk_id": "a", "offsets": [5, 2]}]},
     ["retrieved_chunks[0].offsets: Value error, end 2 is before start 5"]),
]


def test_a_trace_validator_names_each_problem_by_field_as_the_model_did(tmp_path) -> None:
    """Every check a trace makes, through the loader: one line each, each problem named by the
    field (``validation_problems``), as the pydantic model that a trace was named them."""
    import json

    import pytest

    from groundjudge.errors import InputError
    from groundjudge.load.records import read_records

    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line, _ in TRACE_PROBLEMS)
                    + '{"query_id": "q", "config_id": "c", "cost_usd": NaN}\n5\n')
    with pytest.raises(InputError) as caught:
        read_records(path, Trace)
    expected = [f"{path}:{number}: {problem}" for number, (_, problems) in enumerate(TRACE_PROBLEMS, 1)
                for problem in problems]
    expected += [(f"{path}:{len(TRACE_PROBLEMS) + 1}: cost_usd: not a finite number (NaN, Infinity, or beyond the "
                 "range of a double): write a number, or null for no value"),
                 f"{path}:{len(TRACE_PROBLEMS) + 2}: expected a JSON object, got int"]
    assert [str(problem) for problem in caught.value.problems] == expected


def test_a_trace_is_a_frozen_struct_made_from_what_a_line_may_give() -> None:
    """The conversions validation makes (ids to chunks, a bare total or latency, a list of
    unrecorded fields), the maps it shares, and what a trace is: frozen, read-only, not tracked by
    the garbage collector, passed through validation as it is, pickled and written as before."""
    import gc
    import json

    import msgspec
    import pytest
    from frozendict import frozendict
    from pydantic import TypeAdapter, ValidationError

    from groundjudge.contracts import Citation, ContextChunk, input_schema

    line = {"query_id": "q", "config_id": "c", "retrieved_chunks": ["k1"], "context_chunks": ["k1"],
            "citations": ["k1"], "tokens": 12, "latency_ms": 7.5, "versions": {"index": "v2"},
            "not_recorded": [], "team": {"notes": ["a", {"b": 1}]}}
    trace = Trace.model_validate(line)
    assert isinstance(trace, msgspec.Struct) and not gc.is_tracked(trace)
    assert type(trace.retrieved_chunks[0]) is RetrievedChunk and type(trace.context_chunks[0]) is ContextChunk
    assert type(trace.citations[0]) is Citation and trace.citations[0].chunk_id == "k1"
    assert trace.tokens == {"total": 12} and trace.latency_ms == {"end_to_end": 7.5}
    assert trace.model_extra == {"team": {"notes": ("a", {"b": 1})}}
    for kept in (trace.tokens, trace.latency_ms, trace.versions, trace.model_extra, trace.model_extra["team"]):
        assert type(kept) is frozendict
    unrecorded = Trace.model_validate({"query_id": "q", "config_id": "c", "not_recorded": ["answer", "citations"]})
    assert unrecorded.not_recorded == {"answer": "the trace records no answer",
                                       "citations": "the trace records no citations"}
    again = Trace.model_validate({**line, "query_id": "q2"})
    assert again.versions is trace.versions  # one map for the versions every trace states
    assert Trace.model_validate(trace) is trace and TypeAdapter(list[Trace]).validate_python([trace])[0] is trace
    assert Trace.model_validate_json(json.dumps(line)) == trace
    for change in (lambda: setattr(trace, "answer", "x"), lambda: trace.model_extra.update(x=1),
                   lambda: trace.tokens.update(total=1)):
        with pytest.raises((AttributeError, TypeError)):
            change()
    assert pickle.loads(pickle.dumps(trace)) == trace and copy.deepcopy(trace) == trace
    dumped = trace.model_dump(mode="json")
    assert list(dumped)[-1] == "team" and dumped["retrieved_chunks"][0]["chunk_id"] == "k1"
    assert json.loads(trace.model_dump_json()) == dumped and Trace.model_validate(dumped) == trace
    with pytest.raises(ValidationError, match="valid dictionary or instance of Trace"):
        Trace.model_validate(["q"])
    with pytest.raises(ValidationError, match="finite number"):
        Trace.model_validate({"query_id": "q", "config_id": "c", "latency_ms": float("nan")})
    schema = input_schema("trace")
    assert schema["title"] == "Trace" and schema["additionalProperties"] is True
    assert schema["required"] == ["query_id", "config_id"] and list(schema["properties"]) == list(
        Trace.__struct_fields__[:-1])  # every field but model_extra, in order


GOLDEN_PROBLEMS = [  # (line, the problems named for it, as `file:line: field: message`)
    ({"id": "", "question": "Q?"}, ["id: String should have at least 1 character"]),
    ({"id": "g2"}, ["question: required field is missing"]),
    ({"id": "g3", "question": "Q?", "expected_answer": 5, "difficulty": ["hard"]},
     ["expected_answer: Input should be a valid string", "difficulty: Input should be a valid string"]),
    ({"id": "g4", "question": "Q?", "expected_chunk_ids": ["a", ""], "must_cite": "a"},
     ["expected_chunk_ids[1]: String should have at least 1 character", "must_cite: Input should be a valid list"]),
    ({"id": "g5", "question": "Q?", "relevance": {"a": 4, "b": -1, "c": "x", "d": 2.5}},
     ["relevance.a: Input should be less than or equal to 3", "relevance.b: Input should be greater than or equal to 0",
      "relevance.c: Input should be a valid integer, unable to parse string as an integer",
      "relevance.d: Input should be a valid integer, got a number with a fractional part"]),
    ({"id": "g6", "question": "Q?", "relevance": [["a", 1]]}, ["relevance: Input should be a valid dictionary"]),
    ({"id": "g7", "question": "Q?", "expected_doc_ids": [""], "must_contain": [1], "tags": "x"},
     ["expected_doc_ids[0]: String should have at least 1 character", "must_contain[0]: Input should be a valid string",
      "tags: Input should be a valid list"]),
    ({"id": "g8", "question": "Q?", "expected_behavior": "maybe"},
     ["expected_behavior: Input should be 'answer', 'abstain', 'permission_denied' or 'escalate'"]),
    ({"id": "g9", "question": "Q?", "user_context": "tenant-a"},
     ["user_context: Input should be a valid dictionary or instance of UserContext"]),
    ({"id": "g10", "question": "Q?", "user_context": {"tenant": 1, "roles": "admin", "locale": None}},
     ["user_context.tenant: Input should be a valid string", "user_context.roles: Input should be a valid list"]),
    ({"id": "g11", "question": "Q?", "not_recorded": ["expected_behavior", "bogus"]},
     [("not_recorded: Value error, 'bogus' is not a field that can be unrecorded; one of expected_behavior, "
       "expected_chunk_ids")]),
    ({"id": "g12", "question": "Q?", "not_recorded": [1]}, ["not_recorded: Input should be a valid dictionary"]),
    ({"id": "g13", "question": "Q?", "not_recorded": {"expected_behavior": 1}},
     ["not_recorded.expected_behavior: Input should be a valid string"]),
    ({"id": "g14", "question": "Q?", "expected_behavior": "answer", "not_recorded": ["expected_behavior"]},
     ["(record): Value error, expected_behavior is listed in not_recorded but holds a value; leave it out"]),
    ({"id": "g15", "question": "Q?", "expected_chunk_ids": ["a"], "not_recorded": ["expected_chunk_ids"]},
     ["(record): Value error, expected_chunk_ids is listed in not_recorded but the case grades chunks; leave it out"]),
    ({"id": "g16", "question": "Q?", "relevance": {"a": 0}, "not_recorded": {"expected_chunk_ids": "none kept"}},
     ["(record): Value error, expected_chunk_ids is listed in not_recorded but the case grades chunks; leave it out"]),
    ({"id": "g17", "question": "Q?", "paraphrases": [None], "constraints": "c", "forbidden": [["x"]]},
     ["forbidden[0]: Input should be a valid string", "constraints: Input should be a valid list",
      "paraphrases[0]: Input should be a valid string"]),
    ({"id": 17, "question": "Q?", "gold_claim_substrings": {"a": 1}},
     ["id: Input should be a valid string", "gold_claim_substrings: Input should be a valid list"]),
]

CORPUS_PROBLEMS = [
    ({"chunk_id": "", "doc_id": "d", "text": "t"}, ["chunk_id: String should have at least 1 character"]),
    ({"chunk_id": "c2", "text": "t"}, ["doc_id: required field is missing"]),
    ({"chunk_id": "c3", "doc_id": "d"}, ["text: required field is missing"]),
    ({"chunk_id": "c4", "doc_id": "d", "text": 5, "doc_version": 2},
     ["doc_version: Input should be a valid string", "text: Input should be a valid string"]),
    ({"chunk_id": "c5", "doc_id": "d", "text": "t", "section_path": 5}, ["section_path: Input should be a valid list"]),
    ({"chunk_id": "c6", "doc_id": "d", "text": "t", "section_path": ["a", 1]},
     ["section_path[1]: Input should be a valid string"]),
    ({"chunk_id": "c7", "doc_id": "d", "text": "t", "offsets": [4, 2]},
     ["offsets: Value error, end 2 is before start 4"]),
    ({"chunk_id": "c8", "doc_id": "d", "text": "t", "offsets": [1]}, ["offsets: Value error, offsets must be [start, end]"]),
    ({"chunk_id": "c9", "doc_id": "d", "text": "t", "offsets": {"start": -1, "end": 2}},
     ["offsets.start: Input should be greater than or equal to 0"]),
    ({"chunk_id": "c10", "doc_id": "d", "text": "t", "offsets": {"start": 1, "end": 2, "x": 1}},
     ["offsets.x: Extra inputs are not permitted"]),
    ({"chunk_id": "c11", "doc_id": "d", "text": "t", "type": "Prose"},
     ["type: Input should be 'prose', 'code', 'table' or 'figure'"]),
    ({"chunk_id": "c12", "doc_id": "d", "text": "t", "acl": "tenant-a"},
     ["acl: Input should be a valid dictionary or instance of Acl"]),
    ({"chunk_id": "c13", "doc_id": "d", "text": "t", "acl": {"tenants": "t", "roles": [1]}},
     ["acl.tenants: Input should be a valid list", "acl.roles[0]: Input should be a valid string"]),
    ({"chunk_id": "c14", "doc_id": "", "text": "t", "type": None},
     ["doc_id: String should have at least 1 character", "type: Input should be 'prose', 'code', 'table' or 'figure'"]),
]
NOT_FINITE = "not a finite number (NaN, Infinity, or beyond the range of a double): write a number, or null for no value"


@pytest.mark.parametrize(("model", "cases", "tail", "last"), [
    (GoldenCase, GOLDEN_PROBLEMS, '{"id": "g", "question": "Q?", "team": {"score": NaN}}\n[1]\n',
     ["team.score: " + NOT_FINITE, "expected a JSON object, got list"]),
    (CorpusChunk, CORPUS_PROBLEMS, '{"chunk_id": "c", "doc_id": "d", "text": "t", "score": Infinity}\n"x"\n',
     ["score: " + NOT_FINITE, "expected a JSON object, got str"]),
], ids=["golden", "corpus"])
def test_a_golden_case_or_corpus_chunk_validator_names_each_problem_by_field(
        tmp_path, model: type, cases: list[tuple[dict[str, Any], list[str]]], tail: str, last: list[str]) -> None:
    """Every check a golden case and a corpus chunk makes, through the loader: one line each,
    each problem named by file, line and field, as the pydantic models they were named them."""
    from groundjudge.errors import InputError
    from groundjudge.load.records import read_records

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line, _ in cases) + tail)
    with pytest.raises(InputError) as caught:
        read_records(path, model)
    expected = [f"{path}:{number}: {problem}" for number, (_, problems) in enumerate(cases, 1) for problem in problems]
    expected += [f"{path}:{len(cases) + number}: {problem}" for number, problem in enumerate(last, 1)]
    assert [str(problem) for problem in caught.value.problems] == expected


GOLDEN_LINE = {"id": "q", "question": "Q?", "expected_chunk_ids": ["a", "b"], "relevance": {"b": 1, "c": 0},
               "tags": ["x"], "user_context": {"tenant": "t", "roles": ["r"], "badge": [1]},
               "team": {"notes": ["a", {"b": 1}]}}
CORPUS_LINE = {"chunk_id": "a", "doc_id": "d", "text": "t", "section_path": " HR > Leave >> ", "offsets": [0, 4],
               "acl": {"tenants": ["t"], "level": 2}, "team": {"notes": ["a"]}}

GOLDEN_FIELDS = ["id", "question", "expected_answer", "expected_chunk_ids", "relevance", "expected_doc_ids", "must_cite",
                 "must_contain", "forbidden", "gold_claim_substrings", "difficulty", "tags", "expected_behavior",
                 "user_context", "constraints", "paraphrases", "not_recorded"]
CORPUS_FIELDS = ["chunk_id", "doc_id", "doc_version", "text", "section_path", "offsets", "type", "acl"]


@pytest.mark.parametrize("line", [GOLDEN_LINE, CORPUS_LINE], ids=["golden", "corpus"])
def test_a_golden_case_or_corpus_chunk_is_written_in_the_model_s_order(line: dict[str, Any]) -> None:
    """Written (``model_dump``) as the model was: every declared field in its order, a nested
    record's the same way, then the unknown fields; read back, the same record."""
    model = GoldenCase if "question" in line else CorpusChunk
    record = model.model_validate(line)
    dumped = record.model_dump(mode="json")
    nested, inner = ("user_context", "badge") if model is GoldenCase else ("acl", "level")
    declared = GOLDEN_FIELDS if model is GoldenCase else CORPUS_FIELDS
    assert list(dumped) == [*declared, "team"]
    assert list(dumped[nested])[-1] == inner and dumped["team"] == line["team"]
    assert json.loads(record.model_dump_json()) == dumped and model.model_validate(dumped) == record
    assert model.model_validate_json(json.dumps(line)) == record
    assert list(record.model_dump()) == list(dumped) and type(record.model_dump()[nested]) is dict
    if model is GoldenCase:
        assert list(record.relevance.items()) == [("b", 1), ("c", 0), ("a", 3)]  # an expected chunk ungraded: 3
        unrecorded = GoldenCase.model_validate({"id": "q", "question": "Q?", "not_recorded": ["expected_behavior"]})
        assert unrecorded.model_dump(mode="json")["expected_behavior"] == "answer"  # the default, as the model wrote it
        assert unrecorded.model_dump()["not_recorded"] == {"expected_behavior": "the golden set records no expected_behavior"}
    else:
        assert record.section_path == ("HR", "Leave") and dumped["offsets"] == {"start": 0, "end": 4}


@pytest.mark.parametrize("line", [GOLDEN_LINE, CORPUS_LINE], ids=["golden", "corpus"])
def test_a_golden_case_or_corpus_chunk_is_a_frozen_struct_that_pickles(line: dict[str, Any]) -> None:
    """What a case and a chunk are: frozen all the way down (every field set raises, every
    sequence a tuple, every mapping read-only, unknown fields too), holding no list, dict or set
    another record could share, not tracked by the garbage collector, passed through validation
    as they are, equal after a pickle round trip or a copy."""
    import gc

    import msgspec
    from frozendict import frozendict
    from pydantic import TypeAdapter, ValidationError

    from groundjudge.contracts import Acl, UserContext

    model = GoldenCase if "question" in line else CorpusChunk
    record = model.model_validate(line)
    nested = record.user_context if isinstance(record, GoldenCase) else record.acl
    assert isinstance(record, msgspec.Struct) and type(nested) in (UserContext, Acl)
    assert list(record.__struct_fields__) == [*(GOLDEN_FIELDS if model is GoldenCase else CORPUS_FIELDS), "model_extra"]
    assert not gc.is_tracked(record) and not gc.is_tracked(nested)
    for target in (record, nested):
        for name in target.__struct_fields__:
            with pytest.raises(AttributeError):
                setattr(target, name, getattr(target, name))
    assert nested.model_extra == ({"badge": (1,)} if model is GoldenCase else {"level": 2})
    held: list[Any] = [getattr(record, name) for name in record.__struct_fields__]
    held += [getattr(nested, name) for name in nested.__struct_fields__]
    while held:
        value = held.pop()
        assert type(value) not in (list, dict, set), value
        if isinstance(value, Mapping):
            assert type(value) is frozendict
            held += value.values()
        elif isinstance(value, tuple):
            held += value
    for change in (lambda: record.model_extra.update(x=1), lambda: record.model_extra["team"].update(x=1),
                   lambda: nested.model_extra.update(x=1)):
        with pytest.raises((AttributeError, TypeError)):
            change()
    for again in (pickle.loads(pickle.dumps(record)), copy.deepcopy(record), copy.copy(record)):
        assert again == record and type(again) is model and again.model_dump() == record.model_dump()
        assert type(again.model_extra) is frozendict
    assert model.model_validate(record) is record and TypeAdapter(list[model]).validate_python([record])[0] is record
    with pytest.raises(ValidationError, match=f"valid dictionary or instance of {model.__name__}"):
        model.model_validate(["q"])
