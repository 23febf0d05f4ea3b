"""The machine-readable metrics document (``metrics.json``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from groundjudge.load.dataset import Dataset
from groundjudge.metrics.case import MetricSettings
from groundjudge.metrics.evaluate import MetricsRun
from groundjudge.provenance import provenance

SCHEMA_VERSION = 1


def metrics_document(dataset: Dataset, run: MetricsRun, settings: MetricSettings) -> dict[str, Any]:
    """Everything the deterministic stage found.

    ``aggregate`` pools every scored trace; ``per_config`` holds each config's aggregate,
    breakdowns and per-case values. With a single config, ``per_case`` (case id -> metric ->
    value) is also given at the top level.
    """
    per_config: dict[str, Any] = {}
    for cfg_id, cfg in run.configs.items():
        versions: dict[str, set[str]] = {}
        for variants in dataset.traces[cfg_id].values():
            for trace in variants.values():
                for key, value in trace.versions.items():
                    versions.setdefault(key, set()).add(value)
        per_config[cfg_id] = {
            "versions": {key: sorted(values) for key, values in sorted(versions.items())},
            "aggregate": cfg.aggregate,
            "by_tag": cfg.breakdown["tag"],
            "by_difficulty": cfg.breakdown["difficulty"],
            "by_content_type": cfg.breakdown["content_type"],
            "per_case": {c.case_id: c.values for c in cfg.cases},
            "case_details": {
                c.case_id: {
                    "observed_behavior": c.behavior,
                    "expected_behavior": dataset.cases[c.case_id].expected_behavior,
                    "acl_leaks": [asdict(leak) for leak in c.acl_leaks],
                    "content_types": c.content_types,
                }
                for c in cfg.cases
            },
        }
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "groundjudge.metrics",
        "provenance": provenance(),
        "inputs": dataset.sources,
        "settings": {"ks": list(settings.ks), "offset_window_bytes": settings.offset_window,
                     "stability_k": settings.stability_k,
                     "refusal_token": settings.rules.refusal_token},
        "configs": list(run.configs),
        "accounting": {
            "cases": len(dataset.cases),
            "scored": {cfg: len(c.cases) for cfg, c in run.configs.items()},
            "missing_trace": dataset.missing_trace,
            "missing_text": dataset.missing_text,
            "unresolved_chunk_ids": dataset.unresolved_chunks,
        },
        "aggregate": run.overall,
        "per_config": per_config,
    }
    if len(run.configs) == 1:
        doc["per_case"] = next(iter(per_config.values()))["per_case"]
    return doc
