"""Data flows one way (SPEC 2): a module imports only earlier stages and the contracts."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "groundjudge"

# Stage rank of each top-level module or package; a module may import only ranks <= its own.
RANK = {
    "contracts": 0, "files": 0, "provenance": 0, "errors": 0, "parallel": 0, "__init__": 0,
    "inert": 0, "urls": 0, "strict_json": 0,
    "load": 1, "config": 1,
    "metrics": 2,
    "select": 3, "profiles": 3,
    "judge": 4,
    "calibrate": 5,
    "gate": 6,
    "report": 7,
    "label": 8, "history": 8,
    "progress": 9,
    "api": 10,
    "cli": 11,
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
                if RANK[theirs] > RANK[mine]:
                    problems.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {name} (a later stage)")
    assert not problems, "\n".join(problems)
