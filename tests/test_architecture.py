"""Data flows one way (SPEC 2): a module imports only earlier stages and the contracts."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "groundjudge"

# Stage rank of each top-level module or package; a module may import only ranks <= its own.
RANK = {
    "contracts": 0, "frozen": 0, "versions": 0, "files": 0, "provenance": 0, "errors": 0, "parallel": 0,
    "inert": 0, "urls": 0, "strict_json": 0, "distributed": 0,
    "load": 1, "config": 1, "config_file": 1, "trec_config": 1,
    "metrics": 2,
    "select": 3, "profiles": 3,
    "judge": 4,
    "calibrate": 5,
    "gate": 6,
    "report": 7,
    "label": 8, "history": 8,
    "progress": 9,
    "api": 10,
    "__init__": 10,  # the public names, imported from api and the stages for type checkers only
    "cli": 11,
    "entry": 12,  # the command: the quick TREC call, else the CLI
}

# Modules of a later stage that an earlier stage may import: the record a stage takes as its
# input, defined by the stage that reads it and built by the one before. Each must import
# nothing of groundjudge beyond rank 0 (checked below), so no later-stage code can ride along.
STAGE_INPUTS = {
    "groundjudge.judge.item": "select builds the judge's input (JudgeItem)",
}


def stage_of(module: str) -> str:
    return module.split(".")[1] if module.startswith("groundjudge.") else module


def test_every_module_has_a_stage():
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert top in RANK, f"{path}: add its stage to RANK"


def test_imports_only_flow_downstream():
    problems = []
    for path in PACKAGE.rglob("*.py"):
        mine = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("groundjudge"):
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("groundjudge")]
            for name in names:
                theirs = stage_of(name)
                if theirs == "groundjudge":
                    continue
                if RANK[theirs] > RANK[mine] and name not in STAGE_INPUTS:
                    problems.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {name} (a later stage)")
    assert not problems, "\n".join(problems)


def _groundjudge_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("groundjudge"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("groundjudge")]
    return found


def test_stage_inputs_carry_no_later_stage_code():
    """A stage input imported upstream must itself import only rank-0 modules, and so must the
    package it sits in (importing ``groundjudge.judge.item`` runs ``judge/__init__.py`` too)."""
    for module in STAGE_INPUTS:
        parts = module.split(".")[1:]
        path = PACKAGE.joinpath(*parts).with_suffix(".py")
        assert path.is_file(), f"{module}: no such module; drop it from STAGE_INPUTS"
        for source in (path, *(PACKAGE.joinpath(*parts[:i], "__init__.py") for i in range(1, len(parts)))):
            later = [name for name in _groundjudge_imports(source) if RANK[stage_of(name)] > 0]
            assert not later, f"{source.relative_to(PACKAGE)} imports {later}: a stage input must import only rank 0"

