"""Stability: re-asking a run's questions (`calibrate --stability N`), flip rates and noise bands,
unstable verdicts marked in the reports and never trusted by selective trust.

The end-to-end tests run the real client against the scripted server, which answers each claim
question with a P(yes) that either wobbles around the rubric's threshold from one ask to the next
(0.53, 0.47, 0.53, ...: a spread of 0.06) or stays at 0.95, by a fixed property of the claim's
text: so which questions flip, the band and which verdicts fall inside it are known in advance.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import groundjudge as gj
from groundjudge.calibrate.cascade import Cutoff, decide
from groundjudge.calibrate.record import build_record, write_record
from groundjudge.calibrate.stability import (
    Band,
    Observed,
    bands_for,
    check_run,
    figures,
    in_band,
    support_of,
)
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.cli import main
from groundjudge.judge.results import CriterionInfo
from groundjudge.judge.scoring import centred
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LABELS = sorted((ROOT / "calibration" / "labels").glob("example_*.jsonl"))
CUT = 0.5  # claim_check v1's threshold for faithful and citations_supported
WOBBLE = 0.03
FAITHFUL = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness")]


# --- the figures, by hand ----------------------------------------------------------------------

def _observed(support: tuple[float, ...], criterion: str = "faithful", case: str = "q1") -> Observed:
    return Observed(case_id=case, config_id="c", criterion=criterion, kind="claim", index=0, stored=True,
                    p_yes=support, support=support)


def test_flip_rate_spread_and_band_from_observations() -> None:
    observed = [_observed((0.52, 0.49, 0.51), case="a"), _observed((0.9, 0.9, 0.9), case="b"),
                _observed((0.7, 0.66, 0.7), case="c"), _observed((0.3, 0.3, 0.31), case="d")]
    block = figures(observed, {"faithful": 0.5, "citations_supported": 0.5}, repeats=2, seed=0, sample=4,
                    available=10, calls=8, failed=0, seconds=1.0)
    f = block["criteria"]["faithful"]
    assert (f["questions"], f["flipped"], f["flip_rate"]) == (4, 1, 0.25)
    assert f["support_spread"]["max"] == pytest.approx(0.04)  # (0.7, 0.66, 0.7): the largest move
    assert f["band"]["low"] == pytest.approx(0.46) and f["band"]["high"] == pytest.approx(0.54)
    # a criterion with nothing re-asked has no band and no rate, not a zero
    c = block["criteria"]["citations_supported"]
    assert c["questions"] == 0 and c["flip_rate"] is None and c["band"] is None
    assert len(block["questions"]) == 4


def test_the_band_holds_exactly_the_supports_a_move_of_w_can_carry_across_the_cut() -> None:
    band = Band(criterion="faithful", cut=0.5, half_width=0.1, low=0.4, high=0.6, questions=3, flip_rate=0.3,
                repeats=3)
    assert in_band(0.4, band)  # 0.4 + 0.1 reaches the cut
    assert in_band(0.5999, band) and in_band(0.5, band)
    assert not in_band(0.6, band)  # 0.6 - 0.1 is still at the cut: still true
    assert not in_band(0.3999, band)


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.7])
def test_support_of_undoes_the_centred_confidence(cut: float) -> None:
    for p in (0.0, 0.1, cut, 0.61, 0.99, 1.0):
        assert support_of(centred(p, cut), cut) == pytest.approx(p)
    assert support_of(None, cut) is None


def _record_with(identity: dict[str, Any], stability: dict[str, Any] | None, created: str) -> dict[str, Any]:
    from groundjudge.calibrate.record import identity_hash

    ident = {k: identity[k] for k in ("rubric", "model", "decoding")}
    out: dict[str, Any] = {"kind": "groundjudge.calibration", "identity_hash": identity_hash(ident),
                           "created": created, "_path": f"/r/{created}.json", "criteria": {}}
    if stability is not None:
        out["stability"] = stability
    return out


def test_bands_belong_to_one_judge_identity() -> None:
    ident = {"rubric": {"id": "claim_check", "version": 1, "hash": "h"}, "model": "m", "decoding": {"seed": 1}}
    other = {**ident, "decoding": {"seed": 2}}
    block = figures([_observed((0.45, 0.55))], {"faithful": 0.5}, repeats=2, seed=0, sample=1, available=1,
                    calls=2, failed=0, seconds=0.0)
    assert bands_for(ident, [_record_with(other, block, "2026-01-01")]) == ({}, None)
    assert bands_for(ident, [_record_with(ident, None, "2026-01-02")]) == ({}, None)
    bands, path = bands_for(ident, [_record_with(ident, block, "2026-01-03"), _record_with(other, block, "2026")])
    assert path == "/r/2026-01-03.json" and bands["faithful"].low == pytest.approx(0.4)


def _run(model: str, confidence: float) -> Any:
    from groundjudge.judge.results import (
        CaseJudgement,
        ConfigJudgement,
        CriterionValue,
        JudgeIdentity,
        JudgeRun,
        JudgeTotals,
        RubricRef,
        Usage,
        summarize_config,
    )

    cases = {f"q{i}": CaseJudgement(case_id=f"q{i}", config_id="c", status="judged", criteria={
        "faithful": CriterionValue(label=True, value=0.9, confidence=confidence)}) for i in range(3)}
    return JudgeRun(identity=JudgeIdentity(rubric=RubricRef(id="r", version=1, hash="h"), model=model, decoding={}),
                    base_url=None, criteria=FAITHFUL, to_judge=3, skip_reasons={},
                    totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=0, done=3, stopped=None,
                                       output_mode=None), cache={},
                    per_config={"c": ConfigJudgement(summary=summarize_config(cases, FAITHFUL), cases=cases)})


def _cut(model: str) -> Cutoff:
    return Cutoff(judge=model, cutoff=0.9, target_agreement=0.9, risk=0.1, coverage=1.0, bound=0.95, n=100,
                  reason="r", record=None)


SHAKY = {("q1", "c", "faithful"): "verdict unstable: support 0.510 inside the noise band [0.440, 0.560)"}


def test_decide_never_trusts_an_unstable_verdict() -> None:
    run = _run("m", 0.99)
    decided = decide(run, {"faithful": _cut("m")}, unstable=SHAKY)
    sources = {d.case_id: d.source for d in decided.per_config["c"]["faithful"].decisions}
    assert sources == {"q0": "trusted", "q1": "queued", "q2": "trusted"}
    (queued,) = decided.queue
    assert "noise band" in queued.reasons[0].abstained[0].reason
    # without the marks the same verdict is trusted: the mark is what keeps it out
    assert {d.source for d in decide(run, {"faithful": _cut("m")}).per_config["c"]["faithful"].decisions} == {
        "trusted"}


def test_an_unstable_verdict_of_the_escalation_judge_is_not_taken_either() -> None:
    first, second = _run("m", 0.6), _run("big", 0.99)  # the first judge abstains on every item
    cuts = {"faithful": _cut("m")}
    later = {"faithful": _cut("big")}
    plain = decide(first, cuts, escalation=second, escalation_cutoffs=later)
    assert {d.source for d in plain.per_config["c"]["faithful"].decisions} == {"escalated"}
    marked = decide(first, cuts, escalation=second, escalation_cutoffs=later, escalation_unstable=SHAKY)
    sources = {d.case_id: d.source for d in marked.per_config["c"]["faithful"].decisions}
    assert sources == {"q0": "escalated", "q1": "queued", "q2": "escalated"}
    (queued,) = marked.queue
    assert [a.role for a in queued.reasons[0].abstained] == ["first", "escalation"]
    assert "noise band" in queued.reasons[0].abstained[1].reason


# --- against the scripted server ---------------------------------------------------------------

def _claim(body: dict[str, Any]) -> str | None:
    user = body["messages"][-1]["content"]
    if "STATEMENT:" not in user:
        return None
    return user.rsplit("STATEMENT:\n<<<DATA\n", 1)[1].rsplit("\nDATA>>>", 1)[0]


def wobbly(claim: str) -> bool:
    """Which claims the scripted judge is unsure about: a fixed property of their text."""
    return sum(map(ord, claim)) % 3 == 0


def _answer(p_yes: float) -> Reply:
    return Reply("Yes" if p_yes >= 0.5 else "No",
                 top_logprobs=((("Yes", math.log(p_yes)), ("No", math.log(1 - p_yes))),))


class WobblingJudge:
    """A server script: per distinct question, the n-th ask of a wobbly claim gets P(yes)
    0.53 (n even) or 0.47 (n odd); a steady claim 0.95; a contradiction question 0.05; a
    nugget 0.95."""

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        key = json.dumps(body["messages"], sort_keys=True)
        with self.lock:
            n = self.asked.get(key, 0)
            self.asked[key] = n + 1
        user = body["messages"][-1]["content"]
        if "contradict" in user:
            return _answer(0.05)
        claim = _claim(body)
        if claim is None:  # a nugget
            return _answer(0.95)
        if wobbly(claim):
            return _answer(CUT + WOBBLE if n % 2 == 0 else CUT - WOBBLE)
        return _answer(0.95)


def write_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "groundjudge.toml"
    path.write_text(f"""
