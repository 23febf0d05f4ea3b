"""Malformed inputs: each gives one clear `file:line: field: problem` message and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
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
    from groundjudge.load.records import read_records
    from groundjudge.contracts import GoldenCase

    records = read_records(golden, GoldenCase)
    assert [(line, case.id) for line, case in records] == [(1, "a"), (2, "b")]
    assert records[0][1].question == "first\u2028second\u0085third\u2029end"
    golden.write_text('{"id": "a", "question": "x\u2028y"}\n{"id": "b", "question": 3}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--golden", str(golden), "--traces", str(OK_TRACES),
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "g.jsonl:2: question:" in result.stderr
