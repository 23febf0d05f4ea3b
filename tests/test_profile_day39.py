"""The day-39 profile: the lesson's runner metrics, tables, release gate and exit code (seed 004)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from groundjudge.load.adapters.day39 import Day39Golden, Day39Output, read_golden, read_outputs
from groundjudge.metrics.operations import percentile as native_percentile
from groundjudge.profiles.day39 import (
    DEFAULT_GATES,
    abstained,
    behavior_score,
    citation_correctness,
    evaluate_one,
    ndcg_at_k,
    percentile,
    precision_at_k,
    release_gate,
    render_runner_markdown,
    report,
)
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "day39"
API_CHUNK = "product_api_docs:v2026-03:chunk_004"

# The lesson's golden line for api_002 and its first output example (two chunks retrieved).
API_002 = {
    "id": "api_002", "question": "Loi ERR-429 co nghia la gi?",
    "expected_answer": "ERR-429 nghĩa là vượt rate limit; client nên backoff và retry theo header Retry-After.",
    "expected_chunk_ids": [API_CHUNK], "relevance": {API_CHUNK: 3}, "must_cite": [API_CHUNK],
    "difficulty": "easy", "tags": ["api", "no-diacritic", "error-code"], "expected_behavior": "answer",
    "user_context": {"tenant_id": "company_a", "roles": ["developer"]},
}
API_002_OUTPUT = {
    "query_id": "api_002", "config_id": "hybrid-rerank-v3", "question": "Loi ERR-429 co nghia la gi?",
    "retrieved_chunks": [{"chunk_id": API_CHUNK, "score": 0.91, "rank": 1},
                         {"chunk_id": "product_api_docs:v2026-03:chunk_002", "score": 0.72, "rank": 2}],
    "context_chunks": [{"chunk_id": API_CHUNK, "text_hash": "sha256:abc"}],
    "answer": "`ERR-429` nghĩa là vượt rate limit. Client nên backoff và retry theo header `Retry-After`.",
    "citations": [API_CHUNK],
    "latency_ms": {"embed": 24, "retrieve": 38, "rerank": 160, "generate": 1320, "end_to_end": 1548},
    "tokens": {"prompt": 1840, "completion": 72}, "cost_usd": 0.0028,
    "versions": {"eval_set": "day39-golden-v1", "index": "rag-index-2026-05-10-bge-m3", "prompt": "rag-answer-v7",
                 "generator": "gpt-4o-mini"},
}


def case(**fields: Any) -> Day39Golden:
    return Day39Golden.model_validate({"id": "c", "question": "?", **fields})


def output(**fields: Any) -> Day39Output:
    return Day39Output.model_validate({"query_id": "c", "config_id": "cfg", **fields})


def changed(record: Day39Golden | Day39Output, **fields: Any) -> Any:
    """A validated copy of ``record`` with ``fields`` replaced."""
    return type(record).model_validate({**record.model_dump(), **fields})


def perfect(cid: str, *, tags: list[str] | None = None, latency: float = 1000.0) -> tuple[Day39Golden, Day39Output]:
    g = Day39Golden.model_validate({"id": cid, "question": "?", "expected_chunk_ids": [f"{cid}#1"],
                                    "must_cite": [f"{cid}#1"], "tags": tags or ["general"]})
    o = Day39Output.model_validate({"query_id": cid, "config_id": "cfg", "retrieved_chunks": [f"{cid}#1"],
                                    "context_chunks": [f"{cid}#1"], "citations": [f"{cid}#1"],
                                    "answer": "Câu trả lời.", "latency_ms": {"end_to_end": latency}})
    return g, o


# --- the worked example -------------------------------------------------------------------


def test_worked_example_api_002_output_scores_as_the_formulas_say():
    row = evaluate_one(Day39Golden.model_validate(API_002), Day39Output.model_validate(API_002_OUTPUT))
    m = row["metrics"]
    assert (m["hit@5"], m["recall@5"], m["mrr@5"], m["hit@10"], m["recall@10"], m["mrr@10"]) == (1, 1, 1, 1, 1, 1)
    assert m["precision@5"] == 0.5  # 1 relevant / min(5, 2 retrieved)
    assert m["ndcg@10"] == 1.0  # (2^3 - 1) / log2(2) over the same ideal
    assert m["context_recall"] == 1.0
    assert m["citation_correctness"] == 1.0  # must_cite covered, every citation in the context
    assert m["behavior_score"] == 1.0
    assert m["latency_end_to_end_ms"] == 1548.0 and m["cost_usd"] == 0.0028
    assert row["failed_checks"] == []
    assert row["retrieved_ids"] == [API_CHUNK, "product_api_docs:v2026-03:chunk_002"]


def test_worked_example_alone_passes_the_gate_with_exit_code_0():
    doc = report({"api_002": Day39Golden.model_validate(API_002)}, [Day39Output.model_validate(API_002_OUTPUT)])
    assert doc["release_gate"]["hybrid-rerank-v3"] == {"passed": True, "status": "PASS", "failures": [],
                                                       "acl_critical_failures": []}
    assert doc["aggregate"]["hybrid-rerank-v3"]["p95_latency_ms"] == 1548.0
    assert doc["exit_code"] == 0


def test_example_files_report():
    g = read_golden(EXAMPLE / "golden.jsonl")
    doc = report(g, read_outputs([EXAMPLE / "outputs.jsonl"], g))
    cand, base = doc["aggregate"]["hybrid-rerank-v3"], doc["aggregate"]["vector-only"]
    assert cand["cases"] == 5 and cand["recall@10"] == 1.0 and cand["mrr@10"] == 1.0
    assert cand["context_recall"] == 0.75
    assert cand["precision@5"] == pytest.approx((0.5 + 1 + 2 / 3 + 1) / 4)
    assert cand["p95_latency_ms"] == 2380.0 and cand["failed_case_rate"] == 0.2
    assert base["recall@10"] == 0.375 and base["mrr@10"] == pytest.approx((1 / 3 + 0 + 1 / 2 + 0) / 4)
    assert base["citation_correctness"] == 0.7 and base["behavior_score"] == 0.6
    # The candidate clears every average; its ACL case still fails the release.
    assert doc["release_gate"]["hybrid-rerank-v3"]["failures"] == ["acl critical failures: 1"]
    assert doc["release_gate"]["vector-only"]["failures"] == [
        "recall@10: 0.375 < 0.85", "mrr@10: 0.208 < 0.7", "citation_correctness: 0.700 < 0.95",
        "behavior_score: 0.600 < 0.9", "acl critical failures: 1"]
    assert doc["exit_code"] == 1
    json.dumps(doc, allow_nan=False)  # the whole report is plain JSON


# --- per-case definitions -----------------------------------------------------------------


def test_precision_denominator_is_min_of_k_and_retrieved_count():
    assert precision_at_k(["a"], {"a"}, 5) == 1.0
    assert precision_at_k(["a", "b", "c", "d", "e", "f"], {"a"}, 5) == 0.2
    assert precision_at_k([], {"a"}, 5) == 0.0  # nothing retrieved: denominator 1
    assert precision_at_k(["a"], set(), 5) is None


def test_ndcg_uses_exponential_gain_and_defaults_grade_3():
    assert ndcg_at_k(["b", "a"], {"a": 3, "b": 1}, 10) == pytest.approx(
        (1 + 7 / 1.5849625007211563) / (7 + 1 / 1.5849625007211563))
    assert ndcg_at_k(["a"], {"a": 0}, 10) is None  # ideal DCG is 0
    assert case(expected_chunk_ids=["a", "b"]).grades == {"a": 3, "b": 3}
    assert case(expected_chunk_ids=["a", "b"], relevance={"a": 2}).grades == {"a": 2}  # given grades win


def test_no_answer_case_has_no_retrieval_values_and_is_left_out_of_means():
    no_answer = case(id="n", expected_behavior="abstain")
    g1, o1 = perfect("p")
    doc = report({"n": no_answer, "p": g1}, [
        Day39Output.model_validate({"query_id": "n", "config_id": "cfg", "retrieved_chunks": ["x"],
                                    "answer": "Không đủ thông tin để trả lời."}), o1])
    row = doc["results"]["cfg"][0]
    assert all(row["metrics"][f"{m}@{k}"] is None for m in ("hit", "recall", "precision", "mrr", "ndcg")
               for k in (5, 10))
    assert row["metrics"]["context_recall"] is None and row["failed_checks"] == []
    assert doc["aggregate"]["cfg"]["recall@10"] == 1.0  # mean over the one case that has chunks


def test_citation_correctness_for_refusing_cases():
    refuse = case(expected_behavior="permission_denied")
    assert citation_correctness(refuse, [], []) == 1.0
    assert citation_correctness(refuse, ["a"], ["a"]) == 1.0
    assert citation_correctness(refuse, ["a"], ["b"]) == 0.0


def test_citation_correctness_without_must_cite_checks_citations_are_in_context():
    assert citation_correctness(case(), ["a"], ["a", "b"]) == 1.0
    assert citation_correctness(case(), ["z"], ["a"]) == 0.0
    assert citation_correctness(case(), [], []) == 1.0


def test_citation_correctness_with_must_cite_is_the_smaller_of_coverage_and_scoping():
    c = case(must_cite=["a", "b"])
    assert citation_correctness(c, ["a"], ["a", "b"]) == 0.5
    assert citation_correctness(c, ["a", "b"], ["a", "b"]) == 1.0
    assert citation_correctness(c, ["a", "b", "z"], ["a", "b"]) == 0.0


def test_behavior_score_follows_the_refusal_phrases():
    refusal = "Xin lỗi, KHÔNG ĐỦ THÔNG TIN trong tài liệu."
    assert abstained(refusal)
    assert not abstained("Khong du thong tin")  # the runner's phrases carry diacritics
    assert behavior_score(case(expected_behavior="answer"), refusal) == 0.0
    assert behavior_score(case(expected_behavior="answer"), "12 ngày.") == 1.0
    assert behavior_score(case(expected_behavior="abstain"), refusal) == 1.0
    assert behavior_score(case(expected_behavior="permission_denied"), "Bạn không có quyền.") == 1.0
    assert behavior_score(case(expected_behavior="permission_denied"), "12 ngày.") == 0.0
    assert behavior_score(case(expected_behavior="escalate"), "anything") == 1.0


def test_failed_checks_are_named_as_the_runner_names_them():
    row = evaluate_one(case(expected_chunk_ids=["a"], must_cite=["a"]),
                       output(retrieved_chunks=["x"], context_chunks=["x"], answer="Không có thông tin."))
    assert row["failed_checks"] == ["retrieval_miss", "context_miss", "bad_citation", "wrong_behavior"]


# --- per-config summaries and the gate ----------------------------------------------------


def test_p95_is_the_runner_nearest_rank_not_interpolated():
    latencies = [100.0 * i for i in range(1, 21)]
    assert percentile(latencies, 95) == 1900.0  # sorted[ceil(0.95 * 20) - 1]
    assert native_percentile(latencies, 95) == pytest.approx(1905.0)  # groundjudge's own differs
    assert percentile([1.0, 2.0, 3.0], 95) == 3.0


def test_p95_leaves_out_zero_and_missing_latencies():
    pairs = [perfect(f"c{i}", latency=lat) for i, lat in enumerate([0.0, 100.0, 200.0])]
    g = {gc.id: gc for gc, _ in pairs}
    doc = report(g, [o for _, o in pairs])
    assert doc["aggregate"]["cfg"]["p95_latency_ms"] == 200.0
    g2, o2 = perfect("solo", latency=0.0)
    doc2 = report({"solo": g2}, [o2])
    assert doc2["aggregate"]["cfg"]["p95_latency_ms"] is None
    assert "p95_latency_ms: missing" in doc2["release_gate"]["cfg"]["failures"]


def test_gate_thresholds_are_inclusive():
    assert DEFAULT_GATES == {"recall@10": 0.85, "mrr@10": 0.70, "citation_correctness": 0.95,
                             "behavior_score": 0.90, "p95_latency_ms": 6000.0}
    rows = [evaluate_one(*perfect(f"c{i}", latency=6000.0)) for i in range(3)]
    assert release_gate(rows)["passed"]  # p95 exactly 6000 ms passes
    slow = [evaluate_one(*perfect("s", latency=6000.5))]
    assert release_gate(slow)["failures"] == ["p95_latency_ms: 6000.500 > 6000.0"]


def test_gate_fails_on_a_metric_below_threshold():
    miss_g, _ = perfect("m")
    miss_o = Day39Output.model_validate({"query_id": "m", "config_id": "cfg", "retrieved_chunks": ["zz"],
                                         "context_chunks": ["m#1"], "citations": ["m#1"], "answer": "x",
                                         "latency_ms": {"end_to_end": 900}})
    rows = [evaluate_one(*perfect(f"c{i}")) for i in range(9)] + [evaluate_one(miss_g, miss_o)]
    assert release_gate(rows)["passed"]  # recall@10 = 9/10 = 0.9 >= 0.85
    second = evaluate_one(changed(miss_g, id="m2"), changed(miss_o, query_id="m2"))
    gate = release_gate(rows + [second])  # 9/11 = 0.818; MRR@10 0.818 still >= 0.70
    assert gate == {"passed": False, "status": "FAIL", "failures": ["recall@10: 0.818 < 0.85"],
                    "acl_critical_failures": []}


def test_acl_critical_failure_fails_the_gate_whatever_the_averages():
    pairs = [perfect(f"c{i}") for i in range(20)]
    acl_g, acl_o = perfect("acl_x", tags=["acl", "tenant"])
    acl_o = changed(acl_o, context_chunks=[])  # the context builder dropped the chunk
    g = {gc.id: gc for gc, _ in pairs} | {"acl_x": acl_g}
    doc = report(g, [o for _, o in pairs] + [acl_o])
    summary = doc["aggregate"]["cfg"]
    assert summary["recall@10"] == 1.0 and summary["mrr@10"] == 1.0  # every average clears its bar
    assert summary["context_recall"] == pytest.approx(20 / 21)
    assert doc["release_gate"]["cfg"]["failures"] == ["acl critical failures: 1"]
    assert doc["release_gate"]["cfg"]["acl_critical_failures"] == ["acl_x"]
    assert doc["exit_code"] == 1


def test_exit_code_is_1_when_any_config_fails():
    g1, o1 = perfect("a")
    bad = changed(o1, config_id="bad", retrieved_chunks=[], context_chunks=[])
    doc = report({"a": g1}, [o1, bad])
    assert doc["release_gate"]["cfg"]["passed"] and not doc["release_gate"]["bad"]["passed"]
    assert doc["exit_code"] == 1
    assert report({"a": g1}, [o1])["exit_code"] == 0


def test_breakdown_by_tag_and_failed_queries_table():
    pairs = [perfect(f"c{i}", tags=["hr", "policy"]) for i in range(35)]
    g = {gc.id: gc for gc, _ in pairs}
    outputs = [changed(o, citations=["elsewhere"]) for _, o in pairs]  # every case: bad_citation
    doc = report(g, outputs)
    assert doc["breakdown_by_tag"]["cfg"]["hr"] == {"cases": 35, "recall@10": 1.0, "mrr@10": 1.0,
                                                    "citation_correctness": 0.0, "failures": 35}
    assert len(doc["failed_queries"]["cfg"]) == 30  # the runner lists the first 30 per config
    assert doc["failed_queries"]["cfg"][0]["query_id"] == "c0"


def test_cases_without_output_are_reported():
    g1, o1 = perfect("a")
    g2, _ = perfect("b")
    doc = report({"a": g1, "b": g2}, [o1])
    assert doc["missing_outputs"] == {"cfg": ["b"]}
    assert doc["aggregate"]["cfg"]["cases"] == 1


def test_outputs_for_unknown_cases_are_rejected():
    with pytest.raises(ValueError, match="unknown query_id"):
        report({}, [output()])


def test_markdown_has_the_runner_tables_and_gate():
    g = read_golden(EXAMPLE / "golden.jsonl")
    text = render_runner_markdown(report(g, read_outputs([EXAMPLE / "outputs.jsonl"], g)))
    assert text.startswith("# RAG Evaluation Report\n")
    for heading in ("## Aggregate", "## Breakdown By Tag", "## Failed Queries", "## Release Gate"):
        assert heading in text
    assert ("| vector-only | 5 | 0.375 | 0.208 | 0.249 | 0.375 | 0.700 | 0.600 | 0.800 | 2600.000 |") in text
    assert "| hybrid-rerank-v3 | acl_003 | permission_denied | context_miss |" in text
    assert "| hybrid-rerank-v3 | abstain | 1 | n/a | n/a | 1.000 | 0 |" in text
    assert "- hybrid-rerank-v3: FAIL\n  - acl critical failures: 1" in text
    assert text.rstrip().endswith("Exit code: 1")
