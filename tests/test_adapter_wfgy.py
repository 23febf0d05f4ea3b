"""WFGY adapters: the grounded-QA and chunking formats are read as they are, recognised from
their first line, converted to the native contracts, and bad lines are reported as
``file:line: field: problem``."""

from __future__ import annotations

import json

import pytest

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError
from groundjudge.load.adapters import wfgy, wfgy_chunking
from tests.conftest import ROOT

QA = ROOT / "examples" / "wfgy"
CHUNKING = ROOT / "examples" / "wfgy-chunking"


def first_object(path):
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


# --- auto-detection ----------------------------------------------------------------------------

def test_each_format_recognises_its_own_files_and_no_other():
    files = {
        ("wfgy", "gold"): QA / "gold.jsonl",
        ("wfgy", "trace"): QA / "trace.jsonl",
        ("chunking", "gold"): CHUNKING / "gold.jsonl",
        ("chunking", "trace"): CHUNKING / "trace.jsonl",
        ("native", "gold"): ROOT / "examples" / "golden.jsonl",
        ("native", "trace"): ROOT / "examples" / "traces" / "baseline.jsonl",
    }
    adapters = {"wfgy": wfgy, "chunking": wfgy_chunking}
    for (owner, role), path in files.items():
        obj = first_object(path)
        for name, adapter in adapters.items():
            for asked in ("gold", "trace"):
                assert adapter.looks_like(obj, asked) is (name == owner and asked == role), (path, name, asked)


def test_wfgy_trace_detection_accepts_the_q_id_spelling_and_rejects_non_objects():
    assert wfgy.looks_like({"q_id": "A1", "answer_json": {"claim": "x"}}, "trace")
    assert not wfgy.looks_like(["qid"], "gold")  # type: ignore[arg-type]
    assert not wfgy_chunking.looks_like({"qid": "Q", "topk": "S.1.p.B1"}, "trace")


# --- WFGY grounded QA: conversion --------------------------------------------------------------

def test_wfgy_gold_converts_to_native_cases():
    cases, _ = wfgy.to_native(QA / "gold.jsonl", [QA / "trace.jsonl"])
    a1, a2 = cases["A0001"], cases["A0002"]
    assert isinstance(a1, GoldenCase) and a1.question == "Does X support null keys?"
    assert a1.expected_behavior == "answer" and a2.expected_behavior == "abstain"
    assert a1.expected_chunk_ids == ("p1#2",) and a1.must_cite == ("p1#2",) and a1.relevance == {"p1#2": 3}
    assert a1.gold_claim_substrings == ("rejects null keys",)
    assert a1.constraints == ("X rejects null keys.",) and a2.constraints == ()
    assert cases["A0004"].model_extra["notes"].startswith("answer right")  # unknown fields kept


def test_wfgy_traces_convert_to_native_traces():
    _, traces = wfgy.to_native(QA / "gold.jsonl", [QA / "trace.jsonl"])
    assert list(traces) == ["trace"]  # the file's stem names the config
    by_case = {qid: per[0] for qid, per in traces["trace"].items()}
    t1 = by_case["A0001"]
    assert isinstance(t1, Trace) and t1.query_id == "A0001" and t1.config_id == "trace"
    assert t1.question == "Does X support null keys?"
    assert [c.chunk_id for c in t1.retrieved_chunks] == ["p1#1", "p1#2", "p2#1"]
    assert t1.answer == "X rejects null keys." and [c.chunk_id for c in t1.citations] == ["p1#2"]
    assert t1.behavior == "answer" and by_case["A0002"].behavior == "abstain"
    assert by_case["A0010"].behavior == "answer"  # "Not in context." is not the refusal token
    assert by_case["A0007"].model_extra["constraints_echo"] == ("Exports run asynchronously.",
                                                                "Exports are limited to 10,000 rows.")
    assert "constraints_echo" not in (t1.model_extra or {})
    assert by_case["A0004"].model_extra["ts"] == 1723430400 and by_case["A0004"].model_extra["ok"] is True


