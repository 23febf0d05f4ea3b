"""The scaffolding the adapters share: nulls as defaults, unique ids with file:line messages,
unknown fields kept on collision, native traces validated against the foreign line."""

from __future__ import annotations

import pytest
from pydantic import Field, ValidationError

from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters.foreign import (
    ForeignRecord,
    config_ids_for,
    merge_extras,
    native_trace,
    null_as_default,
    read_unique,
)


class Line(ForeignRecord):
    id: str
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, int] = Field(default_factory=dict)
    level: str = "unknown"
    must: list[str]

    _nulls = null_as_default("tags", "meta", "level", "must")


def test_null_means_the_field_default_and_unknown_fields_are_kept():
    line = Line.model_validate({"id": "a", "tags": None, "meta": None, "level": None, "must": [], "extra": 1})
    assert (line.tags, line.meta, line.level, line.model_extra) == ([], {}, "unknown", {"extra": 1})


def test_null_in_a_required_field_is_still_an_error():
    with pytest.raises(ValidationError, match="must"):
        Line.model_validate({"id": "a", "must": None})


def test_read_unique_names_every_repeat_and_every_checked_problem(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"id": "a", "must": []}\n{"id": "b", "must": ["x"]}\n{"id": "a", "must": []}\n')
    with pytest.raises(InputError) as error:
        read_unique(path, Line, "id", "case id",
                    check=lambda line, n: [InputProblem(str(path), n, "must", "not allowed here")] if line.must else [])
    assert [str(p) for p in error.value.problems] == [
        f"{path}:3: id: duplicate case id 'a' (first on line 1)",
        f"{path}:2: must: not allowed here",
    ]
    path.write_text('{"id": "a", "must": []}\n{"id": "b", "must": []}\n')
    by_id, lines = read_unique(path, Line, "id", "case id")
    assert list(by_id) == ["a", "b"] and lines == {"a": 1, "b": 2}


def test_merge_extras_renames_a_colliding_unknown_field_instead_of_losing_it():
    assert merge_extras({"question": "mapped"}, {"question": "theirs", "queue": "q"}, "sys_") == {
        "question": "mapped", "sys_question": "theirs", "queue": "q"}


def test_native_trace_reports_the_foreign_file_and_line(tmp_path):
    problems: list = []
    assert native_trace({"query_id": "a", "config_id": "c"}, tmp_path / "t.jsonl", 7, problems) is not None
    assert native_trace({"query_id": "a", "config_id": "c", "cost_usd": -1}, tmp_path / "t.jsonl", 8, problems) is None
    assert [(p.line, p.field) for p in problems] == [(8, "cost_usd")]


def test_config_ids_are_stems_qualified_by_folder_when_they_collide():
    assert config_ids_for(["a/run.jsonl", "b/run.jsonl", "c/other.jsonl"]) == ["a/run", "b/run", "other"]
