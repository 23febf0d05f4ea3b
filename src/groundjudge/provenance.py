"""Where a result came from: tool version, git commit (with a dirty flag), Python and packages."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from pathlib import Path

from groundjudge import __version__

PACKAGES = ("openai", "httpx", "diskcache", "numpy", "pydantic", "tenacity")  # numpy: kappa and its bootstrap draws


def _ask_git(args: list[str], cwd: Path) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(["git", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def _answer(asked: subprocess.Popen[str] | None) -> str | None:
    if asked is None:
        return None
    try:
        out, _ = asked.communicate(timeout=10)
    except subprocess.SubprocessError:
        asked.kill()
        asked.communicate()
        return None
    return out.strip() if asked.returncode == 0 else None


@lru_cache(maxsize=1)
def provenance() -> dict[str, object]:
    here = Path(__file__).resolve().parent
    # both git calls run while the packages' versions are looked up
    commit_asked = _ask_git(["rev-parse", "HEAD"], here)
    status_asked = _ask_git(["status", "--porcelain", "--untracked-files=no"], here)
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    commit = _answer(commit_asked)
    status = _answer(status_asked)
    dirty = None if commit is None else bool(status)
    return {
        "tool": "groundjudge",
        "tool_version": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "packages": versions,
    }
