"""How the judge cache's entries sit on disk: JSON text in SQLite rows, never pickles, never files.

diskcache's default ``Disk`` pickles every value that is not a plain string or number, and
unpickles whatever a row says is a pickle: a row written into ``cache.db`` by anyone would run
code on the next run. ``JsonDisk`` stores each entry as UTF-8 JSON inside its row and reads back
only such rows; a row in any other form (a pickle written by groundjudge before 0.3, a value
kept in a file beside the database) is never decoded, only counted (``LegacyEntry``), and
``groundjudge cache migrate`` converts the old pickled entries of a cache the user trusts.

Opening a folder also checks the database before diskcache applies the settings stored in it
(diskcache turns every stored ``sqlite_*`` setting into a ``PRAGMA`` statement): only the
settings diskcache itself writes are accepted.
"""

from __future__ import annotations

import io
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import diskcache
import orjson

from groundjudge.errors import StorageError

DATABASE = "cache.db"  # diskcache's file name inside the folder
_KNOWN_SETTINGS = {*diskcache.DEFAULT_SETTINGS, *diskcache.core.METADATA}
MODE_RAW, MODE_PICKLE = diskcache.core.MODE_RAW, diskcache.core.MODE_PICKLE


class CacheUnreadable(StorageError):
    """The cache folder's database cannot be used; the message says which file and what to do."""


class LegacyEntry(Exception):
    """A row not in this cache's form (a pickle, or a value kept in a file): never decoded."""


class JsonDisk(diskcache.Disk):
    """Keys are text; values are JSON objects stored in the row (no file is ever written)."""

    def __init__(self, directory: str, min_file_size: int = 0, pickle_protocol: int = 0, **_: Any) -> None:
        super().__init__(directory, min_file_size=min_file_size, pickle_protocol=pickle_protocol)

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError("judge cache keys are text")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise LegacyEntry("a pickled key")
        return key

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> tuple[int, int, None, Any]:
        if read or not isinstance(value, dict):
            raise TypeError("judge cache values are JSON objects")
        return 0, MODE_RAW, None, sqlite3.Binary(orjson.dumps(value))

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode != MODE_RAW or filename is not None or not isinstance(value, (bytes, str)):
            raise LegacyEntry(f"stored as mode {mode}" + (" in a file" if filename else ""))
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise LegacyEntry(f"not JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise LegacyEntry("not a JSON object")
        return decoded

    def remove(self, file_path: str) -> None:
        # This disk writes no files; a row naming one (``../../somewhere``) must not make
        # diskcache delete it, nor remove the folders above it.
        return None


def check_database(directory: Path) -> None:
    """Refuse a cache database that is not one, is damaged where it opens, or holds settings
    diskcache does not write; before diskcache reads it."""
    path = directory / DATABASE
    if not path.exists():
        return
    if not path.is_file():
        raise CacheUnreadable(f"{path}: not a file; point --cache-dir at another folder or remove it")
    try:
        with _readonly(path) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "Settings" not in tables:
                return  # created by an older, interrupted open: diskcache sets it up
            rows = conn.execute("SELECT key, value FROM Settings").fetchall()
    except sqlite3.DatabaseError as exc:
        raise CacheUnreadable(unreadable(path, exc)) from None
    unknown = sorted(str(key) for key, _ in rows if key not in _KNOWN_SETTINGS)
    if unknown:
        raise CacheUnreadable(f"{path}: not a groundjudge judge cache (unknown setting {unknown[0]!r}); "
                              f"point --cache-dir at another folder, or move {path.name} aside")
    for key, value in rows:
        if not isinstance(value, (int, float, str)) or (isinstance(value, str) and not value.replace("-", "").isalnum()):
            raise CacheUnreadable(f"{path}: setting {key!r} has an unexpected value; point --cache-dir at another "
                                  f"folder, or move {path.name} aside")


def unreadable(path: Path, exc: BaseException) -> str:
    """The one line that says a cache database broke, and how to recover."""
    return (f"{path}: the judge cache is damaged ({exc}); move it aside (mv {path} {path}.broken) and run again: "
            f"replies not in the cache are asked again, or run with --no-cache")


class _readonly:
    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


# --- migrating entries written by groundjudge before 0.3 ---------------------------------------

_REPLY_FIELDS: dict[str, Any] = {"raw": str, "model": str, "prompt_tokens": int, "completion_tokens": int,
                                 "created": (int, float), "repaired": bool, "history": list}


def reply_fields(value: Any) -> dict[str, Any] | None:
    """The fields of a stored cached reply, when ``value`` is exactly one made of plain values
    (defaults filled in); None for anything else."""
    if type(value) is dict and value.keys() == _REPLY_FIELDS.keys() and _plain(value):
        return value  # as this version writes them: every field, each of its own type (checked at once)
    if not isinstance(value, dict) or not {"raw", "model"} <= value.keys() or value.keys() - _REPLY_FIELDS.keys():
        return None
    for name, kind in _REPLY_FIELDS.items():
        if name in value and (not isinstance(value[name], kind) or (kind is int and isinstance(value[name], bool))):
            return None
    if not all(isinstance(h, str) for h in value.get("history", ())):
        return None
    return {"prompt_tokens": 0, "completion_tokens": 0, "created": 0.0, "repaired": False, **value,
            "history": list(value.get("history", ()))}


class _DataOnly(pickle.Unpickler):
    """Reads a pickle of plain containers only: every global (class, function) is refused, so
    nothing in the stream can be called."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: {module}.{name}")


def _plain(value: dict[str, Any]) -> bool:
    history = value["history"]
    return (type(value["raw"]) is str and type(value["model"]) is str and type(value["prompt_tokens"]) is int
            and type(value["completion_tokens"]) is int and type(value["created"]) in (int, float)
            and type(value["repaired"]) is bool and type(history) is list and all(type(h) is str for h in history))


def plain_reply(data: bytes) -> dict[str, Any] | None:
    """An old entry's value when it is exactly a cached reply made of plain values, else None."""
    try:
        value = _DataOnly(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - whatever fails, the entry is not a plain reply
        return None
    return reply_fields(value)


def migrate(directory: Path) -> tuple[int, int]:
    """Rewrite the pickled replies of an old cache folder as JSON rows; returns (converted,
    dropped): entries that are not plain cached replies (or live in files) are deleted, unread."""
    check_database(directory)
    path = directory / DATABASE
    if not path.exists():
        return 0, 0
    converted = dropped = 0
    with sqlite3.connect(path, timeout=60) as conn:
        rows = conn.execute("SELECT rowid, raw, mode, filename, value FROM Cache WHERE mode != ? OR raw = 0",
                            (MODE_RAW,)).fetchall()
        for rowid, raw, mode, filename, value in rows:
            reply = plain_reply(bytes(value)) if raw and mode == MODE_PICKLE and filename is None and value else None
            if reply is None:
                conn.execute("DELETE FROM Cache WHERE rowid = ?", (rowid,))
                dropped += 1
            else:
                conn.execute("UPDATE Cache SET mode = ?, value = ? WHERE rowid = ?",
                             (MODE_RAW, sqlite3.Binary(orjson.dumps(reply)), rowid))
                converted += 1
    return converted, dropped
