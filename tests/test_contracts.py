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


def test_loaded_records_dump_as_given(tmp_path):
    """Records read from a file dump with exclude_unset as the lines they came from, and a copy
    with an update is a new record (the loaded one unchanged)."""
    import json as _json

    from groundjudge.contracts import GoldenCase
    from groundjudge.load.records import read_records

    lines = [{"id": "a", "question": "q?"}, {"id": "b", "question": "q?"},
             {"id": "c", "question": "q?", "tags": ["x"]}, {"id": "d", "question": "q?", "tags": ["y"]}]
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(_json.dumps(line) + "\n" for line in lines))
    cases = [case for _, case in read_records(path, GoldenCase)]
    assert cases[0].model_fields_set == {"id", "question"} and cases[2].model_fields_set == {"id", "question", "tags"}
    assert [c.model_dump(mode="json", exclude_unset=True) for c in cases] == lines
    assert cases == [GoldenCase.model_validate(line) for line in lines]
    copied = cases[0].model_copy(update={"tags": ("z",)})
    assert copied.model_fields_set == {"id", "question", "tags"} and cases[0].tags == ()

