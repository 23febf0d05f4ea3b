"""The README and the reference pages in docs/: the site builds strictly (no broken link or
anchor), and every command, option, Python name and repository path they name exists, so the
docs cannot drift from the code."""

from __future__ import annotations

import ast
import functools
import glob
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from groundjudge.cli import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Paths the docs name that live in the repository start with one of these.
REPO_DIRS = (".ci", "benchmarks", "calibration", "docs", "examples", "rubrics", "scripts", "src", "tests")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHELL = ("", "bash", "sh", "shell", "console")
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _split(page: Path) -> tuple[list[str], list[str]]:
    """A page's fenced code blocks and its inline code spans (outside the blocks)."""
    text = page.read_text(encoding="utf-8")
    blocks = [body for language, body in FENCE.findall(text) if language.strip() in SHELL]
    prose = FENCE.sub("", text)
    return blocks, [" ".join(span.split()) for span in INLINE.findall(prose)]


def _command_lines(page: Path) -> Iterator[str]:
    """Every command line of a page: each logical line of its code blocks (continuations joined)
    and each inline code span."""
    blocks, spans = _split(page)
    for block in blocks:
        yield from block.replace("\\\n", " ").splitlines()
    yield from spans


def _groundjudge_calls(line: str) -> Iterator[list[str]]:
    """The words of each `groundjudge ...` call in a line, up to a comment, pipe or `&&`."""
    line = re.split(r"\s#", " " + line)[0]
    for part in re.split(r"\s(?:\|\||&&|;|\|)\s", line):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        starts = [i for i, w in enumerate(words) if w == "groundjudge" or w.endswith("/groundjudge")]
        if starts:
            yield [w.strip("[]") for w in words[starts[0]:] if w.strip("[]")]


def _params(command: click.Command) -> dict[str, click.Parameter]:
    ctx = click.Context(command)
    return {opt: p for p in command.get_params(ctx) for opt in (*p.opts, *p.secondary_opts)}


def _placeholder(word: str) -> bool:
    return word == "..." or word.isupper() or "<" in word or word.startswith("$")


def _check_call(words: list[str]) -> list[str]:
    """Problems with one `groundjudge ...` call: unknown commands, options and choices."""
    problems: list[str] = []
    commands: list[click.Command] = [main]
    i = 1
    while i < len(words) and all(isinstance(c, click.Group) for c in commands):
        word = words[i]
        if word.startswith("-"):
            break
        found = []
        for name in word.split("|"):
            sub = commands[0].get_command(click.Context(commands[0]), name)  # type: ignore[attr-defined]
            if sub is None:
                problems.append(f"no command {' '.join(words[:i])} {name}")
            else:
                found.append(sub)
        if not found:
            return problems
        commands = found
        i += 1
    for command in commands:
        params = _params(command)
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        j = i
        while j < len(words):
            word = words[j]
            if word.startswith("-") and len(word) > 1 and not word[1:2].isdigit():
                name = word.split("=", 1)[0]
                param = params.get(name)
                if param is None:
                    problems.append(f"{' '.join(words[:i])}: no option {name}")
                elif (isinstance(param, click.Option) and not (param.is_flag or param.count)
                      and "=" not in word and j + 1 < len(words)):
                    j += 1
                    value = words[j]
                    if isinstance(param.type, click.Choice) and not _placeholder(value):
                        problems += [f"{' '.join(words[:i])} {name}: {v!r} is not a choice"
                                     for v in value.split("|") if v not in param.type.choices]
            elif arguments and not _placeholder(word):
                argument = arguments.pop(0)
                if isinstance(argument.type, click.Choice):
                    problems += [f"{' '.join(words[:i])}: {v!r} is not a choice of {argument.name}"
                                 for v in word.split("|") if v not in argument.type.choices]
            j += 1
    return problems


def _all_options() -> set[str]:
    options: set[str] = set()

    def walk(command: click.Command) -> None:
        options.update(_params(command))
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name))  # type: ignore[arg-type]

    walk(main)
    return options


def _leaf_commands() -> dict[str, click.Command]:
    leaves: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name), f"{path} {name}")  # type: ignore[arg-type]
        else:
            leaves[path] = command

    walk(main, "groundjudge")
    return leaves


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="mkdocs and mkdocs-material are not installed (pip install -e '.[dev]' installs them)")
def test_the_reference_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a link to a missing page or anchor, or a page left out of the
    nav, is a warning, and strict mode makes it an error."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (tmp_path / "site" / ("" if page.stem == "index" else page.stem) / "index.html").is_file(), page


def test_every_groundjudge_call_in_the_docs_exists_in_the_cli() -> None:
    problems = []
    calls = 0
    for page in PAGES:
        for line in _command_lines(page):
            for words in _groundjudge_calls(line):
                calls += 1
                problems += [f"{_rel(page)}: `{' '.join(words)}`: {p}" for p in _check_call(words)]
    assert calls > 50  # the parser found the calls
    assert not problems, "\n".join(problems)


