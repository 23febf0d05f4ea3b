"""A judge cascade against two scripted servers: abstained items reach the second judge and
trusted ones never do, each judge's requests and cost are its own, and a killed cascade resumes
from the cache."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import groundjudge as gj
from groundjudge.calibrate.record import build_record, write_record
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.judge.results import CriterionInfo
from tests.support.judge_replies import question_in_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CASES = 6
FAITHFUL = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness")]


def sure(question: str) -> bool:
    """The first judge is sure about half the questions (by a fixed property of their text)."""
    return len(question) % 2 == 0


def answer(p_yes: float) -> Reply:
    return Reply("Yes" if p_yes >= 0.5 else "No",
                 top_logprobs=((("Yes", math.log(p_yes)), ("No", math.log(1 - p_yes))),))


def small_judge(body: dict, index: int) -> Reply:
    return answer(0.999 if sure(question_in_request(body)) else 0.7)


def large_judge(body: dict, index: int) -> Reply:
    return answer(0.99)


def write_config(tmp_path: Path, first: str, second: str) -> Path:
    path = tmp_path / "groundjudge.toml"
    path.write_text(f"""
[inputs]
golden = "{EXAMPLES / 'golden.jsonl'}"
traces = ["{EXAMPLES / 'traces' / 'baseline.jsonl'}", "{EXAMPLES / 'traces' / 'candidate.jsonl'}"]
corpus = "{EXAMPLES / 'corpus.jsonl'}"

[judge]
base_url = "{first}"
model = "small-judge"
rubric = "claim_check"
rubric_version = 1
rubrics_dir = "{ROOT / 'rubrics'}"
concurrency = 1
max_cases = {CASES}
price_prompt_per_mtok = 1.0

[judge.escalate]
base_url = "{second}"
model = "large-judge"

[cache]
dir = "{tmp_path / 'cache'}"

[gates]
configs = ["baseline", "candidate"]
acl_leaks_block = false  # the example plants leaks; this test is about the judges
[gates.metrics]
faithfulness = {{ min = 0.5 }}

[trust]
records_dir = "{tmp_path / 'records'}"
min_coverage = 0.5
""", encoding="utf-8")
    return path


def calibrate_both(config_path: Path) -> None:
    """Records for both judges: sure verdicts (0.999) always right, unsure ones (0.7) right half
    the time, so each judge's cut-off lies between the two (0.71)."""
    config = gj.resolve_config(config_path)
    judge = {(f"c{i}", None): ItemLabels({"faithful": True}, confidence={"faithful": 0.999 if i < 80 else 0.7})
             for i in range(100)}
    human = {(f"c{i}", None): ItemLabels({"faithful": i < 80 or i % 2 == 0}) for i in range(100)}
    with gj.open_judge(config, quiet=True) as first, gj.open_escalation(config, quiet=True) as second:
        assert second is not None
        for session in (first, second):
            record = build_record(judge, session.identity.model_dump(), {"alice": human}, FAITHFUL, reps=50)
            assert record["criteria"]["faithful"]["selective"]["cutoff"]["cutoff"] == 0.71
            write_record(record, config.trust.records_dir)


