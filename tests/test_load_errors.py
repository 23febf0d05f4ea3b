"""Malformed inputs: each gives one clear `file:line: field: problem` message and exit code 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.errors import InputError
from tests.conftest import FIXTURES

BAD = FIXTURES / "malformed"
OK_GOLDEN = BAD / "golden_ok.jsonl"
OK_TRACES = FIXTURES / "mini" / "traces.jsonl"

# (golden, traces, expected message fragment)
CASES = [
    ("golden_bad_json.jsonl", None, "golden_bad_json.jsonl:2: invalid JSON"),
    ("golden_wrong_type.jsonl", None, "golden_wrong_type.jsonl:1: tags: Input should be a valid list"),
    ("golden_missing_field.jsonl", None, "golden_missing_field.jsonl:1: question: required field is missing"),
    ("golden_empty.jsonl", None, "golden_empty.jsonl: file is empty"),
    ("golden_duplicate_id.jsonl", None, "golden_duplicate_id.jsonl:2: id: duplicate case id 'a' (first on line 1)"),
    ("golden_bad_enum.jsonl", None, "golden_bad_enum.jsonl:1: expected_behavior: Input should be"),
    ("golden_bad_yaml.yaml", None, "golden_bad_yaml.yaml:5: invalid YAML"),
    ("golden_utf16.jsonl", None, "golden_utf16.jsonl:1: file is UTF-16 encoded"),
    ("golden_latin1.jsonl", None, "golden_latin1.jsonl:1: not valid UTF-8"),
    ("golden_ok.jsonl", "traces_unknown_query.jsonl", "traces_unknown_query.jsonl:1: query_id: unknown case 'zzz'"),
    ("golden_ok.jsonl", "traces_duplicate.jsonl", "traces_duplicate.jsonl:2: query_id: duplicate trace for case 'a'"),
    ("golden_ok.jsonl", "traces_negative_cost.jsonl", "traces_negative_cost.jsonl:1: cost_usd: Input should be greater"),
    ("golden_ok.jsonl", "traces_chunk_without_id.jsonl",
     "traces_chunk_without_id.jsonl:1: retrieved_chunks[0].chunk_id: required field is missing"),
    ("does_not_exist.jsonl", None, "does_not_exist.jsonl: file not found"),
]


@pytest.mark.parametrize(("golden", "traces", "fragment"), CASES, ids=[c[0] + "+" + str(c[1]) for c in CASES])
def test_bad_input_gives_one_message_and_exit_2(tmp_path, golden, traces, fragment):
    out = tmp_path / "out"
    traces_path = BAD / traces if traces else OK_TRACES
    result = CliRunner().invoke(main, ["metrics", "--golden", str(BAD / golden), "--traces", str(traces_path),
                                       "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == "error: bad input"
    assert len(lines) == 2, lines  # exactly one problem reported
    assert fragment in lines[1]
    assert "Traceback" not in result.output
    assert not out.exists()  # nothing written


@pytest.mark.parametrize("listed", [[[]], [1], ["answer", {"x": 1}]])
def test_a_not_recorded_list_of_anything_but_names_is_one_clear_problem(tmp_path, listed):
    # it once reached a dict comprehension that hashed each item: a TypeError, not an input error
    traces = tmp_path / "t.jsonl"
    traces.write_text('{"query_id": "a", "config_id": "base"}\n'
                      + json.dumps({"query_id": "a", "config_id": "other", "not_recorded": listed}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--golden", str(OK_GOLDEN), "--traces", str(traces), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "t.jsonl:2: not_recorded" in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


def test_unknown_chunk_in_golden_is_an_error_when_corpus_given(tmp_path, mini):
    golden = tmp_path / "g.jsonl"
    golden.write_text('{"id": "a", "question": "q", "expected_chunk_ids": ["nope#1"]}\n')
    result = CliRunner().invoke(main, ["metrics", "--golden", str(golden), "--traces", str(OK_TRACES),
                                       "--corpus", str(mini / "corpus.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "g.jsonl:1: expected_chunk_ids: chunk ids not in the corpus: nope#1" in result.stderr


def test_real_process_exit_code_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "groundjudge.cli", "metrics", "--golden", str(BAD / "golden_bad_json.jsonl"),
         "--traces", str(OK_TRACES), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "golden_bad_json.jsonl:2: invalid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_trace_and_missing_text_are_counted_not_dropped(tmp_path, mini):
    traces = tmp_path / "t.jsonl"
    traces.write_text('{"query_id": "c1", "config_id": "base", "context_chunks": ["ghost#9"], "answer": "x"}\n')
    from groundjudge.load.dataset import load_dataset

    ds = load_dataset(mini / "golden.jsonl", [traces], mini / "corpus.jsonl")
    assert ds.missing_trace == {"base": ["c2", "c3", "c4"]}
    assert ds.missing_text == {"base/c1": ["ghost#9"]}


def test_line_separators_inside_json_strings_do_not_split_a_record(tmp_path):
    # JSON allows U+2028, U+2029 and U+0085 raw inside strings; str.splitlines() would cut the
    # record there. A CRLF file reads the same, and a bad record is still named by its line.
    golden = tmp_path / "g.jsonl"
    golden.write_text('{"id": "a", "question": "first\u2028second\u0085third\u2029end"}\r\n'
                      '{"id": "b", "question": "q"}\r\n', encoding="utf-8", newline="")
    from groundjudge.contracts import GoldenCase
    from groundjudge.load.records import read_records

    records = read_records(golden, GoldenCase)
    assert [(line, case.id) for line, case in records] == [(1, "a"), (2, "b")]
    assert records[0][1].question == "first\u2028second\u0085third\u2029end"
    golden.write_text('{"id": "a", "question": "x\u2028y"}\n{"id": "b", "question": 3}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--golden", str(golden), "--traces", str(OK_TRACES),
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "g.jsonl:2: question:" in result.stderr


def test_the_bytes_read_as_the_text_would_be(tmp_path):
    # JSONL is parsed from the file's bytes; what the text reader would read differently (a
    # BOM, blank lines, a line blank only in Unicode's terms, broken UTF-8 inside a string)
    # reads as before: the same records on the same lines, or the same named problem.
    from groundjudge.contracts import GoldenCase
    from groundjudge.load.records import read_records

    golden = tmp_path / "g.jsonl"
    golden.write_bytes(b'\xef\xbb\xbf{"id": "a", "question": "caf\xc3\xa9"}\n\n  \t\r\n'
                       + "\u3000\n".encode() + b'{"id": "b", "question": "q"}\n')
    assert [(line, case.id, case.question) for line, case in read_records(golden, GoldenCase)] == [
        (1, "a", "caf\u00e9"), (5, "b", "q")]
    golden.write_bytes(b'{"id": "a", "question": "q"}\n{"id": "b", "question": "q"}\n'
                       b'{"id": "c", "question": "caf\xe9"}\n')
    with pytest.raises(InputError) as caught:
        read_records(golden, GoldenCase)
    assert "g.jsonl:3: not valid UTF-8 (byte 0xe9)" in str(caught.value)


# --- non-finite and impossible numbers (SPEC 10: non-finite numbers are malformed) -------------

EXAMPLES = FIXTURES.parent.parent / "examples"


def planted(src: Path, dst: Path, line: int, change: Any) -> Path:
    """``src`` with record ``line`` (1-based) changed by ``change(record)``, written as JSON
    that may hold NaN and Infinity literals (as Python's json and many tools write them)."""
    records = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    change(records[line - 1])
    dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return dst


def _set(path: str, value: Any) -> Any:
    def change(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = record
        for name in parents:
            target = target[int(name)] if isinstance(target, list) else target.setdefault(name, {})
        target[int(last) if isinstance(target, list) else last] = value
    return change


NUMBER_CASES = [  # (file of the example to plant in, field, value, expected problem)
    ("traces/candidate.jsonl", "cost_usd", math.inf, "cost_usd: not a finite number"),
    ("traces/candidate.jsonl", "cost_usd", -math.inf, "cost_usd: not a finite number"),
    ("traces/candidate.jsonl", "latency_ms.end_to_end", math.nan, "latency_ms.end_to_end: not a finite number"),
    ("traces/candidate.jsonl", "latency_ms.end_to_end", -1e300, "latency_ms.end_to_end: Input should be greater"),
    ("traces/candidate.jsonl", "latency_ms.end_to_end", 1e300, "latency_ms.end_to_end: Input should be less"),
    ("traces/candidate.jsonl", "latency_ms", math.nan, "latency_ms: not a finite number"),
    ("traces/candidate.jsonl", "tokens.prompt", -3, "tokens.prompt: Input should be greater"),
    ("traces/candidate.jsonl", "tokens.prompt", 10 ** 400, "tokens.prompt: Input should be less"),
    ("traces/candidate.jsonl", "cost_usd", -0.5, "cost_usd: Input should be greater"),
    ("traces/candidate.jsonl", "retrieved_chunks.0.score", -math.inf, "retrieved_chunks[0].score: not a finite"),
    ("traces/candidate.jsonl", "team_score", math.nan, "team_score: not a finite number"),  # an unknown field
    ("golden.jsonl", "relevance.hr-leave-v3#1", math.nan, "relevance.hr-leave-v3#1: not a finite number"),
    ("golden.jsonl", "relevance.hr-leave-v3#1", -1, "relevance.hr-leave-v3#1: Input should be greater"),
    ("corpus.jsonl", "offsets.0", math.inf, "offsets[0]: not a finite number"),
]


@pytest.mark.parametrize(("name", "field", "value", "fragment"), NUMBER_CASES,
                         ids=[f"{c[0]}:{c[1]}={c[2]!r}"[-60:] for c in NUMBER_CASES])
def test_non_finite_or_impossible_numbers_are_input_errors(tmp_path, name, field, value, fragment):
    files = {"golden.jsonl": EXAMPLES / "golden.jsonl", "traces/candidate.jsonl": EXAMPLES / "traces" / "candidate.jsonl",
             "corpus.jsonl": EXAMPLES / "corpus.jsonl"}
    files[name] = planted(files[name], tmp_path / Path(name).name, 2, _set(field, value))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--golden", str(files["golden.jsonl"]), "--traces",
                                       str(files["traces/candidate.jsonl"]), "--corpus", str(files["corpus.jsonl"]),
                                       "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == "error: bad input" and len(lines) == 2, lines
    assert lines[1].startswith(f"{tmp_path / Path(name).name}:2: {fragment}"), lines
    assert not out.exists()


def test_a_nan_latency_was_dropped_from_its_mean_while_its_n_stayed_before(tmp_path):
    # What used to happen: the mean of a cost column holding Infinity was written as null with
    # n counting every trace. Now the file is refused before any number is computed.
    traces = planted(EXAMPLES / "traces" / "candidate.jsonl", tmp_path / "t.jsonl", 1, _set("cost_usd", math.inf))
    result = CliRunner().invoke(main, ["metrics", "--golden", str(EXAMPLES / "golden.jsonl"), "--traces", str(traces),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "t.jsonl:1: cost_usd: not a finite number" in result.stderr
    from groundjudge.metrics.aggregate import summaries

    with pytest.raises(ValueError, match="not a finite number"):  # and a metric that made one is a bug, said so
        summaries({"latency_ms.end_to_end": [1.0, math.nan, 3.0]})


def test_yaml_golden_and_foreign_formats_refuse_non_finite_numbers(tmp_path):
    golden = tmp_path / "golden.yaml"
    golden.write_text("- id: q001\n  question: How many days?\n  relevance: {hr-leave-v3#2: .nan}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--golden", str(golden), "--traces",
                                       str(EXAMPLES / "traces" / "candidate.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and f"{golden}:1: relevance.hr-leave-v3#2: not a finite number" in result.stderr
    day39 = planted(EXAMPLES / "day39" / "outputs.jsonl", tmp_path / "outputs.jsonl", 1, _set("latency_ms.embed", math.nan))
    kb = planted(EXAMPLES / "kb-eval" / "results_a.jsonl", tmp_path / "results_a.jsonl", 2, _set("latency_ms", -5))
    for gold, traces, fragment in ((EXAMPLES / "day39" / "golden.jsonl", day39, "outputs.jsonl:1: latency_ms.embed: not a finite"),
                                   (EXAMPLES / "kb-eval" / "golden.jsonl", kb, "results_a.jsonl:2: latency_ms: Input should be greater")):
        result = CliRunner().invoke(main, ["metrics", "--golden", str(gold), "--traces", str(traces),
                                           "--out", str(tmp_path / "o")])
        assert result.exit_code == 2 and fragment in result.stderr, result.output


def test_labels_refuse_non_finite_grades(tmp_path):
    labels = tmp_path / "kim.jsonl"
    labels.write_text('{"query_id": "q001", "rater": "kim", "correct": NaN}\n', encoding="utf-8")
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text('{"query_id": "q001", "faithful": true, "correct": Infinity}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--judge-name", "other",
                                       "--labels", str(labels), "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 2, result.output
    assert "verdicts.jsonl:1: correct: not a finite number" in result.stderr or \
        "kim.jsonl:1: correct: not a finite number" in result.stderr
    assert not (tmp_path / "records").exists()


# --- files nested too deeply, and run documents read back (compare, calibrate, triage, label) -----

DEEP = "[" * 100_000 + "]" * 100_000


def _one_line_exit_2(result: Any, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == "error: bad input" and fragment in "\n".join(lines[1:]), lines
    assert "Traceback" not in result.output and len(lines) <= 6


@pytest.mark.parametrize("role", ["golden", "golden.yaml", "traces", "corpus"])
def test_input_nested_100000_deep_is_one_clear_problem(tmp_path, role):
    files = {"golden": EXAMPLES / "golden.jsonl", "traces": EXAMPLES / "traces" / "candidate.jsonl",
             "corpus": EXAMPLES / "corpus.jsonl"}
    if role == "golden.yaml":
        path = tmp_path / "golden.yaml"
        path.write_text("- id: q001\n  question: x\n  tags: " + DEEP + "\n", encoding="utf-8")
        files["golden"] = path
    else:
        path = tmp_path / files[role].name
        path.write_text(files[role].read_text(encoding="utf-8").replace('{', '{"deep": ' + DEEP + ', ', 1),
                        encoding="utf-8")
        files[role] = path
    result = CliRunner().invoke(main, ["metrics", "--golden", str(files["golden"]), "--traces", str(files["traces"]),
                                       "--corpus", str(files["corpus"]), "--out", str(tmp_path / "out")])
    _one_line_exit_2(result, f"{path}" + ("" if role == "golden.yaml" else ":1") + ": nested too deeply")
    assert not (tmp_path / "out").exists()


def test_labels_nested_100000_deep_is_one_clear_problem(tmp_path):
    labels = tmp_path / "kim.jsonl"
    labels.write_text('{"query_id": "q001", "rater": "kim", "x": ' + DEEP + "}\n", encoding="utf-8")
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text('{"query_id": "q001", "faithful": true}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--judge-name", "other",
                                       "--labels", str(labels), "--records-dir", str(tmp_path / "records")])
    _one_line_exit_2(result, f"{labels}:1: nested too deeply")


RUN_DOCUMENTS = [  # report.json text -> the problem named
    (DEEP, "nested too deeply"),
    ('{"per_config": {"a": {"aggregate": {"x": {"value": NaN, "n": 1}}}}, "configs": ["a"]}', "1: NaN: not a finite"),
    ('{"per_config": [], "configs": "a"}', "configs: Input should be a valid list"),
    ('{"per_config": {}, "configs": []}', "configs: List should have at least 1 item"),
    ('{"per_config": {"a": {"per_case": {"q": {"m": "x"}}}}, "configs": ["a", "b"]}', "per_config.a.per_case.q.m"),
    ('{"per_config": {"a": {"per_case": {}}}, "configs": ["a", "b"]}', "configs without a per_config section: ['b']"),
    ("[1, 2]", "not a groundjudge metrics.json or report.json"),
]


@pytest.mark.parametrize(("text", "fragment"), RUN_DOCUMENTS, ids=[f[1][:30] for f in RUN_DOCUMENTS])
def test_compare_reads_a_broken_report_as_one_clear_problem(tmp_path, text, fragment):
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(text, encoding="utf-8")
    _one_line_exit_2(CliRunner().invoke(main, ["compare", str(run)]), fragment)


@pytest.mark.parametrize("text", [DEEP, '{"judge": {"per_config": NaN}, "schema_version": 3}', '{"judge": 3}'])
def test_calibrate_and_label_read_a_broken_report_as_one_clear_problem(tmp_path, text):
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(text, encoding="utf-8")
    labels = tmp_path / "kim.jsonl"
    labels.write_text('{"query_id": "q001", "rater": "kim", "faithful": true}\n', encoding="utf-8")
    _one_line_exit_2(CliRunner().invoke(main, ["calibrate", "--report", str(run / "report.json"), "--labels",
                                               str(labels), "--records-dir", str(tmp_path / "records")]),
                     "report.json")
    _one_line_exit_2(CliRunner().invoke(main, ["label", str(run), "--rater", "kim", "--labels", str(labels)]),
                     "report.json")
    assert not (tmp_path / "records").exists()


TRIAGE_ROWS = [
    (DEEP, "triage.jsonl:1: nested too deeply"),
    ("[1]", "triage.jsonl:1: expected a JSON object, got list"),
    ('{"kind": "x"}', "triage.jsonl:1: kind: Input should be"),
    ('{"kind": "awaits_person", "config_id": "a", "case_id": "b"}', "a row of kind awaits_person needs criteria"),
    ('{"kind": "invalid_citation", "config_id": "a", "case_id": "b", "cited": [], "problem": "p"}',
     "a row of kind invalid_citation needs cited"),
    ('{"kind": "unsupported_claim", "config_id": "a", "case_id": "b", "claim": 3, "cited": [], "supported_by": []}',
     "triage.jsonl:1: claim: Input should be a valid string"),
    (('{"kind": "unsupported_claim", "config_id": "a", "case_id": "b", "claim": "c", "cited": [], "supported_by": [],'
     ' "support_probability": Infinity}'), "triage.jsonl:1: Infinity: not a finite number"),
]


@pytest.mark.parametrize(("text", "fragment"), TRIAGE_ROWS, ids=[f[1][-30:] for f in TRIAGE_ROWS])
def test_triage_reads_a_broken_triage_file_as_one_clear_problem(tmp_path, text, fragment):
    (tmp_path / "triage.jsonl").write_text(text + "\n", encoding="utf-8")
    _one_line_exit_2(CliRunner().invoke(main, ["triage", str(tmp_path)]), fragment)


def test_triage_shows_a_minimal_valid_row(tmp_path):
    (tmp_path / "triage.jsonl").write_text(
        '{"kind": "unsupported_claim", "config_id": "a", "case_id": "b", "claim": "c", "cited": [], '
        '"supported_by": []}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["triage", str(tmp_path)])
    assert result.exit_code == 0 and "**unsupported claim**: “c” — cited nothing" in result.stdout


# --- settings from flags and the environment ----------------------------------------------------

@pytest.mark.parametrize(("args", "fragment"), [
    (["--concurrency", "1000"], "command line: judge.concurrency: Input should be less than or equal to 256"),
    (["--judge-base-url", "http://kim:s3cret@[::1/v1"], "command line: judge.base_url: Value error, not an http"),
    (["--judge-base-url", "ftp://host/v1"], "command line: judge.base_url: Value error, not an http"),
    (["--judge-base-url", "http://host:99999/v1"], "command line: judge.base_url: Value error, not an http"),
])
def test_a_flag_the_settings_refuse_is_one_clear_problem(tmp_path, args, fragment):
    result = CliRunner().invoke(main, ["run", "--golden", str(EXAMPLES / "golden.jsonl"), "--traces",
                                       str(EXAMPLES / "traces" / "candidate.jsonl"), "--judge-model", "m",
                                       "--out", str(tmp_path / "out"), *args])
    _one_line_exit_2(result, fragment)
    assert "s3cret" not in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "fragment"), [
    ("a = " + "[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
    ("[metrics]\nks = [0]\n", "metrics.ks: every k is a rank cut-off and must be at least 1; got 0"),
    (None, "is a folder, expected a TOML config file"),
])
def test_a_config_file_that_cannot_be_used_is_one_clear_problem(tmp_path, text, fragment):
    config = tmp_path / "groundjudge.toml"
    if text is None:
        config.mkdir()
    else:
        config.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--config", str(config), "--golden", str(EXAMPLES / "golden.jsonl"),
                                       "--traces", str(EXAMPLES / "traces" / "candidate.jsonl"),
                                       "--out", str(tmp_path / "out")])
    _one_line_exit_2(result, f"{config}: {fragment}")


@pytest.mark.parametrize(("verdict", "fragment"), [
    ('{"query_id": "q001", "faithful": "yes"}', ('verdicts.jsonl:1: faithful: "yes" is not a label of faithful: one of '
                                                '[true, false], or null for none')),
    ('{"query_id": "q001", "correct": 7}', "verdicts.jsonl:1: correct: 7 is not a label of correct: one of [0, 1, 2, 3]"),
    ('{"query_id": "q001", "correct": true}', "verdicts.jsonl:1: correct: true is not a label of correct"),
    ('{"query_id": "q001", "correct": [1]}', "verdicts.jsonl:1: correct: [1] is not a label of correct"),
    ('{"query_id": "q001", "faithful": {"a": 1}}', 'verdicts.jsonl:1: faithful: {"a": 1} is not a label of faithful'),
])
def test_another_judges_verdicts_must_be_labels_of_the_rubric(tmp_path, verdict, fragment):
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text(verdict + "\n", encoding="utf-8")
    labels = tmp_path / "kim.jsonl"
    labels.write_text('{"query_id": "q001", "rater": "kim", "faithful": true, "correct": 2}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--verdicts", str(verdicts), "--judge-name", "other",
                                       "--labels", str(labels), "--records-dir", str(tmp_path / "records")])
    _one_line_exit_2(result, fragment)
    assert not (tmp_path / "records").exists()
