"""`groundjudge label` without --serve: draws and records a batch, prints the CIs, resumes an
unfinished batch, refuses bad input with exit code 2; `calibrate` reads what the page wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.contracts import HumanLabel
from groundjudge.label.store import append_label, read_batches, sidecar_path
from tests.support.label_run import make_label_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_label_run(tmp_path_factory.mktemp("labelcli"))


def label(*args: str):
    return CliRunner().invoke(main, ["label", *args], catch_exceptions=False)


def test_draw_print_resume_and_calibrate(run_dir, tmp_path):
    labels = tmp_path / "labels" / "kim.jsonl"
    first = label(str(run_dir), "--rater", "kim", "--labels", str(labels), "--batch", "4", "--seed", "9",
                  "--strategy", "stratified")
    assert first.exit_code == 0, first.output
    assert "batch 1 for kim: new (stratified, seed 9), 0/4 labelled" in first.output
    faithful_row = next(line for line in first.output.splitlines() if "│ faithful" in line)
    cells = [c.strip() for c in faithful_row.split("│")[1:-1]]
    assert cells[:3] == ["faithful", "0", "–"] and 0 < float(cells[5]) < 1  # no labels yet; expected CI after
    assert "before any label" in first.output
    assert "the judge gave no confidences" in first.output
    batches = read_batches(labels)
    assert len(batches) == 1 and len(batches[0].picks) == 4 and sidecar_path(labels).exists()

    # two labels, then the same command resumes the same batch
    for q, c, _, _ in batches[0].picks[:2]:
        append_label(labels, HumanLabel(query_id=q, config_id=c, rater="kim", faithful=True, correct=3,
                                        citations_supported=True))
    again = label(str(run_dir), "--rater", "kim", "--labels", str(labels), "--batch", "4", "--seed", "1")
    assert again.exit_code == 0 and "resumed unfinished, 2/4 labelled" in again.output
    assert len(read_batches(labels)) == 1

    result = CliRunner().invoke(main, ["calibrate", "--report", str(run_dir / "report.json"), "--labels",
                                       str(labels), "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    record = json.loads(next((tmp_path / "records").glob("*.json")).read_text())
    assert record["raters"] == {"kim": 2} and record["criteria"]["faithful"]["judge_vs_human"]["n"] == 2


def test_bad_input_exits_2(tmp_path):
    (tmp_path / "report.json").write_text('{"judge": ')
    result = CliRunner().invoke(main, ["label", str(tmp_path), "--rater", "x"])
    assert result.exit_code == 2 and "report.json:1: invalid JSON" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["label", str(empty), "--rater", "x"])
    assert result.exit_code == 2 and "no report.json" in result.output



@pytest.mark.parametrize("rater", ["../../../x", "a/b", "/tmp/elsewhere", "nul\x00byte", ".hidden", "..", "-rf",
                                   "back\\slash", "tab\there", "\x1b]0;title\x07"])
def test_a_rater_name_never_becomes_a_path_outside_the_labels_folder(run_dir, tmp_path, monkeypatch, rater):
    """`label --rater ../../../x` used to write x.jsonl.selection levels above calibration/labels."""
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = set(tmp_path.rglob("*"))
    result = CliRunner().invoke(main, ["label", str(run_dir), "--rater", rater, "--batch", "2"])
    assert result.exit_code == 2, result.output
    problem = result.output.strip().splitlines()[-1]
    assert problem.startswith("  command line: rater: ") and "give your own file with --labels" in problem
    assert set(tmp_path.rglob("*")) == before  # nothing written anywhere
    assert not Path("/tmp/elsewhere.jsonl.selection").exists()


def test_a_plain_rater_name_goes_to_the_labels_folder_and_an_explicit_labels_file_is_the_users(run_dir, tmp_path,
                                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert label(str(run_dir), "--rater", "kim.lee", "--batch", "2").exit_code == 0
    assert sidecar_path(Path("calibration/labels/kim.lee.jsonl")).exists()
    # with --labels the file is the user's choice, and the name is only a name inside it
    mine = tmp_path / "elsewhere" / "mine.jsonl"
    result = label(str(run_dir), "--rater", "../../../x", "--labels", str(mine), "--batch", "2")
    assert result.exit_code == 0 and sidecar_path(mine).exists()
    assert {p.name for p in (tmp_path / "calibration" / "labels").iterdir() if not p.name.startswith(".")} == \
        {"kim.lee.jsonl.selection"}

def test_a_rater_name_with_terminal_controls_or_markup_is_printed_inert(run_dir, tmp_path):
    """With --labels the rater name is only a name, any text: it reaches the terminal as text,
    never as an escape sequence (a window title, a colour) or as rich markup."""
    hostile = "kim\x1b]0;owned\x07[bold red]x[/]\x1b[2J"
    result = label(str(run_dir), "--rater", hostile, "--labels", str(tmp_path / "k.jsonl"), "--batch", "2")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b]0;owned\\x07[bold red]x[/]" in result.output


# --- the human queue: in triage.jsonl, offered first by the picker ------------------------------

def picky_large_judge(body: dict, index: int):
    """The escalation judge is sure about a fifth of the questions only, so some abstained
    items stay queued, with both judges' reasons."""
    from tests.support.judge_replies import question_in_request
    from tests.test_cascade_run import answer

    return answer(0.99 if len(question_in_request(body)) % 5 == 0 else 0.7)


