"""The kb-eval profile: its metric definitions, rounding, nulls and run comparison (seed 002)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest

from groundjudge.errors import ChunkerMismatch, InputError
from groundjudge.load.adapters.kb_eval import KbGoldenQuery, KbHit, KbResult, KbRun, read_golden, read_run
from groundjudge.profiles.kb_eval import (
    KbEvalSettings,
    aggregate,
    citation_coverage_reason,
    compare_runs,
    from_files,
    render_markdown,
    report,
    round4,
    span_match,
)
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "kb-eval"


def golden(*queries: dict[str, Any]) -> dict[str, KbGoldenQuery]:
    out = {}
    for q in queries:
        q = {"query": f"question {q['id']}", "expected_doc_ids": ["d1"], **q}
        out[q["id"]] = KbGoldenQuery.model_validate(q)
    return out


def hits(*ids: str, doc: str = "d1") -> list[dict[str, Any]]:
    return [{"chunk_id": cid, "doc_id": doc} for cid in ids]


def answer(text: str = "ok", *, grounded: bool = True, citations: list[Any] | None = None) -> dict[str, Any]:
    return {"text": text, "grounded": grounded, "citations": citations or []}


def run(*results: dict[str, Any], run_id: str = "a", version: str = "v1") -> KbRun:
    parsed = [KbResult.model_validate({"chunker_version": version, **r}) for r in results]
    return KbRun(run_id, version, {r.query_id: r for r in parsed})


# --- the worked example and the example files ------------------------------------------


def test_worked_example_three_queries_ranked_1_4_and_miss():
    # The seed's hand-rolled fixture: 3 queries whose correct chunk is at rank 1, rank 4, nowhere.
    g = golden({"id": "q1", "expected_chunk_ids": ["c1"]}, {"id": "q2", "expected_chunk_ids": ["c2"]},
               {"id": "q3", "expected_chunk_ids": ["c3"]})
    r = run({"query_id": "q1", "hits_top_k": hits("c1", "x1", "x2")},
            {"query_id": "q2", "hits_top_k": hits("x1", "x2", "x3", "c2", "x4")},
            {"query_id": "q3", "hits_top_k": hits("x1", "x2")})
    agg = aggregate(g, r)
    assert agg["hit_at_k"] == {"1": 0.3333, "3": 0.3333, "5": 0.6667, "10": 0.6667}
    assert agg["mrr"] == 0.4167  # (1 + 1/4 + 0) / 3


def test_example_run_a_aggregate():
    g = read_golden(EXAMPLE / "golden.jsonl")
    store = {"leave#v1-02", "errors#v1-04", "remote#v1-03", "webhooks#v1-02"}  # kb-eval's chunks table
    agg = report(g, read_run(EXAMPLE / "results_a.jsonl", g), known_chunk_ids=store)["aggregate_json"]
    assert agg == {
        "hit_at_k": {"1": 0.2, "3": 0.6, "5": 0.8, "10": 0.8},  # ranks 1, 4, miss, 2, 3 over 5 queries
        "mrr": 0.4167,  # (1 + 1/4 + 0 + 1/2 + 1/3) / 5
        "recall_at_k_doc": {"1": 0.6, "3": 0.6, "5": 0.8, "10": 0.8},
        "citation_coverage": 0.8,  # q3's citation resolves to no chunk
        "groundedness": 0.8333,  # q5 says a forbidden "3 days"; 5 of 6 answers
        "empty_result_rate": 0.1667,  # q4 returned no hits
        "refusal_correctness": 1.0,  # q4 should refuse and did
        "total_queries": 6,
        "failed_queries": 0,
    }


def test_example_compare_falls_back_to_doc_and_span_overlap():
    g = read_golden(EXAMPLE / "golden.jsonl")
    a, b = read_run(EXAMPLE / "results_a.jsonl", g), read_run(EXAMPLE / "results_b.jsonl", g)
    doc = compare_runs(g, a, b)
    assert doc["run_a"] == "run-a" and doc["run_b"] == "run-b"
    assert doc["deltas"]["chunker_version_match"] == "fallback_doc_span"
    kinds = {q["query_id"]: (q["kind"], q["a_hit_rank"], q["b_hit_rank"]) for q in doc["per_query"]}
    assert kinds == {
        "q1": ("Draw", 1, 1),  # spans learned from run a's hit: [350,750) covers 87.5% of [400,800)
        "q2": ("Win", 4, 1),  # [1200,1350) covers exactly 50% of [1200,1500)
        "q3": ("Win", None, 2),
        "q5": ("Loss", 2, 3),
        "q6": ("Regression", 3, None),  # best new chunk covers only 45% of the expected span
    }
    assert "q4" not in kinds  # a should-refuse query has no correct chunk to rank
    assert doc["aggregate_b"]["hit_at_k"] == {"1": 0.4, "3": 0.8, "5": 0.8, "10": 0.8}
    assert doc["deltas"]["hit_at_k"] == {"1": 0.2, "3": 0.2, "5": 0.0, "10": 0.0}
    assert doc["deltas"]["mrr"] == 0.15  # 0.5667 - 0.4167
    assert doc["deltas"]["recall_at_k_doc"]["3"] == 0.4
    assert doc["deltas"]["total_queries"] == 0
    for q in doc["per_query"]:
        if q["kind"] == "Draw":
            assert q["note"] is None
        else:
            assert q["note"] == ("chunker_version differs (md-heading-v1 -> md-heading-v2); "
                                 "matched by doc_id + span overlap")


# --- each metric's definition -------------------------------------------------------------


def test_mrr_is_zero_when_the_correct_chunk_is_below_rank_10():
    g = golden({"id": "q", "expected_chunk_ids": ["c"]})
    agg = aggregate(g, run({"query_id": "q", "hits_top_k": hits(*[f"x{i}" for i in range(10)], "c")}))
    assert agg["mrr"] == 0.0
    assert agg["hit_at_k"]["10"] == 0.0


def test_hit_and_mrr_count_only_queries_with_expected_chunks():
    g = golden({"id": "q1", "expected_chunk_ids": ["c"]}, {"id": "q2", "expected_chunk_ids": []})
    agg = aggregate(g, run({"query_id": "q1", "hits_top_k": hits("c")}, {"query_id": "q2", "hits_top_k": hits("x")}))
    assert agg["hit_at_k"]["1"] == 1.0  # q2 is not a miss: it has nothing to find
    assert agg["mrr"] == 1.0


def test_recall_at_k_doc_is_the_share_of_expected_documents_in_the_top_k():
    g = golden({"id": "q1", "expected_doc_ids": ["d1", "d2"]}, {"id": "q2", "expected_doc_ids": []})
    r = run({"query_id": "q1", "hits_top_k": [{"chunk_id": "a", "doc_id": "d1"}, {"chunk_id": "b", "doc_id": "x"},
                                              {"chunk_id": "c", "doc_id": "d2"}]},
            {"query_id": "q2", "hits_top_k": hits("z", doc="d9")})
    assert aggregate(g, r)["recall_at_k_doc"] == {"1": 0.5, "3": 1.0, "5": 1.0, "10": 1.0}


def test_citation_coverage_is_zero_with_a_broken_citation():
    g = golden({"id": "q"})
    r = run({"query_id": "q", "hits_top_k": hits("c"),
             "answer": answer(citations=[{"citation": "[#9]", "chunk_id": None}])})
    assert aggregate(g, r)["citation_coverage"] == 0.0


def test_citation_coverage_checks_the_chunk_store():
    # The seed: a citation counts when it "resolves to a real chunk in the DB".
    g = golden({"id": "q"})
    r = run({"query_id": "q", "hits_top_k": hits("c"), "answer": answer(citations=["c", "gone"])})
    assert aggregate(g, r, known_chunk_ids={"c", "gone"})["citation_coverage"] == 1.0
    assert aggregate(g, r, known_chunk_ids={"c"})["citation_coverage"] == 0.0


def test_citation_coverage_without_a_chunk_store_is_null_with_the_reason():
    # Whether "c" is a real chunk only the store can say: no rate over a guess.
    g = golden({"id": "q1"}, {"id": "q2"})
    r = run({"query_id": "q1", "hits_top_k": hits("c"), "answer": answer(citations=["c"])},
            {"query_id": "q2", "hits_top_k": [], "answer": answer()})
    assert aggregate(g, r)["citation_coverage"] is None
    reason = citation_coverage_reason(r, None)
    assert "run 'a'" in reason and "(q1)" in reason and "--corpus" in reason
    assert citation_coverage_reason(r, {"c"}) is None


def test_citation_coverage_is_decided_without_a_store_when_no_answer_needs_one():
    # A citation the run resolved to nothing never resolves; an answer without citations has
    # nothing unresolved: neither needs the store.
    g = golden({"id": "q1"}, {"id": "q2"})
    r = run({"query_id": "q1", "hits_top_k": [], "answer": answer(citations=[{"citation": "[#7]", "chunk_id": None}])},
            {"query_id": "q2", "hits_top_k": [], "answer": answer()})
    assert aggregate(g, r)["citation_coverage"] == 0.5
    assert citation_coverage_reason(r, None) is None


def test_citation_coverage_counts_only_grounded_answers():
    g = golden({"id": "q1"}, {"id": "q2"})
    r = run({"query_id": "q1", "hits_top_k": [], "answer": answer(grounded=False, citations=[{"citation": "[#1]"}])},
            {"query_id": "q2", "hits_top_k": hits("c"), "answer": answer(citations=["c"])})
    assert aggregate(g, r, known_chunk_ids={"c"})["citation_coverage"] == 1.0
    only_refusals = run({"query_id": "q1", "hits_top_k": [], "answer": answer(grounded=False)})
    assert aggregate(g, only_refusals)["citation_coverage"] is None


def test_citation_coverage_counts_a_grounded_answer_without_citations_as_covered():
    # "every citation resolves" holds vacuously when there is none, as the seed words it.
    g = golden({"id": "q"})
    assert aggregate(g, run({"query_id": "q", "hits_top_k": [], "answer": answer()}))["citation_coverage"] == 1.0


def test_groundedness_is_false_when_a_forbidden_string_appears():
    g = golden({"id": "q", "must_contain": ["12 days"], "forbidden": ["20 days"]})
    good = run({"query_id": "q", "hits_top_k": [], "answer": answer("You get 12 days of leave.")})
    bad = run({"query_id": "q", "hits_top_k": [], "answer": answer("You get 12 days, or 20 days later.")})
    missing = run({"query_id": "q", "hits_top_k": [], "answer": answer("You get two weeks.")})
    shouted = run({"query_id": "q", "hits_top_k": [], "answer": answer("You get 12 DAYS of leave.")})
    assert aggregate(g, good)["groundedness"] == 1.0
    assert aggregate(g, bad)["groundedness"] == 0.0
    assert aggregate(g, missing)["groundedness"] == 0.0
    assert aggregate(g, shouted)["groundedness"] == 0.0  # the string must appear as written, as kb-eval tests it


def test_groundedness_denominator_excludes_errors_and_runs_without_answers():
    g = golden({"id": "q1", "must_contain": ["x"]}, {"id": "q2"}, {"id": "q3"})
    r = run({"query_id": "q1", "hits_top_k": [], "answer": answer("x")},
            {"query_id": "q2", "hits_top_k": [], "answer": answer("y"), "error": "generator timeout"},
            {"query_id": "q3", "hits_top_k": []})
    agg = aggregate(g, r)
    assert agg["groundedness"] == 1.0  # only q1 is a RAG answer
    assert agg["failed_queries"] == 1
    assert agg["total_queries"] == 3


def test_empty_result_rate_counts_queries_with_no_hits():
    g = golden({"id": "q1"}, {"id": "q2"}, {"id": "q3"})
    r = run({"query_id": "q1", "hits_top_k": []}, {"query_id": "q2", "hits_top_k": hits("c")},
            {"query_id": "q3", "hits_top_k": hits("c")})
    assert aggregate(g, r)["empty_result_rate"] == 0.3333


def test_refusal_correctness_is_one_when_every_should_refuse_query_was_refused():
    g = golden({"id": "r1", "expected_doc_ids": []}, {"id": "r2", "expected_doc_ids": []}, {"id": "a"})
    r = run({"query_id": "r1", "hits_top_k": [], "answer": answer("not found", grounded=False)},
            {"query_id": "r2", "hits_top_k": hits("c"), "answer": answer("not found", grounded=False)},
            {"query_id": "a", "hits_top_k": hits("c"), "answer": answer(grounded=False)})
    assert aggregate(g, r)["refusal_correctness"] == 1.0  # "a" should answer: not in the denominator


def test_refusal_correctness_counts_a_grounded_answer_or_no_answer_as_not_refused():
    # The seed: refused means Answer.grounded == false; a query without an answer did not refuse.
    g = golden({"id": "r1", "expected_doc_ids": []}, {"id": "r2", "expected_doc_ids": []},
               {"id": "r3", "expected_doc_ids": []}, {"id": "r4", "expected_doc_ids": []})
    r = run({"query_id": "r1", "hits_top_k": [], "answer": answer(grounded=False)},
            {"query_id": "r2", "hits_top_k": [], "answer": answer("made up", grounded=True)},
            {"query_id": "r3", "hits_top_k": [], "error": "llm unavailable"},
            {"query_id": "r4", "hits_top_k": [], "error": "search timed out", "answer": answer(grounded=False)})
    assert aggregate(g, r)["refusal_correctness"] == 0.5  # r1 and r4 refused


def test_empty_denominators_are_null_in_json():
    g = golden({"id": "q", "expected_doc_ids": []})
    agg = aggregate(g, run({"query_id": "q", "hits_top_k": []}))  # retrieval-only, should-refuse, no hits
    assert agg["hit_at_k"] == {"1": None, "3": None, "5": None, "10": None}
    assert agg["mrr"] is None and agg["citation_coverage"] is None and agg["groundedness"] is None
    assert agg["recall_at_k_doc"]["10"] is None
    assert agg["refusal_correctness"] == 0.0  # the denominator is not empty: one should-refuse query
    text = json.dumps(agg, allow_nan=False)
    assert '"mrr": null' in text and '"citation_coverage": null' in text


def test_rates_are_rounded_to_4_decimals_half_away_from_zero():
    queries = [{"id": f"q{i}", "expected_chunk_ids": ["c"]} for i in range(32)]
    results = [{"query_id": f"q{i}", "hits_top_k": hits("c" if i == 0 else "x")} for i in range(32)]
    agg = aggregate(golden(*queries), run(*results))
    assert agg["hit_at_k"]["1"] == 0.0313  # 1/32 = 0.03125: Python's round() would give 0.0312
    assert round4(2 / 3) == 0.6667 and round4(1 / 3) == 0.3333 and round4(None) is None


def test_aggregate_is_deterministic():
    g = read_golden(EXAMPLE / "golden.jsonl")
    first = json.dumps(aggregate(g, read_run(EXAMPLE / "results_a.jsonl", g)))
    assert json.dumps(aggregate(g, read_run(EXAMPLE / "results_a.jsonl", g))) == first


def test_results_for_unknown_queries_are_rejected():
    with pytest.raises(ValueError, match="not in the golden set: zz"):
        aggregate(golden({"id": "q"}), run({"query_id": "zz", "hits_top_k": []}))


# --- comparison ---------------------------------------------------------------------------


def test_compare_kinds_on_synthetic_ranks_with_the_same_chunker():
    g = golden(*[{"id": q, "expected_chunk_ids": ["c"]} for q in ("win", "loss", "draw", "reg", "none")])
    a = run({"query_id": "win", "hits_top_k": hits("x", "x2", "c")}, {"query_id": "loss", "hits_top_k": hits("c")},
            {"query_id": "draw", "hits_top_k": hits("x", "c")}, {"query_id": "reg", "hits_top_k": hits("c")},
            {"query_id": "none", "hits_top_k": hits("x")}, run_id="a")
    b = run({"query_id": "win", "hits_top_k": hits("c")}, {"query_id": "loss", "hits_top_k": hits("x", "c")},
            {"query_id": "draw", "hits_top_k": hits("y", "c")}, {"query_id": "reg", "hits_top_k": hits("x")},
            {"query_id": "none", "hits_top_k": hits("y")}, run_id="b")
    doc = compare_runs(g, a, b)
    assert doc["deltas"]["chunker_version_match"] == "exact"
    assert {q["query_id"]: q["kind"] for q in doc["per_query"]} == {
        "win": "Win", "loss": "Loss", "draw": "Draw", "reg": "Regression", "none": "Draw"}
    assert all(q["note"] is None for q in doc["per_query"])  # same settings: no known cause


def test_compare_win_when_b_finds_what_a_missed_and_delta_is_b_minus_a():
    g = golden({"id": "q", "expected_chunk_ids": ["c"]})
    doc = compare_runs(g, run({"query_id": "q", "hits_top_k": hits("x")}, run_id="a"),
                       run({"query_id": "q", "hits_top_k": hits("c")}, run_id="b"))
    assert doc["per_query"] == [{"query_id": "q", "kind": "Win", "a_hit_rank": None, "b_hit_rank": 1, "note": None}]
    assert doc["deltas"]["mrr"] == 1.0 and doc["deltas"]["hit_at_k"]["1"] == 1.0


def test_compare_missing_result_is_a_miss_with_a_note():
    g = golden({"id": "q", "expected_chunk_ids": ["c"]}, {"id": "p", "expected_chunk_ids": ["c"]})
    a = run({"query_id": "q", "hits_top_k": hits("c")}, {"query_id": "p", "hits_top_k": hits("c")}, run_id="a")
    b = run({"query_id": "p", "hits_top_k": hits("c")}, run_id="b")
    per = {q["query_id"]: q for q in compare_runs(g, a, b)["per_query"]}
    assert per["q"]["kind"] == "Regression" and per["q"]["note"] == "no result in run b (b)"


def test_compare_delta_is_null_when_either_side_is_null():
    g = golden({"id": "q", "expected_doc_ids": []})
    a = run({"query_id": "q", "hits_top_k": [], "answer": answer(grounded=False)}, run_id="a")
    b = run({"query_id": "q", "hits_top_k": []}, run_id="b")
    deltas = compare_runs(g, a, b)["deltas"]
    assert deltas["groundedness"] is None  # b has no RAG answer
    assert deltas["refusal_correctness"] == -1.0


def _span_setup(hit_span: list[int], *, doc: str = "d1") -> tuple[KbHit, KbGoldenQuery, dict]:
    query = KbGoldenQuery.model_validate({
        "id": "q", "query": "?", "expected_chunk_ids": ["old#1"], "expected_doc_ids": ["d1"],
        "expected_chunk_spans": [{"chunk_id": "old#1", "doc_id": "d1", "source_spans": [[0, 100]]}]})
    hit = KbHit.model_validate({"chunk_id": "new#1", "doc_id": doc, "source_spans": [hit_span]})
    spans = {s.chunk_id: (s.doc_id, s.source_spans) for s in query.expected_chunk_spans}
    return hit, query, spans


def test_fallback_matches_at_exactly_50_percent_overlap():
    assert span_match(*_span_setup([50, 150]))  # covers [50, 100): 50 of 100 characters
    assert not span_match(*_span_setup([51, 150]))  # 49%
    assert not span_match(*_span_setup([0, 100], doc="d2"))  # full overlap, but another document


def test_fallback_in_compare_counts_a_50_percent_chunk_as_a_hit():
    g = {"q": KbGoldenQuery.model_validate({
        "id": "q", "query": "?", "expected_chunk_ids": ["old#1"], "expected_doc_ids": ["d1"],
        "expected_chunk_spans": [{"chunk_id": "old#1", "doc_id": "d1", "source_spans": [[0, 100]]}]})}
    a = run({"query_id": "q", "hits_top_k": hits("old#1")}, run_id="a", version="v1")
    b50 = run({"query_id": "q", "hits_top_k": [{"chunk_id": "new#1", "doc_id": "d1", "source_spans": [[50, 150]]}]},
              run_id="b", version="v2")
    b49 = run({"query_id": "q", "hits_top_k": [{"chunk_id": "new#1", "doc_id": "d1", "source_spans": [[51, 150]]}]},
              run_id="b", version="v2")
    assert compare_runs(g, a, b50)["per_query"][0]["kind"] == "Draw"
    doc = compare_runs(g, a, b49)
    assert doc["per_query"][0]["kind"] == "Regression"
    assert doc["deltas"]["chunker_version_match"] == "fallback_doc_span"


def test_strict_chunker_version_refuses_differing_versions():
    g = read_golden(EXAMPLE / "golden.jsonl")
    a, b = read_run(EXAMPLE / "results_a.jsonl", g), read_run(EXAMPLE / "results_b.jsonl", g)
    with pytest.raises(ChunkerMismatch, match="run 'run-a' was chunked with 'md-heading-v1' and run 'run-b' with "
                                              "'md-heading-v2'; chunk ids cannot be compared exactly"):
        compare_runs(g, a, b, strict_chunker_version=True)
    same = compare_runs(g, a, a, strict_chunker_version=True)
    assert same["deltas"]["chunker_version_match"] == "exact"
    assert all(q["kind"] == "Draw" for q in same["per_query"])


# --- Markdown -----------------------------------------------------------------------------


def test_markdown_of_a_comparison_lists_deltas_and_non_draws():
    g = read_golden(EXAMPLE / "golden.jsonl")
    text = render_markdown(compare_runs(g, read_run(EXAMPLE / "results_a.jsonl", g),
                                        read_run(EXAMPLE / "results_b.jsonl", g)))
    assert "`fallback_doc_span`" in text
    assert "| mrr | 0.4167 | 0.5667 | 0.1500 |" in text
    assert "| q6 | Regression | 3 | - |" in text
    assert "| q1 |" not in text  # draws are counted, not listed
    assert "Win: 2, Loss: 1, Regression: 1, Draw: 1" in text


def test_markdown_of_one_run_shows_null():
    g = golden({"id": "q", "expected_doc_ids": []})
    text = render_markdown(report(g, run({"query_id": "q", "hits_top_k": []})))
    assert "| mrr | null |" in text


# --- the seed's storage and its own report, against a reference scorer --------------------------
# The golden set, the runs and the database are written from the seed's text
# (tests/support/kb_eval_seed.py); the reference scorer is written from its definitions alone
# (tests/support/kb_eval_reference.py). groundjudge's numbers must equal the reference's.

AGGREGATE_FIELDS = ["hit_at_k", "mrr", "recall_at_k_doc", "citation_coverage", "groundedness", "empty_result_rate",
                    "refusal_correctness", "total_queries", "failed_queries"]  # the seed's AggregateMetrics


def seed_golden() -> dict[str, dict[str, Any]]:
    import yaml

    from tests.support.kb_eval_seed import GOLDEN_YAML

    return {q["id"]: q for q in yaml.safe_load(GOLDEN_YAML)}


def seed_store() -> set[str]:
    from tests.support.kb_eval_seed import CHUNKS

    return {chunk_id for chunk_id, _ in CHUNKS}


def without_notes(report: dict[str, Any]) -> dict[str, Any]:
    # `note` is free text ("may explain known causes"): compared on its own below
    return {**report, "per_query": [{k: v for k, v in q.items() if k != "note"} for q in report["per_query"]]}


def test_seed_compare_of_two_runs_in_its_database_equals_the_reference(tmp_path):
    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import RUN_A, RUN_B, seed_database, stored_aggregate

    golden, db = seed_database(tmp_path)
    result = from_files(golden, [f"{db}#run_a", f"{db}#run_b"])
    expected = ref.compare(seed_golden(), RUN_A, RUN_B, seed_store())
    assert without_notes(result.report) == expected
    # the seed's CompareReport, exactly: no field more, no field less
    assert list(result.report) == ["run_a", "run_b", "aggregate_a", "aggregate_b", "deltas", "per_query"]
    assert list(result.report["aggregate_a"]) == AGGREGATE_FIELDS
    assert all(list(q) == ["query_id", "kind", "a_hit_rank", "b_hit_rank", "note"] for q in result.report["per_query"])
    assert result.report["deltas"]["chunker_version_match"] == "exact"
    # the seed's synthetic ranks: every kind once, the should-refuse q4 not ranked
    assert {q["query_id"]: q["kind"] for q in result.report["per_query"]} == {
        "q1": "Draw", "q2": "Win", "q3": "Win", "q5": "Loss", "q6": "Regression"}
    # its numbers, from the seed's own cases: ranks 1, 4, miss, 2, 1; a broken citation; a forbidden string
    agg_a = result.report["aggregate_a"]
    assert agg_a["hit_at_k"] == {"1": 0.4, "3": 0.6, "5": 0.8, "10": 0.8} and agg_a["mrr"] == 0.55
    assert agg_a["citation_coverage"] == 0.75  # q6 cites c-eval-99, in no chunks table
    assert agg_a["groundedness"] == 0.6667  # q3 misses "refuse", q5 says "Postgres"
    assert agg_a["refusal_correctness"] == 1.0 and result.report["aggregate_b"]["refusal_correctness"] == 0.0
    # store_aggregate: eval_runs.aggregate_json of both runs, as the reference computes them; run_c untouched
    assert stored_aggregate(db, "run_a") == ref.aggregate(seed_golden(), RUN_A["results"], seed_store())
    assert stored_aggregate(db, "run_b") == ref.aggregate(seed_golden(), RUN_B["results"], seed_store())
    assert stored_aggregate(db, "run_c") == {}
    assert result.notes == (f"aggregate_json written back to 2 run(s) of {db}",)


def test_seed_compare_across_chunker_versions_falls_back_as_the_reference_does(tmp_path):
    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import RUN_A, RUN_C, seed_database

    golden, db = seed_database(tmp_path)
    result = from_files(golden, [f"{db}#run_a", f"{db}#run_c"])
    assert without_notes(result.report) == ref.compare(seed_golden(), RUN_A, RUN_C, seed_store())
    assert result.report["deltas"]["chunker_version_match"] == "fallback_doc_span"
    kinds = {q["query_id"]: (q["kind"], q["a_hit_rank"], q["b_hit_rank"]) for q in result.report["per_query"]}
    assert kinds == {"q1": ("Loss", 1, 2), "q2": ("Win", 4, 1), "q3": ("Draw", None, None), "q5": ("Win", 2, 1),
                     "q6": ("Loss", 1, 2)}  # q2 at exactly 50% of c-rag-4's span; q6's first v2 chunk at 0%
    assert all("md-heading-v1 -> md-heading-v2" in q["note"] for q in result.report["per_query"] if q["kind"] != "Draw")


def test_seed_strict_chunker_version_refuses_as_the_reference_does(tmp_path):
    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import RUN_A, RUN_B, RUN_C, seed_database, stored_aggregate

    golden, db = seed_database(tmp_path)
    strict = KbEvalSettings(strict_chunker_version=True)
    with pytest.raises(ref.StrictRefusal):
        ref.compare(seed_golden(), RUN_A, RUN_C, seed_store(), strict=True)
    with pytest.raises(InputError) as err:
        from_files(golden, [f"{db}#run_a", f"{db}#run_c"], settings=strict)
    assert str(err.value).startswith(f"{db}#run_c: chunker_version: run 'run_a' was chunked with 'md-heading-v1' "
                                     "and run 'run_c' with 'md-heading-v2'")
    assert stored_aggregate(db, "run_a") == {}  # refused before anything was written
    same = from_files(golden, [f"{db}#run_a", f"{db}#run_b"], settings=strict)
    assert without_notes(same.report) == ref.compare(seed_golden(), RUN_A, RUN_B, seed_store(), strict=True)


def test_seed_every_run_of_the_database_is_scored_and_stored(tmp_path):
    # "lets us re-compute metrics over historical runs as formulas evolve"
    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import RUN_A, RUN_B, RUN_C, seed_database, stored_aggregate

    golden, db = seed_database(tmp_path)
    result = from_files(golden, [db])
    runs = {r["run_id"]: r["aggregate_json"] for r in result.report["runs"]}
    for run in (RUN_A, RUN_B, RUN_C):
        assert runs[run["run_id"]] == ref.aggregate(seed_golden(), run["results"], seed_store())
        assert stored_aggregate(db, run["run_id"]) == runs[run["run_id"]]


def test_seed_citation_to_a_chunk_that_does_not_exist_gives_zero(tmp_path):
    # The seed's unit test "citation_coverage with broken citation marks 0.0", in its database.
    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import GOLDEN_YAML, make_database, stored_aggregate

    golden = tmp_path / "golden_queries.yaml"
    golden.write_text(GOLDEN_YAML)
    run = {"run_id": "r1", "chunker_version": "md-heading-v1", "created_at": "2026-05-01T00:00:00Z", "results": [
        {"query_id": "q1", "hits_top_k": [{"chunk_id": "c-md-1", "doc_id": "doc-md"}],
         "answer": {"text": "heading boundary [#1]", "citations": [{"citation": "[#1]", "chunk_id": "c-md-404"}],
                    "grounded": True}}]}
    db = make_database(tmp_path / "kb.sqlite", [run], [("c-md-1", "doc-md")])
    result = from_files(golden, [db])
    assert result.report["aggregate_json"]["citation_coverage"] == 0.0
    assert ref.aggregate(seed_golden(), run["results"], {"c-md-1"})["citation_coverage"] == 0.0
    assert stored_aggregate(db, "r1")["citation_coverage"] == 0.0
    # the same run as a results file: the chunk store is then the corpus given beside it
    results = tmp_path / "r1.jsonl"
    results.write_text(json.dumps({**run["results"][0], "chunker_version": "md-heading-v1"}) + "\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"chunk_id": "c-md-1", "doc_id": "doc-md", "text": "heading boundary"}) + "\n")
    assert from_files(golden, [results], corpus=corpus).report["aggregate_json"]["citation_coverage"] == 0.0
    without_store = from_files(golden, [results])
    assert without_store.report["aggregate_json"]["citation_coverage"] is None
    assert "no store was given" in without_store.notes[0] and "(q1)" in without_store.notes[0]
    assert "citation_coverage of run 'r1' is null" in without_store.markdown


def test_seed_empty_denominators_are_stored_as_null(tmp_path):
    # The seed's unit test "NaN metrics (zero denominator) serialize as null in JSON".
    from tests.support.kb_eval_seed import GOLDEN_YAML, make_database

    golden = tmp_path / "golden_queries.yaml"
    golden.write_text(GOLDEN_YAML)
    run = {"run_id": "search-only", "chunker_version": "md-heading-v1", "created_at": "2026-05-01T00:00:00Z",
           "results": [{"query_id": "q1", "hits_top_k": [{"chunk_id": "c-md-1", "doc_id": "doc-md"}]}]}
    db = make_database(tmp_path / "kb.sqlite", [run], [("c-md-1", "doc-md")])
    from_files(golden, [db])
    with closing(sqlite3.connect(db)) as conn:
        (text,) = conn.execute("SELECT aggregate_json FROM eval_runs").fetchone()
    assert '"citation_coverage":null' in text and '"groundedness":null' in text
    assert '"refusal_correctness":null' in text and '"mrr":1.0' in text


def test_seed_compute_twice_gives_identical_aggregates(tmp_path):
    # The seed's determinism test: compute_aggregate twice, identical AggregateMetrics.
    from tests.support.kb_eval_seed import seed_database

    golden, db = seed_database(tmp_path)
    first = from_files(golden, [f"{db}#run_a", f"{db}#run_b"])
    with closing(sqlite3.connect(db)) as conn:
        stored = list(conn.execute("SELECT run_id, aggregate_json FROM eval_runs ORDER BY run_id"))
    second = from_files(golden, [f"{db}#run_a", f"{db}#run_b"])
    with closing(sqlite3.connect(db)) as conn:
        assert list(conn.execute("SELECT run_id, aggregate_json FROM eval_runs ORDER BY run_id")) == stored
    assert json.dumps(first.report) == json.dumps(second.report)


def test_seed_write_back_can_be_turned_off(tmp_path):
    from tests.support.kb_eval_seed import seed_database

    golden, db = seed_database(tmp_path)
    before = db.read_bytes()
    result = from_files(golden, [f"{db}#run_a", f"{db}#run_b"], settings=KbEvalSettings(keep_aggregate_json=True))
    assert db.read_bytes() == before
    assert result.notes == ()
