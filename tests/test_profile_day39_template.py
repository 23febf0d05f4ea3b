"""The day-39 report template and release gates (seed 004), on inputs written from the lesson
(``tests/support/day39_seed.py``), checked against the lesson's runner reproduced from its
definitions (``tests/support/day39_reference.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.load.adapters.day39 import read_golden, read_outputs
from groundjudge.profiles.day39 import Day39Settings, from_files, full_report, render_markdown
from groundjudge.profiles.day39.settings import GATE_SETS, gate_specs
from tests.support import day39_reference as ref
from tests.support import day39_seed as seed
from tests.support.day39_seed import write_jsonl, write_seed_files
from tests.test_inert import markdown_problems

H, V = "hybrid-rerank", "vector-only"


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    return write_seed_files(tmp_path)


def build(files: dict[str, Path], **settings: Any) -> dict[str, Any]:
    golden = read_golden(files["golden"])
    return full_report(golden, read_outputs([files["baseline"], files["candidate"]], golden),
                       Day39Settings.model_validate(settings))


def metrics_run(tmp_path: Path, files: dict[str, Path], *extra: str, config: Path | None = None):
    args = ["metrics", "--profile", "day39", "--golden", str(files["golden"]), "--traces", str(files["baseline"]),
            "--traces", str(files["candidate"]), "--out", str(tmp_path / "out"), "--quiet", *extra]
    if config is not None:
        args += ["--config", str(config)]
    return CliRunner().invoke(main, args)


# --- the runner's numbers, as the lesson's runner computes them -------------------------------------


def test_every_number_of_the_runner_equals_the_reference_runner(files: dict[str, Path]) -> None:
    doc = build(files)
    expected = ref.run(seed.GOLDEN, seed.BASELINE + seed.CANDIDATE)
    assert set(doc["results"]) == set(expected) == {H, V}
    for cfg, rows in expected.items():
        mine = doc["aggregate"][cfg]
        theirs = ref.summary(rows)
        assert mine["cases"] == len(rows) == 14
        assert {k: mine[k] for k in theirs} == pytest.approx(theirs)
        assert [(r["query_id"], r["metrics"]) for r in doc["results"][cfg]] == \
            [(r["query_id"], pytest.approx(r["metrics"])) for r in rows]
        assert [r["failed_checks"] for r in doc["results"][cfg]] == [r["failed"] for r in rows]
        assert doc["release_gate"][cfg]["failures"] == ref.gate(rows)
        for tag, tag_rows in ref.by_tag(rows).items():
            s = ref.summary(tag_rows)
            row = doc["breakdown_by_tag"][cfg][tag]
            assert (row["cases"], row["failures"]) == (len(tag_rows), sum(bool(r["failed"]) for r in tag_rows))
            assert [row["recall@10"], row["mrr@10"], row["citation_correctness"]] == pytest.approx(
                [s["recall@10"], s["mrr@10"], s["citation_correctness"]])
    assert doc["exit_code"] == doc["runner_exit_code"] == ref.exit_code(expected) == 1
    json.dumps(doc, allow_nan=False)


def test_the_template_columns_are_the_reference_values(files: dict[str, Path]) -> None:
    doc = build(files)
    expected = ref.run(seed.GOLDEN, seed.BASELINE + seed.CANDIDATE)
    for cfg, rows in expected.items():
        s = ref.summary(rows)
        row = doc["report_template"]["aggregate_metrics"][cfg]
        for metric in ("hit@5", "recall@5", "recall@10", "precision@5", "mrr@10", "ndcg@10", "citation_correctness",
                       "p95_latency_ms"):
            assert row[metric] == pytest.approx(s[metric]), (cfg, metric)
        assert row["abstention_accuracy"] == pytest.approx(ref.abstention_accuracy(rows))
    # the figures as they stand, so a change of definition shows here
    cand = doc["report_template"]["aggregate_metrics"][H]
    assert (cand["hit@5"], cand["recall@10"], cand["mrr@10"]) == (0.75, pytest.approx(17 / 24), 0.75)
    assert cand["abstention_accuracy"] == 0.5  # api_005 answered, no_answer_001 refused


def test_judge_columns_of_a_metrics_run_say_why_there_is_no_number(files: dict[str, Path]) -> None:
    doc = build(files)
    for cfg in (H, V):
        for metric in ("faithfulness", "answer_relevance"):
            cell = doc["report_template"]["aggregate_metrics"][cfg][metric]
            assert cell["value"] is None and cell["n"] == 0 and cell["state"] == "no_judge"
            assert "groundjudge run --profile day39" in cell["reason"]
    text = render_markdown(doc)
    assert "| not judged (metrics: no judge) | not judged (metrics: no judge) |" in text


# --- the template's sections ------------------------------------------------------------------


def test_the_report_has_the_templates_sections_in_order(files: dict[str, Path]) -> None:
    text = render_markdown(build(files, owner="rag-team", date="2026-05-10"))
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Summary", "## Aggregate Metrics", "## Breakdown By Tag", "## Regression Summary",
                        "## Top Failed Queries", "## Release Gate", "## Decision", "## The runner's own tables"]
    assert ("| Config | Hit@5 | Recall@5 | Recall@10 | Precision@5 | MRR@10 | NDCG@10 | Faithfulness "
            "| Answer relevance "
            "| Citation correctness | Abstention accuracy | p95 latency |") in text
    assert "| Tag | Cases | Recall@10 | MRR@10 | Faithfulness | Citation correctness | Failures | Notes" in text
    assert "| Query ID | Metric changed | Baseline | Candidate | Root cause | Decision |" in text
    assert ("| Query ID | Question | Expected source | Retrieved? | Context? | Answer correct? | Citation correct? "
            "| Root cause | Fix |") in text
    assert "- Date: 2026-05-10\n- Owner: rag-team\n- Config under test: hybrid-rerank\n- Baseline config: vector-only" \
        in text
    assert "- Release decision: **FAIL**" in text
    assert text.rstrip().endswith("Exit code: 1")  # the runner's own line, as it prints it


def test_the_summary_and_reports_carry_the_traces_versions(files: dict[str, Path]) -> None:
    doc = build(files)
    summary = doc["report_template"]["summary"]
    assert summary["eval_set_version"] == ["day39-golden-v1"]
    assert summary["corpus_index_version"] == ["internal-kb-2026-05-10", "rag-index-2026-05-10-bge-m3"]
    assert summary["prompt_model_version"] == ["rag-answer-v7", "gpt-4o-mini"]
    versions = doc["report_template"]["versions"]
    assert versions[H]["values"] == {k: [v] for k, v in seed.CANDIDATE_VERSIONS.items()}
    assert versions[V]["values"]["index"] == ["rag-index-2026-05-10-vector"]
    text = render_markdown(doc)
    assert ("| vector-only | day39-golden-v1 | internal-kb-2026-05-10 | — | bge-m3 | rag-index-2026-05-10-vector |"
            in text)


def test_the_native_report_carries_the_versions_too(files: dict[str, Path], tmp_path: Path) -> None:
    assert metrics_run(tmp_path, files).exit_code == 1
    report = (tmp_path / "out" / "report.md").read_text()
    native = report.split("## Profile `day39`")[0]
    assert "## Versions (from the traces)" in native
    assert "| hybrid-rerank | markdown_v2_800_120 | internal-kb-2026-05-10 | bge-m3 | day39-golden-v1 |" in native


def test_root_causes_of_the_planted_failures(files: dict[str, Path]) -> None:
    doc = build(files, top_failed=20)
    causes = {r["query_id"]: r["root_cause"] for r in doc["report_template"]["top_failed_queries"]}
    assert {cid: causes[cid] for cid in seed.PLANTED} == seed.PLANTED
    assert causes["acl_001"] == "acl"  # refused as it should; the runner's rule still counts it
    rows = {r["query_id"]: r for r in doc["report_template"]["top_failed_queries"]}
    assert "golden_label_issue" in rows["acl_001"]["evidence"]
    assert rows["version_002"]["evidence"] == ("retrieved it_security_policy:v2026-01:chunk_003, another version of "
                                                "the "
                                                "expected it_security_policy:v2026-02:chunk_003")
    assert rows["hr_leave_004"]["retrieved"] == "yes (rank 1, 12)"
    assert rows["hr_leave_004"]["context"] == "partly (1 of 2)"
    assert rows["api_005"]["answer_correct"] == "no (answered; must refuse)"
    assert rows["remote_001"]["fix"].startswith("Check parser, chunking, embedding")
    # ACL and critical hallucinations first
    first = [r["query_id"] for r in doc["report_template"]["top_failed_queries"][:3]]
    assert first == ["acl_001", "api_005", "acl_003"]
    assert doc["report_template"]["failed_queries_total"] == 8


def test_regression_summary_names_what_dropped_and_why(files: dict[str, Path]) -> None:
    reg = build(files)["report_template"]["regression_summary"]
    assert (reg["baseline"], reg["candidate"]) == (V, H)
    assert reg["cases"] == {"improved": 7, "regressed": 5, "unchanged": 2}
    remote = [r for r in reg["rows"] if r["query_id"] == "remote_001"]
    assert [r["metric"] for r in remote] == ["recall@10", "mrr@10", "ndcg@10", "context_recall", "citation_correctness"]
    assert remote[0]["evidence"] == ("hr_remote_policy:v2026-01:chunk_002: rank 1 in vector-only, not among the 3 "
                                     "retrieved in hybrid-rerank")
    assert remote[0]["root_cause"] == "retrieval" and remote[0]["decision"].startswith("fix before release")
    assert {r["query_id"] for r in reg["rows"]} == {"hr_leave_004", "remote_001", "api_005", "version_002",
                                                      "redteam_001"}


def test_a_single_config_has_no_regression_summary(files: dict[str, Path], tmp_path: Path) -> None:
    golden = read_golden(files["golden"])
    doc = full_report(golden, read_outputs([files["candidate"]], golden), Day39Settings())
    assert doc["report_template"]["regression_summary"] is None
    assert doc["report_template"]["summary"]["baseline_config"] is None
    assert "One config: nothing to compare" in render_markdown(doc)


# --- release gates ------------------------------------------------------------------------------


def test_the_gate_sets_are_the_lessons() -> None:
    def bounds(name: str, **gates: Any) -> dict[str, str]:
        return {s.name: s.bound.text() for s in gate_specs(Day39Settings(release_gate=name, gates=gates))}

    assert bounds("runner") == {"acl_critical_failures": "<= 0", "recall@10": ">= 0.85", "mrr@10": ">= 0.7",
                                "citation_correctness": ">= 0.95", "behavior_score": ">= 0.9",
                                "p95_latency_ms": "<= 6000"}
    # section 13, an internal knowledge assistant; cost/query is bounded by the team's budget
    assert bounds("internal-assistant", cost_usd=0.004) == {
        "acl_critical_failures": "<= 0", "recall@10": ">= 0.85", "mrr@10": ">= 0.7", "ndcg@10": ">= 0.75",
        "faithfulness": ">= 0.9", "answer_relevance": ">= 0.88", "citation_correctness": ">= 0.95",
        "abstention_accuracy": ">= 0.9", "critical_hallucinations": "<= 0", "p95_latency_ms": "<= 6000",
        "cost_usd": "<= 0.004"}
    assert bounds("hr-legal-finance") == {"acl_critical_failures": "<= 0", "recall@10": ">= 0.9",
                                          "citation_correctness": ">= 0.97", "faithfulness": ">= 0.93"}
    assert bounds("customer-support") == {"acl_critical_failures": "<= 0", "recall@10": ">= 0.85",
                                          "answer_relevance": ">= 0.88", "abstention_accuracy": ">= 0.9"}
    assert bounds("developer-docs") == {"acl_critical_failures": "<= 0", "mrr@10": ">= 0.75", "ndcg@10": ">= 0.8",
                                        "failed_case_rate[error-code]": "<= 0"}
    assert bounds("internal-search", p95_latency_ms=3000) == {"acl_critical_failures": "<= 0", "hit@10": ">= 0.9",
                                                              "p95_latency_ms": "<= 3000"}
    assert bounds("capstone") == {"acl_critical_failures": "<= 0", "recall@10": ">= 0.8", "mrr@10": ">= 0.65",
                                  "critical_hallucinations": "<= 0"}
    assert set(GATE_SETS) == {"runner", "internal-assistant", "hr-legal-finance", "customer-support",
                              "developer-docs", "internal-search", "capstone"}


def test_a_target_the_lesson_leaves_to_the_team_must_be_given(files: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "gj.toml"
    config.write_text('[profile.day39]\nrelease_gate = "internal-assistant"\n')
    result = metrics_run(tmp_path, files, config=config)
    assert result.exit_code == 2
    assert (f"{config}: profile.day39: the internal-assistant gates bound Cost/query (USD) by a target of yours, "
            "which the lesson does not fix: set it in [profile.day39.gates] (cost_usd = { max = ... }) or with "
            "--gates") in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("table, fragment", [
    ('release_gate = "strict"', "unknown gate set 'strict'"),
    ('[profile.day39.gates]\n"recal@10" = 0.9', "unknown metric 'recal@10'"),
    ('[profile.day39.gates]\n"recall@10" = { min = nan }', "not a finite number"),
    ('[profile.day39.gates]\n"recall@10" = {}', "a gate needs a bound"),
    ('[profile.day39.tag_gates.acl]\nfaithfulness = 0.9', "a judge gate reads a whole config"),
    ("top_failed = -1", "top_failed"),
    ("colour = 1", "unknown setting of the day39 profile"),
])
def test_bad_settings_are_input_errors_naming_the_key(files: dict[str, Path], tmp_path: Path, table: str,
                                                      fragment: str) -> None:
    config = tmp_path / "gj.toml"
    config.write_text(("[profile.day39]\n" if not table.startswith("[") else "") + table + "\n")
    result = metrics_run(tmp_path, files, config=config)
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "profile.day39" in result.output
    assert not (tmp_path / "out").exists()


def test_the_gate_set_decides_the_exit_code(files: dict[str, Path], tmp_path: Path) -> None:
    """The candidate fails the runner's gate (recall@10, citations, ACL); the capstone set asks
    less, but its ACL rule and "no critical hallucination" still fail it (acl_003, api_005)."""
    capstone = build(files, release_gate="capstone", configs=[H])
    checks = {c["gate"]: c for c in capstone["report_template"]["release_gate"]["per_config"][H]["checks"]}
    assert checks["recall@10"]["status"] == "fail"  # 0.708 < 0.80
    assert checks["mrr@10"]["status"] == "pass"
    assert (checks["critical_hallucinations"]["value"], checks["critical_hallucinations"]["status"]) == (1, "fail")
    assert (checks["acl_critical_failures"]["value"], checks["acl_critical_failures"]["status"]) == (2, "fail")
    assert capstone["report_template"]["decision"] == {H: capstone["report_template"]["decision"][H]}  # only H
    assert capstone["exit_code"] == 1 and capstone["runner_exit_code"] == 1


def passing_files(tmp_path: Path) -> dict[str, Path]:
    """The cases the candidate gets right, and only the candidate's outputs."""
    keep = {"hr_leave_001", "hr_leave_003", "security_002", "sla_002", "api_002", "no_answer_001"}
    folder = tmp_path / "passing"
    folder.mkdir()
    return {"golden": write_jsonl(folder / "golden.jsonl", [c for c in seed.GOLDEN if c["id"] in keep]),
            "candidate": write_jsonl(folder / "outputs.jsonl", [o for o in seed.CANDIDATE if o["query_id"] in keep]),
            "store": write_jsonl(folder / "store.jsonl", seed.STORE)}


