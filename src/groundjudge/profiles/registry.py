"""The profiles: a replaced system's own report, markdown and gate, registered by the name of
the input format it reads (see :mod:`groundjudge.load.adapters.registry`).

``--profile`` choices come from here; a profile can only be registered for a known format, so
the two registries cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.load.adapters import format_names
from groundjudge.errors import InputError

__all__ = [
    "Profile",
    "ProfileResult",
    "evidence_overlap",
    "profile_names",
    "register_profile",
    "run_profile",
    "unregister_profile",
]


@dataclass(frozen=True)
class ProfileResult:
    name: str
    report: dict[str, Any]
    markdown: str
    passed: bool | None  # the system's own gate verdict; None where it has no gate


@dataclass(frozen=True)
class Profile:
    """``from_files(golden, traces, live)`` reads files in the format ``name`` and returns the
    system's own report; it raises :class:`InputError` for anything it cannot read. ``live`` is
    a second set of traces for systems that compare two indexes (empty otherwise)."""

    name: str
    from_files: Callable[[Path, Sequence[Path], Sequence[Path]], ProfileResult]


_PROFILES: dict[str, Profile] = {}


def evidence_overlap(path: Path, ids: Sequence[str], gold: Path, gold_ids: Collection[str]) -> int:
    """How many of the question ids in the evidence file ``path`` are in the gold set; raises
    :class:`InputError` when none is. A file that shares no id with the gold set is no evidence
    about it (another format, another gold set, a mismatched export): scored as it is, every
    question would look unanswered, and a gate comparing two runs would compare nothing."""
    known = set(gold_ids)
    mine = set(ids)
    shared = len(mine & known)
    if not shared:
        raise InputError.one(path, None, "qid", f"shares no question id with the gold set {gold} (0 of its "
                                                f"{len(mine)} ids are among the gold's {len(known)}): is it a file "
                                                f"of another format, or of another gold set?")
    return shared


def register_profile(profile: Profile) -> Profile:
    """Add ``profile``. Raises ValueError when its name is not a registered input format or
    already has a profile."""
    if profile.name not in format_names():
        raise ValueError(f"no input format named {profile.name!r}: register the format first "
                         f"(known: {', '.join(format_names())})")
    if profile.name in _PROFILES:
        raise ValueError(f"format {profile.name!r} already has a profile")
    _PROFILES[profile.name] = profile
    return profile


def unregister_profile(name: str) -> None:
    """Remove a registered profile (a test or notebook that registered one cleans up)."""
    _PROFILES.pop(name, None)


def profile_names() -> tuple[str, ...]:
    """The registered profiles, in registration order."""
    return tuple(_PROFILES)


def run_profile(name: str, golden: Path, traces: Sequence[Path], live: Sequence[Path] = ()) -> ProfileResult:
    """The system's own report from files in its own format (``name`` is also the format)."""
    if name not in _PROFILES:
        raise InputError.one(golden, None, "profile",
                             f"unknown profile {name!r}; known: {', '.join(_PROFILES)}")
    return _PROFILES[name].from_files(Path(golden), [Path(t) for t in traces], [Path(p) for p in live])
