"""The judge's cache lookup on a Ray cluster (``groundjudge run --engine ray``).

The items are cut into batches, one row of a Ray dataset each; ``map_batches`` runs the
engine's own lookup (``JudgeEngine.from_cache_only``: the protocol's ``from_cached`` for every
item) against the same cache folder on whichever node Ray picks. What comes back is what the
lookup in this process gives: each item's result where the cache settles it, else its key and
the entry found; the engine's and the cache's counters are added up here. The items the cache
does not settle are judged by this process as usual.

The cache folder must be readable at the same path on every node (a shared filesystem), as the
judge's cache is one diskcache database.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from groundjudge.judge.cache import CachedReply, JudgeCache
from groundjudge.judge.item import JudgeItem
from groundjudge.judge.results import CaseJudgement
from groundjudge.judge.rubric import Rubric

if TYPE_CHECKING:
    from groundjudge.judge.engine import JudgeEngine

__all__ = ["LOOKUP_BATCH", "look_up"]

STAGE = "judge cache lookup"
LOOKUP_BATCH = 2_000  # items per Ray task

Looked = tuple[CaseJudgement | None, str, CachedReply | None]


def look_up(engine: JudgeEngine, items: Sequence[JudgeItem], why: Sequence[str | None]) -> tuple[list[Looked], set[str]]:
    """``engine``'s cache lookup of ``items`` in order, computed on the Ray cluster; and the ids
    of the nodes that did it. The engine's totals and its cache's counters grow as they would
    have in this process."""
    import ray
    import ray.data

    if not items:
        return [], set()
    spec = ray.put((engine.rubric, str(engine.cache.directory), engine.cache.enabled, engine.model,
                    engine.decoding, engine.retry_errors))
    rows = [{"batch": i, "items": pickle.dumps((list(items[start:start + LOOKUP_BATCH]),
                                               list(why[start:start + LOOKUP_BATCH])),
                                              protocol=pickle.HIGHEST_PROTOCOL)}
            for i, start in enumerate(range(0, len(items), LOOKUP_BATCH))]
    found = (ray.data.from_items(rows, override_num_blocks=len(rows))
             .map_batches(partial(_look_up, shared=[spec]), batch_size=1, batch_format="pyarrow"))
    out: list[list[Looked] | None] = [None] * len(rows)
    nodes: set[str] = set()
    totals, cache = engine.totals, engine.cache
    for row in found.iter_rows():
        looked, counts = pickle.loads(row["looked"])
        out[int(row["batch"])] = looked
        nodes.add(row["node"])
        totals.cache_hits += counts["cache_hits"]
        totals.done += counts["done"]
        totals.errors += counts["errors"]
        cache.hits += counts["hits"]
        cache.misses += counts["misses"]
        cache.legacy += counts["legacy"]
    if any(part is None for part in out):
        raise RuntimeError("ray: a batch of the judge cache lookup did not come back")
    if engine.on_progress is not None:
        engine.on_progress(totals)
    return [one for part in out if part is not None for one in part], nodes


# The engine each worker process looks up with, by object id: made once per worker.
_ENGINES: dict[str, JudgeEngine] = {}


def _engine(ref: Any) -> JudgeEngine:
    import ray

    from groundjudge.judge.engine import JudgeEngine

    key = ref.hex()
    if key not in _ENGINES:
        for old in _ENGINES.values():
            old.cache.close()
        _ENGINES.clear()
        rubric: Rubric
        rubric, directory, enabled, model, decoding, retry_errors = ray.get(ref)
        _ENGINES[key] = JudgeEngine(rubric=rubric, cache=JudgeCache(directory, enabled=enabled), model=model,
                                    decoding=decoding, retry_errors=retry_errors)
    return _ENGINES[key]


def _look_up(table: pa.Table, shared: list[Any]) -> pa.Table:
    """Ray's map over batches: each row, a batch of items looked up by the engine in this worker."""
    import ray

    engine = _engine(shared[0])
    node = ray.get_runtime_context().get_node_id()
    batches, looked, nodes = [], [], []
    for row in table.to_pylist():
        items, why = pickle.loads(row["items"])
        before = (engine.totals.cache_hits, engine.totals.done, engine.totals.errors,
                  engine.cache.hits, engine.cache.misses, engine.cache.legacy)
        results = engine.from_cache_only(items, why)
        after = (engine.totals.cache_hits, engine.totals.done, engine.totals.errors,
                 engine.cache.hits, engine.cache.misses, engine.cache.legacy)
        counts = dict(zip(("cache_hits", "done", "errors", "hits", "misses", "legacy"),
                          (b - a for a, b in zip(before, after, strict=True)), strict=True))
        batches.append(row["batch"])
        looked.append(pickle.dumps((results, counts), protocol=pickle.HIGHEST_PROTOCOL))
        nodes.append(node)
    return pa.table({"batch": pa.array(batches, pa.int64()), "looked": pa.array(looked, pa.binary()),
                     "node": pa.array(nodes, pa.string())})
