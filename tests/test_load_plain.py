"""The msgspec path for traces, golden cases and corpus chunks of the plain shape
(groundjudge.load.plain) against pydantic's: it never accepts what pydantic rejects, and what it
accepts is the very record pydantic makes."""

from __future__ import annotations

import json
import math
import sys
from copy import deepcopy
from typing import Any

import msgspec
from frozendict import frozendict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from groundjudge.contracts import Citation, ContextChunk, CorpusChunk, GoldenCase, RetrievedChunk, Trace
from groundjudge.load.plain import plain_records
from groundjudge.load.records import read_records

PYDANTIC = {model: TypeAdapter(list[model]) for model in (Trace, GoldenCase, CorpusChunk)}


def same(a: Any, b: Any, where: str = "record") -> None:
    """``a`` and ``b`` equal, with the same type at every level (tuples, read-only mappings,
    structs with their unknown fields, models with their given fields and unknown fields; a
    record, a struct, has no given fields: what pydantic writes of it)."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, BaseModel):
        state_a, state_b = a.__getstate__(), b.__getstate__()
        assert state_a.keys() == state_b.keys(), where
        assert a.model_fields_set == b.model_fields_set, where
        for key in state_a:
            same(state_a[key], state_b[key], f"{where}.{key}")
        assert a.model_dump_json() == b.model_dump_json(), where
    elif isinstance(a, msgspec.Struct):
        for name in a.__struct_fields__:
            same(getattr(a, name), getattr(b, name), f"{where}.{name}")
        if isinstance(a, (Trace, GoldenCase, CorpusChunk)):
            assert a.model_dump_json() == b.model_dump_json(), where
        if isinstance(a, Trace):
            assert a.versions is b.versions, where  # the one map of these versions
        elif isinstance(a, (RetrievedChunk, ContextChunk, Citation)):
            if isinstance(a.chunk_id, str):  # a trace chunk's ids: one string per value across the run
                assert a.chunk_id is sys.intern(a.chunk_id), where
            if isinstance(getattr(a, "doc_id", None), str):
                assert a.doc_id is sys.intern(a.doc_id), where
    elif isinstance(a, (dict, frozendict)):
        assert list(a) == list(b), where
        for key in a:
            same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (tuple, list, set)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(sorted(a) if isinstance(a, set) else a,
                                       sorted(b) if isinstance(b, set) else b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where
        if isinstance(a, float):
            assert repr(a) == repr(b), where  # -0.0 and 0.0 too


def check(lines: list[str], model: type[BaseModel] = Trace) -> list[Any] | None:
    """The batch of ``lines`` through both paths; the plain records, or None when left to pydantic."""
    batch = ("[" + ",".join(lines) + "]").encode()
    fast = plain_records(model, batch)
    try:
        slow = PYDANTIC[model].validate_json(batch)
    except ValidationError:
        assert fast is None, f"accepted what pydantic rejects: {lines}"
        return None
    if fast is not None:
        same(fast, slow)
    return fast


ids = st.sampled_from(["d0#1", "pool7#1", "", " ", "\t", "é#1", "\u00a0", "a\u0000b", "🙂"]) | st.text(max_size=4)
numbers = (st.integers(-3, 3) | st.integers(-(10**20), 10**20) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0.0, -0.0, 1e12, 1e12 + 1, 10**15, 10**15 + 1, 2**53 + 1, 0.1, 5e-324]))
# (the lists and objects here are the same objects on every draw: a test copies one before changing it)
odd = st.sampled_from([None, True, False, "5", "x", [], {}, [1, 2], {"a": 1}])
anything = numbers | odd | ids


def opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy | anything


offsets = (st.lists(st.integers(-2, 5) | st.floats(-1, 5) | odd, min_size=0, max_size=3)
           | st.fixed_dictionaries({"start": st.integers(-2, 5), "end": st.integers(-2, 5)},
                                   optional={"x": st.just(1)})
           | anything)


def chunk(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    shaped = st.fixed_dictionaries({}, optional={"chunk_id": ids, **fields,
                                                 "extra": anything, "model_extra": st.just({"a": 1})})
    return shaped | ids | anything


retrieved = chunk({"doc_id": opt(ids), "score": opt(numbers), "rank": opt(numbers), "stage": opt(ids),
                   "text": opt(ids), "offsets": offsets,
                   "type": st.sampled_from(["prose", "code", "table", "figure", "Prose", ""]) | anything})
context = chunk({"text": opt(ids), "text_hash": opt(ids)})
cited = chunk({"offsets": offsets})
maps = (st.dictionaries(ids, numbers | odd, max_size=3) | anything)
fields = {
    "question": opt(ids), "paraphrase": opt(numbers), "answer": opt(ids), "error": opt(ids),
    "retrieved_chunks": st.lists(retrieved, max_size=4) | anything,
    "context_chunks": st.lists(context, max_size=4) | anything,
    "citations": st.lists(cited, max_size=3) | anything,
    "behavior": st.sampled_from(["answer", "abstain", "permission_denied", "escalate", "Answer"]) | anything,
    "latency_ms": maps, "tokens": maps, "cost_usd": opt(numbers),
    "versions": st.dictionaries(ids, ids | anything, max_size=2) | anything,
    "not_recorded": st.lists(st.sampled_from(["answer", "citations", "tokens"]), max_size=2) | anything,
    "team_note": anything,
}


@st.composite
def plain_lines(draw: st.DrawFn) -> str:
    """Lines of the plain shape only, valid ones: the plain path must take every one."""
    good_ids = st.text(min_size=1, max_size=6)
    floats = st.floats(0, 1e12) | st.integers(0, 10**6)

    def items(extra: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
        return st.lists(good_ids | st.fixed_dictionaries({"chunk_id": good_ids}, optional=extra), max_size=5)

    record = draw(st.fixed_dictionaries(
        {"query_id": good_ids, "config_id": good_ids},
        optional={"question": st.none() | st.text(), "paraphrase": st.integers(0, 9), "answer": st.text(),
                  "retrieved_chunks": items({"doc_id": st.none() | good_ids, "score": st.none() | st.floats(-1, 1),
                                             "rank": st.integers(-1, 50), "text": st.text(),
                                             "offsets": st.sampled_from([[0, 4], {"start": 2, "end": 9}]),
                                             "type": st.sampled_from(["prose", "code", "table", "figure"])}),
                  "context_chunks": items({"text": st.none() | st.text(), "text_hash": st.text()}),
                  "citations": items({"offsets": st.sampled_from([[1, 1], None])}),
                  "behavior": st.sampled_from(["answer", "abstain", None]), "error": st.none() | st.text(),
                  "latency_ms": st.dictionaries(st.text(max_size=3), floats, max_size=2),
                  "tokens": st.dictionaries(st.text(max_size=3), st.integers(0, 10**15), max_size=2),
                  "cost_usd": st.none() | floats, "versions": st.dictionaries(st.text(max_size=3), st.text(), max_size=2)}))
    return json.dumps(record, ensure_ascii=draw(st.booleans()))


TOP = ["query_id", "config_id", *fields]
CHUNK = {"retrieved_chunks": ["chunk_id", "doc_id", "score", "rank", "stage", "text", "offsets", "type"],
         "context_chunks": ["chunk_id", "text", "text_hash"], "citations": ["chunk_id", "offsets"]}
edge = (anything | offsets | st.sampled_from(["prose", "Answer", "abstain", -1e-9, 1e12 + 0.5, 10**15 + 1]))


@st.composite
def trace_lines(draw: st.DrawFn) -> str:
    """A plain trace with a few things changed (a field, a chunk's field, a total, a key given
    twice or missing, an unknown key): most such lines sit on the edge of the plain shape."""
    record = json.loads(draw(plain_lines()))
    for _ in range(draw(st.integers(0, 3))):
        target, names = record, TOP
        lists = [name for name in CHUNK if isinstance(record.get(name), list) and record[name]]
        maps_given = [name for name in ("latency_ms", "tokens", "versions") if isinstance(record.get(name), dict)]
        where = draw(st.sampled_from(["top", *(["chunk"] if lists else []), *(["map"] if maps_given else [])]))
        if where == "chunk":
            name = draw(st.sampled_from(lists))
            items = record[name]
            i = draw(st.integers(0, len(items) - 1))
            if not isinstance(items[i], dict) or draw(st.booleans()):
                items[i] = deepcopy(draw(edge | ids))
                continue
            target, names = items[i], CHUNK[name]
        elif where == "map":
            target, names = record[draw(st.sampled_from(maps_given))], ["end_to_end", "total", ""]
        key = draw(st.sampled_from([*names, "extra", "model_extra"]))
        if draw(st.integers(0, 5)) == 0 and key in target:
            del target[key]
        else:
            target[key] = deepcopy(draw(edge | ids | fields.get(key, edge)))
    pairs = list(record.items())
    if pairs and draw(st.integers(0, 5)) == 0:
        pairs.append((pairs[0][0], draw(ids | anything)))  # a key given twice
    ascii_only = draw(st.booleans())
    return "{" + ", ".join(json.dumps(k) + ": " + json.dumps(v, ensure_ascii=ascii_only) for k, v in pairs) + "}"


@settings(max_examples=300, deadline=None)
@given(st.lists(plain_lines(), min_size=1, max_size=3))
def test_the_plain_path_takes_every_plain_trace(lines: list[str]) -> None:
    assert check(lines) is not None


def test_a_file_of_plain_and_other_traces_reads_as_pydantic_reads_it(tmp_path: Any) -> None:
    lines = [
        {"query_id": "q1", "config_id": "c", "retrieved_chunks": [{"chunk_id": "a", "doc_id": "d", "score": 1, "rank": 1}],
         "context_chunks": ["a"], "answer": "x [a]", "citations": [{"chunk_id": "a"}],
         "latency_ms": {"end_to_end": 5}, "versions": {"chunking": "v1"}},
        {"query_id": "q2", "config_id": "c", "tokens": 12, "latency_ms": 7.5, "team": {"note": [1]},
         "retrieved_chunks": [{"chunk_id": "b", "mine": 1}], "not_recorded": ["citations"]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    read = read_records(path, Trace)
    assert [line for line, _ in read] == [1, 2]
    for (_, record), line in zip(read, lines, strict=True):
        same(record, Trace.model_validate(line))
    assert check([json.dumps(lines[0])]) is not None and check([json.dumps(lines[1])]) is None
    first = read[0][1]
    assert type(first.context_chunks[0]) is ContextChunk and type(first.citations[0]) is Citation
    assert type(first.retrieved_chunks[0]) is RetrievedChunk and first.retrieved_chunks[0].score == 1.0
    assert type(first.retrieved_chunks[0].score) is float


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(trace_lines(), min_size=1, max_size=3))
def test_the_plain_path_makes_what_pydantic_makes_and_rejects_what_it_rejects(lines: list[str]) -> None:
    check(lines)


def test_numbers_past_a_float_and_bounds_are_left_to_pydantic() -> None:
    for fragment in ('"latency_ms": {"end_to_end": 1e400}', '"cost_usd": 1e400', '"latency_ms": {"x": 1000000000000.5}',
                     '"retrieved_chunks": [{"chunk_id": "a", "score": 1e400}]', '"tokens": {"total": 1000000000000001}',
                     '"paraphrase": -1', '"retrieved_chunks": [{"chunk_id": ""}]', '"context_chunks": [""]'):
        assert check(['{"query_id": "q", "config_id": "c", ' + fragment + "}"]) is None, fragment


good_text = st.text(min_size=1, max_size=6)
texts = st.lists(st.text(max_size=4), max_size=3)
chunk_ids = st.lists(good_text, max_size=3)
CASE_FIELDS = {
    "expected_answer": st.none() | st.text(), "expected_chunk_ids": chunk_ids,
    "relevance": st.dictionaries(st.text(max_size=6), st.integers(0, 3), max_size=3),
    "expected_doc_ids": st.none() | chunk_ids, "must_cite": chunk_ids, "must_contain": texts,
    "forbidden": texts, "gold_claim_substrings": texts, "difficulty": st.none() | st.text(max_size=5),
    "tags": texts, "expected_behavior": st.sampled_from(["answer", "abstain", "permission_denied", "escalate"]),
    "constraints": texts, "paraphrases": texts,
}
CHUNK_FIELDS = {
    "doc_version": st.none() | st.text(max_size=4), "section_path": texts | st.text(max_size=8),
    "offsets": st.none() | st.sampled_from([[0, 4], {"start": 2, "end": 9}, [3, 3]]),
    "type": st.sampled_from(["prose", "code", "table", "figure"]),
}


@st.composite
def plain_cases(draw: st.DrawFn) -> str:
    """Golden cases of the plain shape only, valid ones: the plain path must take every one."""
    record = draw(st.fixed_dictionaries({"id": good_text, "question": good_text}, optional=CASE_FIELDS))
    return json.dumps(record, ensure_ascii=draw(st.booleans()))


@st.composite
def plain_chunks(draw: st.DrawFn) -> str:
    """Corpus chunks of the plain shape only, valid ones: the plain path must take every one."""
    record = draw(st.fixed_dictionaries({"chunk_id": good_text, "doc_id": good_text, "text": st.text(max_size=8)},
                                        optional=CHUNK_FIELDS))
    return json.dumps(record, ensure_ascii=draw(st.booleans()))


def changed(draw: st.DrawFn, line: str, names: list[str], nested: list[str]) -> str:
    """``line`` with a few things changed (a field's value, a list's item, a field gone or
    given twice, an unknown or nested field): most such lines sit on the edge of the plain shape."""
    record = json.loads(line)
    for _ in range(draw(st.integers(0, 3))):
        lists = [name for name, value in record.items() if isinstance(value, (list, dict)) and value]
        if lists and draw(st.integers(0, 2)) == 0:
            target = record[draw(st.sampled_from(lists))]
            if isinstance(target, list):
                target[draw(st.integers(0, len(target) - 1))] = deepcopy(draw(edge | ids))
            else:
                target[draw(st.sampled_from([*target, "", "x"]))] = deepcopy(draw(edge | ids))
            continue
        key = draw(st.sampled_from([*names, *nested, "extra", "model_extra"]))
        if draw(st.integers(0, 5)) == 0 and key in record:
            del record[key]
        else:
            record[key] = deepcopy(draw(edge | ids | st.lists(ids, max_size=2) | st.just({"tenant": "t", "roles": ["r"]})))
    pairs = list(record.items())
    if pairs and draw(st.integers(0, 5)) == 0:
        pairs.append((pairs[0][0], draw(ids | anything)))  # a key given twice
    ascii_only = draw(st.booleans())
    return "{" + ", ".join(json.dumps(k) + ": " + json.dumps(v, ensure_ascii=ascii_only) for k, v in pairs) + "}"


@st.composite
def case_lines(draw: st.DrawFn) -> str:
    return changed(draw, draw(plain_cases()), ["id", "question", *CASE_FIELDS], ["user_context", "not_recorded"])


@st.composite
def chunk_lines(draw: st.DrawFn) -> str:
    return changed(draw, draw(plain_chunks()), ["chunk_id", "doc_id", "text", *CHUNK_FIELDS], ["acl"])


@settings(max_examples=300, deadline=None)
@given(st.lists(plain_cases(), min_size=1, max_size=3), st.lists(plain_chunks(), min_size=1, max_size=3))
def test_the_plain_path_takes_every_plain_case_and_chunk(cases: list[str], chunks: list[str]) -> None:
    assert check(cases, GoldenCase) is not None
    assert check(chunks, CorpusChunk) is not None


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(case_lines(), min_size=1, max_size=3), st.lists(chunk_lines(), min_size=1, max_size=3))
def test_cases_and_chunks_made_as_pydantic_makes_them_and_rejected_as_it_rejects(cases: list[str],
                                                                                  chunks: list[str]) -> None:
    check(cases, GoldenCase)
    check(chunks, CorpusChunk)


def test_a_case_s_expected_chunks_are_graded_and_its_odd_fields_left_to_pydantic() -> None:
    (case,) = check(['{"id": "q", "question": "Q?", "expected_chunk_ids": ["a", "b"], "relevance": {"b": 1}}'],
                    GoldenCase) or ()
    assert list(case.relevance.items()) == [("b", 1), ("a", 3)] and type(case.relevance) is frozendict
    (case,) = check(['{"id": "q", "question": "Q?", "expected_chunk_ids": ["a"]}'], GoldenCase) or ()
    assert dict(case.relevance) == {"a": 3}
    mixed = check(['{"id": "q", "question": "Q?", "expected_chunk_ids": ["a"]}',
                   '{"id": "r", "question": "R?", "relevance": {"c": 2}, "tags": ["x"]}',
                   '{"id": "s", "question": "S?", "relevance": {}, "user_context": null}'], GoldenCase)
    assert mixed is not None and [dict(c.relevance) for c in mixed] == [{"a": 3}, {"c": 2}, {}]
    assert mixed[1].tags == ("x",) and mixed[2].relevance is mixed[0].not_recorded  # the one empty map
    for odd in ('"user_context": {"tenant": "t"}', '"not_recorded": ["expected_behavior"]', '"team": 1',
                '"relevance": {"a": 3.0}', '"relevance": {"a": 4}', '"must_cite": [""]'):
        assert check(['{"id": "q", "question": "Q?", ' + odd + "}"], GoldenCase) is None, odd


def test_a_chunk_s_section_path_is_split_and_its_odd_fields_left_to_pydantic() -> None:
    (chunk,) = check(['{"chunk_id": "a", "doc_id": "d", "text": "t", "section_path": " HR > Leave >> "}'],
                     CorpusChunk) or ()
    assert chunk.section_path == ("HR", "Leave") and chunk.type == "prose"
    for odd in ('"acl": {"tenants": ["t"]}', '"team": 1', '"type": "Prose"', '"offsets": [4, 2]', '"doc_id": ""'):
        assert check(['{"chunk_id": "a", "doc_id": "d", "text": "t", ' + odd + "}"], CorpusChunk) is None, odd


def test_plain_cases_and_chunks_cannot_be_changed(tmp_path: Any) -> None:
    golden = tmp_path / "g.jsonl"
    golden.write_text('{"id": "q", "question": "Q?", "tags": ["a"], "relevance": {"c": 2}}\n')
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"chunk_id": "a", "doc_id": "d", "text": "t"}\n')
    ((_, case),) = read_records(golden, GoldenCase)
    ((_, chunk),) = read_records(corpus, CorpusChunk)
    for record, name, value in ((case, "tags", ()), (chunk, "text", "x")):
        try:
            setattr(record, name, value)
        except AttributeError:
            pass
        else:
            raise AssertionError(f"{name} changed")
    for change in (lambda: case.relevance.update(x=1), lambda: case.model_extra.update(x=1),  # type: ignore[attr-defined]
                   lambda: chunk.model_extra.update(x=1)):  # type: ignore[attr-defined]
        try:
            change()
        except (AttributeError, TypeError):
            pass
        else:
            raise AssertionError("changed")


def test_a_batch_holds_one_string_of_a_config_and_of_a_document() -> None:
    traces = check([json.dumps({"query_id": f"q{i}", "config_id": "baseline"}) for i in range(3)]) or []
    assert traces[0].config_id is traces[1].config_id is traces[2].config_id
    mixed = check([json.dumps({"query_id": "q", "config_id": name}) for name in ("a", "a", "b", "a")]) or []
    assert [t.config_id for t in mixed] == ["a", "a", "b", "a"] and mixed[0].config_id is mixed[1].config_id
    chunks = check([json.dumps({"chunk_id": f"d{d}#{i}", "doc_id": f"d{d}", "text": "t"}) for d in (1, 2) for i in (1, 2)],
                   CorpusChunk) or []
    assert [c.doc_id for c in chunks] == ["d1", "d1", "d2", "d2"]
    assert chunks[0].doc_id is chunks[1].doc_id and chunks[2].doc_id is chunks[3].doc_id
