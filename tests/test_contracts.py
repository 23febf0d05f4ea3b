"""Contract records: a trace's chunks and citations are slotted records that keep unknown fields."""

from __future__ import annotations

import copy
import pickle

from groundjudge.contracts import RetrievedChunk, Trace


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

