"""A loaded trace's chunk lists as columns (load.items): they read as the lists they replace."""

from __future__ import annotations

import json
import math
import pickle
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from groundjudge.contracts import Citation, ContextChunk, RetrievedChunk, Trace
from groundjudge.load.dataset import load_golden, load_traces
from groundjudge.load.items import (
    IdColumns,
    RetrievedColumns,
    chunk_docs,
    chunk_ids,
    chunk_scores,
    chunk_texts,
    has_offsets,
)
from groundjudge.metrics.case import ranking_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _parsed(line: str) -> Trace:
    return Trace.model_validate_json(line)


def test_loaded_traces_hold_columns_and_equal_the_parsed_ones():
    """Every example trace, loaded, equals the same line validated on its own: ==, its dump,
    its JSON, a pickle round trip, and item by item."""
    paths = [EXAMPLES / "traces" / "baseline.jsonl", EXAMPLES / "traces" / "candidate.jsonl"]
    loaded = load_traces(paths, load_golden(EXAMPLES / "golden.jsonl"))
    parsed = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                t = _parsed(line)
                parsed[(t.config_id, t.query_id, t.paraphrase)] = t
    kinds = set()
    for config_id, per_case in loaded.items():
        for case_id, variants in per_case.items():
            for i, trace in variants.items():
                ref = parsed.pop((config_id, case_id, i))
                kinds.add(type(trace.retrieved_chunks))
                assert trace == ref and ref == trace
                assert trace.model_dump() == ref.model_dump()
                assert trace.model_dump_json() == ref.model_dump_json()
                assert pickle.loads(pickle.dumps(trace)) == ref
                for name in ("retrieved_chunks", "context_chunks", "citations"):
                    assert list(getattr(trace, name)) == getattr(ref, name)
                    assert list(chunk_ids(getattr(trace, name))) == [c.chunk_id for c in getattr(ref, name)]
                assert list(chunk_scores(trace.retrieved_chunks)) == [c.score for c in ref.retrieved_chunks]
                assert list(chunk_docs(trace.retrieved_chunks)) == [c.doc_id for c in ref.retrieved_chunks]
                assert list(chunk_texts(trace.context_chunks)) == [c.text for c in ref.context_chunks]
                assert ranking_of(trace) == ranking_of(ref)
    assert not parsed
    assert RetrievedColumns in kinds


def _chunks(n: int = 4, **extra) -> list[RetrievedChunk]:
    return [RetrievedChunk(chunk_id=f"c{i}", doc_id=f"d{i % 2}", score=1.0 - i / 10, rank=i + 1, stage="rerank",
                           **extra) for i in range(n)]


def test_the_columns_read_as_a_list():
    items = _chunks()
    columns = RetrievedColumns.of(items)
    assert columns is not None
    assert len(columns) == 4 and bool(columns)
    assert columns[0] == items[0] and columns[-1] == items[-1] and columns[1:3] == items[1:3]
    assert isinstance(columns[1:3], list)
    with pytest.raises(IndexError):
        columns[4]
    with pytest.raises(IndexError):
        columns[-5]
    assert items[2] in columns and RetrievedChunk(chunk_id="zz") not in columns
    assert columns == items and items == columns and columns == RetrievedColumns.of(items)
    assert columns != items[:3] and columns != [*items[:3], RetrievedChunk(chunk_id="c3")]
    assert columns != tuple(items)  # as a list, which never equals a tuple
    assert repr(columns) == repr(items)
    assert columns.index(items[2]) == 2 and list(reversed(columns)) == items[::-1]
    with pytest.raises(TypeError):
        hash(columns)
    assert type(columns[0]) is RetrievedChunk and columns[0].model_extra == {}
    assert pickle.loads(pickle.dumps(columns)) == items
    assert columns.ids == ("c0", "c1", "c2", "c3") and columns.types is None and columns.stages == ("rerank",) * 4


