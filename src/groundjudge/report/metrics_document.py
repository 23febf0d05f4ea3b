"""The models of ``metrics.json``, the deterministic stage's document (``report.json`` extends
it: :mod:`.document`). Apart, so that reading or rendering it loads no judge, gate or Arrow code."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from groundjudge.metrics.value import MetricValue
from groundjudge.versions import SCHEMA_VERSION


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Provenance(_Doc):
    model_config = ConfigDict(frozen=True, extra="allow")
    tool: str
    tool_version: str
    git_commit: str | None
    git_dirty: bool | None
    python: str
    packages: dict[str, str | None]


class CaseDetail(_Doc):
    observed_behavior: str | None  # None: not recorded (no behaviour field, no answer text)
    expected_behavior: str | None  # None: the golden set does not record it
    acl_leaks: list[dict[str, Any]]
    content_types: list[str]


class ConfigMetrics(_Doc):
    versions: dict[str, list[str]] = Field(default_factory=dict)
    aggregate: dict[str, MetricValue]
    by_tag: dict[str, dict[str, MetricValue]]
    by_difficulty: dict[str, dict[str, MetricValue]]
    by_content_type: dict[str, dict[str, MetricValue]]
    per_case: dict[str, dict[str, float | None]]
    case_details: dict[str, CaseDetail]


class Accounting(_Doc):
    cases: int
    scored: dict[str, int]
    missing_trace: dict[str, list[str]]
    missing_text: dict[str, list[str]]
    unresolved_chunk_ids: dict[str, list[str]]
    run_queries_not_in_qrels: list[str] | None = None  # TREC inputs: left out of means
    # trace exports (otel): traces that could not be made a case -> why; None for other inputs
    skipped_traces: dict[str, str] | None = None


class MetricsSettings(_Doc):
    ks: list[int]
    offset_window_bytes: int | None = None
    stability_k: int | None = None
    refusal_token: str | None = None
    averaging: str | None = None  # TREC inputs: how means are taken


class MetricsDocument(_Doc):
    """``metrics.json``: everything the deterministic stage found."""

    schema_version: Literal[4] = SCHEMA_VERSION
    kind: Literal["groundjudge.metrics", "groundjudge.report"] = "groundjudge.metrics"
    provenance: Provenance
    inputs: dict[str, str]
    settings: MetricsSettings
    configs: list[str]
    accounting: Accounting
    aggregate: dict[str, MetricValue]
    per_config: dict[str, ConfigMetrics]
    per_case: dict[str, dict[str, float | None]] | None = None  # with a single config, its per_case