[inputs]
golden = "{EXAMPLES / 'golden.jsonl'}"
traces = ["{EXAMPLES / 'traces' / 'baseline.jsonl'}", "{EXAMPLES / 'traces' / 'candidate.jsonl'}"]
corpus = "{EXAMPLES / 'corpus.jsonl'}"
labels = [{", ".join(f'"{p}"' for p in LABELS)}]

[judge]
base_url = "{base_url}"
model = "wobbly-judge"
rubric = "claim_check"
rubric_version = 1
rubrics_dir = "{ROOT / 'rubrics'}"
concurrency = 2

[cache]
dir = "{tmp_path / 'cache'}"

[gates]
configs = ["baseline", "candidate"]
acl_leaks_block = false  # the example plants leaks; this test is about the judge

[trust]
records_dir = "{tmp_path / 'records'}"
""", encoding="utf-8")
    return path


def cache_entries(tmp_path: Path) -> dict[Any, Any]:
    """Every stored entry of the judge cache, as the database holds it."""
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as db:
        return dict(db.execute("SELECT key, value FROM Cache").fetchall())


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run, `calibrate --stability 3` over every question of it, and a run again."""
    tmp = tmp_path_factory.mktemp("stability")
    script = WobblingJudge()
    with ScriptedOpenAIServer(script, model="wobbly-judge") as srv:
        config = write_config(tmp, srv.base_url)
        first = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp / "before"), "--quiet",
                                          "--no-history"])
        assert first.exit_code in (0, 1), first.output
        run_calls = srv.call_count
        before = cache_entries(tmp)
        calibrated = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--report",
                                               str(tmp / "before" / "report.json"), "--stability", "3",
                                               "--stability-sample", "100000"])
        reask_calls = srv.call_count - run_calls
        after = cache_entries(tmp)
        again = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp / "after"), "--quiet",
                                          "--no-history"])
        rerun_calls = srv.call_count - run_calls - reask_calls
    assert calibrated.exit_code == 0, calibrated.output
    assert again.exit_code in (0, 1), again.output
    (record_path,) = (tmp / "records").glob("*.json")
    return {"tmp": tmp, "config": config, "calibrated": calibrated, "record": json.loads(record_path.read_text()),
            "before": before, "after": after, "reask_calls": reask_calls, "rerun_calls": rerun_calls}


