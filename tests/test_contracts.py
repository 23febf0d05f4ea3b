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
    assert isinstance(first, RetrievedChunk) and first.model_extra == {"kb_source": [1, 2]}
    assert second.model_extra == {} and second.chunk_id == "k2" and second.score is None
    for again in (pickle.loads(pickle.dumps(trace)), copy.deepcopy(trace), copy.copy(trace)):
        assert again == trace
        assert again.retrieved_chunks[0].model_extra == {"kb_source": [1, 2]}
        assert again.citations[0].model_extra == {"note": "x"} and again.citations[0].offsets.end == 4
    assert not hasattr(RetrievedChunk, "__pydantic_fields_set__")  # a dataclass with slots, not a model