def test_queued_items_are_triage_rows_and_the_picker_offers_them_first(tmp_path):
    from tests.support.openai_server import ScriptedOpenAIServer
    from tests.test_cascade_run import calibrate_both, small_judge, write_config

    out = tmp_path / "run"
    with ScriptedOpenAIServer(small_judge, model="small-judge") as one, \
            ScriptedOpenAIServer(picky_large_judge, model="large-judge") as two:
        config_path = write_config(tmp_path, one.base_url, two.base_url)
        calibrate_both(config_path)
        ran = CliRunner().invoke(main, ["run", "--config", str(config_path), "--out", str(out), "--quiet"])
        assert ran.exit_code in (0, 1), ran.output
        report = json.loads((out / "report.json").read_text())
        queue = [(q["config_id"], q["case_id"]) for q in report["gates"]["selective"]["queue"]]
        judged = [(cfg, c) for cfg, s in report["judge"]["per_config"].items()
                  for c, case in s["cases"].items() if case["status"] == "judged"]
        from tests.test_report_outputs import _errors, _validator

        assert _errors(_validator("report"), report) == []  # queue reasons and all included
        counts = [per["faithful"]["counts"] for per in report["gates"]["selective"]["per_config"].values()]
        assert len(queue) >= 2 and sum(c["escalated"] for c in counts) >= 1 and sum(c["trusted"] for c in counts) >= 1

        # triage.jsonl: one awaits_person row per queued item, saying why
        rows = [json.loads(line) for line in (out / "triage.jsonl").read_text().splitlines()]
        waiting = [r for r in rows if r["kind"] == "awaits_person"]
        assert sorted((r["config_id"], r["case_id"]) for r in waiting) == sorted(queue)
        for r in waiting:
            assert r["awaits"] == "a person's label" and r["criteria"] == ["faithful"] and r["question"]
            (reason,) = r["reasons"]
            roles = [(a["judge"], a["role"], a["cutoff"]) for a in reason["abstained"]]
            assert roles == [("small-judge", "first", 0.71), ("large-judge", "escalation", 0.71)]
            assert all(a["reason"] == f"verdict confidence {a['confidence']:.3f} < lambda 0.71"
                       for a in reason["abstained"])
            assert "`small-judge` (first): verdict confidence 0.700 < lambda 0.71" in r["why"]
        shown = CliRunner().invoke(main, ["triage", str(out), "--kind", "awaits_person", "--json"])
        assert shown.exit_code == 0 and len(shown.output.splitlines()) == len(queue)
        text = CliRunner().invoke(main, ["triage", str(out), "--kind", "awaits_person"]).output
        assert text.count("**awaits a person** (faithful)") == len(queue)
        assert f"{len(queue)} item(s) await a person's label" in (out / "triage.md").read_text()
        html = (out / "report.html").read_text()
        assert html.count("(first): verdict confidence 0.700 &lt; lambda 0.71") == len(queue)
        assert "all-or-nothing rule: no confidence per verdict" in html  # correct, citations_supported

        # the picker: the queue first, in queue order, chosen with certainty
        labels = tmp_path / "labels" / "kim.jsonl"
        first = label(str(out), "--rater", "kim", "--labels", str(labels), "--batch", "50")
        assert first.exit_code == 0, first.output
        assert f"batch 1 for kim: new (human queue), 0/{len(queue)} labelled" in first.output
        assert (f"human queue: {len(queue)} of {len(queue)} queued item(s) not yet labelled by kim; this batch is "
                f"{len(queue)} of them") in first.output
        (batch,) = read_batches(labels)
        assert batch.strategy == "queue" and [(c, q) for q, c, _, _ in batch.picks] == queue
        assert all(pi == 1.0 for _, _, pi, _ in batch.picks)
        for q, c, _, _ in batch.picks:
            append_label(labels, HumanLabel(query_id=q, config_id=c, rater="kim", faithful=False, correct=2))
        # calibrating on them: the ordinal criterion gets its reliability and cut-off too (too few here)
        cal = CliRunner().invoke(main, ["calibrate", "--config", str(config_path), "--report", str(out / "report.json"),
                                        "--labels", str(labels), "--records-dir", str(tmp_path / "records-kim")])
        assert cal.exit_code == 0, cal.output
        assert (f"correct: selective trust (target 0.9, risk 0.1): no lambda: the judge keeps nothing: {len(queue)} "
                "items with a confidence, fewer than the 22") in cal.output
        assert "faithful: selective trust" in cal.output and "kappa-maximising threshold" in cal.output

        # then sampled batches, from the rest only; the queue labels are known items there
        second = label(str(out), "--rater", "kim", "--labels", str(labels), "--batch", "2", "--strategy", "random")
        assert second.exit_code == 0 and "batch 2 for kim: new (random, seed 0)" in second.output
        assert f"human queue: 0 of {len(queue)} queued item(s)" in second.output
        sampled = read_batches(labels)[-1]
        pool = {(c, q) for q, c, _, _ in sampled.pool}
        assert not pool & set(queue) and len(pool) == len(judged) - len(queue)
        assert sampled.labelled_before == len(queue)

        # another rater may skip the queue
        lee = label(str(out), "--rater", "lee", "--labels", str(tmp_path / "labels" / "lee.jsonl"), "--batch", "2",
                    "--no-queue-first")
        assert lee.exit_code == 0 and "new (uncertain, seed 0)" in lee.output

        # a new run with the labels: the queued items are now decided by a person
        again = CliRunner().invoke(main, ["run", "--config", str(config_path), "--out", str(tmp_path / "run2"),
                                          "--labels", str(labels), "--quiet"])
        assert again.exit_code in (0, 1), again.output
    selective = json.loads((tmp_path / "run2" / "report.json").read_text())["gates"]["selective"]
    assert selective["queue"] == []
    assert sum(per["faithful"]["counts"]["human"] for per in selective["per_config"].values()) == len(queue)
    rows = (tmp_path / "run2" / "triage.jsonl").read_text()
    assert "awaits_person" not in rows