def test_pass_when_every_gate_was_evaluated_and_held(tmp_path: Path) -> None:
    f = passing_files(tmp_path)
    result = from_files(f["golden"], [f["candidate"]], settings=Day39Settings(release_gate="capstone"))
    assert result.passed is True and result.report["report_template"]["decision"][H]["status"] == "PASS"
    assert "- Release decision: **PASS**" in result.markdown


def test_a_judge_gate_in_a_metrics_run_is_not_evaluated_so_it_does_not_hold(tmp_path: Path) -> None:
    f = passing_files(tmp_path)
    result = from_files(f["golden"], [f["candidate"]],
                        settings=Day39Settings(release_gate="customer-support"))
    checks = {c["gate"]: c for c in result.report["report_template"]["release_gate"]["per_config"][H]["checks"]}
    relevance = checks["answer_relevance"]
    assert (relevance["status"], relevance["blocking"], relevance["value"]) == ("no_data", True, None)
    assert relevance["reason"].startswith("not evaluated, so it does not hold: not judged: `groundjudge metrics` runs "
                                          "no judge")
    assert result.passed is False and result.report["report_template"]["decision"][H]["status"] == "FAIL"


def test_a_skipped_gate_is_not_a_held_gate_pass_with_risk(tmp_path: Path) -> None:
    f = passing_files(tmp_path)
    settings = Day39Settings(release_gate="customer-support",
                             gates={"answer_relevance": {"min": 0.88, "on_missing": "skip"}})
    result = from_files(f["golden"], [f["candidate"]], settings=settings)
    decision = result.report["report_template"]["decision"][H]
    assert decision["status"] == "PASS_WITH_RISK" and decision["risks"] == ["Answer relevance >= 0.88"]
    assert result.passed is True  # as a native advisory or skipped gate, it does not fail the run
    assert "- Release decision: **PASS_WITH_RISK**" in result.markdown
    assert "- [ ] Answer relevance >= 0.88 — no data: skipped (on_missing = skip)" in result.markdown


