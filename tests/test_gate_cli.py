"""Gates as a user meets them: the bundled example's config with one gate changed, `groundjudge
run` against a scripted judge. A gate that cannot be evaluated never passes: it is a
configuration error before anything runs, or, when its metric has no data, a failure."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import verdict_for_request
from tests.support.openai_server import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXAMPLE_TEXT = (EXAMPLES / "groundjudge.toml").read_text(encoding="utf-8")


def example_config(tmp_path: Path, *, gates: str = "", replace: dict[str, str] | None = None) -> Path:
    """The bundled example's config, written in ``tmp_path`` (inputs still in examples/), with
    ``gates`` added at the end of its [gates.metrics] table and ``replace`` applied."""
    text = EXAMPLE_TEXT
    for old, new in {'"golden.jsonl"': f'"{EXAMPLES / "golden.jsonl"}"',
                     '"traces/baseline.jsonl"': f'"{EXAMPLES / "traces" / "baseline.jsonl"}"',
                     '"traces/candidate.jsonl"': f'"{EXAMPLES / "traces" / "candidate.jsonl"}"',
                     '"corpus.jsonl"': f'"{EXAMPLES / "corpus.jsonl"}"',
                     '"../calibration/': f'"{ROOT / "calibration"}/',
                     'dir = "../cache"': f'dir = "{tmp_path / "cache"}"',
                     'out = "../runs/example"': f'out = "{tmp_path / "out"}"',
                     **(replace or {})}.items():
        assert old in text, old
        text = text.replace(old, new)
    anchor = "correctness = { min = 2.5 }\n"
    path = tmp_path / "groundjudge.toml"
    path.write_text(text.replace(anchor, anchor + gates), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def judge_server():
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        yield srv


def run(srv: ScriptedOpenAIServer, config: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                     "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                                     "--no-history", "--quiet", *args],
                              env={"GROUNDJUDGE_BASE_URL": None, "GROUNDJUDGE_MODEL": None,
                                   "GROUNDJUDGE_CACHE_DIR": None})


def gate(report: dict[str, Any], metric: str, config: str = "candidate") -> dict[str, Any]:
    return next(g for g in report["gates"]["results"] if g["metric"] == metric and g["config_id"] == config)


# --- gates that cannot be evaluated: configuration errors, before any call or output -------------

@pytest.mark.parametrize(("gates", "replace", "field", "says"), [
    ('"mrr@3" = { min = nan }\n', {}, 'gates.metrics."mrr@3"', "min = nan is not a finite number"),
    ('"mrr@3" = { max = inf }\n', {}, 'gates.metrics."mrr@3"', "max = inf is not a finite number"),
    ('"mrr@3" = {}\n', {}, 'gates.metrics."mrr@3"', "a gate needs a bound"),
    ('"recal@10" = { min = 0.5 }\n', {}, 'gates.metrics."recal@10"',
     "unknown metric 'recal@10' (did you mean 'recall@10'?); metrics that exist: "),
    ('"recall@7" = { min = 0.5 }\n', {}, 'gates.metrics."recall@7"',
     "recall@7 is not computed: [metrics] ks = [1, 3, 5, 10] (add 7 to ks"),
    ("", {"ks = [1, 3, 5, 10]": "ks = []"}, 'gates.metrics."recall@10"',
     "recall@10 is not computed: [metrics] ks = [] (add 10 to ks"),
    ("", {'"behavior_correct" = { min = 1.0 }': '"behavior_correct" = { min = 1.0 }\nfaithfulness = { min = 0.9 }'},
     "gates.tags.acl.faithfulness", "judge gates read a whole config, not a tag"),
    ("", {'"behavior_correct" = { min = 1.0 }': '"recal@10" = { min = 1.0 }'},
     'gates.tags.acl."recal@10"', "unknown metric 'recal@10'"),
    ("judge_error_rate = { max = 0.2 }\n", {}, "gates.max_judge_error_rate", "the judge_error-rate gate is set twice"),
    (('[[gates.regression]]\nmetric = "latency_ms.end_to_end.p95"\nbaseline = "baseline"\ncandidate = "candidate"\n'
     'max_drop = 100\n'), {}, "gates.regression[0].metric", "has no per-case values to pair"),
    ('[[gates.regression]]\nmetric = "recal@10"\nbaseline = "baseline"\ncandidate = "candidate"\nmax_drop = 0\n',
     {}, "gates.regression[0].metric", "unknown metric 'recal@10'"),
    ('[[gates.regression]]\nmetric = "recall@10"\nbaseline = "baseline"\ncandidate = "candidatee"\nmax_drop = 0\n',
     {}, "gates.regression[0].candidate", "no config 'candidatee' in the traces; configs: baseline, candidate"),
    ('[[gates.regression]]\nmetric = "recall@10"\nbaseline = "baseline"\ncandidate = "candidate"\nmax_drop = nan\n',
     {}, "gates.regression[0].max_drop", "not a finite number"),
])
def test_a_gate_that_cannot_be_evaluated_is_a_config_error_before_anything_runs(
        tmp_path: Path, judge_server: ScriptedOpenAIServer, gates: str, replace: dict[str, str], field: str,
        says: str) -> None:
    config = example_config(tmp_path, gates=gates, replace=replace)
    calls = judge_server.call_count
    result = run(judge_server, config)
    assert result.exit_code == 2, result.output
    first, *lines = result.output.splitlines()
    assert first == "error: bad input" and all(line.startswith((f"  {config}: gates.", f"  {config}: metrics."))
                                               for line in lines)
    mine = [line for line in lines if line.startswith(f"  {config}: {field}: ")]
    assert len(mine) == 1 and says in mine[0], result.output  # one line per bad gate
    assert judge_server.call_count == calls and not (tmp_path / "out").exists()


def test_the_metrics_a_config_error_lists_are_those_the_run_computes(tmp_path: Path,
                                                                     judge_server: ScriptedOpenAIServer) -> None:
    """The list of metrics that exist is read off the code that computes them and the rubric:
    every aggregate of the example's metrics.json is there, and the rubric's judge metrics."""
    bad = run(judge_server, example_config(tmp_path, gates='"recal@10" = { min = 0.5 }\n'))
    listed = set(bad.output.split("metrics that exist: ")[1].strip().split(", "))
    assert {"faithfulness", "correctness", "citation_support", "judge_error_rate"} <= listed
    out = tmp_path / "metrics"
    assert CliRunner().invoke(main, ["metrics", "--config", str(EXAMPLES / "groundjudge.toml"), "--out", str(out),
                                     "--quiet"]).exit_code == 0
    aggregate = json.loads((out / "metrics.json").read_text())["per_config"]["candidate"]["aggregate"]
    from groundjudge.metrics.case import MetricSettings
    from groundjudge.metrics.names import metric_names

    names = metric_names(MetricSettings())
    assert all(names.is_aggregate(m) for m in aggregate)
    assert {m for m in aggregate if "<" not in m and not m.startswith(("latency_ms.", "tokens."))} <= listed
    assert "latency_ms.<stage>.p95" in listed and "tokens.<kind>" in listed


def test_ks_zero_is_one_config_error_not_a_traceback(tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    config = example_config(tmp_path, replace={"ks = [1, 3, 5, 10]": "ks = [0]"})
    result = run(judge_server, config)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert result.output == (f"error: bad input\n  {config}: metrics.ks: every k is a rank cut-off and must be at "
                             f"least 1; got 0 in [0]\n")
    negative = CliRunner().invoke(main, ["metrics", "--config", str(example_config(
        tmp_path, replace={"ks = [1, 3, 5, 10]": "ks = [5, -1]"})), "--quiet"])
    assert negative.exit_code == 2 and "got -1 in [5, -1]" in negative.output and "Traceback" not in negative.output


# --- gates with no data -----------------------------------------------------------------------------

def test_a_blocking_gate_with_no_data_fails_the_run(tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    """--max-cases 0: the candidate was not judged at all. Its judge_error-rate gate has no
    data, so the verdict is FAIL with that reason (it used to pass with n = 0)."""
    result = run(judge_server, example_config(tmp_path), "--max-cases", "0", "--junit", str(tmp_path / "junit.xml"))
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    health = gate(report, "judge_error_rate")
    assert (health["status"], health["blocking"], health["n"], health["value"]) == ("no_data", True, 0, None)
    assert "no case of this config was sent to the judge" in health["reason"]
    assert report["gates"]["failed"] == [health["name"]]
    faithfulness = gate(report, "faithfulness")  # untrusted: stays advisory
    assert (faithfulness["status"], faithfulness["blocking"]) == ("advisory", False)
    assert "no data (n = 0)" in faithfulness["reason"]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Verdict: **FAIL**" in text and "no_data (fails: blocking)" in text
    assert 'class="badge fail">no_data (fails: blocking)<' in (tmp_path / "out" / "report.html").read_text()
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.get("failures") == "1"


def test_on_missing_skip_reports_a_gate_without_data_and_does_not_block(tmp_path: Path,
                                                                        judge_server: ScriptedOpenAIServer) -> None:
    config = example_config(tmp_path, gates='judge_error_rate = { max = 0.1, on_missing = "skip" }\n',
                            replace={"max_judge_error_rate = 0.1": ""})
    result = run(judge_server, config, "--max-cases", "0")
    assert result.exit_code == 0, result.output
    health = gate(json.loads((tmp_path / "out" / "report.json").read_text()), "judge_error_rate")
    assert (health["status"], health["blocking"]) == ("no_data", False)
    assert 'on_missing = "skip": reported, not blocking' in health["reason"]


def test_a_tag_gate_for_a_tag_no_case_has_fails(tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    config = example_config(tmp_path, replace={"[gates.tags.acl]": "[gates.tags.acll]"})
    result = run(judge_server, config)
    assert result.exit_code == 1, result.output
    tagged = next(g for g in json.loads((tmp_path / "out" / "report.json").read_text())["gates"]["results"]
                  if g["tag"] == "acll")
    assert tagged["status"] == "no_data" and tagged["blocking"]
    assert "no case of this config has tag 'acll' (tags: acl, acronym," in tagged["reason"]


# --- what a judge gate reads -----------------------------------------------------------------------

def test_the_faithfulness_gate_reads_the_verdicts_and_the_report_keeps_the_mean_support(
        tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    """The scripted judge finds one supported and one unsupported claim per answer: every
    answer is unfaithful (verdict False) with a claim share of 0.5. The gate reads the share of
    answers judged faithful (what calibration vouches for), the judge's table the mean score."""
    assert run(judge_server, example_config(tmp_path)).exit_code == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    summary = report["judge"]["per_config"]["candidate"]["summary"]
    assert summary["metrics"]["faithfulness"]["value"] == pytest.approx(0.5)
    assert summary["labels"]["faithful"] == {"False": summary["metrics"]["faithfulness"]["n"]}
    faithfulness = gate(report, "faithfulness")
    assert faithfulness["value"] == 0.0 and faithfulness["n"] == summary["metrics"]["faithfulness"]["n"]
    assert faithfulness["reason"].startswith("would fail; untrusted: ")
    assert faithfulness["reason"].endswith("; value: share of judged cases labelled True (faithful)")
    correctness = gate(report, "correctness")
    assert correctness["value"] == 3.0 and "value: mean grade of judged cases (correct)" in correctness["reason"]


