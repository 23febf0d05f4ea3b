"""Per-case deterministic metrics on a hand-made dataset whose values are worked out by hand."""

from __future__ import annotations

import math

import pytest

from groundjudge.load.dataset import load_dataset
from groundjudge.metrics.evaluate import evaluate_dataset


@pytest.fixture
def run(mini):
    dataset = load_dataset(mini / "golden.jsonl", [mini / "traces.jsonl"], mini / "corpus.jsonl")
    return evaluate_dataset(dataset)


def values(run, case_id):
    return run.case("base", case_id).values


def test_ranked_metrics_follow_scores_and_grades(run):
    v = values(run, "c1")  # ranking by score: leave#2 (grade 1), sla#1 (unjudged), leave#1 (grade 3)
    assert v["hit@1"] == 1.0 and v["recall@1"] == 0.5 and v["precision@3"] == pytest.approx(2 / 3)
    idcg = 3 + 1 / math.log2(3)
    assert v["ndcg@3"] == pytest.approx((1 + 3 / 2) / idcg, abs=1e-12)
    assert v["ndcg_exp@3"] == pytest.approx((1 + 7 / 2) / (7 + 1 / math.log2(3)), abs=1e-12)
    assert v["map"] == pytest.approx((1 + 2 / 3) / 2)
    assert v["r_precision"] == 0.5


def test_context_and_citation_metrics(run):
    v = values(run, "c1")
    assert v["context_recall"] == 0.5 and v["context_precision"] == 0.5
    # leave#1 is cited but never reached the context: not scoped, although must_cite is covered.
    assert v["citation_scoped"] == 0.0 and v["citation_in_context"] == 0.0
    assert v["must_cite_coverage"] == 1.0
    assert v["citation_offset_accuracy"] == 1.0  # [10, 30] lies inside leave#1's [0, 44]
    assert v["recall_doc@1"] == 1.0  # leave#2 belongs to the expected document


def test_behaviour_containment_and_acl(run):
    c1, c2, c3, c4 = (values(run, c) for c in ("c1", "c2", "c3", "c4"))
    assert c1["must_contain"] == 1.0 and c1["acl_leak"] == 0.0 and c1["over_refusal"] == 0.0
    assert c2["acl_leak"] == 1.0  # a globex user was shown an acme-only chunk
    assert run.case("base", "c2").acl_leaks[0].chunk_id == "leave#1"
    assert c3["behavior_correct"] == 0.0 and c3["under_refusal"] == 1.0 and c3["forbidden_absent"] == 0.0
    assert c4["behavior_correct"] == 1.0 and c4["abstention_accuracy"] == 1.0 and c4["empty_result"] == 1.0


def test_empty_denominators_are_none_and_left_out_of_means(run):
    c4 = values(run, "c4")
    assert c4["recall@5"] is None and c4["map"] is None and c4["acl_leak"] is None
    agg = run.configs["base"].aggregate
    assert agg["recall@5"]["n"] == 2  # c3 and c4 have no relevant chunks
    assert agg["acl_leak"] == {"value": pytest.approx(2 / 3), "n": 3}
    assert agg["latency_ms.end_to_end.p50"]["value"] == pytest.approx(350.0)


def test_breakdowns_by_tag_difficulty_and_content_type(run):
    breakdown = run.configs["base"].breakdown
    assert set(breakdown["tag"]) == {"exact", "numeric", "acl", "no-answer"}
    assert breakdown["difficulty"]["easy"]["must_contain"] == {"value": 1.0, "n": 2}
    assert set(breakdown["content_type"]) == {"prose", "table", "(unknown)"}
    assert breakdown["content_type"]["table"]["hit@1"]["n"] == 1


def test_failure_stage_follows_the_pipeline():
    from groundjudge.metrics.failures import failure_stage

    assert failure_stage({"acl_leak": 1.0, "recall@10": 0.0}) == "ACL leak"
    assert failure_stage({"recall@10": 0.5, "context_recall": 0.5, "must_contain": 0.0}) == "retrieval missed"
    assert failure_stage({"recall@10": 1.0, "context_recall": 0.5}) == "context dropped"
    assert failure_stage({"recall@10": 1.0}, ["cited_support", "unsupported"]) == "answer unsupported"
    assert failure_stage({"recall@10": 1.0}, ["misattributed"]) == "citation misattributed"
    assert failure_stage({"recall@10": 1.0, "behavior_correct": 1.0}, ["cited_support"]) is None
