"""`groundjudge calibrate` on the bundled example's labels, and the position-bias probe."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import context_ids_in_request, verdict_for_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"
LABELS = sorted((ROOT / "calibration" / "labels").glob("example_*.jsonl"))


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, str, str]:
    tmp = tmp_path_factory.mktemp("calib")
    srv = ScriptedOpenAIServer(verdict_for_request).start()
    result = CliRunner().invoke(main, ["run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
                                       "--judge-model", srv.model, "--cache-dir", str(tmp / "cache"),
                                       "--out", str(tmp / "out"), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    yield tmp, srv.base_url, srv.model
    srv.stop()


def test_calibrate_writes_a_record_with_inter_rater_figures(judged):
    tmp, _, _ = judged
    args = ["calibrate", "--config", str(EXAMPLE), "--report", str(tmp / "out" / "report.json"),
            "--records-dir", str(tmp / "records"), *(a for p in LABELS for a in ("--labels", str(p)))]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (record_path,) = (tmp / "records").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["primary_rater"] == "rater_a" and record["raters"] == {"rater_a": 81, "rater_b": 30}
    faithful = record["criteria"]["faithful"]
    assert faithful["judge_vs_human"]["n"] == 81
    assert faithful["inter_rater"]["rater_a~rater_b"]["n"] == 30
    assert record["judge"]["rubric"]["id"] == "grounded_answer"
    # The scripted judge calls every answer unfaithful, so it cannot be trusted.
    assert "untrusted" in result.output


def order_sensitive(body, index):
    """A judge that only believes the chunk shown first: its verdicts move with the order."""
    ids = context_ids_in_request(body)
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    cited = user.rsplit("IDS CITED BY THE ANSWER: ", 1)[1].strip().split(", ")
    claims = [{"claim": "fact", "cited": cited, "verdict": "supported", "support": ids[:1]}]
    return Reply(json.dumps({"claims": claims, "correctness": 3, "reason": "r"}))


@pytest.mark.parametrize(("script", "flips"), [(verdict_for_request, False), (order_sensitive, True)])
def test_position_probe_reports_flip_rates(tmp_path, script, flips):
    with ScriptedOpenAIServer(script) as srv:
        base = ["--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                "--cache-dir", str(tmp_path / "cache")]
        assert CliRunner().invoke(main, ["run", *base, "--out", str(tmp_path / "out"), "--quiet"]).exit_code in (0, 1)
        result = CliRunner().invoke(main, ["calibrate", *base, "--report", str(tmp_path / "out" / "report.json"),
                                           "--records-dir", str(tmp_path / "records"), "--position-probe"])
    assert result.exit_code == 0, result.output
    (record_path,) = (tmp_path / "records").glob("*.json")
    probe = json.loads(record_path.read_text())["position_probe"]
    assert probe["items_probed"] > 20 and probe["judged_both_ways"] == probe["items_probed"]
    citations = probe["citations_supported"]
    assert (citations["flips"] > 0) == flips and citations["n"] > 0


def test_another_judges_verdicts_are_calibrated_under_their_own_identity(tmp_path):
    labels = [json.loads(line) for line in LABELS[0].read_text().splitlines()]
    lines = [{"query_id": l["query_id"], "config_id": l["config_id"], "faithful": l["faithful"],
              "correct": l["correct"], "citations_supported": l["citations_supported"]} for l in labels]
    lines[0]["faithful"] = not lines[0]["faithful"]  # one disagreement
    verdicts = tmp_path / "vendor.jsonl"
    verdicts.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--judge-name", "vendor-judge-3",
                                       "--records-dir", str(tmp_path / "records"),
                                       *(a for p in LABELS for a in ("--labels", str(p)))])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "records").glob("*.json")
    record = json.loads(path.read_text())
    assert record["judge"]["model"] == "vendor-judge-3" and record["judge"]["rubric"]["id"] == "external"
    faithful = record["criteria"]["faithful"]["judge_vs_human"]
    assert faithful["n"] == 81 and faithful["disagreements"] == [f"{lines[0]['config_id']}/{lines[0]['query_id']}"]


def test_verdicts_without_a_judge_name_are_refused(tmp_path):
    verdicts = tmp_path / "v.jsonl"
    verdicts.write_text('{"query_id": "q001", "faithful": true}\n')
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--labels", str(LABELS[0]),
                                       "--records-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--judge-name" in result.stderr


# --- trust only rises with more evidence (issue 24, section 3) ---------------------------------

@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, list[str]]:
    """The bundled example copied as a team would keep it (examples/, calibration/labels/), with a
    low bar for trust (min_items 20), judged once by a scripted judge whose verdicts vary."""
    import shutil

    from tests.support.label_run import mixed_verdict

    root = tmp_path_factory.mktemp("team")
    shutil.copytree(ROOT / "examples", root / "examples")
    shutil.copytree(ROOT / "calibration" / "labels", root / "calibration" / "labels")
    config = root / "examples" / "groundjudge.toml"
    config.write_text(config.read_text().replace("min_items = 50", "min_items = 20"))
    srv = ScriptedOpenAIServer(mixed_verdict).start()
    judge = ["--config", str(config), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url,
             "--judge-model", srv.model, "--cache-dir", str(root / "cache")]
    first = CliRunner().invoke(main, ["run", *judge, "--out", str(root / "runs" / "first"), "--quiet"])
    assert first.exit_code == 0, first.output
    yield root, judge
    srv.stop()


def agreeing_labels(report: Path, rater: str, count: int | None) -> list[dict]:
    """Labels of a person who agrees with every verdict of the judge (kappa 1.0)."""
    doc = json.loads(report.read_text())
    rows = [{"query_id": case_id, "config_id": cfg, "rater": rater,
             **{name: value["label"] for name, value in case["criteria"].items()}}
            for cfg, section in doc["judge"]["per_config"].items()
            for case_id, case in section["cases"].items() if case["status"] == "judged"]
    return rows[:count]


def calibrate_cli(root: Path, *labels: Path) -> tuple[str, list[Path]]:
    args = ["calibrate", "--config", str(root / "examples" / "groundjudge.toml"),
            "--report", str(root / "runs" / "first" / "report.json"), *(a for p in labels for a in ("--labels", str(p)))]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output, sorted((root / "calibration" / "records").glob("*.json"))


def test_a_smaller_one_rater_record_is_written_beside_the_larger_one_and_does_not_decide(project):
    """The issue's case: an 81-item, two-rater record (kappa near 0, untrusted), then a one-rater
    record from 30 items at kappa 1.0. The second used to replace the first in the same file and
    make the judge's gates blocking (exit 1) with no warning."""
    root, judge = project
    _, (first,) = calibrate_cli(root)  # the example's two raters, named in the config
    big = json.loads(first.read_text())
    assert big["criteria"]["faithful"]["judge_vs_human"]["n"] == 81 and big["raters"] == {"rater_a": 81, "rater_b": 30}
    # the record names its evidence: each label file with its sha256, the labels hash, in its file name too
    files = big["evidence"]["label_files"]
    assert [Path(f["path"]).name for f in files] == ["example_rater_a.jsonl", "example_rater_b.jsonl"]
    assert all(f["sha256"] == hashlib.sha256((root / "calibration" / "labels" / Path(f["path"]).name).read_bytes())
               .hexdigest() for f in files)
    assert f"labels-{big['evidence']['labels_hash'][:12]}" in first.name

    sam = root / "calibration" / "labels" / "sam.jsonl"
    sam.write_text("".join(json.dumps(r) + "\n" for r in agreeing_labels(root / "runs" / "first" / "report.json",
                                                                         "sam", 30)))
    output, records = calibrate_cli(root, sam)
    assert len(records) == 2 and first in records  # written beside it, the first untouched
    (small_path,) = [p for p in records if p != first]
    small = json.loads(small_path.read_text())
    assert small["raters"] == {"sam": 30} and small["criteria"]["faithful"]["judge_vs_human"]["kappa"] == 1.0
    wrote, deciding = output.strip().splitlines()[-2:]
    assert wrote.startswith(f"wrote {small_path}") and f"beside it for this judge: {first.name}" in wrote
    assert deciding.startswith("deciding trust now (most labelled items (n), then most raters, then newest): "
                               f"{first.name}, more labelled items than this record (faithful 81 > 30")

    again = CliRunner().invoke(main, ["run", *judge, "--out", str(root / "runs" / "second"), "--quiet"])
    assert again.exit_code == 0, again.output  # the judge's gates stay advisory: the verdict is unchanged
    doc = json.loads((root / "runs" / "second" / "report.json").read_text())
    faithfulness = doc["gates"]["trust"]["faithfulness"]
    assert not faithfulness["trusted"]
    assert (faithfulness["record"], faithfulness["labels_hash"], faithfulness["n"], faithfulness["raters"]) == (
        str(first), big["evidence"]["labels_hash"], 81, {"rater_a": 81, "rater_b": 30})
    assert f"decided by {first.name} (labels {big['evidence']['labels_hash'][:12]}, n=81" in faithfulness["reason"]
    summary = doc["calibration"]
    assert summary["decided_by"]["faithful"] == {"path": str(first), "labels_hash": big["evidence"]["labels_hash"],
                                                 "n": 81, "raters": {"rater_a": 81, "rater_b": 30},
                                                 "created": big["created"]}
    assert {r["path"]: r["decides"] for r in summary["records"]} == {
        str(first): ["faithful", "correct", "citations_supported"], str(small_path): []}
    md = (root / "runs" / "second" / "report.md").read_text()
    assert "| faithful | 81 |" in md and f"`{first.name}` (labels {big['evidence']['labels_hash'][:12]}, raters " \
                                        "rater_a 81, rater_b 30)" in md
    assert f"outranked for every criterion: `{small_path.name}`" in md
    html = (root / "runs" / "second" / "report.html").read_text()
    assert f"<code>{first.name}</code> (labels {big['evidence']['labels_hash'][:12]}, n=81, raters rater_a 81" in html


