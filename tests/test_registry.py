"""One registry for the systems groundjudge replaces: a fifth system (tests/support/toy_system.py)
is one module plus its registration, and the command line, the config and detection follow;
unknown format names are refused with the known ones listed; ``[inputs] format`` is a name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.config import load_config
from groundjudge.errors import InputError
from groundjudge.load.adapters import (
    InputFormat,
    detect_format,
    format_choices,
    load_any,
    register_format,
    unregister_format,
)
from groundjudge.profiles import Profile, profile_names, register_profile
from tests.conftest import FIXTURES, ROOT
from tests.support import toy_system

TOY = FIXTURES / "toy"
BUILT_IN = ("wfgy", "wfgy-chunking", "kb-eval", "day39", "otel")
BUILT_IN_PROFILES = ("wfgy", "wfgy-chunking", "kb-eval", "day39")  # a trace export has no report of its own


@pytest.fixture
def toy():
    toy_system.register()
    yield toy_system
    toy_system.unregister()


def metrics(*args: str | Path):
    return CliRunner().invoke(main, ["metrics", *map(str, args), "--quiet"])


def test_no_source_file_names_the_toy_system():
    mentions = [str(p) for p in (ROOT / "src").rglob("*.py") if re.search(r"\btoy\b", p.read_text(), re.IGNORECASE)]
    assert mentions == []


def test_toy_files_are_detected_and_loaded(toy, tmp_path):
    gold, good = TOY / "gold.jsonl", TOY / "replies_good.jsonl"
    assert detect_format(gold, [good]) == "toy"
    result = metrics("--golden", gold, "--traces", good, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["inputs"]["format"] == "toy" and doc["configs"] == ["replies_good"]
    # first looks: T-1 kb-12 (hit), T-2 kb-41 (hit), T-3 kb-9 (miss); T-4 expects no article
    assert doc["per_config"]["replies_good"]["aggregate"]["hit@1"] == {"value": 2 / 3, "n": 3}
    dataset, fmt = load_any(gold, [good])
    assert fmt == "toy" and set(dataset.cases) == {"T-1", "T-2", "T-3", "T-4"}
    assert dataset.cases["T-1"].model_extra["queue"] == "accounts"  # unknown fields travel through


def test_format_and_profile_flags_accept_the_toy_and_its_gate_sets_the_exit_code(toy, tmp_path):
    gold = TOY / "gold.jsonl"
    good = metrics("--format", "toy", "--profile", "toy", "--golden", gold, "--traces", TOY / "replies_good.jsonl",
                   "--out", tmp_path / "good")
    bad = metrics("--format", "toy", "--profile", "toy", "--golden", gold, "--traces", TOY / "replies_bad.jsonl",
                  "--out", tmp_path / "bad")
    assert (good.exit_code, bad.exit_code) == (0, 1), good.output + bad.output
    own_good = json.loads((tmp_path / "good" / "profile-toy.json").read_text())
    own_bad = json.loads((tmp_path / "bad" / "profile-toy.json").read_text())
    assert own_good == {"first_look": 2 / 3, "n": 3, "min_first_look": 0.6, "pass": True}
    assert own_bad == {"first_look": 1 / 3, "n": 3, "min_first_look": 0.6, "pass": False}
    assert "## Profile `toy`" in (tmp_path / "bad" / "report.md").read_text()


def test_help_lists_registered_systems_as_choices(toy):
    text = CliRunner().invoke(main, ["metrics", "--help"]).output
    assert "[auto|native|wfgy|wfgy-chunking|kb-eval|day39|otel|toy]" in text
    assert "[wfgy|wfgy-chunking|kb-eval|day39|toy]" in text


def test_unregistered_system_is_no_longer_a_choice(tmp_path):
    toy_system.register()
    toy_system.unregister()
    assert "toy" not in format_choices() and "toy" not in profile_names()
    result = metrics("--format", "toy", "--golden", TOY / "gold.jsonl", "--traces", TOY / "replies_good.jsonl",
                     "--out", tmp_path)
    assert result.exit_code == 2


def test_unknown_format_flag_names_the_known_ones(toy, tmp_path):
    result = metrics("--format", "nope", "--golden", TOY / "gold.jsonl", "--traces", TOY / "replies_good.jsonl",
                     "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "'nope' is not one of 'auto', 'native', 'wfgy', 'wfgy-chunking', 'kb-eval', 'day39', 'otel', 'toy'" in result.output
    assert not (tmp_path / "out").exists()


def test_unknown_profile_flag_names_the_known_ones(tmp_path):
    result = metrics("--profile", "nope", "--golden", TOY / "gold.jsonl", "--traces", TOY / "replies_good.jsonl",
                     "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "'nope' is not one of 'wfgy', 'wfgy-chunking', 'kb-eval', 'day39'" in result.output


def write_config(folder: Path, fmt: str) -> Path:
    path = folder / "groundjudge.toml"
    path.write_text(f'[inputs]\ngolden = "gold.jsonl"\ntraces = ["replies_good.jsonl"]\nformat = "{fmt}"\n')
    for name in ("gold.jsonl", "replies_good.jsonl"):
        (folder / name).write_text((TOY / name).read_text())
    return path


def test_unknown_format_in_config_names_the_known_ones(tmp_path):
    path = write_config(tmp_path, "nope")
    with pytest.raises(InputError) as error:
        load_config(path)
    [problem] = error.value.problems
    assert (problem.file, problem.field) == (str(path), "inputs.format")
    assert f"unknown format 'nope'; known: auto, native, {', '.join(BUILT_IN)}" in problem.problem
    result = CliRunner().invoke(main, ["metrics", "--config", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "inputs.format" in result.stderr and "known: auto, native, wfgy" in result.stderr


def test_config_format_is_a_name_not_a_path(tmp_path):
    path = write_config(tmp_path, "native")
    config = load_config(path)
    assert config.inputs.format == "native"  # was resolved against the config's folder
    assert config.inputs.golden == tmp_path / "gold.jsonl"  # paths still are
    assert config.inputs.traces == [tmp_path / "replies_good.jsonl"]


def test_config_can_name_a_registered_system(toy, tmp_path):
    path = write_config(tmp_path, "toy")
    assert load_config(path).inputs.format == "toy"
    result = CliRunner().invoke(main, ["metrics", "--config", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["inputs"]["format"] == "toy"


def test_load_any_refuses_an_unknown_format_naming_the_known_ones():
    with pytest.raises(InputError, match=r"unknown format 'nope'; known: auto, native, wfgy, wfgy-chunking"):
        load_any(TOY / "gold.jsonl", [TOY / "replies_good.jsonl"], fmt="nope")


def test_two_formats_claiming_one_file_is_an_error_not_a_guess(toy):
    greedy = InputFormat("greedy", lambda first, role: "ticket" in first, toy_system.to_native)
    register_format(greedy)
    try:
        with pytest.raises(InputError, match=r"gold.jsonl:1: format: .*several formats \(toy, greedy\).*--format"):
            detect_format(TOY / "gold.jsonl", [TOY / "replies_good.jsonl"])
    finally:
        unregister_format("greedy")


@pytest.mark.parametrize("name", ["auto", "native", "wfgy", "Toy", "toy system", ""])
def test_registry_refuses_taken_reserved_and_malformed_names(name):
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        register_format(InputFormat(name, toy_system.looks_like, toy_system.to_native))
    assert format_choices()[:2] == ("auto", "native") and format_choices()[2:] == BUILT_IN


def test_a_profile_needs_a_registered_format_and_only_one_per_format(toy):
    with pytest.raises(ValueError, match="no input format named 'ticketing'"):
        register_profile(Profile("ticketing", toy_system.from_files))
    with pytest.raises(ValueError, match="'toy' already has a profile"):
        register_profile(Profile("toy", toy_system.from_files))


# --- a profile's knobs: one settings model gives a [profile.<name>] table and flags --------------

def toy_config(folder: Path, table: str = "", replies: str = "replies_good.jsonl") -> Path:
    path = folder / "groundjudge.toml"
    path.write_text(f'[inputs]\ngolden = "{TOY / "gold.jsonl"}"\ntraces = ["{TOY / replies}"]\n' + table)
    return path


def own_report(out: Path) -> dict:
    return json.loads((out / "profile-toy.json").read_text())


def test_a_knob_is_set_by_its_flag_and_by_a_profile_table_and_the_flag_wins(toy, tmp_path):
    # replies_good: first_look 2/3, above the default bound 0.6
    assert metrics("--config", toy_config(tmp_path), "--profile", "toy", "--out", tmp_path / "a").exit_code == 0
    by_flag = metrics("--config", toy_config(tmp_path), "--profile", "toy", "--min-first-look", "0.7",
                      "--out", tmp_path / "b")
    assert by_flag.exit_code == 1 and own_report(tmp_path / "b")["min_first_look"] == 0.7
    config = toy_config(tmp_path, "[profile.toy]\nmin_first_look = 0.7\n")
    assert metrics("--config", config, "--profile", "toy", "--out", tmp_path / "c").exit_code == 1
    assert own_report(tmp_path / "c")["min_first_look"] == 0.7
    assert metrics("--config", config, "--profile", "toy", "--min-first-look", "0.5", "--out", tmp_path / "d"
                   ).exit_code == 0
    assert own_report(tmp_path / "d")["min_first_look"] == 0.5


@pytest.mark.parametrize("spelling", ["--only_replied", "--only-replied"])
def test_a_bool_knob_is_a_switch_under_each_of_its_spellings(toy, tmp_path, spelling):
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"ticket": "T-1", "looked_at": ["kb-12"], "reply": "Use the reset link."}\n')
    args = ("--format", "toy", "--profile", "toy", "--golden", TOY / "gold.jsonl", "--traces", replies)
    assert metrics(*args, "--out", tmp_path / "all").exit_code == 1  # T-2 and T-3 unreplied: misses, 1/3
    assert own_report(tmp_path / "all")["n"] == 3
    assert metrics(*args, spelling, "--out", tmp_path / "replied").exit_code == 0  # 1/1
    assert own_report(tmp_path / "replied") == {"first_look": 1.0, "n": 1, "min_first_look": 0.6, "pass": True}
    table = metrics("--config", toy_config(tmp_path, "[profile.toy]\nonly_replied = true\n", "replies_good.jsonl"),
                    "--traces", replies, "--profile", "toy", "--out", tmp_path / "table")
    assert table.exit_code == 0 and own_report(tmp_path / "table")["n"] == 1


def test_an_unknown_key_in_a_profile_table_names_the_profile_and_its_settings(toy, tmp_path):
    config = toy_config(tmp_path, "[profile.toy]\nmin_first_lok = 0.7\n")
    result = metrics("--config", config, "--profile", "toy", "--out", tmp_path / "out")
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    assert (f"{config}: profile.toy.min_first_lok: unknown setting of the toy profile (its settings: min_first_look, "
            "only_replied)") in result.stderr


def test_a_table_for_a_profile_that_does_not_exist_is_refused(toy, tmp_path):
    config = toy_config(tmp_path, "[profile.tickets]\nmin_first_look = 0.7\n")
    result = metrics("--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{config}: profile.tickets: unknown profile 'tickets'; known: {', '.join(BUILT_IN_PROFILES)}, toy" in result.stderr


def test_a_bad_knob_value_names_its_flag_or_its_table_key(toy, tmp_path):
    by_flag = metrics("--config", toy_config(tmp_path), "--profile", "toy", "--min-first-look", "2",
                      "--out", tmp_path / "a")
    assert by_flag.exit_code == 2 and "command line: --min-first-look: Input should be less than or equal to 1" \
        in by_flag.stderr
    config = toy_config(tmp_path, "[profile.toy]\nmin_first_look = \"high\"\n")
    by_table = metrics("--config", config, "--profile", "toy", "--out", tmp_path / "b")
    assert by_table.exit_code == 2 and f"{config}: profile.toy.min_first_look: Input should be a valid number" \
        in by_table.stderr


def test_a_knob_flag_needs_its_profile(toy, tmp_path):
    result = metrics("--config", toy_config(tmp_path), "--min-first-look", "0.7", "--out", tmp_path / "a")
    assert result.exit_code == 2
    assert "command line: --min-first-look: a setting of the toy profile: add --profile toy" in result.stderr
    other = metrics("--config", toy_config(tmp_path), "--profile", "kb-eval", "--only-replied", "--out", tmp_path / "b")
    assert other.exit_code == 2 and "--only_replied: a setting of the toy profile" in other.stderr


def test_help_lists_each_knob_with_its_profile(toy):
    for command in ("metrics", "run"):
        text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "--min-first-look TEXT [--profile toy] The gate's lower bound on first_look." in text
        assert "--only_replied, --only-replied [--profile toy] Leave tickets without a reply out" in text


def test_knobs_from_python_are_the_same_settings(toy, tmp_path):
    from groundjudge import api

    config = api.resolve_config(toy_config(tmp_path, "[profile.toy]\nonly_replied = true\n"),
                                {"profile.toy.min_first_look": 0.25})
    settings = api.profile_settings(config, "toy")
    assert (settings.min_first_look, settings.only_replied) == (0.25, True)
    assert api.profile_report(config, "toy").report["min_first_look"] == 0.25
    assert api.profile_settings(api.resolve_config(toy_config(tmp_path)), "toy") == toy_system.ToySettings()


def test_two_profiles_may_share_a_flag_only_spelled_and_used_the_same_way(toy):
    from typing import Annotated

    from pydantic import Field

    from groundjudge.profiles import Flag, ProfileSettings, unregister_profile

    class Clash(ProfileSettings):
        only: Annotated[str, Flag("--only-replied"), Field(description="a value, not a switch")] = ""

    register_format(InputFormat("clash", lambda first, role: False, toy_system.to_native))
    try:
        with pytest.raises(ValueError, match="--only-replied .*'toy' profile's 'only_replied'"):
            register_profile(Profile("clash", toy_system.from_files, Clash))
        assert "clash" not in profile_names()

        class Same(ProfileSettings):
            min_first_look: float = 0.5  # --min-first-look, a value as the toy's: one flag for both

        register_profile(Profile("clash", toy_system.from_files, Same))
        text = " ".join(CliRunner().invoke(main, ["metrics", "--help"]).output.split())
        assert "--min-first-look TEXT [--profile toy] The gate's lower bound on first_look. [--profile clash]" in text
    finally:
        unregister_profile("clash")
        unregister_format("clash")


_FIRST_RECORDS = ['{"id": "q1", "question": "Was ist \u00e4?"}', '{"a": [1, 2]}', '[1, 2]', '"text"', '{"a": ',
                  '{"k": "\U0001f600\U0001f600"}', '{\n  "id": "q1"\n}', '']


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("lead", ["", "\n\n", "  \t\n"])
def test_a_file_is_told_by_its_head_as_by_its_whole_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         bom: bytes, lead: str) -> None:
    """Detection reads a long file's head only where the head decides the first record (its
    line is whole inside it): with heads of every size, what it finds is what reading the
    whole file finds, for JSON Lines, arrays, streams, pretty-printed and unreadable starts,
    and characters cut at the head's end."""
    from groundjudge.load.adapters import registry
    from groundjudge.load.json_stream import first_object
    from groundjudge.load.records import read_text

    for n, first in enumerate(_FIRST_RECORDS):
        path = tmp_path / f"f{n}{len(lead)}{len(bom)}.jsonl"
        path.write_bytes(bom + (lead + first + '\n{"id": "q2"}\n' + '{"id": "\u00fc"}\n' * 3).encode("utf-8"))
        whole = first_object(read_text(path))
        for size in range(1, path.stat().st_size + 2):
            monkeypatch.setattr(registry, "_HEAD_BYTES", size)
            assert registry._first_object(path) == whole, (first, size)


def test_a_file_invalid_past_its_head_is_refused_by_the_loader_with_its_line(tmp_path: Path) -> None:
    """Detection no longer reads a long file whole; bad bytes past its head are still named,
    with their line, when the file is loaded."""
    golden = tmp_path / "golden.jsonl"
    line = json.dumps({"case_id": "c0", "question": "q?", "expected_chunk_ids": ["d#1"]})
    golden.write_bytes(((line + "\n") * 30_000).encode() + b'{"case_id": "\xff"}\n')
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"case_id": "c0", "config_id": "a", "answer": "x", "retrieved_chunks": ["d#1"]}) + "\n")
    from groundjudge.load.adapters import registry

    with pytest.MonkeyPatch.context() as patch:  # told by the head: the whole text is never read
        patch.setattr(registry, "read_text", lambda path: pytest.fail(f"{path} read whole"))
        assert registry._first_object(golden) == json.loads(line)
    assert detect_format(golden, [trace]) == "native"
    with pytest.raises(InputError, match=r"golden\.jsonl:30001: not valid UTF-8 \(byte 0xff\)"):
        load_any(golden, [trace])
