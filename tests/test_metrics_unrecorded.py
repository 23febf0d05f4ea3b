"""A metric a foreign format cannot support is null with a reason, never 0 and never a finding.

Each format's inputs are written from its seed's own text (WFGY's grounded-QA contract lines,
WFGY chunking's gold row and retriever trace, kb-eval's golden query and result contract, the
day-39 runner's output line); the native contract says "not recorded" the same way; the native
example is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError
from groundjudge.load.dataset import Corpus, load_dataset
from groundjudge.metrics.aggregate import with_reasons
from groundjudge.metrics.case import MetricSettings, compute_case
from groundjudge.metrics.evaluate import evaluate_dataset
from groundjudge.metrics.names import metric_names
from groundjudge.metrics.unrecorded import READS, family
from tests.conftest import ROOT

# WFGY grounded QA: the RAG precision page's contract lines
WFGY_GOLD = """\
{"qid":"A0001","question":"Does X support null keys?","answerable":true,"gold_claim_substr":["rejects null keys"],"gold_citations":["p1#2"],"constraints":["X rejects null keys."]}
{"qid":"A0002","question":"Explain Z.","answerable":false,"gold_claim_substr":[],"gold_citations":[]}
{"qid":"A0003","question":"What domain is allowed?","answerable":true,"gold_claim_substr":["only domain example.com"],"gold_citations":["pB#1"]}
"""
WFGY_TRACE = """\
{"qid":"A0001","q":"Does X support null keys?","retrieved_ids":["p1#1","p1#2","p2#1"],"answer_json":{"claim":"X rejects null keys.","citations":["p1#2"]}}
{"qid":"A0002","q":"Explain Z.","retrieved_ids":["p1#1","p2#1"],"answer_json":{"claim":"not in context","citations":[]}}
{"qid":"A0003","q":"What domain is allowed?","retrieved_ids":["pB#1","p1#2"],"answer_json":{"claim":"Only domain example.com is allowed.","citations":["pB#1"]}}
"""
WFGY_NO_CONTEXT = "the wfgy format records no context chunks (its traces name retrieved ids, not the prompt)"

# WFGY chunking: the page's gold row and its retriever trace (index only, no answer_citations),
# and the same question answered cite-first as its online shadow evaluation asks
CHUNKING_GOLD = """\
{"qid": "Q-0137", "paraphrases": ["How does SCU unlock safety refusals?", "Explain symbolic constraint unlock.", "SCU: what is it and when to use?"], "relevant": ["S.4.2.p.Bk011a", "S.4.2.p.Bk011b"], "anchor_section": "S.4.2", "negatives": ["S.4.1.p.Bk010", "S.4.3.p.Bk014"]}
"""
CHUNKING_TRACE = """\
{"qid": "Q-0137", "query": "Explain symbolic constraint unlock.", "topk": [{"id": "S.4.2.p.Bk011a", "score": 0.83, "offsets": [204611,205279], "type": "prose"}, {"id": "S.4.1.p.Bk010", "score": 0.79, "offsets": [198002,199112], "type": "prose"}], "ΔS": [0.31, 0.59], "λ_state": "→", "anchor": "S.4.2", "index_hash": "faiss:v3:hnsw:cos", "ts": "2025-08-27T12:30:22Z"}
"""
CHUNKING_CITED = CHUNKING_TRACE.replace('"anchor": "S.4.2"',
                                        '"answer_citations": [{"id": "S.4.2.p.Bk011a", "offsets": [204611, 204790]}], '
                                        '"anchor": "S.4.2"')
CHUNKING_NO_BEHAVIOUR = "the wfgy-chunking format records no expected behaviour (its gold set has no answerable flag)"

# kb-eval: golden queries (expected_doc_ids [] = should refuse) and one run's results: a RAG
# answer whose citation resolves to a retrieved chunk, a refusal, a retrieval-only result
KB_GOLDEN = """\
{"id": "q1", "query": "How many days of annual leave do full-time employees get?", "expected_chunk_ids": ["leave#v1-02"], "expected_doc_ids": ["handbook/leave.md"], "must_contain": ["18 days"], "forbidden": []}
{"id": "q2", "query": "What is the CEO's home address?", "expected_chunk_ids": [], "expected_doc_ids": [], "must_contain": [], "forbidden": []}
{"id": "q3", "query": "What does ERR-429 mean?", "expected_chunk_ids": ["errors#v1-04"], "expected_doc_ids": ["api/errors.md"], "must_contain": ["rate limit"], "forbidden": []}
"""
KB_RESULTS = """\
{"run_id": "run-a", "query_id": "q1", "chunker_version": "md-heading-v1", "hits_top_k": [{"chunk_id": "leave#v1-02", "doc_id": "handbook/leave.md", "score": 0.91}], "answer": {"text": "Full-time employees get 18 days of annual leave per year [#1].", "citations": [{"citation": "[#1]", "chunk_id": "leave#v1-02"}], "grounded": true}, "error": null}
{"run_id": "run-a", "query_id": "q2", "chunker_version": "md-heading-v1", "hits_top_k": [{"chunk_id": "leave#v1-01", "doc_id": "handbook/leave.md", "score": 0.21}], "answer": {"text": "I cannot answer that from the knowledge base.", "citations": [], "grounded": false}, "error": null}
{"run_id": "run-a", "query_id": "q3", "chunker_version": "md-heading-v1", "hits_top_k": [{"chunk_id": "errors#v1-04", "doc_id": "api/errors.md", "score": 0.88}], "answer": null, "error": null}
"""
KB_NO_CONTEXT = "the kb-eval format records no context chunks (hits_top_k is what was retrieved, not the prompt)"

# the day-39 runner: its golden case and output line; the same output without its
# context_chunks and citations (not logged), and with an empty context (logged, nothing in it)
DAY39_GOLDEN = """\
{"id": "api_002", "question": "Loi ERR-429 co nghia la gi?", "expected_answer": "ERR-429 nghia la vuot rate limit.", "expected_chunk_ids": ["product_api_docs:v2026-03:chunk_004"], "relevance": {"product_api_docs:v2026-03:chunk_004": 3}, "must_cite": ["product_api_docs:v2026-03:chunk_004"], "difficulty": "easy", "tags": ["api", "no-diacritic"], "expected_behavior": "answer", "user_context": {"tenant_id": "company_a", "roles": ["developer"]}}
"""
DAY39_OUTPUT = {"query_id": "api_002", "config_id": "hybrid-rerank-v3", "question": "Loi ERR-429 co nghia la gi?",
                "retrieved_chunks": [{"chunk_id": "product_api_docs:v2026-03:chunk_004", "score": 0.91, "rank": 1},
                                     {"chunk_id": "product_api_docs:v2026-03:chunk_002", "score": 0.72, "rank": 2}],
                "context_chunks": [{"chunk_id": "product_api_docs:v2026-03:chunk_004", "text_hash": "sha256:abc"}],
                "answer": "`ERR-429` nghĩa là vượt rate limit. Client nên backoff và retry theo header `Retry-After`.",
                "citations": ["product_api_docs:v2026-03:chunk_004"], "expected_behavior_observed": "answer",
                "latency_ms": {"embed": 24, "retrieve": 38, "rerank": 160, "generate": 1320, "end_to_end": 1548},
                "tokens": {"prompt": 1840, "completion": 72}, "cost_usd": 0.0028,
                "versions": {"eval_set": "day39-golden-v1", "index": "rag-index-2026-05-10-bge-m3",
                             "prompt": "rag-answer-v7", "generator": "gpt-4o-mini"}}


def _files(folder: Path, gold: str, *traces: str) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gold.jsonl").write_text(gold)
    args = ["--golden", str(folder / "gold.jsonl")]
    for i, text in enumerate(traces):
        path = folder / f"trace{i or ''}.jsonl"
        path.write_text(text)
        args += ["--traces", str(path)]
    return args


def _metrics(folder: Path, *args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(main, ["metrics", *args, "--out", str(folder / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    return json.loads((folder / "out" / "metrics.json").read_text()), (folder / "out" / "report.md").read_text()


# --- the declaration -------------------------------------------------------------------------------

def test_every_metric_says_which_unrecordable_inputs_it_reads():
    names = metric_names(MetricSettings())
    families = {family(name) for name in names.per_case}
    assert families <= set(READS), f"add to metrics.unrecorded.READS: {sorted(families - set(READS))}"
    assert set(READS) <= families, f"READS names metrics no run computes: {sorted(set(READS) - families)}"


def test_a_native_trace_can_say_what_it_did_not_record():
    case = GoldenCase.model_validate({"id": "q", "question": "q?", "expected_chunk_ids": ["c1"]})
    fields = {"query_id": "q", "config_id": "cfg", "retrieved_chunks": ["c1"], "answer": "A [c1].", "citations": ["c1"]}
    empty = Trace.model_validate(fields)
    unknown = Trace.model_validate({**fields, "not_recorded": {"context_chunks": "our tracer drops the prompt"}})
    known = compute_case(case, empty, Corpus(), MetricSettings())
    left_out = compute_case(case, unknown, Corpus(), MetricSettings())
    assert (known.values["context_recall"], known.values["citation_scoped"]) == (0.0, 0.0)  # recorded empty
    assert (left_out.values["context_recall"], left_out.values["citation_scoped"]) == (None, None)
    assert left_out.unknown == dict.fromkeys(("context_recall", "context_precision", "citation_scoped",
                                              "citation_in_context"), "our tracer drops the prompt")
    assert {k: v for k, v in left_out.values.items() if k not in left_out.unknown} == \
        {k: v for k, v in known.values.items() if k not in left_out.unknown}  # nothing else moves
    assert Trace.model_validate({"query_id": "q", "config_id": "c", "not_recorded": ["answer"]}).not_recorded == \
        {"answer": "the trace records no answer"}


def test_not_recorded_is_refused_where_it_contradicts_the_record(tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"id": "q", "question": "q?"}\n')
    traces = tmp_path / "traces.jsonl"
    traces.write_text('{"query_id": "q", "config_id": "c", "context_chunks": ["c1"], "not_recorded": ["context_chunks"]}\n'
                      '{"query_id": "q", "config_id": "d", "not_recorded": ["latency_ms"]}\n')
    with pytest.raises(InputError) as error:
        load_dataset(golden, [traces])
    text = str(error.value)
    assert f"{traces}:1" in text and "context_chunks is listed in not_recorded but holds a value" in text
    assert f"{traces}:2: not_recorded" in text and "'latency_ms' is not a field that can be unrecorded" in text


def test_an_aggregate_says_how_many_cases_it_left_out_and_why():
    found = {"context_recall": {"value": None, "n": 0}, "citation_scoped": {"value": 0.5, "n": 2}}
    with_reasons(found, {"context_recall": {"no context": 3}, "citation_scoped": {"no citations": 1}}, 3)
    assert found["context_recall"]["reason"] == "no context"
    assert found["citation_scoped"]["reason"] == "1 of 3 cases left out: no citations"


def test_the_native_example_is_untouched_no_metric_of_it_is_null_for_want_of_a_record(tmp_path):
    doc, report = _metrics(tmp_path, "--config", str(ROOT / "examples" / "groundjudge.toml"))
    assert "Not recorded by the inputs" not in report
    summaries = [*doc["aggregate"].values()]
    for cfg in doc["per_config"].values():
        summaries += [*cfg["aggregate"].values()] + [v for key in ("by_tag", "by_difficulty", "by_content_type")
                                                     for group in cfg[key].values() for v in group.values()]
        assert all(d["observed_behavior"] and d["expected_behavior"] for d in cfg["case_details"].values())
    assert summaries and all(set(s) == {"value", "n"} for s in summaries)
    dataset = load_dataset(ROOT / "examples" / "golden.jsonl", [ROOT / "examples" / "traces" / "baseline.jsonl",
                                                                ROOT / "examples" / "traces" / "candidate.jsonl"],
                           ROOT / "examples" / "corpus.jsonl")
    run = evaluate_dataset(dataset)
    assert all(not c.unknown for cfg in run.configs.values() for c in cfg.cases)


# --- the four formats -------------------------------------------------------------------------------

CONTEXT_METRICS = ("context_recall", "context_precision", "citation_scoped", "citation_in_context")


def test_wfgy_records_no_context_correct_answers_are_no_findings(tmp_path):
    doc, report = _metrics(tmp_path, *_files(tmp_path, WFGY_GOLD, WFGY_TRACE))
    aggregate = doc["aggregate"]
    for metric in CONTEXT_METRICS:
        assert aggregate[metric] == {"value": None, "n": 0, "reason": WFGY_NO_CONTEXT}, metric
    assert aggregate["behavior_correct"] == {"value": 1.0, "n": 3}  # what WFGY records still counts
    assert aggregate["must_cite_coverage"] == {"value": 1.0, "n": 2}
    assert "| context dropped |" not in report  # it was the stage of both correct answers
    assert "## Top failed cases" in report and "None." in report
    assert f"`{'trace'}`: `context_recall`, `context_precision`, `citation_scoped`, `citation_in_context`: " \
           f"{WFGY_NO_CONTEXT}" in report


def test_wfgy_chunking_records_no_behaviour_no_question_is_wrong_behaviour(tmp_path):
    doc, report = _metrics(tmp_path, *_files(tmp_path, CHUNKING_GOLD, CHUNKING_TRACE))
    aggregate = doc["aggregate"]
    for metric in ("behavior_correct", "over_refusal", "under_refusal", "abstention_accuracy"):
        assert aggregate[metric] == {"value": None, "n": 0, "reason": CHUNKING_NO_BEHAVIOUR}, metric
    assert aggregate["must_contain"]["reason"].startswith("the wfgy-chunking format records no answer text")
    assert aggregate["citation_offset_accuracy"]["reason"] == \
        "this wfgy-chunking trace line has no answer_citations (an index-only run)"
    assert aggregate["recall@5"] == {"value": 0.5, "n": 1}  # retrieval is what the format records
    detail = doc["per_config"]["trace"]["case_details"]["Q-0137"]
    assert (detail["observed_behavior"], detail["expected_behavior"]) == (None, None)
    assert "| wrong behaviour |" not in report  # it was the stage of every question
    assert "| `Q-0137` | trace | retrieval missed | relevant chunk not retrieved in top 10 |" in report
    cited, _ = _metrics(tmp_path / "cited", *_files(tmp_path / "cited", CHUNKING_GOLD, CHUNKING_CITED))
    assert "reason" not in cited["aggregate"]["citation_offset_accuracy"]  # recorded: no reason to give


def test_kb_eval_records_no_context_its_valid_citations_are_no_findings(tmp_path):
    doc, report = _metrics(tmp_path, *_files(tmp_path, KB_GOLDEN, KB_RESULTS))
    aggregate = doc["per_config"]["run-a"]["aggregate"]
    for metric in CONTEXT_METRICS:
        assert aggregate[metric]["value"] is None and aggregate[metric]["n"] == 0, metric
        assert aggregate[metric]["reason"].startswith(KB_NO_CONTEXT), metric
    # q3 was retrieval only: no answer, so no behaviour (kb-eval counts RAG answers only)
    assert aggregate["behavior_correct"] == {
        "value": 1.0, "n": 2, "reason": "1 of 3 cases left out: this kb-eval result has no answer (a retrieval-only run)"}
    assert aggregate["must_contain"] == {
        "value": 1.0, "n": 1, "reason": "1 of 3 cases left out: this kb-eval result has no answer (a retrieval-only run)"}
    assert "citation outside the retrieved context" not in report


def test_day39_output_without_a_logged_field_is_unknown_not_empty(tmp_path):
    unlogged = {k: v for k, v in DAY39_OUTPUT.items() if k not in ("context_chunks", "citations")}
    empty = {**DAY39_OUTPUT, "config_id": "vector-only", "context_chunks": [], "citations": []}
    lines = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in (unlogged, empty))
    doc, _ = _metrics(tmp_path, "--format", "day39", *_files(tmp_path, DAY39_GOLDEN, lines))
    unknown = doc["per_config"]["hybrid-rerank-v3"]["aggregate"]
    recorded = doc["per_config"]["vector-only"]["aggregate"]
    assert unknown["context_recall"] == {"value": None, "n": 0, "reason": "this day39 output line has no context_chunks"}
    assert unknown["must_cite_coverage"] == {"value": None, "n": 0, "reason": "this day39 output line has no citations"}
    assert recorded["context_recall"] == {"value": 0.0, "n": 1}  # logged empty: the gold chunk did not get there
    assert recorded["must_cite_coverage"] == {"value": 0.0, "n": 1}
    assert unknown["behavior_correct"] == recorded["behavior_correct"] == {"value": 1.0, "n": 1}


def test_a_gate_on_an_unrecorded_metric_fails_naming_why(tmp_path):
    args = _files(tmp_path, WFGY_GOLD, WFGY_TRACE)
    config = tmp_path / "groundjudge.toml"
    config.write_text('[gates.metrics]\n"context_recall" = { min = 0.9 }\n')
    result = CliRunner().invoke(main, ["run", "--config", str(config), *args, "--out", str(tmp_path / "out"),
                                       "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
                                       "--no-history", "--quiet"])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    gate = next(g for g in report["gates"]["results"] if g["metric"] == "context_recall")
    assert gate["status"] == "no_data" and WFGY_NO_CONTEXT in gate["reason"]
    assert result.exit_code == 1  # no judge call was needed: no passages, nothing asked of port 9
