"""The package as users get it: its public names, its published schemas, and a wheel installed
outside the source tree that finds its rubrics and runs the example."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import groundjudge
from groundjudge.cli import main

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "rag-faithfulness-dev"


def test_all_is_complete_and_every_name_resolves() -> None:
    for name in groundjudge.__all__:
        assert getattr(groundjudge, name) is not None, name
    from groundjudge import api

    public = {n for n in vars(api) if not n.startswith("_") and callable(getattr(api, n))
              and getattr(getattr(api, n), "__module__", "") == "groundjudge.api"}
    missing = public - set(groundjudge.__all__) - {"metric_settings", "select", "trust_rules"}
    assert not missing, f"public API functions not exported: {sorted(missing)}"
    with pytest.raises(AttributeError):
        groundjudge.no_such_name  # noqa: B018


def _schema(name: str) -> jsonschema.Draft202012Validator:
    result = CliRunner().invoke(main, ["schema", name])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


EXAMPLE_FILES = {
    "golden": [ROOT / "examples" / "golden.jsonl", SHARED / "golden.jsonl"],
    "trace": [*sorted((ROOT / "examples" / "traces").glob("*.jsonl")), *sorted((SHARED / "traces").glob("*.jsonl"))],
    "corpus": [ROOT / "examples" / "corpus.jsonl", SHARED / "corpus.jsonl"],
    "labels": [*sorted((ROOT / "calibration" / "labels").glob("*.jsonl")), SHARED / "labels" / "annotators.jsonl"],
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_FILES))
def test_every_bundled_file_passes_its_printed_schema(name: str) -> None:
    validator = _schema(name)
    files = [p for p in EXAMPLE_FILES[name] if p.exists()]
    assert files
    for path in files:
        for i, record in enumerate(_lines(path), 1):
            errors = list(validator.iter_errors(record))
            assert not errors, f"{path}:{i}: {errors[0].message}"


@pytest.mark.parametrize(("name", "record"), [
    ("trace", {"config_id": "c"}),  # no query_id
    ("trace", {"query_id": "q", "config_id": "c", "retrieved_chunks": [""]}),  # empty id
    ("trace", {"query_id": "q", "config_id": "c", "citations": [{"chunk_id": "a", "offsets": [1, 2, 3]}]}),
    ("trace", {"query_id": "q", "config_id": "c", "tokens": "many"}),
    ("corpus", {"chunk_id": "a", "doc_id": "d", "text": "t", "offsets": [-1, 3]}),
    ("golden", {"id": "q", "question": "?", "relevance": {"a": 7}}),
    ("labels", {"query_id": "q", "rater": "r", "correct": 5}),
])
def test_the_printed_schema_rejects_what_the_loader_rejects(name: str, record: dict, tmp_path: Path) -> None:
    from pydantic import ValidationError

    from groundjudge.contracts import CONTRACTS

    assert list(_schema(name).iter_errors(record)), record
    with pytest.raises(ValidationError):
        CONTRACTS[name].model_validate(record)


def test_a_wheel_installed_outside_the_repository_runs_the_example(tmp_path: Path) -> None:
    """Rubrics ship as package data: an installed (non-editable) groundjudge finds its default
    rubric from any folder. The judge here is the scripted server, not the embedded model."""
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    wheel = next(wheels.glob("groundjudge-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # The fresh venv borrows this interpreter's installed dependencies (no network in tests): a
    # plain path line, so their folder's own .pth files, the editable install among them, are not
    # run and the source tree stays invisible.
    deps = Path(subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "borrowed-dependencies.pth").write_text(str(deps) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                              "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    work = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "calibration", work / "calibration")
    from tests.support.judge_replies import verdict_for_request
    from tests.support.openai_server import ScriptedOpenAIServer

    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDJUDGE_")}
    env.pop("PYTHONPATH", None)
    env["PYTHONNOUSERSITE"] = "1"
    where = subprocess.run([str(python), "-c", "import groundjudge, sys; print(groundjudge.__file__)"], cwd=work,
                           env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        proc = subprocess.run([str(python), "-m", "groundjudge.cli", "run", "--config", "examples/groundjudge.toml", "--rubric", "grounded_answer",
                               "--judge-base-url", srv.base_url, "--judge-model", srv.model, "--cache-dir", "cache",
                               "--out", "out", "--quiet"], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    assert (work / "out" / "report.json").exists(), proc.stdout + proc.stderr
    report = json.loads((work / "out" / "report.json").read_text())
    assert report["judge"]["identity"]["rubric"]["id"] == "grounded_answer"
    assert not (work / "rubrics").exists()


def _type_checking_imports(init: Path) -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` in a package's __init__.py."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    block = next((node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                  and node.test.id == "TYPE_CHECKING"), None)
    assert block is not None, f"{init}: no `if TYPE_CHECKING:` imports"
    return {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names if node.module is not None}


def test_the_names_type_checkers_see_are_the_names_imported_on_use() -> None:
    """The package imports its public names lazily; type checkers read the TYPE_CHECKING imports
    instead, so the two lists and __all__ must name the same things from the same modules."""
    seen = _type_checking_imports(Path(groundjudge.__file__))
    assert seen == groundjudge._EXPORTS
    assert sorted(groundjudge.__all__) == sorted(["__version__", *groundjudge._EXPORTS])


def test_a_type_checker_sees_the_signature_of_an_exported_function(tmp_path: Path) -> None:
    """``gj.run_eval`` is a typed function to mypy, not ``Any``: a call with a wrong argument is an
    error, with the project's own mypy settings."""
    from mypy import api as mypy_api

    snippet = tmp_path / "use_groundjudge.py"
    snippet.write_text("import groundjudge as gj\n\n"
                       "reveal_type(gj.run_eval)\n"
                       "gj.run_eval(\"examples/groundjudge.toml\", None)\n", encoding="utf-8")
    stdout, stderr, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml"), str(snippet)])
    assert status == 1, stdout + stderr
    revealed = next(line for line in stdout.splitlines() if "Revealed type" in line)
    assert "config: groundjudge.config.Config" in revealed and "-> groundjudge.api.RunResult" in revealed, revealed
    assert 'Argument 1 to "run_eval" has incompatible type "str"; expected "Config"' in stdout, stdout
    assert 'Argument 2 to "run_eval" has incompatible type "None"; expected "JudgeSession"' in stdout, stdout