# --- the judge's budget ----------------------------------------------------------------------------

def test_a_small_budget_goes_to_the_gated_config_first(tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    result = run(judge_server, example_config(tmp_path), "--smoke", "--max-cases", "6")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    judged = {cfg: sum(c["status"] == "judged" for c in section["cases"].values())
              for cfg, section in report["judge"]["per_config"].items()}
    assert judged == {"baseline": 0, "candidate": 6}
    assert gate(report, "judge_error_rate")["n"] == 6 and gate(report, "faithfulness")["n"] == 6
    # a regression gate on a judge metric needs both configs judged: they take turns
    both = REGRESSION.format(metric="faithfulness", baseline="baseline", candidate="candidate", max_drop=0.1)
    assert run(judge_server, example_config(tmp_path, gates=both), "--smoke", "--max-cases", "6").exit_code == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {cfg: sum(c["status"] == "judged" for c in section["cases"].values())
            for cfg, section in report["judge"]["per_config"].items()} == {"baseline": 3, "candidate": 3}


# --- regression gates ------------------------------------------------------------------------------

REGRESSION = """
[[gates.regression]]
metric = "{metric}"
baseline = "{baseline}"
candidate = "{candidate}"
max_drop = {max_drop}
"""


def test_a_regression_gate_fails_a_real_drop_and_reports_like_the_other_gates(
        tmp_path: Path, judge_server: ScriptedOpenAIServer) -> None:
    """The example's candidate answers better than its baseline (behavior_correct 0.80 -> 0.96,
    a real change by `groundjudge compare`): gated the other way round, that is a real drop."""
    gates = (REGRESSION.format(metric="behavior_correct", baseline="candidate", candidate="baseline", max_drop=0.05)
             + REGRESSION.format(metric="faithfulness", baseline="baseline", candidate="candidate", max_drop=0.0))
    result = run(judge_server, example_config(tmp_path, gates=gates), "--junit", str(tmp_path / "junit.xml"))
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    drop = next(g for g in report["gates"]["results"] if g["kind"] == "regression" and g["metric"] == "behavior_correct")
    assert (drop["status"], drop["blocking"], drop["config_id"], drop["baseline"]) == ("fail", True, "baseline",
                                                                                        "candidate")
    assert drop["n"] == 51 and drop["value"] == pytest.approx(0.9608 - 0.8039, abs=1e-3) and drop["p_value"] < 0.05
    # the test is the one `groundjudge compare` runs: the same pairs, the same p
    compared = CliRunner().invoke(main, ["compare", str(tmp_path / "out"), "--config-a", "candidate", "--config-b",
                                         "baseline", "--out", str(tmp_path / "compare")])
    row = json.loads((tmp_path / "compare" / "compare.json").read_text())["metrics"]["behavior_correct"]
    assert compared.exit_code == 0 and (row["n_paired"], row["p_value"]) == (drop["n"], drop["p_value"])
    assert row["regressed"] and row["delta"] == pytest.approx(-drop["value"])
    assert report["gates"]["failed"] == [drop["name"]] == ["baseline vs candidate: behavior_correct drop <= 0.05"]
    judged = next(g for g in report["gates"]["results"] if g["kind"] == "regression" and g["metric"] == "faithfulness")
    assert (judged["status"], judged["blocking"]) == ("advisory", False)  # the example's judge is not trusted
    assert judged["reason"].startswith("would pass: ") and "(change +0.0000), p = 1.0000: no drop" in judged["reason"]
    assert f"| {drop['name']} | 0.1569 | 51 | fail |" in (tmp_path / "out" / "report.md").read_text()
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    failing = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failing == [drop["name"]] and suite.get("failures") == "1"
    # the same gate with room for the drop passes
    roomy = REGRESSION.format(metric="behavior_correct", baseline="candidate", candidate="baseline", max_drop=0.2)
    assert run(judge_server, example_config(tmp_path, gates=roomy)).exit_code == 0


def test_leaks_in_a_gated_config_fail_its_acl_gate_and_junit_names_them(tmp_path: Path,
                                                                        judge_server: ScriptedOpenAIServer) -> None:
    config = example_config(tmp_path, replace={'configs = ["candidate"]': 'configs = ["baseline", "candidate"]'})
    result = run(judge_server, config, "--junit", str(tmp_path / "junit.xml"))
    assert result.exit_code == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    acl = gate(report, "acl_leak", "baseline")
    assert acl["status"] == "fail" and acl["name"] in report["gates"]["failed"]
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    failures = {c.get("name"): c.findtext("failure") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert sorted(failures) == sorted(report["gates"]["failed"]) and suite.get("failures") == str(len(failures))
    leaking = acl["reason"].removeprefix("critical: leaks in ").split(", ")
    assert all(f"\n{case}: " in failures[acl["name"]] for case in leaking)
