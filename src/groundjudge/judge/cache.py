"""The judge cache (SPEC 5.4): raw replies in diskcache, keyed by what the verdict depends on.

Only the raw reply (with its model id and token usage) is stored; parsing happens after the
lookup, so a parser fix re-reads old replies without a new call. The key names every input of
the judgment explicitly and nothing transport-only (no base URL timeout, no API key).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import diskcache
import orjson
from diskcache.core import EVICTION_POLICY

from groundjudge.judge.cache_disk import (
    DATABASE,
    CacheUnreadable,
    JsonDisk,
    LegacyEntry,
    check_database,
    reply_fields,
    unreadable,
)
from groundjudge.judge.render import JudgeItem
from groundjudge.judge.rubric import Rubric


def cache_key(rubric: Rubric, model: str, decoding: dict[str, Any], item: JudgeItem, *,
              rubric_hash: str | None = None) -> str:
    """The SHA-256 of every input of the judgment, as one canonical JSON document: sorted keys,
    no spaces, text as UTF-8 (``canonical_key_document``). ``rubric_hash``: the rubric's content
    hash when the caller has it already (hashing the rubric costs more than the rest of the key).
    For the keys of many items, :class:`CacheKeys` encodes what they share once."""
    return CacheKeys(rubric, model, decoding, rubric_hash=rubric_hash)(item)


class CacheKeys:
    """``cache_key`` of many items under one rubric, model and decoding (as they are when this
    is made): what every key shares is encoded once.

    orjson writes each key's document in one call: the item's strings exactly as
    ``json.dumps(..., ensure_ascii=False)`` does (checked for every code point), the shared
    parts as the ``json`` encoding made once (``orjson.Fragment``), the fields in sorted order.
    A nightly run makes hundreds of thousands of keys, so this avoids one ``json.dumps`` of the
    whole key each. Anything orjson refuses (a lone surrogate, say) takes the reference path."""

    __slots__ = ("_decoding", "_model", "_rubric", "_rubric_hash", "_shared")

    def __init__(self, rubric: Rubric, model: str, decoding: dict[str, Any], *, rubric_hash: str | None = None) -> None:
        self._rubric, self._model, self._decoding = rubric, model, decoding
        self._rubric_hash = rubric_hash or rubric.content_hash
        rubric_part, model_part = _rubric_and_model(rubric.id, rubric.version, self._rubric_hash, model)
        self._shared = (orjson.Fragment(canonical_json(decoding)), orjson.Fragment(model_part),
                        orjson.Fragment(rubric_part))

    def __call__(self, item: JudgeItem) -> str:
        decoding, model, rubric = self._shared
        # the ids and texts as tuples (orjson writes a tuple as a list; a sequence of another
        # type is refused, and then the reference path writes it as a list)
        ids, texts = zip(*item.contexts) if item.contexts else ((), ())
        try:
            canonical = orjson.dumps({  # keys in sorted order: orjson writes them as given
                "answer": item.answer,
                "citations": item.citations,
                "context_ids": ids,
                "contexts": texts,
                "decoding": decoding,
                "expected_answer": item.expected_answer,
                "model": model,
                "question": item.question,
                "rubric": rubric})
        except orjson.JSONEncodeError:
            canonical = canonical_json(canonical_key_document(self._rubric, self._model, self._decoding, item,
                                                              rubric_hash=self._rubric_hash))
        return hashlib.sha256(canonical).hexdigest()


def canonical_key_document(rubric: Rubric, model: str, decoding: dict[str, Any], item: JudgeItem, *,
                           rubric_hash: str | None = None) -> dict[str, Any]:
    """What the key is the hash of (``canonical_json`` of this document, the reference encoding)."""
    return {
        "rubric": {"id": rubric.id, "version": rubric.version, "hash": rubric_hash or rubric.content_hash},
        "model": model,
        "decoding": decoding,
        "question": item.question,
        "contexts": [text for _, text in item.contexts],
        "context_ids": [cid for cid, _ in item.contexts],
        "answer": item.answer,
        "citations": list(item.citations),
        "expected_answer": item.expected_answer,
    }


def canonical_json(value: Any) -> bytes:
    """The reference encoding of a cache key's document: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def canonical_strings(value: str | list[str] | list[dict[str, str]] | None) -> bytes:
    """``canonical_json(value)`` for text, a list of texts or of messages (keys and values all
    text), by orjson: it writes text exactly as ``json.dumps(..., ensure_ascii=False)`` does,
    which a test checks for every code point, and faster. Raises
    ``orjson.JSONEncodeError`` for what orjson refuses (a lone surrogate): callers then take
    ``canonical_json``."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@lru_cache(maxsize=64)
def _rubric_and_model(rubric_id: str, version: int, rubric_hash: str, model: str) -> tuple[bytes, bytes]:
    return canonical_json({"id": rubric_id, "version": version, "hash": rubric_hash}), canonical_json(model)


@lru_cache(maxsize=1)
def derivation_hash() -> str:
    """What a stored case result (``claim_check``'s case memo, see ``judge.claim_questions``) was derived
    with: the tool's version and the source of the judge package and of the judge item. Any
    change to how replies are read or combined makes it new, so the stored result is derived
    again from the stored replies (no call), as the reply cache's rule has it: parsing happens
    after the lookup."""
    from groundjudge import __version__

    package = Path(__file__).resolve().parent
    sources = [*sorted(package.glob("*.py")), package.parent / "select.py"]
    if not (package / "engine.py").is_file() or not sources[-1].is_file():
        # installed without its sources (byte code only): one version of the code cannot be
        # told from another, so no memo outlives this process
        return secrets.token_hex(16)
    digest = hashlib.sha256(__version__.encode("utf-8"))
    for path in sources:
        digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass
class CachedReply:
    raw: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    created: float
    repaired: bool = False  # True: this is the reply to the one repair retry
    history: list[str] = field(default_factory=list)  # earlier invalid replies for the same key


class JudgeCache:
    """A diskcache directory of JSON entries (``cache_disk.JsonDisk``: no pickles); safe across
    processes, so a killed run keeps what it stored.

    Opening a folder whose database is not one, or not a judge cache, raises
    ``CacheUnreadable`` with the one line to show. A database that breaks while the run uses it
    does not end the run: the cache is switched off for the rest of the run (every later
    lookup a miss, nothing more stored), ``problem`` says why, the report shows it and the run's
    reports are written as usual. Entries in an old form (pickles written before 0.3) are never
    decoded: they are misses, counted in ``legacy``."""

    def __init__(self, directory: str | Path, *, enabled: bool = True) -> None:
        self.directory = Path(directory)
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.legacy = 0
        self.problem: str | None = None
        self.on_problem: Callable[[str], None] | None = None  # told once when the cache breaks mid-run
        self._cache: diskcache.Cache | None = None
        if enabled:
            if self.directory.exists() and not self.directory.is_dir():
                raise CacheUnreadable(f"{self.directory}: the judge cache folder is a file; give --cache-dir a folder")
            check_database(self.directory)
            try:
                # never evicts on its own (diskcache's default drops the oldest entries past 1 GiB, and a
                # large nightly set would be asked again every night): `groundjudge cache prune` does
                self._cache = diskcache.Cache(str(self.directory), disk=JsonDisk, eviction_policy="none")
            except (sqlite3.DatabaseError, OSError) as exc:
                raise CacheUnreadable(unreadable(self.directory / "cache.db", exc)) from None

    def _broke(self, exc: BaseException) -> None:
        """Switch the cache off for the rest of the run, keeping the reason."""
        self.problem = unreadable(self.directory / "cache.db", exc)
        cache, self._cache = self._cache, None
        if cache is not None:
            try:
                cache.close()
            except (sqlite3.Error, OSError):
                pass
        if self.on_problem is not None:
            self.on_problem(self.problem)

    def get(self, key: str) -> CachedReply | None:
        if self._cache is None:
            self.misses += 1
            return None
        try:
            value = self._cache.get(key)
        except LegacyEntry:
            self.legacy += 1
            self.misses += 1
            return None
        except (sqlite3.DatabaseError, OSError) as exc:
            self._broke(exc)
            self.misses += 1
            return None
        return self._counted(value)

    def _read_in_place(self) -> bool:
        """Whether rows may be read straight from the database: a lookup changes nothing in it
        (no statistics, an eviction policy that updates nothing on reading)."""
        cache = self._cache
        return not (cache is None or cache.statistics or EVICTION_POLICY[cache.eviction_policy]["get"])

    def locate(self, keys: Sequence[str]) -> list[int] | None:
        """Each key's row id (0: none), found in one pass over the table's index of keys, where
        the keys are most of the table's rows (a nightly re-run over its own cache: looking up
        a key costs several times what passing it in the index does); None otherwise, or when
        the database cannot be read (then :meth:`get_many` looks each key up by itself)."""
        if not self._read_in_place() or len(keys) < 2:
            return None
        position = {key: i for i, key in enumerate(keys)}
        try:
            with closing(_read_only(self.directory / DATABASE)) as conn:
                count = conn.execute("SELECT value FROM Settings WHERE key = 'count'").fetchone()
                if count is None or type(count[0]) is not int or count[0] > _ROWS_PER_KEY_LOCATED * len(position):
                    return None
                rowids = [0] * len(keys)
                for key, rowid in conn.execute("SELECT key, rowid FROM Cache WHERE raw = 1"):
                    i = position.get(key)
                    if i is not None:
                        rowids[i] = rowid
        except (sqlite3.Error, OSError):
            return None
        return [rowids[position[key]] for key in keys]  # (a key given twice: at each of its places)

    def get_many(self, keys: Sequence[str], rowids: Sequence[int] | None = None) -> list[CachedReply | None]:
        """``get`` of each key, in order: the same entries, the same counts, the same rules.

        The rows are read in a few queries over diskcache's ``Cache`` table (the one
        ``diskcache.Cache.get`` reads, with its conditions: the key as text, not expired), on a
        read-only connection of this call's own, and decoded by the cache's own ``JsonDisk``.
        ``rowids``: where :meth:`locate` found each key's row (0: not found); the rows there are
        read by row id, and every key not found there by its key. That happens only where a
        lookup changes nothing in the database (``_read_in_place``); where it does, or where
        the read fails in any way, each key is looked up by :meth:`get`, which switches a
        broken cache off with its reason."""
        cache = self._cache
        if cache is None or len(keys) < 2 or not self._read_in_place():
            return [self.get(key) for key in keys]
        db_keys = [cache.disk.put(key) for key in keys]  # as get: a key that is not text is refused
        if not all(raw for _, raw in db_keys):
            return [self.get(key) for key in keys]
        try:
            rows = _read_rows(self.directory / DATABASE, [db_key for db_key, _ in db_keys], rowids)
        except (sqlite3.Error, OSError):
            return [self.get(key) for key in keys]
        out: list[CachedReply | None] = []
        for key in keys:
            row = rows.get(key)
            if row is None:
                self.misses += 1
                out.append(None)
                continue
            try:
                value = cache.disk.fetch(*row, False)
            except LegacyEntry:
                self.legacy += 1
                self.misses += 1
                out.append(None)
                continue
            except OSError:  # as diskcache's own lookup: the entry went while it was read
                self.misses += 1
                out.append(None)
                continue
            out.append(self._counted(value))
        return out

    def _counted(self, value: Any) -> CachedReply | None:
        """A stored value (None: no entry) as a reply, counted as a hit, a miss or a legacy entry."""
        reply = _reply(value) if value is not None else None
        if reply is None:
            if value is not None:
                self.legacy += 1
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def put(self, key: str, reply: CachedReply) -> None:
        if self._cache is not None:
            try:
                self._cache.set(key, reply.__dict__)
            except (sqlite3.DatabaseError, OSError) as exc:
                self._broke(exc)

    def put_many(self, entries: Iterable[tuple[str, CachedReply]]) -> None:
        """Store several entries in one transaction: one commit to disk instead of one each."""
        if self._cache is not None:
            try:
                with self._cache.transact():
                    for key, reply in entries:
                        self._cache.set(key, reply.__dict__)
            except (sqlite3.DatabaseError, OSError) as exc:
                self._broke(exc)

    def stats(self) -> dict[str, Any]:
        entries = size = 0
        if self._cache is not None:
            try:
                entries, size = len(self._cache), self._cache.volume()
            except (sqlite3.DatabaseError, OSError) as exc:
                self._broke(exc)
        out = {"directory": str(self.directory), "enabled": self.enabled, "entries": entries,
               "size_bytes": size, "hits": self.hits, "misses": self.misses}
        if self.legacy:
            out["legacy_entries_skipped"] = self.legacy
        if self.problem:
            out["problem"] = self.problem
        return out

    def prune(self, older_than_days: float) -> int:
        """Drop replies stored more than ``older_than_days`` ago; return how many. Entries this
        version cannot read (old pickles) are dropped too, unread."""
        if self._cache is None:
            return 0
        cutoff = time.time() - older_than_days * 86400
        removed = 0
        for key in list(self._cache.iterkeys()):
            try:
                value = self._cache.get(key)
            except LegacyEntry:
                value = None
            if value is None or not isinstance(value.get("created", 0), (int, float)) or value.get("created", 0) < cutoff:
                removed += int(self._cache.delete(key))
        return removed

    def clear(self) -> int:
        return self._cache.clear() if self._cache is not None else 0

    def close(self) -> None:
        if self._cache is not None:
            try:
                self._cache.close()
            except (sqlite3.Error, OSError):
                pass


_KEYS_PER_QUERY = 500  # well under SQLite's limit on a statement's parameters
# keys are located in one pass over the index when the table has at most this many rows per key
_ROWS_PER_KEY_LOCATED = 2


def _read_only(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=60)


def _read_rows(database: Path, keys: Sequence[str], rowids: Sequence[int] | None = None,
               ) -> dict[str, tuple[int, str | None, Any]]:
    """(mode, filename, value) of the rows of these keys, by key, as ``diskcache.Cache.get``
    selects them: the key as it is (``raw``), not expired. ``rowids``: each key's row id where
    known (0: not known); those rows are read by id, every key not among them by its key."""
    found: dict[str, tuple[int, str | None, Any]] = {}
    now = time.time()
    live = "raw = 1 AND (expire_time IS NULL OR expire_time > ?)"
    with closing(_read_only(database)) as conn:
        rest = list(dict.fromkeys(keys))
        if rowids is not None:
            known = sorted({rowid for rowid in rowids if rowid})
            for start in range(0, len(known), _KEYS_PER_QUERY):
                ids = known[start:start + _KEYS_PER_QUERY]
                query = f"SELECT key, mode, filename, value FROM Cache WHERE rowid IN ({','.join('?' * len(ids))}) AND {live}"
                for key, mode, filename, value in conn.execute(query, (*ids, now)):
                    found[key] = (mode, filename, value)
            rest = [key for key in rest if key not in found]  # (a row gone or moved since: by its key)
        for start in range(0, len(rest), _KEYS_PER_QUERY):
            part = rest[start:start + _KEYS_PER_QUERY]
            query = f"SELECT key, mode, filename, value FROM Cache WHERE key IN ({','.join('?' * len(part))}) AND {live}"
            for key, mode, filename, value in conn.execute(query, (*part, now)):
                found[key] = (mode, filename, value)
    return found


def _reply(value: Any) -> CachedReply | None:
    """A stored entry as a ``CachedReply``; None when it is not one (wrong fields or types)."""
    fields = reply_fields(value)
    return CachedReply(**fields) if fields is not None else None