def test_the_checker_finds_a_command_or_option_that_does_not_exist() -> None:
    assert _check_call(["groundjudge", "run", "--config", "x.toml", "--max-cases", "3"]) == []
    assert _check_call(["groundjudge", "cache", "stats|prune|clear"]) == []
    assert _check_call(["groundjudge", "runn"]) == ["no command groundjudge runn"]
    assert _check_call(["groundjudge", "run", "--max-case", "3"]) == ["groundjudge run: no option --max-case"]
    assert _check_call(["groundjudge", "triage", "R", "--kind", "unsupported"]) == [
        "groundjudge triage --kind: 'unsupported' is not a choice"]
    assert _check_call(["groundjudge", "schema", "golden|traces"]) == [
        "groundjudge schema: 'traces' is not a choice of name"]


def test_every_option_named_alone_exists_in_the_cli() -> None:
    """An option in inline code (`--max-cases`) is an option of some command, or of the
    benchmark script the same span names."""
    options = _all_options()
    problems = []
    for page in PAGES:
        for span in _split(page)[1]:
            words = span.split()
            if not words or not words[0].startswith("--"):
                continue
            for word in words:
                name = word.split("=", 1)[0].rstrip(",.")
                if name.startswith("--") and "<" not in name and name not in options:
                    problems.append(f"{_rel(page)}: `{span}`: no groundjudge command has {name}")
    assert not problems, "\n".join(problems)


def test_benchmark_options_in_the_docs_exist_in_their_scripts() -> None:
    problems = []
    checked = 0
    for page in PAGES:
        for line in _command_lines(page):
            for match in re.finditer(r"(?:benchmarks/)?(\w+\.py)((?:\s+[^\s|`]+)*)", line):
                script = ROOT / "benchmarks" / match.group(1)
                if not script.is_file():
                    continue
                source = script.read_text(encoding="utf-8")
                for name in re.findall(r"(?<!\S)(--[\w-]+)", match.group(2)):
                    checked += 1
                    if f'"{name}"' not in source:
                        problems.append(f"{_rel(page)}: {match.group(1)} has no option {name}")
    assert checked > 3
    assert not problems, "\n".join(problems)