def test_what_the_columns_cannot_hold_stays_a_list():
    assert RetrievedColumns.of([]) is None
    assert RetrievedColumns.of(_chunks(text="the chunk's text")) is None
    assert RetrievedColumns.of(_chunks(offsets=[0, 4])) is None
    assert RetrievedColumns.of(_chunks(reranker="bge")) is None  # an unknown field
    mixed = [RetrievedChunk(chunk_id="a", score=0.5), RetrievedChunk(chunk_id="b")]
    assert RetrievedColumns.of(mixed) is None
    ranks = [RetrievedChunk(chunk_id="a", rank=1), RetrievedChunk(chunk_id="b")]
    assert RetrievedColumns.of(ranks) is None
    assert RetrievedColumns.of([RetrievedChunk(chunk_id="a", rank=2**70)]) is None
    bare = RetrievedColumns.of([RetrievedChunk(chunk_id="a"), RetrievedChunk(chunk_id="b")])
    assert bare is not None and bare.docs is bare.scores is bare.ranks is None
    assert list(chunk_scores(bare)) == [None, None] and list(chunk_docs(bare)) == [None, None]
    assert ranking_of(Trace(query_id="q", config_id="c", retrieved_chunks=["a", "b", "a"])) == ["a", "b"]

    assert IdColumns.of([ContextChunk(chunk_id="a", text="given")]) is None
    assert IdColumns.of([ContextChunk(chunk_id="a", text_hash="h")]) is None
    assert IdColumns.of([Citation(chunk_id="a", offsets=[1, 2])]) is None
    assert IdColumns.of([Citation(chunk_id="a"), ContextChunk(chunk_id="b")]) is None
    cites = IdColumns.of([Citation(chunk_id="a"), Citation(chunk_id="b")])
    assert cites is not None and list(cites) == [Citation(chunk_id="a"), Citation(chunk_id="b")]
    assert not has_offsets(cites) and has_offsets([Citation(chunk_id="a", offsets=[1, 2])])
    assert chunk_texts(IdColumns.of([ContextChunk(chunk_id="a")])) == (None,)


def test_a_trace_keeps_its_lists_where_the_columns_do_not_fit(tmp_path: Path):
    line = {"query_id": "q001", "config_id": "x",
            "retrieved_chunks": [{"chunk_id": "a", "score": 0.9, "text": "kept"}, {"chunk_id": "b", "score": 0.5}],
            "context_chunks": [{"chunk_id": "a", "text": "kept"}], "citations": ["a"]}
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n")
    trace = load_traces([tmp_path / "t.jsonl"], load_golden(EXAMPLES / "golden.jsonl"))["x"]["q001"][0]
    assert isinstance(trace.retrieved_chunks, list) and isinstance(trace.context_chunks, list)
    assert isinstance(trace.citations, IdColumns)
    assert trace == _parsed(json.dumps(line))


def test_scores_and_the_ranking_as_with_lists():
    """Scores held in an array read back the same floats and rank the same way as the list of
    items, on random traces (ties, repeated ids, negative scores). A NaN score is refused when
    a trace is read (SPEC 10: non-finite numbers are malformed), so none reaches the arrays."""
    with pytest.raises(ValidationError):
        RetrievedChunk(chunk_id="c", score=math.nan)
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(1, 8)
        chunks = [RetrievedChunk(chunk_id=f"c{rng.randint(0, 5)}",
                                 score=rng.choice([0.5, 0.25, -1.0, rng.random()])) for _ in range(n)]
        columns = RetrievedColumns.of(chunks)
        assert columns is not None
        scores = chunk_scores(columns)
        assert list(scores) == [c.score for c in chunks]
        as_list = Trace(query_id="q", config_id="c", retrieved_chunks=chunks)
        as_columns = Trace(query_id="q", config_id="c", retrieved_chunks=chunks)
        object.__setattr__(as_columns, "retrieved_chunks", columns)
        assert ranking_of(as_columns) == ranking_of(as_list)


def test_ranks_one_to_n_are_one_shared_range_and_others_an_array():
    a, b = RetrievedColumns.of(_chunks(3)), RetrievedColumns.of(_chunks(3))
    assert a is not None and b is not None and a.ranks is b.ranks and a.ranks == range(1, 4)
    odd = RetrievedColumns.of([RetrievedChunk(chunk_id="a", rank=2), RetrievedChunk(chunk_id="b", rank=1)])
    assert odd is not None and list(odd.ranks) == [2, 1] and [c.rank for c in odd] == [2, 1]
    assert [type(c.rank) for c in a] == [int] * 3 and pickle.loads(pickle.dumps(a)) == _chunks(3)
