"""Where a result came from: tool version, git commit (with a dirty flag), Python and packages."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from groundjudge import __version__

PACKAGES = ("openai", "httpx", "diskcache", "numpy", "pydantic", "tenacity")  # numpy: kappa and its bootstrap draws


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@lru_cache(maxsize=1)
def provenance() -> dict[str, object]:
    here = Path(__file__).resolve().parent
    commit = _git(["rev-parse", "HEAD"], here)
    dirty = None if commit is None else bool(_git(["status", "--porcelain", "--untracked-files=no"], here))
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "tool": "groundjudge",
        "tool_version": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "packages": versions,
    }