def test_the_cli_reference_covers_every_command_and_option() -> None:
    """docs/cli.md names every command and every option of each (a profile's knobs are
    documented in docs/profiles.md, and checked there)."""
    text = " ".join((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split())
    profiles = (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8")
    problems = []
    for path, command in _leaf_commands().items():
        if path not in text and not re.search(re.escape(path.rsplit(" ", 1)[0]) + r"\b.*\b"
                                              + re.escape(path.rsplit(" ", 1)[1]), text):
            problems.append(f"docs/cli.md does not name `{path}`")
        own = {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
        knobs = {o for o in _params(command) if o.startswith("--")} - own - {"--help"}
        problems += [f"docs/cli.md does not name {path} {o}" for o in sorted(own - {"--help"})
                     if not re.search(re.escape(o) + r"(?![\w-])", text)]
        problems += [f"docs/profiles.md does not name the knob {o}" for o in sorted(knobs)
                     if not re.search(re.escape(o) + r"(?![\w-])", profiles)]
    assert not problems, "\n".join(problems)


def _expand(path: str) -> list[str]:
    """`src/groundjudge/{load,metrics}` -> both; `<rater>` and `N` placeholders -> globs."""
    braces = re.search(r"\{([^}]*)\}", path)
    if braces:
        return [p for option in braces.group(1).split(",")
                for p in _expand(path[:braces.start()] + option + path[braces.end():])]
    return [re.sub(r"<[^>]*>", "*", path)]


def _repo_paths(page: Path) -> Iterator[str]:
    blocks, spans = _split(page)
    text = page.read_text(encoding="utf-8")
    links = [target for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", text)) if "://" not in target]
    words = [w for chunk in (*blocks, *spans) for w in re.split(r"[\s'\"=()]+|,(?![^{]*\})", chunk)]
    for word in [*words, *links]:
        word = word.split("#", 1)[0].rstrip(".,:;")
        if page.parent != ROOT and word in links and not word.startswith(REPO_DIRS):
            continue  # a link between pages: mkdocs checks it
        if word.startswith(tuple(f"{d}/" for d in REPO_DIRS)) or word in ("pyproject.toml", "mkdocs.yml"):
            yield word


def test_every_repository_path_the_docs_name_exists() -> None:
    problems = []
    seen = 0
    for page in PAGES:
        for path in _repo_paths(page):
            seen += 1
            if not any(glob.glob(str(ROOT / p)) for p in _expand(path)):
                problems.append(f"{_rel(page)}: {path} does not exist")
    assert seen > 50
    assert not problems, "\n".join(problems)


def test_every_python_name_the_docs_name_exists() -> None:
    """`groundjudge.metrics.names`, `groundjudge.judge.batch.collect_lines`: a module, or a name
    in one."""
    problems = []
    for page in PAGES:
        for span in _split(page)[1]:
            if re.search(r"\.(toml|jsonl?|md|py|ya?ml|sqlite)$", span):
                continue  # a file name, not a module
            for dotted in re.findall(r"^(groundjudge(?:\.\w+)+)(?:\(\))?$", span):
                parts = dotted.split(".")
                for cut in range(len(parts), 0, -1):
                    try:
                        obj = importlib.import_module(".".join(parts[:cut]))
                        break
                    except ModuleNotFoundError:
                        continue
                try:
                    for name in parts[cut:]:
                        obj = getattr(obj, name)
                except AttributeError:
                    if dotted not in _span_attributes():
                        problems.append(f"{_rel(page)}: {dotted} does not exist")
    assert not problems, "\n".join(problems)


@functools.cache
def _span_attributes() -> frozenset[str]:
    """The OpenTelemetry attribute names groundjudge reads or writes (``groundjudge.case_id``):
    named like modules, but strings in the code that handles traces."""
    names: set[str] = set()
    for module in ("load/adapters/otel.py", "report/otel_events.py", "report/phoenix.py"):
        tree = ast.parse((ROOT / "src" / "groundjudge" / module).read_text(encoding="utf-8"))
        names.update(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and re.fullmatch(r"groundjudge(\.\w+)+", node.value))
    return frozenset(names)


def _anchors(page: Path) -> set[str]:
    from markdown.extensions.toc import slugify

    headings = re.findall(r"^#+\s+(.*)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE)
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in headings}


def test_the_readme_links_to_pages_and_anchors_that_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        target, _, anchor = link.partition("#")
        assert (ROOT / target).is_file(), link
        if anchor:
            assert anchor in _anchors(ROOT / target), link


def test_the_readme_is_a_front_door_with_the_ci_test_command() -> None:
    """At most about 150 lines (reference belongs in docs/), and the line `.ci/run` runs on a
    clean checkout: the first line that starts with scripts/test.sh."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
    test_lines = [line for line in lines if re.match(r"^scripts/test\.sh", line)]
    assert test_lines and re.sub(r" *#.*", "", test_lines[0]) == "scripts/test.sh"


def _config_key_exists(section: str, key: str) -> bool:
    """`[judge] rubric_version`, `[judge.escalate] model`, `[profile.wfgy] k`: a field of the
    config models, or a knob of the profile."""
    from pydantic import BaseModel

    from groundjudge.config import Config
    from groundjudge.profiles import get_profile

    parts = section.split(".")
    if parts[0] == "profile":
        return len(parts) == 2 and key in get_profile(parts[1]).settings.model_fields
    model: type[BaseModel] = Config
    for part in parts:
        field = model.model_fields.get(part)
        if field is None:
            return False
        inner = [a for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return False
        model = inner[0]
    return key in model.model_fields


def _config_keys(page: Path) -> Iterator[tuple[str, str]]:
    """Keys named as `[section] key` anywhere, and in docs/configuration.md the keys of each
    section's table (first column)."""
    for span in _split(page)[1]:
        for section, keys in re.findall(r"^\[([\w.-]+)\] ((?:\w+(?:, )?)+)$", span):
            yield from ((section, key) for key in keys.split(", "))
    if page.name == "configuration.md":
        section = None
        for line in page.read_text(encoding="utf-8").splitlines():
            heading = re.match(r"^### `\[([\w.]+)\]`", line)
            if heading:
                section = heading.group(1)
            elif line.startswith("#"):
                section = None
            elif section and line.startswith("| `"):
                first = line.split("|")[1]
                yield from ((section, key) for key in re.findall(r"`(\w+)`", first))


def test_every_config_key_the_docs_name_exists() -> None:
    problems = []
    seen = 0
    for page in PAGES:
        for section, key in _config_keys(page):
            seen += 1
            if not _config_key_exists(section, key):
                problems.append(f"{_rel(page)}: [{section}] {key} is not a config key")
    assert seen > 40
    assert not problems, "\n".join(problems)
    assert not _config_key_exists("judge", "rubric_versoin")
    assert not _config_key_exists("profile.wfgy", "kk")


def test_the_configuration_page_names_every_config_key() -> None:
    """Every key of every section is named in docs/configuration.md (the gates' own keys in
    docs/gates.md, which it links to)."""
    from pydantic import BaseModel

    from groundjudge.config import Config

    text = "\n".join((ROOT / "docs" / name).read_text(encoding="utf-8") for name in ("configuration.md", "gates.md"))
    missing = []

    def walk(model: type[BaseModel], path: str) -> None:
        for name, field in model.model_fields.items():
            inner = [a for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
                     if isinstance(a, type) and issubclass(a, BaseModel)]
            if inner and path:
                walk(inner[0], f"{path}.{name}")
            elif inner:
                walk(inner[0], name)
            elif not re.search(rf"`\[?{re.escape(name)}\b|(?<![\w.-]){re.escape(name)} = ", text) and not re.search(
                    rf"`\[+{re.escape(path)}\.{re.escape(name)}", text):
                missing.append(f"{path}.{name}" if path else name)

    walk(Config, "")
    assert not [m for m in missing if m not in ("profile", "source")], missing
