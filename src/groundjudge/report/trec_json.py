"""The metrics document for TREC qrels + run input, in the same shape as for traces, and its
files: metrics.json as built, report.md rendered from the document read in place (no model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundjudge.files import check_outputs, write_json_atomic, write_text_atomic
from groundjudge.load.trec import read_qrels, read_run
from groundjudge.metrics.retrieval import evaluate_trec
from groundjudge.provenance import provenance
from groundjudge.report.document_view import MetricsView, view_of
from groundjudge.report.markdown import render_markdown
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


def write_trec_reports(doc: dict[str, Any], out_dir: Path) -> MetricsView:
    """metrics.json and report.md of ``doc`` (as :func:`trec_document` built it) in ``out_dir``:
    the files :func:`groundjudge.api.write_metrics_reports` writes from it, without validating
    it into the typed document. Returns the view report.md was rendered from."""
    view = view_of(doc)
    text = render_markdown(view)
    write_json_atomic(out_dir / "metrics.json", doc)
    write_text_atomic(out_dir / "report.md", text)
    return view


def run_trec(qrels_path: Path, run_path: Path, ks: Sequence[int], out_dir: Path) -> MetricsView:
    """``groundjudge metrics`` on TREC files alone: the output folder checked, the files read
    and evaluated, metrics.json and report.md written; returns the view report.md was rendered from."""
    check_outputs(out_dir)
    return write_trec_reports(trec_document(qrels_path, run_path, ks), out_dir)
