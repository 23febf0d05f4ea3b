"""The metrics document for TREC qrels + run input, in the same shape as for traces."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundjudge.load.trec import read_qrels, read_run
from groundjudge.metrics.retrieval import evaluate_trec
from groundjudge.provenance import provenance
from groundjudge.versions import SCHEMA_VERSION


def trec_document(qrels_path: Path, run_path: Path, ks: Sequence[int]) -> dict[str, Any]:
    """Ranked-retrieval metrics with trec_eval's conventions: means over queries in both files."""
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    per_query, means = evaluate_trec(qrels, run, ks)
    config_id = run_path.name
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "groundjudge.metrics",
        "provenance": provenance(),
        "inputs": {"qrels": str(qrels_path), "run": str(run_path)},
        "settings": {"ks": list(ks), "averaging": "mean over queries in both qrels and run"},
        "configs": [config_id],
        "accounting": {
            "cases": len(qrels),
            "scored": {config_id: len(per_query)},
            "missing_trace": {config_id: sorted(q for q in qrels if q not in run)},
            "missing_text": {},
            "unresolved_chunk_ids": {},
            "run_queries_not_in_qrels": sorted(q for q in run if q not in qrels),
        },
        "aggregate": means,
        "per_config": {
            config_id: {"aggregate": means, "by_tag": {}, "by_difficulty": {}, "by_content_type": {},
                        "per_case": per_query, "case_details": {}},
        },
        "per_case": per_query,
    }