def test_the_same_evidence_replaces_only_its_own_record_and_more_evidence_takes_over(project):
    root, judge = project
    report = root / "runs" / "first" / "report.json"
    sam = root / "calibration" / "labels" / "sam.jsonl"
    sam.write_text("".join(json.dumps(r) + "\n" for r in agreeing_labels(report, "sam", 30)))
    _, before = calibrate_cli(root, sam)
    output, after = calibrate_cli(root, sam)  # exactly the same labels and verdicts
    assert after == before and "it replaces the earlier record of exactly the same labels, verdicts and rater" in output

    everything = agreeing_labels(report, "sam", None)  # sam labels every judged item: more than 81
    assert len(everything) > 81
    sam.write_text("".join(json.dumps(r) + "\n" for r in everything))
    output, records = calibrate_cli(root, sam)
    (largest,) = set(records) - set(before)
    assert len(records) == len(before) + 1
    assert output.strip().splitlines()[-1].endswith("this record, for every criterion")
    run = CliRunner().invoke(main, ["run", *judge, "--out", str(root / "runs" / "third"), "--quiet"])
    assert run.exit_code in (0, 1), run.output
    trust = json.loads((root / "runs" / "third" / "report.json").read_text())["gates"]["trust"]["faithfulness"]
    assert trust["trusted"] and trust["record"] == str(largest) and trust["n"] == len(everything)
