"""Write report files atomically: a reader sees the old file or the new one, never half of one;
and split JSON Lines text into its lines.

The new content goes to a fresh hidden file beside the target, which then replaces it in one
``os.replace``. The file is created with mode 0666 and the kernel applies the process umask,
as for any ordinary file: reports are readable by others under umask 022 (CI artifact
uploaders, other users) and private under umask 077. (``tempfile.mkstemp`` would force 0600.)
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Any

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


def write_text_atomic(path: Path, text: str) -> None:
    write_chunks_atomic(path, (text,))


def write_chunks_atomic(path: Path, chunks: Iterable[str]) -> None:
    """Write the text ``chunks`` one after the other: a large report never has to exist as one
    string in memory. An error while producing them leaves the old file (if any) in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 2) -> None:
    """``indent=None`` writes one compact line with the standard library's C encoder, several
    times faster than the indenting one: for documents too large to read by eye anyway. The
    compact line is written piece by piece: the same bytes as one ``json.dumps``, without
    ever holding them all in memory."""
    if indent is None:
        write_chunks_atomic(path, _with_newline(compact_json_chunks(data)))
        return
    write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False) + "\n")


def _with_newline(chunks: Iterable[str]) -> Iterator[str]:
    yield from chunks
    yield "\n"


_SLICE = 1000  # entries of a large mapping encoded per call
_WALK_DEPTH = 6  # smaller mappings are walked key by key down to this depth, then encoded whole


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compact_json_chunks(value: Any, depth: int = 0) -> Iterator[str]:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` in
    pieces: a mapping of ``_SLICE`` entries or more is encoded that many entries per call, a
    smaller one near the top key by key, anything else in one call."""
    if not isinstance(value, dict) or not value or (depth >= _WALK_DEPTH and len(value) < _SLICE):
        yield _dumps(value)
    elif len(value) >= _SLICE:
        items = list(value.items())
        for start in range(0, len(items), _SLICE):
            yield ("{" if start == 0 else ",") + _dumps(dict(items[start:start + _SLICE]))[1:-1]
        yield "}"
    else:
        sep = "{"
        for key, item in value.items():
            # json.dumps writes a non-string key (number, bool, None) as a string
            yield sep + _dumps(key if isinstance(key, str) else next(iter(json.loads(_dumps({key: 0}))))) + ":"
            yield from compact_json_chunks(item, depth + 1)
            sep = ","
        yield "}"


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
    return [line[:-1] if line.endswith("\r") else line for line in lines]