def test_wfgy_config_id_can_be_named():
    _, traces = wfgy.to_native(QA / "gold.jsonl", [QA / "trace.jsonl"], config_id="guarded-v2")
    assert list(traces) == ["guarded-v2"]
    assert traces["guarded-v2"]["A0001"][0].config_id == "guarded-v2"


def test_wfgy_last_trace_line_wins_and_the_replaced_lines_are_named(tmp_path):
    gold = write(tmp_path, "gold.jsonl", [{"qid": "A", "question": "q?", "answerable": True,
                                           "gold_claim_substr": [], "gold_citations": []}])
    trace = write(tmp_path, "trace.jsonl", [
        {"qid": "A", "q": "q?", "retrieved_ids": [], "answer_json": {"claim": "first", "citations": []}},
        {"qid": "A", "q": "q?", "retrieved_ids": [], "answer_json": {"claim": "second", "citations": []}},
        {"qid": "A", "q": "q?", "retrieved_ids": [], "answer_json": {"claim": "not in context", "citations": []}},
    ])
    _, traces = wfgy.to_native(gold, [trace])
    kept = traces["trace"]["A"][0]
    assert kept.answer == "not in context" and kept.behavior == "abstain"
    assert kept.model_extra["superseded_lines"] == (f"{trace}:1", f"{trace}:2")


def test_wfgy_two_trace_files_are_two_configs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    line = {"qid": "A0001", "retrieved_ids": ["p1#2"], "answer_json": {"claim": "x", "citations": []}}
    paths = [write(tmp_path / "a", "trace.jsonl", [line]), write(tmp_path / "b", "trace.jsonl", [line])]
    _, traces = wfgy.to_native(QA / "gold.jsonl", paths)
    assert sorted(traces) == ["a/trace", "b/trace"]


# --- WFGY grounded QA: bad input ---------------------------------------------------------------

GOOD_GOLD = {"qid": "A", "question": "q?", "answerable": True, "gold_claim_substr": [], "gold_citations": ["c"]}


@pytest.mark.parametrize(("lines", "fragment"), [
    ([GOOD_GOLD, {**GOOD_GOLD, "qid": "B", "answerable": "yes"}], ":2: answerable: Input should be a valid boolean"),
    ([GOOD_GOLD, {**GOOD_GOLD, "qid": "B"} | {"question": None}], ":2: question: Input should be a valid string"),
    ([{k: v for k, v in GOOD_GOLD.items() if k != "answerable"}], ":1: answerable: required field is missing"),
    ([GOOD_GOLD, '{"qid": "B", "question": '], ":2: invalid JSON"),
    ([GOOD_GOLD, {**GOOD_GOLD, "gold_citations": "c"}], ":2: gold_citations: Input should be a valid list"),
    ([GOOD_GOLD, GOOD_GOLD], ":2: qid: duplicate qid 'A' (first on line 1)"),
])
def test_wfgy_bad_gold_lines_name_file_line_and_field(tmp_path, lines, fragment):
    gold = write(tmp_path, "gold.jsonl", lines)
    with pytest.raises(InputError) as err:
        wfgy.to_native(gold, [])
    assert f"{gold}{fragment}" in str(err.value)


@pytest.mark.parametrize(("line", "fragment"), [
    ({"qid": "A", "answer_json": {"claim": "x", "citations": "c"}}, ":2: answer_json.citations: Input should be a valid list"),
    ({"qid": "A", "retrieved_ids": [1, 2]}, ":2: retrieved_ids[0]: Input should be a valid string"),
    ({"q": "no id"}, ":2: qid: required field is missing"),
    ({"qid": "ZZZ", "answer_json": {"claim": "x"}}, ":2: qid: unknown qid 'ZZZ': not in the gold set"),
])
def test_wfgy_bad_trace_lines_name_file_line_and_field(tmp_path, line, fragment):
    gold = write(tmp_path, "gold.jsonl", [GOOD_GOLD])
    ok = {"qid": "A", "retrieved_ids": ["c"], "answer_json": {"claim": "x", "citations": ["c"]}}
    trace = write(tmp_path, "trace.jsonl", [ok, line])
    with pytest.raises(InputError) as err:
        wfgy.to_native(gold, [trace])
    assert f"{trace}{fragment}" in str(err.value)


