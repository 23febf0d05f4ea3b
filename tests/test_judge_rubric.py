"""Rubrics: strict loading, the lock file, and a content hash that ignores YAML layout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from groundjudge.errors import InputError
from groundjudge.judge.rubric import LOCK_NAME, load_rubric, lock_rubrics, parse_rubric_file, read_lock

ROOT = Path(__file__).resolve().parent.parent
RUBRICS = ROOT / "rubrics"
V1 = RUBRICS / "grounded_answer" / "v1.yaml"


@pytest.fixture
def rubrics(tmp_path: Path) -> Path:
    """A private copy of the published rubrics, safe to edit."""
    return Path(shutil.copytree(RUBRICS, tmp_path / "rubrics"))


def _edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _problems(exc: pytest.ExceptionInfo[InputError]) -> str:
    return "\n".join(str(p) for p in exc.value.problems)


def test_published_default_rubric_loads_and_matches_the_lock() -> None:
    rubric = load_rubric(RUBRICS, "grounded_answer")
    assert (rubric.id, rubric.version, rubric.key) == ("grounded_answer", 1, "grounded_answer/v1")
    assert read_lock(RUBRICS)["grounded_answer/v1"] == rubric.content_hash
    assert len(rubric.content_hash) == 64
    assert [c.name for c in rubric.criteria] == ["faithful", "correct", "citations_supported"]
    verdicts = rubric.output_schema["properties"]["claims"]["items"]["properties"]["verdict"]["enum"]
    assert verdicts == ["supported", "partially_supported", "unsupported", "contradicted"]


def test_unknown_key_is_an_error_naming_the_file_and_the_key(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    _edit(path, temperature=0.7)
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    text = _problems(exc)
    assert str(path) in text and "temperature" in text and "unknown key" in text


def test_unknown_template_variable_is_an_error(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    _edit(path, user_template=data["user_template"] + "\nUSER: {{ user_name }}\n")
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    text = _problems(exc)
    assert str(path) in text and "user_name" in text


def test_user_template_must_show_question_contexts_and_answer(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    _edit(path, user_template="QUESTION: {{ question }}\nANSWER: {{ answer }}\n")
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    assert "contexts" in _problems(exc)


def test_system_prompt_with_a_variable_is_an_error(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    _edit(path, system_prompt=data["system_prompt"] + "The question is {{ question }}.\n")
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    text = _problems(exc)
    assert str(path) in text and "system_prompt" in text


def test_repair_prompt_may_only_use_problem(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    _edit(path, repair_prompt="Wrong: {{ problem }} for {{ answer }}")
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    assert "repair_prompt" in _problems(exc)


def test_file_name_must_match_declared_id_and_version(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    _edit(path, version=2)
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    assert "declares grounded_answer/v2" in _problems(exc)


def test_invalid_yaml_names_the_file_and_line(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    path.write_text("id: grounded_answer\nversion: [1\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        parse_rubric_file(path)
    problem = exc.value.problems[0]
    assert problem.file == str(path) and problem.line is not None and "invalid YAML" in problem.problem


def test_edited_published_version_is_an_error_naming_the_file(rubrics: Path) -> None:
    path = rubrics / "grounded_answer" / "v1.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    _edit(path, system_prompt=data["system_prompt"].replace("strict grader", "lenient grader"))
    with pytest.raises(InputError) as exc:
        load_rubric(rubrics, "grounded_answer")
    text = _problems(exc)
    assert str(path) in text and "was edited" in text and "new version" in text


def test_unpublished_version_is_refused_until_locked(rubrics: Path) -> None:
    v1 = rubrics / "grounded_answer" / "v1.yaml"
    v2 = rubrics / "grounded_answer" / "v2.yaml"
    shutil.copy(v1, v2)
    data = yaml.safe_load(v1.read_text(encoding="utf-8"))
    _edit(v2, version=2, description=data["description"] + " (v2)")
    with pytest.raises(InputError) as exc:
        load_rubric(rubrics, "grounded_answer")  # the newest version by default
    assert "not published" in _problems(exc) and str(v2) in _problems(exc)
    # v1 can still be asked for by version
    assert load_rubric(rubrics, "grounded_answer", 1).version == 1

    lock, added = lock_rubrics(rubrics)
    assert added == ["grounded_answer/v2"]
    v2_rubric = load_rubric(rubrics, "grounded_answer")
    assert v2_rubric.version == 2
    assert lock["grounded_answer/v2"] == v2_rubric.content_hash
    assert lock["grounded_answer/v1"] == read_lock(RUBRICS)["grounded_answer/v1"]  # v1 untouched
    assert json.loads((rubrics / LOCK_NAME).read_text())["rubrics"] == lock
    # locking again pins nothing new
    assert lock_rubrics(rubrics)[1] == []


def test_lock_refuses_an_edited_published_version_and_writes_nothing(rubrics: Path) -> None:
    v1 = rubrics / "grounded_answer" / "v1.yaml"
    before = (rubrics / LOCK_NAME).read_bytes()
    data = yaml.safe_load(v1.read_text(encoding="utf-8"))
    _edit(v1, description=data["description"] + " Edited.")
    with pytest.raises(InputError) as exc:
        lock_rubrics(rubrics)
    assert str(v1) in _problems(exc) and "edited" in _problems(exc)
    assert (rubrics / LOCK_NAME).read_bytes() == before


def test_missing_rubric_is_an_input_error(rubrics: Path) -> None:
    with pytest.raises(InputError) as exc:
        load_rubric(rubrics, "no_such_rubric")
    assert "no rubric no_such_rubric" in _problems(exc)
    with pytest.raises(InputError):
        load_rubric(rubrics, "grounded_answer", 7)


def test_content_hash_is_stable_under_comments_and_layout(rubrics: Path) -> None:
    original = parse_rubric_file(V1)
    path = rubrics / "grounded_answer" / "v1.yaml"
    data = yaml.safe_load(V1.read_text(encoding="utf-8"))
    # Same meaning, different text: flow style, other key order, comments.
    relaid = "# a new comment at the top\n" + yaml.safe_dump(
        dict(reversed(list(data.items()))), default_flow_style=True, width=1000, allow_unicode=True
    ) + "# and one at the end\n"
    assert relaid != V1.read_text(encoding="utf-8")
    path.write_text(relaid, encoding="utf-8")
    assert parse_rubric_file(path).content_hash == original.content_hash
    # ...and it still passes the lock check
    assert load_rubric(rubrics, "grounded_answer").content_hash == original.content_hash

    # one changed character of meaning changes the hash
    data["repair_prompt"] = data["repair_prompt"].replace("JSON only", "JSON only!")
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert parse_rubric_file(path).content_hash != original.content_hash


def test_rendering_with_a_missing_value_fails_loudly() -> None:
    rubric = load_rubric(RUBRICS, "grounded_answer")
    with pytest.raises(Exception, match="contexts"):
        rubric.render_user(question="q", answer="a", expected_answer="e", citations=[])


# --- rubric names and files that cannot be used: one clear line -----------------------------------

def test_a_rubric_id_is_a_name_never_a_path_or_a_pattern(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from groundjudge.cli import main

    for rubric_id in ("../../etc", "*", "claim_check/../grounded_answer"):
        result = CliRunner().invoke(main, ["rubrics", "show", rubric_id])
        assert result.exit_code == 2 and f"{rubric_id!r} is not a rubric id" in result.stderr, result.output


def test_a_rubric_or_lock_file_that_cannot_be_read_is_one_clear_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from groundjudge.cli import main

    folder = tmp_path / "rubrics"
    (folder / "deep").mkdir(parents=True)
    (folder / "deep" / "v1.yaml").write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    result = CliRunner().invoke(main, ["rubrics", "list", "--dir", str(folder)])
    assert result.exit_code == 2 and f"{folder / 'deep' / 'v1.yaml'}: nested too deeply to read" in result.stderr
    (folder / "deep" / "v1.yaml").unlink()
    (folder / "rubrics.lock").write_text("[1]\n")
    result = CliRunner().invoke(main, ["rubrics", "list", "--dir", str(folder)])
    assert result.exit_code == 2 and "rubrics.lock: rubrics: expected an object" in result.stderr, result.output
