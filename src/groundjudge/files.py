"""Write report files atomically: a reader sees the old file or the new one, never half of one;
and split JSON Lines text into its lines.

The new content goes to a fresh hidden file beside the target, which then replaces it in one
``os.replace``. The file is created with mode 0666 and the kernel applies the process umask,
as for any ordinary file: reports are readable by others under umask 022 (CI artifact
uploaders, other users) and private under umask 077. (``tempfile.mkstemp`` would force 0600.)
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from groundjudge.errors import InputError

_ATTEMPTS = 100


def _create_beside(path: Path) -> tuple[int, Path]:
    """Open a new, uniquely named file next to ``path`` for writing; mode 0666 minus the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_ATTEMPTS):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


def file_and_part(path: str | Path) -> tuple[Path, str | None]:
    """The file an input path names, and the part of it after the last ``#`` when the path
    itself is no file but the part before ``#`` is (``kb.sqlite#run_a``: one run of a
    database); otherwise the path whole and None."""
    path = Path(path)
    text = str(path)
    if "#" in text and not path.exists():
        head, _, part = text.rpartition("#")
        if part and Path(head).is_file():
            return Path(head), part
    return path, None


def folder_problem(folder: Path) -> str | None:
    """Why the reports could not be written into ``folder`` (made if missing), or None: a file
    where the folder (or one of its parents) would be, or a folder this process may not write.
    Nothing is created: the answer comes before any work, and bad inputs leave no folder."""
    probe = Path(folder)
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a folder: give a folder for the reports (it is made if missing)"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} cannot be written by this user: give a folder you may write to"
    return None


def file_problem(path: Path) -> str | None:
    """Why a report file could not be written at ``path``, or None (see ``folder_problem``)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder: give a file name"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} cannot be written by this user"
    return folder_problem(path.parent)


def check_outputs(out_dir: str | Path, *files: str | Path | None, where: str = "out") -> None:
    """Exit-2 input errors, before any work, for a run folder (``--out``) that is a file or may
    not be written, and for report ``files`` (``--junit``) that could not be written: finding
    out after the judge has been paid for would lose the run's reports."""
    problem = folder_problem(Path(out_dir))
    if problem:
        raise InputError.one(out_dir, None, where, problem)
    for path in files:
        if path is not None and (problem := file_problem(Path(path))):
            raise InputError.one(path, None, None, problem)


def write_text_atomic(path: Path, text: str) -> None:
    write_chunks_atomic(path, (text,))


def write_chunks_atomic(path: Path, chunks: Iterable[str | bytes]) -> None:
    """Write the ``chunks`` (text, or UTF-8 bytes) one after the other: a large report never has
    to exist as one string in memory. An error while producing them leaves the old file (if
    any) in place."""
    with open_atomic(path) as handle:
        for chunk in chunks:
            handle.write(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8"))


_staged: ContextVar[list[tuple[Path, Path]] | None] = ContextVar("_staged", default=None)


@contextmanager
def open_atomic(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a new file that replaces ``path`` when the block ends without an
    error (inside :func:`together`: when that block ends); after an error the old file (if any)
    stays and the new one is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    staged = _staged.get()
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        if staged is None:
            os.replace(tmp, path)
        else:
            staged.append((tmp, path))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def together() -> Iterator[None]:
    """Files written atomically inside this block replace their targets only when every one of
    them was written: a full disk or an error half-way leaves all the old files (and no
    temporary file), never a mix of old and new."""
    staged: list[tuple[Path, Path]] = []
    token = _staged.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _staged.reset(token)
    for tmp, path in staged:
        os.replace(tmp, path)


# JSON is written by orjson: several times faster than the standard library's C encoder on a
# nightly report.json (benchmarks/README.md), and the same document. Its
# text differs only in the spelling of some floats (0.00001 for 1e-05), and NaN or an infinity,
# which JSON cannot carry, is written as null (no value) where ``json`` would refuse it.
# Keys that are not strings are written as strings, as ``json`` does.
# A read-only mapping (a record's ``frozendict``) is written as the dict it reads as.
_COMPACT = orjson.OPT_NON_STR_KEYS
_PRETTY = orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def _as_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value.items())
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def write_json_atomic(path: Path, data: Any) -> None:
    """Two-space indented JSON. A value that JSON cannot hold (a set, an object) raises
    ``TypeError`` before anything is written. (A document too large to read by eye is written
    compact, a piece at a time: ``report.document.write_document``.)"""
    write_chunks_atomic(path, (orjson.dumps(data, default=_as_json, option=_PRETTY),))


def compact_json(value: Any) -> bytes:
    """``value`` as one line of compact JSON (no newline)."""
    return orjson.dumps(value, default=_as_json, option=_COMPACT)


def jsonl_lines(text: str) -> list[str]:
    r"""The lines of JSON Lines text: split at ``\n`` only (a ``\r`` before it dropped), so a
    string holding U+2028, U+0085 or a form feed, which ``str.splitlines`` would break, stays
    one line, and line numbers count what editors count.

    >>> jsonl_lines('{"a": "x\u2028y"}\r\n{"b": 1}\n')
    ['{"a": "x\u2028y"}', '{"b": 1}']
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
