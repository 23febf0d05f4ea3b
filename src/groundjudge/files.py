"""Write report files atomically: a reader sees the old file or the new one, never half of one.

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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 2) -> None:
    """``indent=None`` writes one compact line with the standard library's C encoder, several
    times faster than the indenting one: for documents too large to read by eye anyway."""
    separators = (",", ":") if indent is None else None
    write_text_atomic(path, json.dumps(data, indent=indent, separators=separators, ensure_ascii=False,
                                       allow_nan=False) + "\n")
