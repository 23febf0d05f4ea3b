"""`groundjudge run --profile day39`: the judge reads the answers' context from the lesson's
document store and fills the report's judged columns, with the scripted server as the judge.

Before: the day-39 outputs carry chunk ids without text, so the run judged none of them
(``missing_text`` for every answer) and the profile's report had no judged column at all."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.profiles.day39.gates import check_gates, decide
from groundjudge.profiles.day39.settings import Day39Settings, gate_specs
from tests.support.day39_seed import write_seed_files
from tests.support.openai_server import Reply, ScriptedOpenAIServer
from tests.test_profile_day39_template import passing_files

H, V = "hybrid-rerank", "vector-only"
RELEVANCE = "respond to what the QUESTION asks"
OFF_QUESTION = "Public API cho phép 600 requests mỗi phút."  # remote_001's candidate answer


UNSUPPORTED = "Có, API hỗ trợ GraphQL endpoint tại /graphql."  # api_005's candidate answer: no passage says it


def judge_script(body: dict, index: int) -> Reply:
    """Yes (0.95) to every question, but No (0.1) to whether remote_001's candidate answer, about
    the API's rate limit, responds to a question about remote work or states a fact of the
    expected answer, and No (0.05) to whether the passages support api_005's GraphQL claim."""
    user = body["messages"][-1]["content"]
    if RELEVANCE in user or "FACT:" in user:
        p = 0.1 if OFF_QUESTION in user else 0.95
    else:
        p = 0.05 if user.rstrip().endswith(f"{UNSUPPORTED}\nDATA>>>") else 0.95
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=((("Yes", math.log(p)), ("No", math.log(1 - p))),))


@pytest.fixture(autouse=True)
def _no_judge_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)


def run(tmp_path: Path, golden: Path, traces: list[Path], *extra: str) -> tuple[Any, Path, list[dict]]:
    out = tmp_path / "out"
    args = ["run", "--profile", "day39", "--golden", str(golden), *(a for t in traces for a in ("--traces", str(t))),
            "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--no-history", *extra]
    with ScriptedOpenAIServer(judge_script) as srv:
        result = CliRunner().invoke(main, [*args, "--judge-base-url", srv.base_url, "--judge-model", srv.model])
        bodies = [r.body for r in srv.requests]
    return result, out, bodies


def test_without_the_text_nothing_is_judged_and_the_report_says_how_to_give_it(tmp_path: Path) -> None:
    files = write_seed_files(tmp_path)
    result, out, bodies = run(tmp_path, files["golden"], [files["baseline"], files["candidate"]])
    assert result.exit_code == 1, result.output  # the judge_error-rate gate has nothing, and the planted failures
    assert bodies == []
    report = json.loads((out / "report.json").read_text())
    assert report["judge"]["skip_reasons"]["missing_text"] == 20  # every answer the judge would read
    cases = report["judge"]["per_config"][H]["cases"]
    assert {c["status"] for c in cases.values()} == {"skipped"} and all(c["criteria"] == {} for c in cases.values())
    missing = [c["reason"] for c in cases.values() if c["reason"].startswith("missing_text")]
    assert len(missing) == 11
    assert all("no corpus was given: give the chunks' text with --corpus FILE" in r for r in missing)
    own = json.loads((out / "profile-day39.json").read_text())
    cell = own["report_template"]["judge"][H]["faithfulness"]
    assert (cell["value"], cell["n"], cell["state"]) == (None, 0, "none_judged")
    assert cell["reason"].startswith("no judged answer: 11 missing_text, 3 decided deterministically")
    assert "give the chunks' text with --corpus FILE: the document store" in cell["reason"]


def test_missing_text_reason_names_the_corpus(tmp_path: Path) -> None:
    from groundjudge import api
    from groundjudge.metrics.evaluate import evaluate_dataset

    files = write_seed_files(tmp_path)
    config = api.for_profile(api.resolve_config(None, {"inputs.golden": files["golden"],
                                                       "inputs.traces": (files["candidate"],)}), "day39")
    dataset = api.load_inputs(config)
    reasons = {s.reason for s in api.select(config, dataset, evaluate_dataset(dataset)) if not s.judge}
    text = next(r for r in reasons if r and r.startswith("missing_text"))
    assert text.endswith("; no corpus was given: give the chunks' text with --corpus FILE (one JSON line per chunk: "
                         "chunk_id and text) (for day39 files, the system's own chunk store is read as the corpus), "
                         "or inline as context_chunks[].text")


