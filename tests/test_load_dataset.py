"""Loading a dataset: traces share the corpus's id strings, and read the same as without it."""

from __future__ import annotations

import json
from pathlib import Path

from groundjudge.load.dataset import load_dataset, load_golden, load_traces


def _ids(trace):
    return ([(c.chunk_id, c.doc_id) for c in trace.retrieved_chunks], [c.chunk_id for c in trace.context_chunks],
            [c.chunk_id for c in trace.citations])


def test_trace_chunk_ids_are_the_corpus_strings_and_unchanged(mini: Path, tmp_path: Path) -> None:
    # one retrieved chunk the corpus does not know, and one whose doc id differs from the corpus's
    lines = (mini / "traces.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["retrieved_chunks"][0]["doc_id"] = "another-doc"  # leave#2, of doc "leave" in the corpus
    first["retrieved_chunks"][1]["doc_id"] = "sla"  # sla#1: the corpus's doc id
    first["retrieved_chunks"].append({"chunk_id": "nowhere#9", "doc_id": "nowhere"})
    (tmp_path / "traces.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")

    ds = load_dataset(mini / "golden.jsonl", [tmp_path / "traces.jsonl"], mini / "corpus.jsonl")
    plain = load_traces([tmp_path / "traces.jsonl"], load_golden(mini / "golden.jsonl"))  # no corpus: nothing shared
    chunks = ds.corpus.chunks
    shared = 0
    for config_id, per_case in ds.traces.items():
        for case_id, variants in per_case.items():
            for i, trace in variants.items():
                assert _ids(trace) == _ids(plain[config_id][case_id][i])
                assert trace.model_dump() == plain[config_id][case_id][i].model_dump()
                items = [*trace.retrieved_chunks, *trace.context_chunks, *trace.citations]
                for item in items:
                    if item.chunk_id in chunks:
                        assert item.chunk_id is chunks[item.chunk_id].chunk_id
                        shared += 1
                for r in trace.retrieved_chunks:
                    if r.chunk_id in chunks and r.doc_id == chunks[r.chunk_id].doc_id:
                        assert r.doc_id is chunks[r.chunk_id].doc_id
    assert shared > 10
    odd = ds.traces[first["config_id"]][first["query_id"]][0]
    assert odd.retrieved_chunks[-1].chunk_id == "nowhere#9" and odd.retrieved_chunks[-1].doc_id == "nowhere"
    assert odd.retrieved_chunks[0].doc_id == "another-doc"
    assert odd.retrieved_chunks[1].doc_id is ds.corpus.chunks["sla#1"].doc_id


def test_loaded_records_share_their_empty_parts_and_equal_small_dicts(tmp_path: Path) -> None:
    """Empty lists and dicts, empty extras and a dict equal to the last record's are one object
    across the records of a kind, and every record still equals the line parsed on its own."""
    from groundjudge.contracts import GoldenCase, Trace

    examples = Path(__file__).resolve().parent.parent / "examples"
    cases = load_golden(examples / "golden.jsonl")
    traces = load_traces([examples / "traces" / "baseline.jsonl"], cases)
    golden_lines = [line for line in (examples / "golden.jsonl").read_text().splitlines() if line.strip()]
    for line in golden_lines:
        parsed = GoldenCase.model_validate_json(line)
        assert cases[parsed.id] == parsed and cases[parsed.id].model_dump() == parsed.model_dump()
    empty = [c.forbidden for c in cases.values() if not c.forbidden]
    assert len(empty) > 5 and all(e is empty[0] for e in empty)
    loaded = [t for per_case in traces.values() for variants in per_case.values() for t in variants.values()]
    for line in (examples / "traces" / "baseline.jsonl").read_text().splitlines():
        if line.strip():
            parsed = Trace.model_validate_json(line)
            assert traces[parsed.config_id][parsed.query_id][parsed.paraphrase] == parsed
    versions = [t.versions for t in loaded if t.versions]
    assert len(versions) > 5 and all(v is versions[0] for v in versions if v == versions[0])
    assert len({id(t.__pydantic_extra__) for t in loaded if not t.__pydantic_extra__}) == 1
    deep = loaded[0].model_copy(deep=True)
    assert deep == loaded[0] and deep.versions is not loaded[0].versions
