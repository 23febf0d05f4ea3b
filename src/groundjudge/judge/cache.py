"""The judge cache (SPEC 5.4): raw replies in diskcache, keyed by what the verdict depends on.

Only the raw reply (with its model id and token usage) is stored; parsing happens after the
lookup, so a parser fix re-reads old replies without a new call. The key names every input of
the judgment explicitly and nothing transport-only (no base URL timeout, no API key).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import diskcache

from groundjudge.judge.render import JudgeItem
from groundjudge.judge.rubric import Rubric


def cache_key(rubric: Rubric, model: str, decoding: dict[str, Any], item: JudgeItem, *,
              rubric_hash: str | None = None) -> str:
    """``rubric_hash``: the rubric's content hash when the caller has it already (hashing the
    rubric costs more than the rest of the key)."""
    parts = {
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
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
    """A diskcache directory; safe across processes, so a killed run keeps what it stored."""

    def __init__(self, directory: str | Path, *, enabled: bool = True) -> None:
        self.directory = Path(directory)
        self.enabled = enabled
        self._cache = diskcache.Cache(str(self.directory)) if enabled else None
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> CachedReply | None:
        if self._cache is None:
            self.misses += 1
            return None
        value = self._cache.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return CachedReply(**value)

    def put(self, key: str, reply: CachedReply) -> None:
        if self._cache is not None:
            self._cache.set(key, reply.__dict__)

    def stats(self) -> dict[str, Any]:
        entries = len(self._cache) if self._cache is not None else 0
        size = self._cache.volume() if self._cache is not None else 0
        return {"directory": str(self.directory), "enabled": self.enabled, "entries": entries,
                "size_bytes": size, "hits": self.hits, "misses": self.misses}

    def prune(self, older_than_days: float) -> int:
        """Drop replies stored more than ``older_than_days`` ago; return how many."""
        if self._cache is None:
            return 0
        cutoff = time.time() - older_than_days * 86400
        removed = 0
        for key in list(self._cache.iterkeys()):
            value = self._cache.get(key)
            if value is None or value.get("created", 0) < cutoff:
                removed += int(self._cache.delete(key))
        return removed

    def clear(self) -> int:
        return self._cache.clear() if self._cache is not None else 0

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