def test_wfgy_null_lists_read_as_empty():
    t = wfgy.WfgyTrace.model_validate({"qid": "A", "retrieved_ids": None, "answer_json": {"claim": None,
                                                                                         "citations": None}})
    assert t.retrieved_ids == [] and t.citations == [] and t.claim == ""


# --- WFGY chunking: conversion -----------------------------------------------------------------

def test_chunking_gold_converts_to_native_cases():
    cases, _ = wfgy_chunking.to_native(CHUNKING / "gold.jsonl", [CHUNKING / "trace.jsonl"])
    case = cases["Q-0137"]
    assert case.question == "How does SCU unlock safety refusals?"
    assert case.paraphrases == ("Explain symbolic constraint unlock.", "SCU: what is it and when to use?")
    assert case.expected_chunk_ids == ("S.4.2.p.Bk011a", "S.4.2.p.Bk011b")
    assert case.model_extra["anchor_section"] == "S.4.2"
    assert case.model_extra["negatives"] == ("S.4.1.p.Bk010", "S.4.3.p.Bk014")
    assert cases["Q-0202"].model_extra["gold_offsets"] == {"S.3.4.p.Bk021": (50800, 50980)}
    assert cases["Q-0202"].model_extra["notes"].startswith("the cited span")


def test_chunking_traces_convert_to_native_traces():
    _, traces = wfgy_chunking.to_native(CHUNKING / "gold.jsonl",
                                        [CHUNKING / "trace.jsonl", CHUNKING / "trace_live.jsonl"])
    assert sorted(traces) == ["trace", "trace_live"]
    doc = traces["trace"]["Q-0137"]
    assert list(doc) == [0]  # its only run is the primary trace, though it asks the 2nd paraphrase
    t = doc[0]
    assert t.question == "Explain symbolic constraint unlock."
    first = t.retrieved_chunks[0]
    assert (first.chunk_id, first.score, first.type, first.rank) == ("S.4.2.p.Bk011a", 0.83, "prose", 1)
    assert (first.offsets.start, first.offsets.end) == (204611, 205279)
    assert t.model_extra["ΔS"] == (0.31, 0.59) and t.model_extra["λ_state"] == "→"
    assert t.model_extra["index_hash"] == "faiss:v3:hnsw:cos"
    cited = traces["trace"]["Q-0202"][0].citations[0]
    assert cited.chunk_id == "S.3.4.p.Bk021" and (cited.offsets.start, cited.offsets.end) == (51010, 51200)


def test_chunking_runs_become_paraphrase_traces_in_gold_order(tmp_path):
    gold = write(tmp_path, "gold.jsonl", [{"qid": "Q", "paraphrases": ["p0", "p1", "p2"], "relevant": ["S.1.p.B"]}])
    trace = write(tmp_path, "shadow.jsonl", [
        {"qid": "Q", "query": "p2", "topk": [{"id": "S.1.p.B"}]},
        {"qid": "Q", "query": "live traffic wording", "topk": []},
        {"qid": "Q", "query": "p0", "topk": [], "seed": 1},
        {"qid": "Q", "query": "p0", "topk": [], "seed": 2},
    ])
    _, traces = wfgy_chunking.to_native(gold, [trace])
    runs = traces["shadow"]["Q"]
    assert [(i, runs[i].question, runs[i].model_extra.get("seed")) for i in sorted(runs)] == [
        (0, "p0", 1), (1, "p0", 2), (2, "p2", None), (3, "live traffic wording", None)]


# --- WFGY chunking: bad input ------------------------------------------------------------------

GOOD_ROW = {"qid": "Q", "paraphrases": ["p"], "relevant": ["S.1.p.B"], "anchor_section": "S.1"}


