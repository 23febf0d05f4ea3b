"""Adapters for kb-eval and the day-39 runner: conversion, auto-detection, and bad lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError
from groundjudge.load.adapters import day39, kb_eval
from tests.conftest import ROOT

KB = ROOT / "examples" / "kb-eval"
D39 = ROOT / "examples" / "day39"
NATIVE = ROOT / "examples"


def first_object(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def write_jsonl(path: Path, *rows: dict[str, Any] | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def error_text(exc: pytest.ExceptionInfo[InputError]) -> str:
    return str(exc.value)


# --- kb-eval ------------------------------------------------------------------------------


def test_kb_eval_golden_converts_to_native_cases():
    cases, _ = kb_eval.to_native(KB / "golden.jsonl", [KB / "results_a.jsonl"])
    assert all(isinstance(c, GoldenCase) for c in cases.values())
    q1, q4 = cases["q1"], cases["q4"]
    assert q1.question == "How many days of annual leave does a full-time employee get?"
    assert q1.expected_chunk_ids == ("leave#v1-02",) and q1.relevance == {"leave#v1-02": 3}
    assert q1.expected_doc_ids == ("handbook/leave.md",) and q1.expected_behavior == "answer"
    assert q1.must_contain == ("18 days",) and q1.forbidden == ("20 days",)
    assert q1.tags == ("hr", "numeric")  # unknown-to-kb-eval fields travel through
    assert q4.expected_doc_ids == () and q4.expected_behavior == "abstain"  # empty = should refuse
    assert cases["q2"].model_extra["expected_chunk_spans"][0]["source_spans"] == ((1200, 1500),)


def test_kb_eval_results_convert_to_native_traces():
    _, traces = kb_eval.to_native(KB / "golden.jsonl", [KB / "results_a.jsonl", KB / "results_b.jsonl"])
    assert list(traces) == ["run-a", "run-b"]
    q2 = traces["run-a"]["q2"][0]
    assert isinstance(q2, Trace) and q2.config_id == "run-a"
    assert [(c.chunk_id, c.doc_id, c.rank) for c in q2.retrieved_chunks][-1] == ("errors#v1-04", "api/errors.md", 4)
    assert q2.retrieved_chunks[3].model_extra["source_spans"] == ((1200, 1500),)
    assert [c.chunk_id for c in q2.citations] == ["errors#v1-04"]
    assert q2.behavior == "answer" and q2.model_extra["grounded"] is True
    assert q2.versions == {"chunking": "md-heading-v1"}
    assert q2.latency_ms == {"end_to_end": 910.0}
    assert q2.context_chunks == ()  # kb-eval does not record the prompt context
    q3 = traces["run-a"]["q3"][0]
    assert q3.citations == () and q3.model_extra["unresolved_citations"] == ("[#7]",)
    q4 = traces["run-a"]["q4"][0]
    assert q4.behavior == "abstain" and q4.retrieved_chunks == ()
    assert traces["run-a"]["q5"][0].citations[0].chunk_id == "remote#v1-03"  # bare-string citation
    assert traces["run-b"]["q1"][0].versions["chunking"] == "md-heading-v2"


def test_kb_eval_config_id_overrides_the_run_id():
    _, traces = kb_eval.to_native(KB / "golden.jsonl", [KB / "results_b.jsonl"], config_id="candidate")
    assert list(traces) == ["candidate"] and traces["candidate"]["q1"][0].config_id == "candidate"
    with pytest.raises(InputError, match="config 'candidate' is already used"):
        kb_eval.to_native(KB / "golden.jsonl", [KB / "results_a.jsonl", KB / "results_b.jsonl"],
                          config_id="candidate")


def test_kb_eval_run_id_defaults_to_the_file_name(tmp_path):
    row = first_object(KB / "results_a.jsonl")
    del row["run_id"]
    path = write_jsonl(tmp_path / "nightly-42.jsonl", row)
    assert kb_eval.read_run(path).run_id == "nightly-42"


def test_kb_eval_looks_like():
    assert kb_eval.looks_like(first_object(KB / "golden.jsonl"), "gold")
    assert kb_eval.looks_like(first_object(KB / "results_a.jsonl"), "trace")
    assert not kb_eval.looks_like(first_object(KB / "results_a.jsonl"), "gold")
    assert not kb_eval.looks_like(first_object(NATIVE / "golden.jsonl"), "gold")
    assert not kb_eval.looks_like(first_object(NATIVE / "traces" / "baseline.jsonl"), "trace")
    assert not kb_eval.looks_like(first_object(D39 / "golden.jsonl"), "gold")
    assert not kb_eval.looks_like(first_object(D39 / "outputs.jsonl"), "trace")
    assert not kb_eval.looks_like(["not", "a", "dict"], "gold")  # type: ignore[arg-type]


def test_kb_eval_database_runs_convert_to_native_traces_one_config_each(tmp_path):
    # The seed's storage: eval_runs + eval_query_results of kb-eval's SQLite database.
    from tests.support.kb_eval_seed import seed_database

    golden, db = seed_database(tmp_path)
    cases, traces = kb_eval.to_native(golden, [db])
    assert list(cases) == ["q1", "q2", "q3", "q4", "q5", "q6"]  # the seed's golden YAML
    assert cases["q4"].expected_behavior == "abstain" and cases["q1"].model_extra["lang"] == "en"
    assert list(traces) == ["run_a", "run_b", "run_c"]
    q6 = traces["run_b"]["q6"][0]
    assert q6.error == "retriever timed out" and q6.latency_ms == {"end_to_end": 30000.0}  # elapsed_ms
    assert traces["run_c"]["q1"][0].versions == {"chunking": "md-heading-v2"}  # from config_snapshot_json
    _, one = kb_eval.to_native(golden, [f"{db}#run_c", f"{db}#run_a"])
    assert list(one) == ["run_c", "run_a"]


def test_kb_eval_database_is_detected_as_kb_eval_traces(tmp_path):
    # The seed's golden set is YAML (no first record to look at): its traces decide.
    from groundjudge.load.adapters import detect_format
    from tests.support.kb_eval_seed import seed_database

    golden, db = seed_database(tmp_path)
    assert detect_format(golden, [db]) == "kb-eval"
    assert detect_format(golden, [f"{db}#run_b"]) == "kb-eval"
    assert kb_eval.claims_file(db, "trace") and not kb_eval.claims_file(db, "gold")
    assert not kb_eval.claims_file(KB / "results_a.jsonl", "trace")


def test_kb_eval_reads_the_runner_s_names_for_answer_text_and_time(tmp_path):
    # kb-eval's Answer carries its text as `answer`, and the runner times a query as `elapsed_ms`.
    row = {"query_id": "q1", "chunker_version": "v1", "hits_top_k": [], "elapsed_ms": 1842,
           "answer": {"answer": "heading boundary first [#1]", "citations": ["c1"], "grounded": True}}
    run = kb_eval.read_run(write_jsonl(tmp_path / "run.jsonl", row))
    result = run.results["q1"]
    assert result.answer.text == "heading boundary first [#1]" and result.latency_ms == 1842


def test_kb_eval_a_database_with_several_runs_is_not_one_run(tmp_path):
    from tests.support.kb_eval_seed import seed_database

    _, db = seed_database(tmp_path)
    with pytest.raises(InputError, match=r"holds 3 runs \('run_a', 'run_b', 'run_c'\); name one as .*#RUN_ID"):
        kb_eval.read_run(db)
    assert kb_eval.read_run(f"{db}#run_b").run_id == "run_b"


def test_kb_eval_golden_without_expected_doc_ids_names_file_line_field(tmp_path):
    path = write_jsonl(tmp_path / "golden.jsonl",
                       {"id": "q1", "query": "a", "expected_doc_ids": ["d"]},
                       {"id": "q2", "query": "b", "expected_chunk_ids": ["c"]})
    with pytest.raises(InputError) as exc:
        kb_eval.to_native(path, [])
    assert error_text(exc) == f"{path}:2: expected_doc_ids: required field is missing"


@pytest.mark.parametrize(("row", "fragment"), [
    ("{not json", "results.jsonl:2: invalid JSON"),
    ({"query_id": "q1", "chunker_version": "v1", "hits_top_k": [{"chunk_id": "c"}]},
     "results.jsonl:2: hits_top_k[0].doc_id: required field is missing"),
    ({"query_id": "q1", "chunker_version": "v1", "hits_top_k": [{"chunk_id": "c", "doc_id": "d",
                                                                  "source_spans": [[9, 3]]}]},
     "results.jsonl:2: hits_top_k[0].source_spans[0]: Value error, end 3 is before start 9"),
    ({"query_id": "q1", "chunker_version": "v1", "hits_top_k": [], "answer": {"text": "x"}},
     "results.jsonl:2: answer.grounded: required field is missing"),
    ({"query_id": "q1", "chunker_version": "v2", "hits_top_k": []},
     "results.jsonl:2: chunker_version: 'v2' differs from 'v1' on line 1"),
    ({"query_id": "zz", "chunker_version": "v1", "hits_top_k": []},
     "results.jsonl:2: query_id: unknown query 'zz'"),
    ({"query_id": "q0", "chunker_version": "v1", "hits_top_k": []},
     "results.jsonl:2: query_id: duplicate result for query 'q0' (first on line 1)"),
])
def test_kb_eval_bad_result_line_names_file_line_field(tmp_path, row, fragment):
    golden = write_jsonl(tmp_path / "golden.jsonl", {"id": "q0", "query": "a", "expected_doc_ids": []},
                         {"id": "q1", "query": "b", "expected_doc_ids": ["d"]})
    results = write_jsonl(tmp_path / "results.jsonl",
                          {"query_id": "q0", "chunker_version": "v1", "hits_top_k": []}, row)
    with pytest.raises(InputError) as exc:
        kb_eval.to_native(golden, [results])
    assert fragment in error_text(exc)
    assert len(exc.value.problems) == 1


def test_kb_eval_duplicate_golden_id_and_spans_of_an_unexpected_chunk(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl",
                       {"id": "q", "query": "a", "expected_doc_ids": []},
                       {"id": "q", "query": "b", "expected_doc_ids": []},
                       {"id": "p", "query": "c", "expected_doc_ids": ["d"], "expected_chunk_ids": ["c1"],
                        "expected_chunk_spans": [{"chunk_id": "c9", "doc_id": "d", "source_spans": [[0, 5]]}]})
    with pytest.raises(InputError) as exc:
        kb_eval.read_golden(path)
    assert error_text(exc).splitlines() == [
        f"{path}:2: id: duplicate query id 'q' (first on line 1)",
        (f"{path}:3: expected_chunk_spans[0].chunk_id: 'c9' is not one of expected_chunk_ids; "
        "list it there or remove its spans"),
    ]


# --- day39 --------------------------------------------------------------------------------


def test_day39_golden_converts_to_native_cases():
    cases, _ = day39.to_native(D39 / "golden.jsonl", [D39 / "outputs.jsonl"])
    hr = cases["hr_leave_001"]
    assert hr.expected_chunk_ids == ("hr_leave_policy:v2026-01:chunk_003",)
    assert hr.must_cite == ("hr_leave_policy:v2026-01:chunk_003",)
    assert hr.difficulty == "easy" and hr.tags == ("hr", "policy", "single-hop")
    assert hr.user_context is not None and hr.user_context.tenant == "company_a"
    assert hr.user_context.model_extra["tenant_id"] == "company_a"  # the original name is kept
    assert cases["acl_003"].expected_behavior == "permission_denied"
    assert cases["acl_003"].user_context.tenant == "company_b"  # type: ignore[union-attr]
    assert cases["no_answer_001"].expected_chunk_ids == () and cases["no_answer_001"].expected_behavior == "abstain"
    assert cases["sales_004"].relevance == {"sales_handbook:v2026-01:chunk_007": 3,
                                            "support_sla_policy:v2026-01:chunk_007": 2}


def test_day39_outputs_convert_to_native_traces():
    _, traces = day39.to_native(D39 / "golden.jsonl", [D39 / "outputs.jsonl"])
    assert sorted(traces) == ["hybrid-rerank-v3", "vector-only"]
    api = traces["hybrid-rerank-v3"]["api_002"][0]
    assert [c.chunk_id for c in api.retrieved_chunks] == ["product_api_docs:v2026-03:chunk_004"]
    assert api.retrieved_chunks[0].score == 0.91 and api.retrieved_chunks[0].stage == "rerank"
    assert api.context_chunks[0].text_hash == "sha256:abc"
    assert [c.chunk_id for c in api.citations] == ["product_api_docs:v2026-03:chunk_004"]
    assert api.behavior == "answer" and api.model_extra["expected_behavior_observed"] == "answer"
    assert api.latency_ms["end_to_end"] == 1548 and api.tokens == {"prompt": 1840, "completion": 72}
    assert api.cost_usd == 0.0028 and api.versions["prompt"] == "rag-answer-v7"
    vec = traces["vector-only"]["hr_leave_001"][0]
    assert [c.chunk_id for c in vec.context_chunks][-1] == "hr_leave_policy:v2026-01:chunk_003"  # plain id lists


def test_day39_config_id_override(tmp_path):
    out = write_jsonl(tmp_path / "o.jsonl", first_object(D39 / "outputs.jsonl"))
    _, traces = day39.to_native(D39 / "golden.jsonl", [out], config_id="nightly")
    assert list(traces) == ["nightly"]
    # Two configs folded into one name collide on the same case: an input error, not a silent overwrite.
    with pytest.raises(InputError, match="duplicate output for case 'api_002' config 'nightly'"):
        day39.to_native(D39 / "golden.jsonl", [D39 / "outputs.jsonl"], config_id="nightly")


def test_day39_looks_like():
    assert day39.looks_like(first_object(D39 / "golden.jsonl"), "gold")
    assert day39.looks_like(first_object(D39 / "outputs.jsonl"), "trace")
    assert not day39.looks_like(first_object(NATIVE / "golden.jsonl"), "gold")  # native says `tenant`
    assert not day39.looks_like(first_object(NATIVE / "traces" / "baseline.jsonl"), "trace")
    assert not day39.looks_like(first_object(KB / "golden.jsonl"), "gold")
    assert not day39.looks_like(first_object(KB / "results_a.jsonl"), "trace")
    assert not day39.looks_like(first_object(D39 / "outputs.jsonl"), "gold")


def test_day39_defaults_follow_the_runner(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", {"id": "a", "question": "q", "expected_chunk_ids": None,
                                              "tags": None, "difficulty": None})
    case = day39.read_golden(path)["a"]
    assert (case.expected_chunk_ids, case.tags, case.difficulty, case.expected_behavior, case.expected_answer) == \
        ([], [], "unknown", "answer", "")
    out = day39.read_outputs([write_jsonl(tmp_path / "o.jsonl", {"query_id": "a"})], {"a": case})[0]
    assert out.config_id == "unknown" and out.retrieved_ids == [] and out.answer is None


@pytest.mark.parametrize(("golden_row", "output_row", "fragment"), [
    ({"id": "a", "question": "q", "expected_behavior": "refuse"}, None,
     "g.jsonl:1: expected_behavior: Input should be 'answer', 'abstain', 'permission_denied' or 'escalate'"),
    ({"id": "a", "question": "q", "relevance": {"c": 5}}, None,
     "g.jsonl:1: relevance.c: Input should be less than or equal to 3"),
    ({"id": "a"}, None, "g.jsonl:1: question: required field is missing"),
    ({"id": "a", "question": "q"}, {"query_id": "a", "retrieved_chunks": [{"score": 0.5}]},
     "o.jsonl:1: retrieved_chunks[0].chunk_id: required field is missing"),
    ({"id": "a", "question": "q"}, {"query_id": "a", "latency_ms": {"end_to_end": "slow"}},
     "o.jsonl:1: latency_ms.end_to_end: Input should be a valid number"),
    ({"id": "a", "question": "q"}, {"query_id": "zzz"}, "o.jsonl:1: query_id: unknown case 'zzz'"),
    ({"id": "a", "question": "q"}, {"query_id": "a", "retrieved_chunks": [{"chunk_id": "c", "type": "slide"}]},
     "o.jsonl:1: retrieved_chunks[0].type: Input should be"),  # fine for day39, not for the native contract
])
def test_day39_bad_line_names_file_line_field(tmp_path, golden_row, output_row, fragment):
    golden = write_jsonl(tmp_path / "g.jsonl", golden_row)
    outputs = [write_jsonl(tmp_path / "o.jsonl", output_row)] if output_row else []
    with pytest.raises(InputError) as exc:
        day39.to_native(golden, outputs)
    assert fragment in error_text(exc)
    assert error_text(exc).startswith(str(tmp_path))


def test_day39_duplicate_golden_id(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", {"id": "a", "question": "q"}, {"id": "a", "question": "r"})
    with pytest.raises(InputError) as exc:
        day39.read_golden(path)
    assert error_text(exc) == f"{path}:2: id: duplicate case id 'a' (first on line 1)"
