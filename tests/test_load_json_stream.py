"""Records laid out as JSON Lines, a JSON array, or pretty-printed objects one after another:
each keeps the line it starts on, a field's line can be found, and a syntax error is one problem
with its place."""

from __future__ import annotations

import json

import pytest

from groundjudge.load.json_stream import LocatedValue, ValueProblem, first_object, layout, located_values, split_path

PRETTY = """{
"qid": "Q-1",
"relevant": [
"S.1.p.B1",
"S.1.p.B2"
]
}

{
"qid": "Q-2",
"topk": [
{"id": "a", "score": 0.5},
{"id": "b", "score": 0.4}
]
}
"""


def test_layout_is_read_from_the_start_of_the_text():
    assert layout('{"a": 1}\n{"a": 2}\n') == "jsonl"
    assert layout('\n\n  {"a": 1}\n') == "jsonl"
    assert layout('[{"a": 1}]') == "array"
    assert layout('  \n[\n{"a": 1}\n]\n') == "array"
    assert layout(PRETTY) == "stream"
    assert layout('{"a": 1,\n"b": 2}\n') == "stream"


def test_a_stream_of_pretty_printed_objects_keeps_each_start_line():
    items = list(located_values(PRETTY))
    assert [(i.line, i.value["qid"]) for i in items] == [(1, "Q-1"), (9, "Q-2")]
    assert all(isinstance(i, LocatedValue) for i in items)


def test_an_array_keeps_each_element_start_line():
    text = '[\n  {"qid": "A"},\n  {\n    "qid": "B"\n  }\n]\n'
    assert [(i.line, i.value) for i in located_values(text)] == [(2, {"qid": "A"}), (3, {"qid": "B"})]
    assert list(located_values("[ ]")) == []


def test_json_lines_read_as_a_stream_give_the_same_records():
    text = '{"a": 1}\n{"a": 2}\n'
    assert [(i.line, i.value) for i in located_values(text)] == [(1, {"a": 1}), (2, {"a": 2})]


@pytest.mark.parametrize("loc, line", [
    (("qid",), 10), (("topk",), 11), (("topk", 1), 13), (("topk", 1, "score"), 13), (("missing",), 9),
    (("topk", 7), 11), (("qid", 0), 10),
])
def test_a_field_is_found_on_its_own_line(loc, line):
    second = list(located_values(PRETTY))[1]
    assert second.line_of(loc) == line


@pytest.mark.parametrize("text, line, words", [
    ('{\n"qid": "A"\n"x": 1\n}\n', 3, ["Expecting ',' delimiter", "in the record from line 1"]),
    ('[\n{"qid": "A"},\n]\n', 3, ["Expecting value"]),
    ('[\n{"qid": "A"}\n{"qid": "B"}\n]\n', 3, ["expected ',' or ']'"]),
    ('[\n{"qid": "A"},\n', 2, ["ends inside the array"]),
    ('[{"qid": "A"}]\n{"qid": "B"}\n', 2, ["after the array's closing"]),
])
def test_a_syntax_error_is_one_problem_with_its_line_and_ends_the_reading(text, line, words):
    items = list(located_values(text))
    problem = items[-1]
    assert isinstance(problem, ValueProblem) and problem.line == line
    assert all(w in problem.message for w in words), problem.message
    assert not any(isinstance(i, ValueProblem) for i in items[:-1])


def test_first_object_in_each_layout():
    assert first_object('{"a": 1}\n{"a": 2}\n') == {"a": 1}
    assert first_object('[\n{"a": 1},\n{"a": 2}\n]') == {"a": 1}
    assert first_object(PRETTY)["qid"] == "Q-1"
    assert first_object("[1, 2]") is None and first_object('{"a": \n') is None and first_object("[]") is None


def test_split_path_reads_the_non_finite_field_names():
    assert split_path("topk[2].score") == ("topk", 2, "score")
    assert split_path("ΔS[0]") == ("ΔS", 0)
    assert split_path("score") == ("score",)


def test_every_value_of_a_round_trip_is_kept():
    records = [{"qid": f"Q{i}", "nested": {"list": [i, {"x": None}], "s": "a\nb ] , {"}} for i in range(5)]
    for text in (json.dumps(records, indent=2), "\n".join(json.dumps(r, indent=4) for r in records),
                 json.dumps(records)):
        assert [i.value for i in located_values(text)] == records
