"""The metric batches scored on a Ray cluster (``groundjudge run --engine ray``).

Each batch of (config, case) pairs is one row of a Ray dataset; ``map_batches`` runs the same
batch function as the default engine (``evaluate.score_pairs``: a batch of pairs in, a record
batch out) on whichever node Ray picks. The batches are exactly the default engine's, so each
record batch, and every table and summary made from them, is the same. A record batch comes
back as Arrow's IPC stream (its schema kept as it was, which a Ray block merging several
batches would widen), its facts pickled beside it.

The dataset and settings are put in Ray's object store once; a worker process reads them once
and keeps them for every batch it scores.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from groundjudge.load.dataset import Dataset
from groundjudge.metrics.case import MetricSettings
from groundjudge.metrics.table import CaseFacts

__all__ = ["score_batches"]

STAGE = "metrics"


def score_batches(dataset: Dataset, settings: MetricSettings, batches: Sequence[Sequence[tuple[str, str]]],
                  ) -> tuple[list[tuple[pa.RecordBatch, list[CaseFacts]]], set[str]]:
    """``evaluate.score_pairs`` of each batch, in order, computed on the Ray cluster this
    process is connected to; and the ids of the nodes that computed them."""
    import ray
    import ray.data

    if not batches:
        return [], set()
    shared = ray.put((dataset, settings))
    rows = [{"batch": i, "config_id": [c for c, _ in pairs], "case_id": [k for _, k in pairs]}
            for i, pairs in enumerate(batches)]
    # a list around the reference: Ray would otherwise fetch and unpickle the whole dataset
    # again for every batch, where a worker needs it once
    scored = (ray.data.from_items(rows, override_num_blocks=len(rows))
              .map_batches(partial(_score, shared=[shared]), batch_size=1, batch_format="pyarrow"))
    out: list[tuple[pa.RecordBatch, list[CaseFacts]] | None] = [None] * len(batches)
    nodes: set[str] = set()
    for row in scored.iter_rows():
        i = int(row["batch"])
        batch = pa.ipc.open_stream(row["metrics"]).read_next_batch()
        facts: list[CaseFacts] = pickle.loads(row["facts"])
        if batch.column("config_id").to_pylist() != rows[i]["config_id"] or \
                batch.column("case_id").to_pylist() != rows[i]["case_id"]:
            raise RuntimeError(f"ray: metric batch {i} came back with other rows than were sent")
        out[i] = batch, facts
        nodes.add(row["node"])
    missing = [i for i, done in enumerate(out) if done is None]
    if missing:
        raise RuntimeError(f"ray: {len(missing)} metric batches did not come back (first: {missing[0]})")
    return [done for done in out if done is not None], nodes


# What this worker process scores against, by object id: read once per worker.
_SHARED: dict[str, tuple[Dataset, MetricSettings]] = {}


def _score(table: pa.Table, shared: list[Any]) -> pa.Table:
    """Ray's map over batches: each row, a batch of pairs, scored by ``evaluate.score_pairs``."""
    import ray

    from groundjudge.metrics.evaluate import score_pairs

    ref = shared[0]
    key = ref.hex()
    if key not in _SHARED:
        _SHARED.clear()  # the dataset of an earlier run on this worker is not needed again
        _SHARED[key] = ray.get(ref)
    dataset, settings = _SHARED[key]
    node = ray.get_runtime_context().get_node_id()
    out: dict[str, list[Any]] = {"batch": [], "metrics": [], "facts": [], "node": []}
    for row in table.to_pylist():
        batch, facts = score_pairs(dataset, settings, list(zip(row["config_id"], row["case_id"], strict=True)))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        out["batch"].append(row["batch"])
        out["metrics"].append(sink.getvalue().to_pybytes())
        out["facts"].append(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL))
        out["node"].append(node)
    return pa.table({"batch": pa.array(out["batch"], pa.int64()), "metrics": pa.array(out["metrics"], pa.binary()),
                     "facts": pa.array(out["facts"], pa.binary()), "node": pa.array(out["node"], pa.string())})
