"""The judge engine run on items against a scripted server, with its own cache folder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import JudgeEngine


def judge_items(srv: Any, rubric: Any, items: list[Any], cache_dir: Path, *, concurrency: int = 1):
    """(results in the items' order, the engine with its totals)."""
    client = JudgeClient(ClientSettings(base_url=srv.base_url, model=srv.model, timeout_s=60, max_attempts=2))
    cache = JudgeCache(cache_dir)
    engine = JudgeEngine(rubric=rubric, client=client, cache=cache, concurrency=concurrency)
    try:
        return asyncio.run(engine.run(items)), engine
    finally:
        cache.close()