def _claims(report: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {(cid, cfg): case["claims"] for cfg, section in report["judge"]["per_config"].items()
            for cid, case in section["cases"].items() if case["status"] == "judged"}


def test_flip_rate_and_band_come_out_as_scripted(measured: dict[str, Any]) -> None:
    block = measured["record"]["stability"]
    report = json.loads((measured["tmp"] / "before" / "report.json").read_text())
    claims = _claims(report)
    questions = block["questions"]
    assert block["repeats"] == 3 and block["sample"] == block["questions_available"] > 0
    assert block["calls"] == measured["reask_calls"] == 3 * block["sample"] and block["failed_calls"] == 0
    for name in ("faithful", "citations_supported"):
        mine = [q for q in questions if q["criterion"] == name]
        shaky = [q for q in mine if wobbly(claims[(q["case_id"], q["config_id"])][q["index"]]["claim"])]
        assert mine and shaky and len(shaky) < len(mine)  # the script gives both kinds
        c = block["criteria"][name]
        # the stored answer is the first of four observations: 0.53, then 0.47, 0.53, 0.47
        assert all(q["stored"] and len(q["support"]) == 4 for q in mine)
        assert c["questions"] == len(mine) and c["flipped"] == len(shaky)
        assert c["flip_rate"] == pytest.approx(len(shaky) / len(mine))
        assert c["support_spread"]["max"] == pytest.approx(2 * WOBBLE)
        assert c["p_yes_spread"]["max"] == pytest.approx(2 * WOBBLE)
        assert c["band"]["low"] == pytest.approx(CUT - 2 * WOBBLE)
        assert c["band"]["high"] == pytest.approx(CUT + 2 * WOBBLE)
    assert "nugget_grade" in block["not_covered"]["correct"]
    out = measured["calibrated"].output
    assert f"stability: re-asking {block['sample']} of {block['sample']} question(s) x 3 = {block['calls']}" in out
    assert "noise band [0.440, 0.560) around 0.5" in out


def test_reasks_never_touch_the_cached_answers(measured: dict[str, Any]) -> None:
    assert measured["before"] == measured["after"]
    assert measured["rerun_calls"] == 0  # and the run after them reads only what was cached


def test_unstable_verdicts_are_marked_in_every_report(measured: dict[str, Any]) -> None:
    tmp = measured["tmp"]
    report = json.loads((tmp / "after" / "report.json").read_text())
    stability = report["stability"]
    assert stability["status"] == "checked"
    claims = _claims(report)
    expected = {(cid, cfg) for (cid, cfg), cl in claims.items()
                if any(wobbly(c["claim"]) for c in cl if c["verdict"] != "unchecked")}
    marked = {(u["case_id"], u["config_id"]) for u in stability["unstable"] if u["criterion"] == "faithful"}
    assert expected and marked == expected
    assert all(CUT - 2 * WOBBLE <= u["support"] < CUT + 2 * WOBBLE for u in stability["unstable"])
    md = (tmp / "after" / "report.md").read_text()
    assert "## Stability" in md and f"{len(stability['unstable'])} of" in md
    rows = [json.loads(line) for line in (tmp / "after" / "triage.jsonl").read_text().splitlines()]
    flagged = {(r["case_id"], r["config_id"]) for r in rows if r["kind"] == "unstable_verdict"}
    assert flagged == {(u["case_id"], u["config_id"]) for u in stability["unstable"]}
    assert "unstable verdict" in (tmp / "after" / "triage.md").read_text()
    html = (tmp / "after" / "report.html").read_text()
    assert 'id="stability"' in html and "Unstable verdict" in html


def test_selective_trust_never_trusts_an_unstable_verdict(measured: dict[str, Any]) -> None:
    """With a record whose cut-off keeps every verdict, only the unstable ones are not trusted."""
    config_path = measured["config"]
    config = gj.resolve_config(config_path)
    judge = {(f"c{i}", None): ItemLabels({"faithful": True}, confidence={"faithful": 0.52}) for i in range(200)}
    human = {(f"c{i}", None): ItemLabels({"faithful": True}) for i in range(200)}
    with gj.open_judge(config, quiet=True) as session:
        record = build_record(judge, session.identity.model_dump(), {"alice": human}, FAITHFUL, reps=50)
        assert record["criteria"]["faithful"]["selective"]["cutoff"]["cutoff"] <= 0.52
        write_record(record, config.trust.records_dir)
        result = gj.run_eval(config, session)
    assert result.stability is not None and result.gates.selective is not None
    unstable = {(u.case_id, u.config_id) for u in result.stability.unstable if u.criterion == "faithful"}
    decisions = [d for per in result.gates.selective.per_config.values() for d in per["faithful"].decisions]
    assert unstable and {(d.case_id, d.config_id) for d in decisions if d.source != "trusted"} == unstable
    queued = {(q.case_id, q.config_id): q for q in result.gates.selective.queue}
    reasons = [r.abstained[0].reason for k in unstable if k in queued for r in queued[k].reasons
               if r.criterion == "faithful"]
    assert reasons and all("noise band" in r for r in reasons)


def test_a_run_without_stability_figures_says_so(measured: dict[str, Any]) -> None:
    tmp = measured["tmp"]
    report = json.loads((tmp / "before" / "report.json").read_text())
    assert report["stability"]["status"] == "no_figures" and report["stability"]["unstable"] == []
    assert "no stability figures for this judge" in report["stability"]["reason"]
    assert "no stability figures for this judge" in (tmp / "before" / "report.md").read_text()
    assert "Stability unknown" in (tmp / "before" / "triage.md").read_text()
    assert "Stability unknown" in (tmp / "before" / "report.html").read_text()


@pytest.mark.parametrize(("args", "problem"), [
    (["--stability", "0"], "stability: '0' is not a whole number >= 2"),
    (["--stability", "1"], "stability: '1' is not a whole number >= 2"),
    (["--stability", "three"], "stability: 'three' is not a whole number >= 2"),
    (["--stability", "3", "--stability-sample", "0"], "stability-sample: '0' is not a whole number >= 1"),
    (["--stability", "2.5"], "stability: '2.5' is not a whole number >= 2"),
])
def test_bad_stability_values_exit_2_with_one_line(measured: dict[str, Any], args: list[str], problem: str) -> None:
    tmp = measured["tmp"]
    result = CliRunner().invoke(main, ["calibrate", "--config", str(measured["config"]), "--report",
                                       str(tmp / "before" / "report.json"), *args])
    assert result.exit_code == 2 and result.stderr == f"error: bad input\n  command line: {problem}\n"


def test_stability_needs_a_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["calibrate", "--labels", str(LABELS[0]), "--records-dir", str(tmp_path),
                                       "--verdicts", str(tmp_path / "v.jsonl"), "--judge-name", "x",
                                       "--stability", "3"])
    assert result.exit_code == 2 and result.stderr == (
        "error: bad input\n  command line: stability: needs --report and --labels (the figures go into the "
        "calibration record)\n")


def test_check_run_has_nothing_to_mark_without_support_criteria(measured: dict[str, Any]) -> None:
    from groundjudge.calibrate.verdicts import verdicts_from_report

    run = verdicts_from_report(measured["tmp"] / "before" / "report.json")
    assert check_run(run, [], []) is None
    assert check_run(run, ["faithful"], []).status == "no_figures"  # type: ignore[union-attr]
