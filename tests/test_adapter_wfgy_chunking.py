"""WFGY chunking files as the WFGY page writes them: the gold set named ``gold.json`` (a JSON
array), gold rows and traces pretty-printed over several lines ("Gold rows should look like",
"Logging schema for evaluation"), and JSON Lines; every problem names file, line and field."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.errors import InputError
from groundjudge.load.adapters import detect_format, load_any
from groundjudge.load.adapters.wfgy_chunking import read_gold, read_traces

# The page's gold row and trace, line for line as it prints them.
PAGE_GOLD_ROW = """{
"qid": "Q-0137",
"paraphrases": [
"How does SCU unlock safety refusals?",
"Explain symbolic constraint unlock.",
"SCU: what is it and when to use?"
],
"relevant": ["S.4.2.p.Bk011a", "S.4.2.p.Bk011b"],
"anchor_section": "S.4.2",
"negatives": ["S.4.1.p.Bk010", "S.4.3.p.Bk014"]
}"""

PAGE_TRACE = """{
"qid": "Q-0137",
"query": "Explain symbolic constraint unlock.",
"topk": [
{"id": "S.4.2.p.Bk011a", "score": 0.83, "offsets": [204611,205279], "type": "prose"},
{"id": "S.4.1.p.Bk010", "score": 0.79, "offsets": [198002,199112], "type": "prose"}
],
"ΔS": [0.31, 0.59],
"λ_state": "→",
"anchor": "S.4.2",
"index_hash": "faiss:v3:hnsw:cos",
"ts": "2025-08-27T12:30:22Z"
}"""

# A second question in the page's shape (a code block), so files hold more than one record.
SECOND_ROW = """{
"qid": "Q-0138",
"paraphrases": [
"Which function retries a failed upload?",
"Where is the upload retry implemented?",
"Upload retry: which code?"
],
"relevant": ["S.3.4.p.Bk021"],
"anchor_section": "S.3.4",
"negatives": ["S.3.3.p.Bk019"]
}"""

SECOND_TRACE = """{
"qid": "Q-0138",
"query": "Where is the upload retry implemented?",
"topk": [
{"id": "S.3.4.p.Bk021", "score": 0.91, "offsets": [50800,50980], "type": "code"}
],
"ΔS": [0.22],
"λ_state": "→",
"answer_citations": [{"id": "S.3.4.p.Bk021", "offsets": [50800,50980]}]
}"""


def as_jsonl(*records: str) -> str:
    return "".join(json.dumps(json.loads(r), ensure_ascii=False) + "\n" for r in records)


@pytest.fixture
def page_files(tmp_path):
    gold = tmp_path / "gold.json"
    gold.write_text("[\n" + PAGE_GOLD_ROW + ",\n" + SECOND_ROW + "\n]\n", encoding="utf-8")
    logs = tmp_path / "logs.jsonl"
    logs.write_text(PAGE_TRACE + "\n" + SECOND_TRACE + "\n", encoding="utf-8")
    return gold, logs


def test_the_gold_json_array_and_pretty_printed_traces_read_as_json_lines_do(page_files, tmp_path):
    gold, logs = page_files
    rows = read_gold(gold)
    traces = read_traces(logs)
    assert [(line, g.qid) for line, g in rows] == [(2, "Q-0137"), (13, "Q-0138")]  # the line each record starts on
    assert [(line, t.qid) for line, t in traces] == [(1, "Q-0137"), (14, "Q-0138")]
    assert rows[0][1].paraphrases[1] == "Explain symbolic constraint unlock."
    assert traces[0][1].delta_s == [0.31, 0.59] and traces[0][1].lambda_state == "→"
    assert traces[0][1].model_extra["index_hash"] == "faiss:v3:hnsw:cos"  # unknown fields kept
    (tmp_path / "gold.jsonl").write_text(as_jsonl(PAGE_GOLD_ROW, SECOND_ROW), encoding="utf-8")
    (tmp_path / "logs2.jsonl").write_text(as_jsonl(PAGE_TRACE, SECOND_TRACE), encoding="utf-8")
    assert [g for _, g in read_gold(tmp_path / "gold.jsonl")] == [g for _, g in rows]
    assert [t for _, t in read_traces(tmp_path / "logs2.jsonl")] == [t for _, t in traces]


def test_pretty_printed_gold_rows_one_after_another_and_a_one_line_array(tmp_path):
    stream = tmp_path / "gold_rows.json"
    stream.write_text(PAGE_GOLD_ROW + "\n" + SECOND_ROW + "\n", encoding="utf-8")
    assert [(line, g.qid) for line, g in read_gold(stream)] == [(1, "Q-0137"), (12, "Q-0138")]
    one_line = tmp_path / "gold_one_line.json"
    one_line.write_text(json.dumps([json.loads(PAGE_GOLD_ROW), json.loads(SECOND_ROW)]), encoding="utf-8")
    assert [(line, g.qid) for line, g in read_gold(one_line)] == [(1, "Q-0137"), (1, "Q-0138")]


def test_the_format_is_detected_and_converted_from_these_layouts(page_files):
    gold, logs = page_files
    assert detect_format(gold, [logs]) == "wfgy-chunking"
    dataset, fmt = load_any(gold, [logs])
    assert fmt == "wfgy-chunking"
    assert sorted(dataset.cases) == ["Q-0137", "Q-0138"]
    assert dataset.cases["Q-0137"].question == "How does SCU unlock safety refusals?"


def problems(path, read):
    with pytest.raises(InputError) as caught:
        read(path)
    return [str(p) for p in caught.value.problems]


def test_a_bad_field_in_a_pretty_printed_record_names_its_own_line(tmp_path):
    gold = tmp_path / "gold.json"
    gold.write_text("[\n" + PAGE_GOLD_ROW.replace('"relevant": [', '"relevant": "S.4.2.p.Bk011a", "x": [') + ",\n"
                    + SECOND_ROW.replace('"paraphrases": [', '"paraphrases": [],\n"y": [') + "\n]\n", encoding="utf-8")
    assert problems(gold, read_gold) == [f"{gold}:9: relevant: Input should be a valid list",
                                         (f"{gold}:15: paraphrases: List should have at least 1 item after "
                                         f"validation, not 0")]
    logs = tmp_path / "logs.jsonl"
    logs.write_text(PAGE_TRACE.replace('"type": "prose"}\n]', '"type": "poem"}\n]') + "\n"
                    + SECOND_TRACE.replace("[0.22]", "[0.22, 0.5]").replace("0.91", "NaN") + "\n", encoding="utf-8")
    assert problems(logs, read_traces) == [
        f"{logs}:6: topk[1].type: Input should be 'prose', 'code', 'table' or 'figure'",
        (f"{logs}:18: topk[0].score: not a finite number (NaN, Infinity, or beyond the range of a double): "
        "write a number, or null for no value"),
    ]
    logs.write_text(SECOND_TRACE.replace("[0.22]", "[0.22, 0.5]"), encoding="utf-8")
    assert problems(logs, read_traces) == [(f"{logs}:7: ΔS: Value error, has 2 values for 1 topk items; give one "
                                           "distance per topk item, in the same order")]


def test_a_repeated_qid_names_the_line_of_its_record(tmp_path):
    gold = tmp_path / "gold.json"
    gold.write_text("[\n" + PAGE_GOLD_ROW + ",\n" + PAGE_GOLD_ROW + "\n]\n", encoding="utf-8")
    assert problems(gold, read_gold) == [f"{gold}:13: qid: duplicate qid 'Q-0137' (first on line 2)"]


def test_a_syntax_error_in_a_pretty_printed_file_is_one_line_with_its_place(tmp_path):
    gold = tmp_path / "gold.json"
    gold.write_text("[\n" + PAGE_GOLD_ROW.replace('"anchor_section": "S.4.2",', '"anchor_section": "S.4.2"') + "\n]\n",
                    encoding="utf-8")
    [line] = problems(gold, read_gold)
    assert line.startswith(f"{gold}:11: invalid JSON: Expecting ',' delimiter (column 1, in the record from line 2)")


def test_json_lines_still_report_every_bad_line(tmp_path):
    gold = tmp_path / "gold.jsonl"
    good = json.dumps(json.loads(PAGE_GOLD_ROW))
    gold.write_text(good + "\n{broken\n" + good.replace("Q-0137", "Q-2") + "\n[1]\n", encoding="utf-8")
    found = problems(gold, read_gold)
    assert [p.split(": ")[0] for p in found] == [f"{gold}:2", f"{gold}:4"]


def test_the_profile_runs_on_the_page_files_from_the_command_line(page_files, tmp_path):
    gold, logs = page_files
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(gold),
                                       "--traces", str(logs), "--out", str(out), "--quiet"])
    assert result.exit_code == 1, result.output  # coverage 0.5 < 0.70: not eligible (no input error)
    own = json.loads((out / "profile-wfgy-chunking.json").read_text(encoding="utf-8"))
    assert own["n_questions"] == 2 and own["n_runs"] == 2 and own["coverage"] == 0.5
    doc = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["format"] == "wfgy-chunking"


def test_a_bad_pretty_printed_file_is_exit_2_with_file_line_and_field(page_files, tmp_path):
    gold, logs = page_files
    logs.write_text(PAGE_TRACE.replace('"offsets": [198002,199112]', '"offsets": [199112,198002]'), encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(gold),
                                       "--traces", str(logs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert f"{logs}:6: topk[1].offsets" in result.stderr
    assert not (tmp_path / "out").exists()