@pytest.mark.parametrize(("line", "fragment"), [
    ({"qid": "Q", "topk": [{"id": "S.1.p.B", "type": "diagram"}]}, ":2: topk[0].type: Input should be"),
    ({"qid": "Q", "topk": [{"id": "S.1.p.B", "offsets": [9, 3]}]}, ":2: topk[0].offsets: Value error, end 3 is before start"),
    ({"qid": "Q", "topk": [{"id": "S.1.p.B", "offsets": [1, 2, 3]}]}, ":2: topk[0].offsets: Value error"),
    ({"qid": "Q", "topk": [{"score": 0.5}]}, ":2: topk[0].id: required field is missing"),
    ({"qid": "Q", "topk": [{"id": "S.1.p.B"}], "ΔS": [0.1, 0.2]}, ":2: ΔS: Value error, has 2 values for 1 topk"),
    ({"qid": "Q", "answer_citations": [{"offsets": [1, 2]}]}, ":2: answer_citations[0].id: required field"),
    ({"qid": "NOPE", "topk": []}, ":2: qid: unknown qid 'NOPE'"),
])
def test_chunking_bad_trace_lines_name_file_line_and_field(tmp_path, line, fragment):
    gold = write(tmp_path, "gold.jsonl", [GOOD_ROW])
    trace = write(tmp_path, "trace.jsonl", [{"qid": "Q", "topk": []}, line])
    with pytest.raises(InputError) as err:
        wfgy_chunking.to_native(gold, [trace])
    assert f"{trace}{fragment}" in str(err.value)


@pytest.mark.parametrize(("row", "fragment"), [
    ({**GOOD_ROW, "paraphrases": []}, ":2: paraphrases: List should have at least 1 item"),
    ({k: v for k, v in GOOD_ROW.items() if k != "relevant"}, ":2: relevant: required field is missing"),
    ({**GOOD_ROW, "gold_offsets": {"S.1.p.B": [5]}}, ":2: gold_offsets.S.1.p.B: Value error"),
    (GOOD_ROW, ":2: qid: duplicate qid 'Q' (first on line 1)"),
])
def test_chunking_bad_gold_lines_name_file_line_and_field(tmp_path, row, fragment):
    gold = write(tmp_path, "gold.jsonl", [GOOD_ROW, row])
    with pytest.raises(InputError) as err:
        wfgy_chunking.to_native(gold, [])
    assert f"{gold}{fragment}" in str(err.value)


def test_chunking_delta_s_accepts_the_increment_sign_spelling():
    t = wfgy_chunking.ChunkingTrace.model_validate({"qid": "Q", "topk": [{"id": "a"}], "∆S": [0.3]})
    assert t.delta_s == [0.3]


def test_wfgy_traces_say_what_the_format_does_not_record(tmp_path):
    from groundjudge.load.adapters.wfgy import NO_ANSWER, NO_CONTEXT

    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"qid":"A0002","question":"Explain Z.","answerable":false,"gold_claim_substr":[],'
                    '"gold_citations":[]}\n{"qid":"A0003","question":"What domain is allowed?","answerable":true,'
                    '"gold_claim_substr":["only domain example.com"],"gold_citations":["pB#1"]}\n')
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"qid":"A0002","q":"Explain Z.","retrieved_ids":["p1#1","p2#1"],'
                     '"answer_json":{"claim":"Not in context","citations":[]}}\n'
                     '{"qid":"A0003","q":"What domain is allowed?","retrieved_ids":["pB#1","p1#2"]}\n')
    _, traces = wfgy.to_native(gold, [trace])
    refused, unanswered = traces["trace"]["A0002"][0], traces["trace"]["A0003"][0]
    assert refused.not_recorded == {"context_chunks": NO_CONTEXT} and refused.behavior == "abstain"
    assert unanswered.not_recorded == {"context_chunks": NO_CONTEXT, "answer": NO_ANSWER, "citations": NO_ANSWER}
    assert unanswered.behavior is None  # a line with no answer_json shows no behaviour
