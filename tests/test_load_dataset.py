"""Loading a dataset: records that cannot be changed, equal to each line parsed on its own."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import msgspec
import pytest
from frozendict import frozendict
from pydantic import BaseModel, ValidationError

from groundjudge.frozen import GivenFields
from groundjudge.load.dataset import load_dataset, load_golden, load_traces

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _mutable_parts(value: object, found: dict[int, object]) -> None:
    """Every list, dict and set reachable from ``value`` through fields, items and values."""
    if isinstance(value, (list, dict, set)) and type(value) not in (frozendict, GivenFields):
        found[id(value)] = value
    if isinstance(value, BaseModel):
        parts = [*(getattr(value, name) for name in type(value).model_fields), value.__pydantic_extra__,
                 value.__pydantic_fields_set__]
    elif isinstance(value, msgspec.Struct):
        parts = [getattr(value, name) for name in value.__struct_fields__]
    elif isinstance(value, dict):
        parts = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        parts = list(value)
    else:
        return
    for part in parts:
        _mutable_parts(part, found)


def test_loaded_records_cannot_be_changed_and_share_nothing_changeable() -> None:
    """A loaded record raises on every change (a field set, a tag appended, a mapping's key set,
    a chunk's field set), and holds no list, dict or set: so no two records, from one file or
    two, can share one."""
    ds = load_dataset(EXAMPLES / "golden.jsonl", [EXAMPLES / "traces" / "baseline.jsonl",
                                                  EXAMPLES / "traces" / "candidate.jsonl"], EXAMPLES / "corpus.jsonl")
    again = load_golden(EXAMPLES / "golden.jsonl")
    case = next(c for c in ds.cases.values() if c.tags and c.relevance)
    other = again[case.id]
    trace = next(t for per_case in ds.traces.values() for t in per_case.values()
                 if t.retrieved_chunks and t.versions and t.latency_ms)
    chunk = next(iter(ds.corpus.chunks.values()))
    attempts = {
        "set a case's field": lambda: setattr(case, "question", "changed"),
        "append to its tags": lambda: case.tags.append("x"),
        "set a grade": lambda: case.relevance.__setitem__("elsewhere#1", 1),
        "add to not_recorded": lambda: case.not_recorded.update(answer="why"),
        "set a version": lambda: trace.versions.__setitem__("index", "v9"),
        "append a chunk": lambda: trace.retrieved_chunks.append(trace.retrieved_chunks[0]),
        "set a chunk's score": lambda: setattr(trace.retrieved_chunks[0], "score", 0.0),
        "clear the latencies": lambda: trace.latency_ms.clear(),
        "set a trace's answer": lambda: setattr(trace, "answer", "changed"),
        "set a corpus chunk's text": lambda: setattr(chunk, "text", "changed"),
        "append to its section path": lambda: chunk.section_path.append("x"),
        "set a case's unknown field": lambda: case.model_extra.__setitem__("team", "x"),
        "set a chunk's access list": lambda: setattr(chunk, "acl", None),
        "set a trace's unknown field": lambda: trace.model_extra.__setitem__("team", "x"),
    }
    for what, attempt in attempts.items():
        with pytest.raises((TypeError, AttributeError, ValidationError)):
            attempt()
            pytest.fail(f"{what}: no error")
    assert case == other and case.tags == other.tags and "elsewhere#1" not in other.relevance

    records = [*ds.cases.values(), *again.values(), *ds.corpus.chunks.values(),
               *(t for per_case in ds.traces.values() for t in per_case.values())]
    assert len(records) > 100
    found: dict[int, object] = {}
    for record in records:
        _mutable_parts(record, found)
    assert found == {}


def test_loaded_records_pickle_and_equal_each_line_parsed_on_its_own() -> None:
    from groundjudge.contracts import GoldenCase, Trace

    cases = load_golden(EXAMPLES / "golden.jsonl")
    traces, paraphrases = load_traces([EXAMPLES / "traces" / "baseline.jsonl"], cases)
    for line in (EXAMPLES / "golden.jsonl").read_text().splitlines():
        if line.strip():
            parsed = GoldenCase.model_validate_json(line)
            assert cases[parsed.id] == parsed and cases[parsed.id].model_dump_json() == parsed.model_dump_json()
    for line in (EXAMPLES / "traces" / "baseline.jsonl").read_text().splitlines():
        if line.strip():
            parsed = Trace.model_validate_json(line)
            loaded = (traces[parsed.config_id][parsed.query_id] if parsed.paraphrase == 0
                      else paraphrases[parsed.config_id][parsed.query_id][parsed.paraphrase])
            assert loaded == parsed and loaded.model_dump_json() == parsed.model_dump_json()
            assert json.loads(loaded.model_dump_json()) == loaded.model_dump(mode="json")
            assert pickle.loads(pickle.dumps(loaded)) == loaded


def _gaps_one_trace_at_a_time(by_config: dict[str, Any], known: dict[str, Any]) -> tuple[dict[str, list[str]], ...]:
    """The rule for a dataset's gaps, applied to each trace on its own."""
    missing_text, unresolved = {}, {}
    for cfg, per_case in by_config.items():
        for cid, variants in per_case.items():
            for trace in variants.values():
                key = f"{cfg}/{cid}" + (f"#p{trace.paraphrase}" if trace.paraphrase else "")
                no_text = [c.chunk_id for c in trace.context_chunks if c.text is None and c.chunk_id not in known]
                unknown = sorted({c.chunk_id for c in (*trace.retrieved_chunks, *trace.citations)
                                  if c.chunk_id not in known}) if known else []
                if no_text:
                    missing_text[key] = no_text
                if unknown:
                    unresolved[key] = unknown
    return missing_text, unresolved


@pytest.mark.parametrize("gap", ["none", "context without text", "context with text", "retrieved", "cited",
                                 "no corpus"])
def test_gaps_are_those_of_each_trace_looked_at_on_its_own(gap: str) -> None:
    from groundjudge.contracts import CorpusChunk, Trace
    from groundjudge.load.dataset import Corpus, assemble_dataset, by_paraphrase

    corpus = Corpus({} if gap == "no corpus" else {
        cid: CorpusChunk(chunk_id=cid, doc_id=cid.split("#")[0], text="t") for cid in ("a#1", "a#2", "b#1")})
    odd = {"context without text": {"context_chunks": ["a#1", "ghost#1"]},
           "context with text": {"context_chunks": [{"chunk_id": "ghost#1", "text": "here"}]},
           "retrieved": {"retrieved_chunks": ["a#1", "ghost#1", "ghost#1"]},
           "cited": {"citations": ["ghost#2"]}}.get(gap, {})
    traces = [Trace.model_validate({"query_id": f"c{i}", "config_id": cfg, "paraphrase": p,
                                    "retrieved_chunks": ["a#1", "b#1"], "context_chunks": ["a#2"],
                                    "citations": ["a#1"], **(odd if (i, p) == (2, 1) else {})})
              for cfg in ("base", "cand") for i in range(4) for p in (0, 1)]
    by_config: dict[str, Any] = {}
    for t in traces:
        by_config.setdefault(t.config_id, {}).setdefault(t.query_id, {})[t.paraphrase] = t
    cases = {f"c{i}": None for i in range(5)}
    own, paraphrases = by_paraphrase(by_config)
    ds = assemble_dataset(cases, own, corpus, {}, paraphrases=paraphrases)  # type: ignore[arg-type]
    assert (ds.missing_text, ds.unresolved_chunks) == _gaps_one_trace_at_a_time(by_config, corpus.chunks)
    assert list(ds.missing_text) == list(_gaps_one_trace_at_a_time(by_config, corpus.chunks)[0])  # in case order
    assert ds.missing_trace == {"base": ["c4"], "cand": ["c4"]}
    assert bool(ds.missing_text or ds.unresolved_chunks) == (gap not in ("none", "context with text"))


def test_chunks_a_case_names_are_checked_against_the_corpus_field_by_field(tmp_path: Path) -> None:
    from groundjudge.errors import InputError
    from groundjudge.load.dataset import load_corpus

    corpus = load_corpus(Path(__file__).parent / "fixtures" / "mini" / "corpus.jsonl")
    cases = [{"id": "a", "question": "q", "expected_chunk_ids": ["leave#1"], "relevance": {"sla#1": 1}},
             {"id": "b", "question": "q", "must_cite": ["leave#2", "ghost#1"]},
             {"id": "c", "question": "q", "relevance": {"ghost#2": 2, "leave#1": 1}, "expected_chunk_ids": ["ghost#3"]}]
    golden = tmp_path / "g.jsonl"
    golden.write_text("".join(json.dumps(case) + "\n" for case in cases[:1]))
    assert list(load_golden(golden, corpus)) == ["a"]
    golden.write_text("".join(json.dumps(case) + "\n" for case in cases))
    with pytest.raises(InputError) as caught:
        load_golden(golden, corpus)
    assert [(p.line, p.field, p.problem) for p in caught.value.problems] == [
        (2, "must_cite", "chunk ids not in the corpus: ghost#1"),
        (3, "expected_chunk_ids", "chunk ids not in the corpus: ghost#3"),
        (3, "relevance", "chunk ids not in the corpus: ghost#2, ghost#3")]


def test_a_trace_repeated_in_another_file_names_where_the_first_is(tmp_path: Path) -> None:
    from groundjudge.contracts import GoldenCase
    from groundjudge.errors import InputError

    cases = {cid: GoldenCase(id=cid, question="Q?") for cid in ("a", "b")}
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    first.write_text("\n".join(json.dumps(t) for t in (
        {"query_id": "a", "config_id": "c"}, {"query_id": "a", "config_id": "c", "paraphrase": 1},
        {"query_id": "b", "config_id": "d"})) + "\n")
    second.write_text("\n".join(json.dumps(t) for t in (
        {"query_id": "zz", "config_id": "c"}, {"query_id": "a", "config_id": "c", "paraphrase": 1},
        {"query_id": "b", "config_id": "c"}, {"query_id": "b", "config_id": "d"})) + "\n")
    with pytest.raises(InputError) as raised:
        load_traces([first, second], cases)
    assert [str(p) for p in raised.value.problems] == [
        f"{second}:1: query_id: unknown case 'zz': not in the golden set",
        f"{second}:2: query_id: duplicate trace for case 'a' config 'c' paraphrase 1 (first at {first}:2)",
        f"{second}:4: query_id: duplicate trace for case 'b' config 'd' (first at {first}:3)"]
    traces, paraphrases = load_traces([first], cases)
    assert {cfg: {cid: t.paraphrase for cid, t in per.items()} for cfg, per in traces.items()} == {
        "c": {"a": 0}, "d": {"b": 0}}
    assert {cfg: {cid: sorted(v) for cid, v in per.items()} for cfg, per in paraphrases.items()} == {"c": {"a": [1]}}


def test_paraphrase_traces_are_held_apart_and_scored_with_their_case(tmp_path: Path) -> None:
    """A case's own trace is its config's trace for it; its paraphrases' traces (in any order in
    the file, even before its own) score its paraphrase stability, in paraphrase order; a case
    with only a paraphrase's trace has no trace of its own and is not scored."""
    from groundjudge.metrics.evaluate import evaluate_dataset
    from groundjudge.metrics.stability import topk_agreement

    golden, traces = tmp_path / "golden.jsonl", tmp_path / "traces.jsonl"
    golden.write_text("\n".join(json.dumps({"id": cid, "question": f"q {cid}?", "paraphrases": ["again?", "once more?"],
                                            "expected_chunk_ids": ["a#1"]}) for cid in ("a", "b")) + "\n")
    rankings = {0: ["a#1", "b#1", "c#1"], 1: ["a#1", "d#1", "e#1"], 2: ["b#1", "c#1", "f#1"]}
    lines = [{"query_id": "a", "config_id": "cfg", "paraphrase": p, "retrieved_chunks": rankings[p]} for p in (2, 0, 1)]
    lines.append({"query_id": "b", "config_id": "cfg", "paraphrase": 1, "retrieved_chunks": ["a#1"]})
    traces.write_text("\n".join(map(json.dumps, lines)) + "\n")

    ds = load_dataset(golden, [traces])
    assert list(ds.traces) == ["cfg"] and list(ds.traces["cfg"]) == ["a"]
    assert ds.trace("cfg", "a") is ds.traces["cfg"]["a"] and ds.trace("cfg", "a").paraphrase == 0
    assert ds.trace("cfg", "b") is None and ds.missing_trace == {"cfg": ["b"]}
    assert [t.paraphrase for t in ds.paraphrase_traces("cfg", "a")] == [1, 2]
    assert [t.paraphrase for t in ds.paraphrase_traces("cfg", "b")] == [1] and ds.paraphrase_traces("x", "a") == []

    run = evaluate_dataset(ds)
    assert [c.case_id for c in run.configs["cfg"].cases] == ["a"]
    expected = topk_agreement([rankings[0], rankings[1], rankings[2]], 5)
    assert expected is not None and 0 < expected < 1
    assert run.case("cfg", "a").values["paraphrase_stability@5"] == expected