def test_gates_from_the_command_line(files: dict[str, Path], tmp_path: Path) -> None:
    f = passing_files(tmp_path)
    out = tmp_path / "flags"
    result = CliRunner().invoke(main, ["metrics", "--profile", "day39", "--golden", str(f["golden"]), "--traces",
                                       str(f["candidate"]), "--release-gate", "capstone", "--gates", "recall@10=1",
                                       "p95_latency_ms=1000", "--out", str(out), "--quiet"])
    assert result.exit_code == 1, result.output  # p95 1710 ms > 1000
    own = json.loads((out / "profile-day39.json").read_text())
    checks = {c["gate"]: c["status"] for c in own["report_template"]["release_gate"]["per_config"][H]["checks"]}
    assert checks == {"acl_critical_failures": "pass", "recall@10": "pass", "mrr@10": "pass",
                      "critical_hallucinations": "pass", "p95_latency_ms": "fail"}
    assert own["settings"]["gates"]["p95_latency_ms"] == {"min": None, "max": 1000.0, "on_missing": "fail"}


def test_tag_gates_bound_the_cases_of_a_tag(files: dict[str, Path]) -> None:
    doc = build(files, release_gate="developer-docs", tag_gates={"multi-hop": {"failed_case_rate": 0}})
    checks = {c["gate"]: c for c in doc["report_template"]["release_gate"]["per_config"][H]["checks"]}
    assert checks["failed_case_rate[error-code]"]["status"] == "pass"  # api_002 passes in the candidate
    assert checks["failed_case_rate[multi-hop]"]["status"] == "fail"
    assert checks["failed_case_rate[multi-hop]"]["value"] == 1.0 and checks["failed_case_rate[multi-hop]"]["n"] == 2
    v = {c["gate"]: c for c in doc["report_template"]["release_gate"]["per_config"][V]["checks"]}
    assert v["failed_case_rate[error-code]"]["status"] == "fail"  # vector-only does not find ERR-429


def test_a_config_named_in_the_settings_must_exist(files: dict[str, Path], tmp_path: Path) -> None:
    result = metrics_run(tmp_path, files, "--candidate", "bm25")
    assert result.exit_code == 2
    assert (f"{files['baseline']}: profile.day39.candidate: 'bm25' is not a config of these outputs (vector-only, "
            "hybrid-rerank)") in result.output


def test_hostile_text_stays_inert_in_the_template(tmp_path: Path) -> None:
    golden = [dict(c) for c in seed.GOLDEN]
    golden[1] = {**golden[1], "question": "<img src=x onerror=alert(1)>|# forged", "tags": ["<b>x</b>|", "hr"]}
    outputs = [dict(o) for o in seed.CANDIDATE]
    outputs[1] = {**outputs[1], "versions": {"prompt": "v7|<script>x</script>\x1b[2J"}, "retrieved_chunks": []}
    g = write_jsonl(tmp_path / "g.jsonl", golden)
    o = write_jsonl(tmp_path / "o.jsonl", outputs)
    result = from_files(g, [o], settings=Day39Settings(top_failed=20))
    assert markdown_problems(result.markdown) == []
    assert "hr_leave_003" in result.markdown
