"""groundjudge align: a judge whose signals carry a known rule is recovered out of fold; folds
never split a question; the derived rubric is pinned, loads by name and judges a cached re-run
with zero calls; a record from labels the rubric was fitted on never gates; bad input exits 2."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.calibrate.align import IN_SAMPLE, OUT_OF_FOLD, run_alignment
from groundjudge.calibrate.align_data import AnswerItem
from groundjudge.calibrate.align_eval import question_folds
from groundjudge.calibrate.record import build_record
from groundjudge.calibrate.trust import TrustRules, trust_status
from groundjudge.calibrate.verdicts import ItemLabels
from groundjudge.cli import main
from groundjudge.errors import InputError
from groundjudge.judge.claim_signals import ClaimSignals
from groundjudge.judge.results import CriterionInfo
from groundjudge.judge.rubric import load_rubric
from tests.support.openai_server import HTTPError, Reply, ScriptedOpenAIServer
from tests.test_judge_claim_check import statement, yes_no

pytestmark = pytest.mark.usefixtures("no_judge_environment")

FITTED, HELD = 20, 6  # questions whose labels align sees, and questions it never sees
CONFIGS = ("m1", "m2", "m3", "m4")
grades: dict[tuple[str, str], int] = {}  # the people's `correct` grade of each answer


def _sentences(i: int) -> dict[str, str]:
    return {"good": f"The plan covers {10 + i} sites.", "staff": f"The plan has {30 + i} staff in Lyon.",
            "paraphrase": f"The scheme covers {10 + i} facilities.",  # two unfound words, still faithful
            "bad": f"The plan covers {50 + i} sites."}  # one unfound number: the people mark it


def write_dataset(root: Path) -> dict[tuple[str, str], list[tuple[int, int] | None]]:
    """Golden set, corpus and one trace file per config; per answer, the span of its bad
    sentence (None where it has none). The rule people follow: a claim is unsupported exactly
    when it states a number the passage does not."""
    rng = random.Random(7)
    golden, corpus, traces = [], [], {c: [] for c in CONFIGS}
    spans: dict[tuple[str, str], list[tuple[int, int] | None]] = {}
    grades.clear()
    for i in range(FITTED + HELD):
        qid = f"q{i:02d}"
        question = f"How large is plan {i}?"
        golden.append({"id": qid, "question": question, "expected_behavior": "answer",
                       "expected_answer": f"The plan covers {10 + i} sites. The plan has {30 + i} staff."})
        corpus.append({"chunk_id": f"{qid}#1", "doc_id": qid,
                       "text": f"The plan covers {10 + i} sites in Lyon and {30 + i} staff. Members meet every week."})
        s = _sentences(i)
        for config in CONFIGS:
            parts = rng.sample(["good", "staff", "paraphrase"], 2)
            if rng.random() < 0.45:
                parts.insert(rng.randrange(3), "bad")
            answer = " ".join(s[p] for p in parts)
            start = answer.find(s["bad"]) if "bad" in parts else -1
            spans[(qid, config)] = [(start, start + len(s["bad"]))] if start >= 0 else []
            grades[(qid, config)] = ("good" in parts or "paraphrase" in parts) + 2 * ("staff" in parts)
            traces[config].append({"query_id": qid, "config_id": config, "question": question,
                                   "retrieved_chunks": [{"chunk_id": f"{qid}#1", "doc_id": qid, "rank": 1}],
                                   "context_chunks": [{"chunk_id": f"{qid}#1"}], "answer": answer, "citations": [],
                                   "behavior": "answer"})
    _jsonl(root / "golden.jsonl", golden)
    _jsonl(root / "corpus.jsonl", corpus)
    for config, rows in traces.items():
        _jsonl(root / "traces" / f"{config}.jsonl", rows)
    return spans


def write_labels(path: Path, spans: dict, questions: set[str]) -> None:
    _jsonl(path, [{"query_id": q, "config_id": c, "rater": "people", "faithful": not s, "correct": grades[(q, c)],
                   "spans": [{"start": a, "end": b, "text": "", "label_type": "Evident Baseless Info"} for a, b in s]}
                  for (q, c), s in sorted(spans.items()) if q in questions])


def _jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def noisy_judge(body: dict, index: int) -> Reply:
    """P(yes) from a hash of the statement: it carries nothing about the people's rule."""
    p = 0.05 + 0.9 * int(hashlib.sha256(statement(body).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=(yes_no(p),))


def config_file(root: Path, rubric: str, out: str, *, rubrics_dir: Path | None = None, version: int | None = None) -> Path:
    traces = ", ".join(f'"{root / "traces" / (c + ".jsonl")}"' for c in CONFIGS)
    judge = f'rubric = "{rubric}"\n' + (f"rubric_version = {version}\n" if version else "") + (
        f'rubrics_dir = "{rubrics_dir}"\n' if rubrics_dir else "")
    path = root / f"{out}.toml"
    path.write_text(f'[inputs]\ngolden = "{root / "golden.jsonl"}"\ntraces = [{traces}]\ncorpus = "{root / "corpus.jsonl"}"\n'
                    f'[judge]\n{judge}max_attempts = 1\n[cache]\ndir = "{root / "cache"}"\n'
                    f'[output]\nout = "{root / out}"\n[trust]\nrecords_dir = "{root / "records"}"\n')
    return path


def run_cli(args: list[str]):
    return CliRunner().invoke(main, args)


@pytest.fixture(scope="module")
def aligned(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The synthetic set judged by claim_check v4 on the scripted server, aligned on the labels of
    the first FITTED questions; the derived rubric then judges the same answers from the cache."""
    root = tmp_path_factory.mktemp("align")
    spans = write_dataset(root)
    questions = sorted({q for q, _ in spans})
    write_labels(root / "labels.jsonl", spans, set(questions[:FITTED]))
    write_labels(root / "held_out.jsonl", spans, set(questions[FITTED:]))
    with ScriptedOpenAIServer(noisy_judge) as srv:
        base = run_cli(["run", "--config", str(config_file(root, "claim_check", "base", version=4)),
                        "--judge-base-url", srv.base_url, "--judge-model", srv.model, "--quiet"])
        asked = srv.call_count
    assert base.exit_code in (0, 1), base.output
    assert asked > 0
    fit = run_cli(["align", "--report", str(root / "base" / "report.json"), "--labels", str(root / "labels.jsonl"),
                   "--out-dir", str(root / "rubrics"), "--records-dir", str(root / "records"), "--seed", "3"])
    assert fit.exit_code == 0, fit.output
    with ScriptedOpenAIServer(default=HTTPError(500)) as srv:  # any call would fail the case
        again = run_cli(["run", "--config", str(config_file(root, "claim_check_aligned", "again",
                                                             rubrics_dir=root / "rubrics")),
                         "--judge-base-url", srv.base_url, "--judge-model", "judge-test-1", "--quiet"])
        calls = srv.call_count
    return {"root": root, "spans": spans, "fit_output": fit.output, "again": again, "calls": calls,
            "questions": questions}


def test_the_known_rule_is_recovered_out_of_fold(aligned: dict) -> None:
    root = aligned["root"]
    done = run_alignment(root / "base" / "report.json", [root / "labels.jsonl"], seed=3, reps=200)
    weights = done.final.claim_model.weights
    assert done.final.claim_labels  # the spans gave claim labels
    # an unfound number sinks a claim; the model's P(yes) carries nothing, and gets (almost) no weight
    assert weights["unfound_numbers"] < -2
    assert abs(weights["p_yes_logit"]) < 0.25 * abs(weights["unfound_numbers"])
    oof = done.oof.by_metric
    assert oof["kappa"].value is not None and oof["kappa"].value > 0.9
    assert oof["kappa"].ci_low is not None and oof["kappa"].ci_low <= oof["kappa"].value <= oof["kappa"].ci_high
    # the base rule counts every unfound term alike: a paraphrase sinks it as a wrong number does
    assert done.base.by_metric["kappa"].value < oof["kappa"].value
    assert [f for f, _ in done.curve] == [0.25, 0.5, 0.75, 1.0]
    assert "out-of-fold" in aligned["fit_output"] and "learning curve" in aligned["fit_output"]


def test_the_fit_is_deterministic_given_the_seed(aligned: dict) -> None:
    root = aligned["root"]
    a = run_alignment(root / "base" / "report.json", [root / "labels.jsonl"], seed=3, reps=50, curve=False)
    b = run_alignment(root / "base" / "report.json", [root / "labels.jsonl"], seed=3, reps=50, curve=False)
    assert a.final == b.final and a.oof_labels == b.oof_labels and a.oof.as_dict() == b.oof.as_dict()


def _item(query_id: str) -> AnswerItem:
    signals = ClaimSignals(p_yes=None, unfound=0, unfound_numbers=0, unfound_names=0, found_share=1.0, length=3,
                           cited=False)
    return AnswerItem(query_id=query_id, config_id=None, truth=True, claims=[signals], claim_truth=None,
                      base_label=True, base_confidence=None)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_folds_never_split_a_question(seed: int) -> None:
    items = [_item(f"q{i % 13}") for i in range(60)]
    folds = question_folds(items, 5, seed)
    by_question: dict[str, set[int]] = {}
    for item, fold in zip(items, folds):
        by_question.setdefault(item.query_id, set()).add(fold)
    assert all(len(f) == 1 for f in by_question.values())
    assert set(folds) == set(range(5))


def test_the_derived_rubric_keeps_its_base_questions_and_is_pinned(aligned: dict) -> None:
    root = aligned["root"]
    derived = load_rubric(root / "rubrics", "claim_check_aligned")
    base = load_rubric(Path(__file__).resolve().parent.parent / "rubrics", "claim_check", 4)
    assert derived.key == "claim_check_aligned/v1"
    assert derived.derived_from == f"claim_check/v4@{base.content_hash}"
    assert derived.claim_questions == base.claim_questions and derived.system_prompt == base.system_prompt
    assert derived.aligned is not None and derived.aligned.seed == 3 and derived.aligned.folds == 5
    assert derived.aligned.labels_sha256 == [hashlib.sha256((root / "labels.jsonl").read_bytes()).hexdigest()]
    assert sorted(derived.aligned.fitted_questions) == aligned["questions"][:FITTED]
    assert derived.aligned.out_of_fold["kappa"] is not None
    # the labels also grade `correct`: its cut points are fitted (on the nugget answers) and measured
    fitted = derived.aligned.criteria["correct"]
    assert fitted.cut_points is not None and len(fitted.cut_points) == 3 and fitted.out_of_fold["n"] == FITTED * 4
    assert "correct: cut points" in aligned["fit_output"]
    path = root / "rubrics" / "claim_check_aligned" / "v1.yaml"
    edited = root / "edited"
    (edited / "claim_check_aligned").mkdir(parents=True)
    (edited / "rubrics.lock").write_text((root / "rubrics" / "rubrics.lock").read_text())
    text = path.read_text().replace(f"threshold: {derived.aligned.threshold}", "threshold: 0.5")
    assert text != path.read_text()
    (edited / "claim_check_aligned" / "v1.yaml").write_text(text)
    with pytest.raises(InputError, match="was edited"):
        load_rubric(edited, "claim_check_aligned")


def test_the_derived_rubric_judges_a_cached_rerun_with_the_fitted_scoring_and_no_call(aligned: dict) -> None:
    root, again = aligned["root"], aligned["again"]
    assert again.exit_code in (0, 1), again.output
    assert aligned["calls"] == 0
    report = json.loads((root / "again" / "report.json").read_text())
    assert report["judge"]["identity"]["rubric"]["id"] == "claim_check_aligned"
    done = run_alignment(root / "base" / "report.json", [root / "labels.jsonl"], seed=3, reps=50, curve=False)
    expected = {(i.query_id, i.config_id): label for i, label in zip(done.labelled.items,
                                                                     done.final.predict(done.labelled.items)[0])}
    got = {(q, c): case["criteria"]["faithful"]["label"] for c, section in report["judge"]["per_config"].items()
           for q, case in section["cases"].items() if (q, c) in expected}
    assert got == expected
    # and against the people: the fitted rule finds exactly the answers with a wrong number
    truth = {k: not s for k, s in aligned["spans"].items()}
    assert sum(got[k] == truth[k] for k in got) / len(got) > 0.95


def test_calibrating_on_the_fitted_labels_is_in_sample_and_never_gates(aligned: dict) -> None:
    root = aligned["root"]
    config = config_file(root, "claim_check_aligned", "again", rubrics_dir=root / "rubrics")
    result = run_cli(["calibrate", "--config", str(config), "--report", str(root / "again" / "report.json"),
                      "--labels", str(root / "labels.jsonl"), "--records-dir", str(root / "records")])
    assert result.exit_code == 0, result.output
    assert "in-sample" in result.output
    records = [json.loads(p.read_text()) for p in (root / "records").glob("*.json")]
    kinds = sorted((r.get("fitting") or {}).get("predictions") for r in records)
    assert kinds == [IN_SAMPLE, OUT_OF_FOLD]
    held = run_cli(["calibrate", "--config", str(config), "--report", str(root / "again" / "report.json"),
                    "--labels", str(root / "held_out.jsonl"), "--records-dir", str(root / "held-records")])
    assert held.exit_code == 0, held.output
    (record,) = [json.loads(p.read_text()) for p in (root / "held-records").glob("*.json")]
    assert record["fitting"]["predictions"] == "held_out"


def _record(predictions: str) -> dict:
    """A record with perfect agreement on 80 items, for a fitted rubric."""
    items = {(f"q{i}", None): ItemLabels({"faithful": i % 3 != 0}) for i in range(80)}
    info = CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness")
    ident = {"rubric": {"id": "claim_check_aligned", "version": 1, "hash": "a" * 64}, "model": "m", "decoding": {}}
    record = build_record(items, ident, {"people": items}, [info], reps=200)
    record["fitting"] = {"predictions": predictions, "reason": "80 of the 80 labelled questions were used to fit it"}
    return record


def test_a_record_from_in_sample_predictions_cannot_gate() -> None:
    provenance = _record(IN_SAMPLE)["judge"]
    refused = trust_status("faithful", provenance, [_record(IN_SAMPLE)], TrustRules())
    assert not refused.trusted and "in-sample" in refused.reason and "used to fit" in refused.reason
    assert trust_status("faithful", provenance, [_record(OUT_OF_FOLD)], TrustRules()).trusted
    # beside an out-of-fold record, the in-sample one never decides
    both = trust_status("faithful", provenance, [_record(IN_SAMPLE), _record(OUT_OF_FOLD)], TrustRules())
    assert both.trusted


def test_bad_input_is_one_line_and_exit_2(aligned: dict, tmp_path: Path) -> None:
    root = aligned["root"]
    report = str(root / "base" / "report.json")
    missing = run_cli(["align", "--report", report, "--labels", str(tmp_path / "none.jsonl"),
                       "--out-dir", str(tmp_path / "r")])
    assert missing.exit_code == 2 and "none.jsonl" in missing.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q00", "config_id": "m1", "rater": "people", "faithful": false, '
                   '"spans": [{"start": 9, "end": 3}]}\n')
    spans = run_cli(["align", "--report", report, "--labels", str(bad), "--out-dir", str(tmp_path / "r")])
    assert spans.exit_code == 2 and f"{bad}:1" in spans.output and "spans[0]" in spans.output
    few = run_cli(["align", "--report", report, "--labels", str(root / "held_out.jsonl"), "--folds", "50",
                   "--out-dir", str(tmp_path / "r")])
    assert few.exit_code == 2 and "folds" in few.output
    assert not (tmp_path / "r").exists()  # nothing half-written


def test_a_version_once_pinned_is_never_written_again(tmp_path: Path) -> None:
    from groundjudge.calibrate.align import next_version

    assert next_version(tmp_path, "claim_check_aligned") == 1
    (tmp_path / "rubrics.lock").write_text(json.dumps({"rubrics": {"claim_check_aligned/v2": "a" * 64,
                                                                   "other/v7": "b" * 64}}))
    assert next_version(tmp_path, "claim_check_aligned") == 3  # v2's file is gone, its pin is not
    (tmp_path / "claim_check_aligned").mkdir()
    (tmp_path / "claim_check_aligned" / "v4.yaml").write_text("")
    assert next_version(tmp_path, "claim_check_aligned") == 5


def test_the_installed_rubrics_folder_is_never_written(aligned: dict, tmp_path: Path) -> None:
    from groundjudge.judge.rubric import packaged_rubrics

    with packaged_rubrics() as installed:
        before = sorted(p.name for p in installed.rglob("*"))
        root = aligned["root"]
        result = run_cli(["align", "--report", str(root / "base" / "report.json"), "--labels",
                          str(root / "labels.jsonl"), "--out-dir", str(installed),
                          "--records-dir", str(tmp_path / "records")])
        assert result.exit_code == 2 and "out-dir" in result.output and "installed" in result.output
        assert sorted(p.name for p in installed.rglob("*")) == before