def test_with_the_document_store_the_answers_are_judged_with_claim_check_v5(tmp_path: Path) -> None:
    files = write_seed_files(tmp_path)
    result, out, bodies = run(tmp_path, files["golden"], [files["baseline"], files["candidate"]],
                              "--corpus", str(files["store"]))
    assert result.exit_code == 1, result.output  # the candidate fails the runner's gate (planted)
    assert "profile day39: FAIL" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["judge"]["identity"]["rubric"]["id"] == "claim_check"
    assert report["judge"]["identity"]["rubric"]["version"] == 5  # the profile's rubric version
    assert "missing_text" not in report["judge"]["skip_reasons"]
    cases = report["judge"]["per_config"][H]["cases"]
    judged = {cid for cid, c in cases.items() if c["status"] == "judged"}
    assert len(judged) == 11  # the 3 refusals are decided without it
    assert {c["reason"] for cid, c in cases.items() if cid not in judged} == {
        "decided deterministically: abstain has no claims to judge",
        "decided deterministically: permission_denied has no claims to judge"}
    assert sum(RELEVANCE in b["messages"][-1]["content"] for b in bodies) == 20  # one per judged answer
    # the passages the judge read are the store's text
    assert any("Nhân viên full-time được nghỉ 12 ngày phép năm." in b["messages"][-1]["content"] for b in bodies)
    own = json.loads((out / "profile-day39.json").read_text())
    for cfg in (H, V):
        verdicts = [c for c in report["judge"]["per_config"][cfg]["cases"].values() if c["status"] == "judged"]
        for metric, name in (("faithfulness", "faithful"), ("answer_relevance", "relevant")):
            labels = [c["criteria"][name]["label"] for c in verdicts]
            cell = own["report_template"]["aggregate_metrics"][cfg][metric]
            assert cell["n"] == len(labels) and cell["state"] == "untrusted"
            assert cell["value"] == pytest.approx(sum(1 for v in labels if v is True) / len(labels))
    assert cases["remote_001"]["criteria"]["relevant"]["label"] is False
    assert cases["api_005"]["criteria"]["faithful"]["label"] is False  # GraphQL: terms no passage has
    md = (out / "profile-day39.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith(f"| {H} | 0.750"))
    cand = own["report_template"]["aggregate_metrics"][H]
    assert f"{cand['faithfulness']['value']:.3f} (n=11, untrusted)" in row
    assert f"{cand['answer_relevance']['value']:.3f} (n=11, untrusted)" in row
    # the judge's findings reach the failed-query table and the regression summary
    top = {r["query_id"]: r for r in own["report_template"]["top_failed_queries"]}
    assert top["remote_001"]["answer_correct"].startswith("no (judge: 0/3")  # nothing of the expected answer
    reg = [r for r in own["report_template"]["regression_summary"]["rows"] if r["query_id"] == "remote_001"]
    assert "answer_relevance" in [r["metric"] for r in reg]


def test_untrusted_judge_gates_hold_only_with_risk(tmp_path: Path) -> None:
    """customer-support: recall@10, abstention accuracy (deterministic) and answer relevance
    (judged): the judge has no calibration record, so its gate is advisory: PASS_WITH_RISK."""
    f = passing_files(tmp_path)
    result, out, _ = run(tmp_path, f["golden"], [f["candidate"]], "--corpus", str(f["store"]),
                         "--release-gate", "customer-support")
    assert result.exit_code == 0, result.output
    assert "profile day39: PASS_WITH_RISK" in result.output
    own = json.loads((out / "profile-day39.json").read_text())
    checks = {c["gate"]: c for c in own["report_template"]["release_gate"]["per_config"][H]["checks"]}
    assert checks["answer_relevance"]["status"] == "advisory" and not checks["answer_relevance"]["blocking"]
    assert checks["answer_relevance"]["reason"].startswith("would pass; advisory: ")
    assert checks["answer_relevance"]["value"] == 1.0 and checks["answer_relevance"]["n"] == 5
    assert {c["status"] for g, c in checks.items() if g != "answer_relevance"} == {"pass"}
    assert own["report_template"]["summary"]["release_decision"] == "PASS_WITH_RISK"


def test_a_rubric_without_answer_relevance_says_so(tmp_path: Path) -> None:
    f = passing_files(tmp_path)
    config = tmp_path / "gj.toml"
    config.write_text("[judge]\nrubric = \"claim_check\"\nrubric_version = 4\n")
    result, out, _ = run(tmp_path, f["golden"], [f["candidate"]], "--corpus", str(f["store"]),
                         "--config", str(config))
    assert result.exit_code == 0, result.output
    own = json.loads((out / "profile-day39.json").read_text())
    cell = own["report_template"]["judge"][H]["answer_relevance"]
    assert (cell["state"], cell["value"]) == ("not_in_rubric", None)
    assert "claim_check/v4 has no relevant criterion" in cell["reason"]
    assert own["report_template"]["judge"][H]["faithfulness"]["state"] == "untrusted"


# --- the gate rule on each kind of judge cell ----------------------------------------------------

def cell(state: str, value: float | None, n: int = 10) -> dict[str, Any]:
    return {"metric": "faithfulness", "criterion": "faithful", "value": value, "n": n, "state": state,
            "reason": f"{state} reason"}


@pytest.mark.parametrize("judge, status, blocking, decision", [
    (cell("trusted", 0.95), "pass", True, "PASS"),
    (cell("trusted", 0.80), "fail", True, "FAIL"),
    (cell("untrusted", 0.95), "advisory", False, "PASS_WITH_RISK"),
    (cell("untrusted", 0.80), "advisory", False, "PASS_WITH_RISK"),  # would fail: still never blocking
    (cell("none_judged", None, 0), "no_data", True, "FAIL"),
    (cell("no_judge", None, 0), "no_data", True, "FAIL"),
])
def test_a_judge_gate_blocks_only_when_trusted_and_never_passes_without_data(
        judge: dict[str, Any], status: str, blocking: bool, decision: str) -> None:
    specs = [s for s in gate_specs(Day39Settings(release_gate="hr-legal-finance")) if s.metric == "faithfulness"]
    [check] = check_gates(specs, {}, {}, {}, {}, {"faithfulness": judge})
    assert (check["status"], check["blocking"]) == (status, blocking)
    assert decide("cand", [check])["status"] == decision
    if status == "advisory":
        assert check["reason"].startswith("would pass" if judge["value"] >= 0.93 else "would fail")