def test_abstained_items_reach_the_second_judge_and_trusted_ones_never_do(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(small_judge, model="small-judge") as one, \
            ScriptedOpenAIServer(large_judge, model="large-judge") as two:
        config_path = write_config(tmp_path, one.base_url, two.base_url)
        calibrate_both(config_path)
        config = gj.resolve_config(config_path)
        with gj.open_judge(config, quiet=True) as first, gj.open_escalation(config, quiet=True) as second:
            result = gj.run_eval(config, first, escalate=second)
        first_questions = {question_in_request(r.body) for r in one.requests}
        second_questions = {question_in_request(r.body) for r in two.requests}
        calls = (one.call_count, two.call_count)
    selective = result.gates.selective
    assert selective is not None and selective.escalation_model == "large-judge"
    decisions = [d for per in selective.per_config.values() for d in per["faithful"].decisions]
    by_source = {s: {d.case_id for d in decisions if d.source == s} for s in ("trusted", "escalated", "queued")}
    questions = {c: result.dataset.cases[c].question for c in result.dataset.cases}
    assert by_source["trusted"] and by_source["escalated"] and not by_source["queued"]
    assert {questions[c] for c in by_source["trusted"]} == {q for q in first_questions if sure(q)}
    # the second judge saw exactly the abstained items' questions, none of the trusted ones
    assert second_questions == {questions[c] for c in by_source["escalated"]}
    assert not second_questions & {questions[c] for c in by_source["trusted"]}
    # requests and cost are accounted per judge
    assert result.judge.totals.usage.requests == calls[0] and result.escalation is not None
    assert result.escalation.totals.usage.requests == calls[1] > 0
    assert result.escalation.identity.model == "large-judge" and result.judge.identity.model == "small-judge"
    assert result.escalation.totals.usage.cost_usd > 0 and result.judge.totals.usage.cost_usd > 0
    busy = next(c for c, per in selective.per_config.items() if per["faithful"].items)
    gate = next(r for r in result.gates.results if r.metric == "faithfulness" and r.config_id == busy)
    assert gate.status == "pass" and gate.blocking and "escalated" in gate.reason
    assert gate.all_or_nothing and "advisory: untrusted: kappa" in gate.all_or_nothing  # the old rule: no gate

    out = gj.write_run_reports(result, tmp_path / "out")
    assert out.escalation.identity.model == "large-judge"
    assert out.gates.selective.per_config[busy]["faithful"].counts["escalated"] >= 1
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Selective trust" in text and "`large-judge` (escalation)" in text and "calibration figures" in text
    sent = len(by_source["escalated"])
    assert f"Escalation judge `large-judge`: {sent} item(s) sent, {calls[1]} HTTP requests" in text
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'aria-label="faithful: reliability' in html and 'aria-label="faithful: coverage vs agreement"' in html
    items = selective.per_config[busy]["faithful"].items  # the items column shows the count
    assert f"<tr><td>{busy}</td><td>faithful</td><td>{items}</td>" in html and "built-in method" not in html


def test_a_killed_cascade_resumes_from_the_cache(tmp_path: Path) -> None:
    answered_before_kill = 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDJUDGE_") and k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    with ScriptedOpenAIServer(small_judge, model="small-judge") as one, \
            ScriptedOpenAIServer(large_judge, model="large-judge", delay_s=0.3) as two:
        config_path = write_config(tmp_path, one.base_url, two.base_url)
        calibrate_both(config_path)
        command = [sys.executable, "-m", "groundjudge.cli", "run", "--config", str(config_path), "--quiet",
                   "--out", str(tmp_path / "out")]
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # the second judge's (k+1)-th call arrives only after its k-th reply was stored
            wait_for(lambda: two.call_count > answered_before_kill or proc.poll() is not None)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        answered = [json.dumps(r.body["messages"]) for r in two.requests if r.responded_at is not None]
        assert len(answered) == answered_before_kill
        assert not (tmp_path / "out" / "report.json").exists()
        first_calls = one.call_count

        one.reset()
        two.reset()
        two.delay_s = 0.0
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        resumed = [json.dumps(r.body["messages"]) for r in two.requests]
        assert one.call_count == 0  # the first judge's verdicts all come from the cache
    assert again.returncode == 0, again.stderr
    assert first_calls > 0 and resumed and not set(answered) & set(resumed)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    escalation: dict[str, Any] = report["escalation"]
    assert escalation["totals"]["usage"]["requests"] == len(resumed)
    judged = [c for s in escalation["per_config"].values() for c in s["cases"].values() if c["status"] == "judged"]
    assert judged and all(c["status"] == "judged" for s in escalation["per_config"].values()
                          for c in s["cases"].values() if c["status"] != "skipped")
    assert report["judge"]["totals"]["usage"]["requests"] == 0
