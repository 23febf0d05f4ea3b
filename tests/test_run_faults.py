"""The bundled example against a judge with injected faults, then a healthy one (issue: an
error is never a verdict, and is always asked again).

The default rubric (claim_check) asks one-token questions. A faulty judge answers 40% of the
calls with a 429, a 500, an answer cut to one letter ("N") or prose, the last two with token
alternatives that point the other way. Nothing it says wrongly may become a verdict, every item
it broke must be asked again on the next run (and only those), and the verdicts must then be
exactly those of a clean run.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import claim_answer, claim_answer_p, question_in_request
from tests.support.openai_server import HTTPError, Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FAULT_RATE = 0.4
QUESTIONS = {json.loads(line)["id"]: json.loads(line)["question"]
             for line in (EXAMPLES / "golden.jsonl").read_text().splitlines() if line.strip()}


def example_config(tmp_path: Path) -> Path:
    """examples/groundjudge.toml with absolute input paths, one call at a time (so the faults
    fall on the same calls every time the test runs) and no labels."""
    text = (EXAMPLES / "groundjudge.toml").read_text().replace("concurrency = 4", "concurrency = 1")
    for name in ("golden.jsonl", "corpus.jsonl", "traces/baseline.jsonl", "traces/candidate.jsonl"):
        text = text.replace(f'"{name}"', f'"{EXAMPLES / name}"')
    text = text.replace('labels = ["../calibration/labels/example_rater_a.jsonl", '
                        '"../calibration/labels/example_rater_b.jsonl"]', "")
    text = text.replace('records_dir = "../calibration/records"', f'records_dir = "{ROOT / "calibration" / "records"}"')
    path = tmp_path / "groundjudge.toml"
    path.write_text(text)
    return path


def faulty_judge(seed: int = 7):
    rng = random.Random(seed)

    def script(body: dict[str, Any], index: int) -> Any:
        if rng.random() >= FAULT_RATE:
            return claim_answer(body, index)
        p = claim_answer_p(body)
        wrong = 0.02 if p >= 0.5 else 0.98  # the alternatives point the other way
        alternatives = (("Yes", math.log(wrong)), ("No", math.log(1 - wrong)), ("N", math.log(0.001)))
        return rng.choice([
            HTTPError(429, retry_after=0),
            HTTPError(500, retry_after=0),
            Reply("N", top_logprobs=(alternatives,)),  # a reply cut to one token
            Reply("I", top_logprobs=((("I", math.log(0.5)), *alternatives),)),  # prose ("I think ...")
        ])

    return script


def run(config: Path, srv: ScriptedOpenAIServer, cache: Path, out: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--judge-base-url", srv.base_url,
                                       "--judge-model", srv.model, "--cache-dir", str(cache), "--out", str(out),
                                       "--no-history", "--quiet", *extra])
    assert result.exit_code in (0, 1) and not_a_crash(result), result.output
    return json.loads((out / "report.json").read_text())["judge"]


def not_a_crash(result: Any) -> bool:
    """click's test runner reports an exception that escaped as exit code 1: not a failed gate."""
    return result.exception is None or isinstance(result.exception, SystemExit)


def verdicts(judge: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(cfg, cid): (case["status"], case["criteria"], case["claims"], case["nuggets"])
            for cfg, section in judge["per_config"].items() for cid, case in section["cases"].items()}


def bodies(srv: ScriptedOpenAIServer) -> list[str]:
    return [json.dumps(r.body, sort_keys=True) for r in srv.requests]


def test_faults_then_a_healthy_judge_give_the_clean_verdicts_asking_only_what_failed(tmp_path: Path) -> None:
    config = example_config(tmp_path)
    with ScriptedOpenAIServer(claim_answer) as srv:
        clean = verdicts(run(config, srv, tmp_path / "clean-cache", tmp_path / "clean"))
        clean_asked = bodies(srv)
    assert len(clean_asked) == len(set(clean_asked)) > 100  # each question once

    with ScriptedOpenAIServer(faulty_judge()) as srv:
        faulty = verdicts(run(config, srv, tmp_path / "cache", tmp_path / "faulty"))
        faults = sum(1 for r in srv.requests if r.action != claim_answer(r.body))
    errored = {pair for pair, v in faulty.items() if v[0] == "judge_error"}
    assert faults > 0.3 * len(clean_asked) and errored  # the faults did break items
    # nothing the faulty judge said wrongly became a verdict: every judged item is as in the clean run
    for pair, v in faulty.items():
        assert v == clean[pair] if v[0] != "judge_error" else clean[pair][0] == "judged", pair

    with ScriptedOpenAIServer(claim_answer) as srv:
        healed = verdicts(run(config, srv, tmp_path / "cache", tmp_path / "healed"))
        asked = bodies(srv)
    assert healed == clean
    # only the broken items' questions were asked, each once, each one the clean run asked too
    assert asked and len(asked) == len(set(asked)) and set(asked) <= set(clean_asked)
    # (a question's prompt names the case's question first; both configs share it)
    broken_cases = {QUESTIONS[cid] for _, cid in errored}
    assert {question_in_request(json.loads(body)) for body in asked} <= broken_cases

    with ScriptedOpenAIServer(claim_answer) as srv:
        again = verdicts(run(config, srv, tmp_path / "cache", tmp_path / "again"))
        assert srv.call_count == 0
    assert again == clean
