"""What report.md and the terminal summary read of a metrics document (:class:`MetricsView`):
the typed document (:class:`~groundjudge.report.metrics_document.MetricsDocument`) is one, and
so is a metrics.json document held as a dict, read in place by :func:`view_of`. A document
built as a dict (TREC qrels and run: :mod:`.trec_json`) is so rendered without a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol


class ValueView(Protocol):
    """A metric's mean with its denominator (:class:`~groundjudge.metrics.value.MetricValue`)."""

    @property
    def value(self) -> float | None: ...
    @property
    def n(self) -> int: ...
    @property
    def reason(self) -> str | None: ...


class CaseDetailView(Protocol):
    @property
    def acl_leaks(self) -> Sequence[Mapping[str, Any]]: ...


class ConfigView(Protocol):
    @property
    def versions(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def aggregate(self) -> Mapping[str, ValueView]: ...
    @property
    def by_tag(self) -> Mapping[str, Mapping[str, ValueView]]: ...
    @property
    def by_difficulty(self) -> Mapping[str, Mapping[str, ValueView]]: ...
    @property
    def per_case(self) -> Mapping[str, Mapping[str, float | None]]: ...
    @property
    def case_details(self) -> Mapping[str, CaseDetailView]: ...


class AccountingView(Protocol):
    @property
    def cases(self) -> int: ...
    @property
    def scored(self) -> Mapping[str, int]: ...
    @property
    def missing_trace(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def missing_text(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def unresolved_chunk_ids(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def run_queries_not_in_qrels(self) -> Sequence[str] | None: ...
    @property
    def skipped_traces(self) -> Mapping[str, str] | None: ...


class ProvenanceView(Protocol):
    @property
    def tool_version(self) -> str: ...
    @property
    def git_commit(self) -> str | None: ...
    @property
    def git_dirty(self) -> bool | None: ...
    @property
    def python(self) -> str: ...


class MetricsView(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, str]: ...
    @property
    def configs(self) -> Sequence[str]: ...
    @property
    def accounting(self) -> AccountingView: ...
    @property
    def per_config(self) -> Mapping[str, ConfigView]: ...
    @property
    def provenance(self) -> ProvenanceView: ...


# --- a metrics.json dict, read in place --------------------------------------------------------

class _Value(NamedTuple):
    value: float | None
    n: int
    reason: str | None


class _CaseDetail(NamedTuple):
    acl_leaks: Sequence[Mapping[str, Any]]


class _Config(NamedTuple):
    versions: Mapping[str, Sequence[str]]
    aggregate: Mapping[str, _Value]
    by_tag: Mapping[str, Mapping[str, _Value]]
    by_difficulty: Mapping[str, Mapping[str, _Value]]
    per_case: Mapping[str, Mapping[str, float | None]]
    case_details: Mapping[str, _CaseDetail]


class _Accounting(NamedTuple):
    cases: int
    scored: Mapping[str, int]
    missing_trace: Mapping[str, Sequence[str]]
    missing_text: Mapping[str, Sequence[str]]
    unresolved_chunk_ids: Mapping[str, Sequence[str]]
    run_queries_not_in_qrels: Sequence[str] | None
    skipped_traces: Mapping[str, str] | None


class _Provenance(NamedTuple):
    tool_version: str
    git_commit: str | None
    git_dirty: bool | None
    python: str


class _Document(NamedTuple):
    kind: str
    inputs: Mapping[str, str]
    configs: Sequence[str]
    accounting: _Accounting
    per_config: Mapping[str, _Config]
    provenance: _Provenance


def view_of(doc: Mapping[str, Any]) -> MetricsView:
    """``doc``, a metrics.json document as a dict (in the shape the models check), as a
    :class:`MetricsView`; values are read as they are, not checked."""
    acc = doc["accounting"]
    prov = doc["provenance"]
    return _Document(
        kind=doc["kind"], inputs=doc["inputs"], configs=doc["configs"],
        accounting=_Accounting(acc["cases"], acc["scored"], acc["missing_trace"], acc["missing_text"],
                               acc["unresolved_chunk_ids"], acc.get("run_queries_not_in_qrels"),
                               acc.get("skipped_traces")),
        per_config={cfg: _config(section) for cfg, section in doc["per_config"].items()},
        provenance=_Provenance(prov["tool_version"], prov["git_commit"], prov["git_dirty"], prov["python"]),
    )


def _config(section: Mapping[str, Any]) -> _Config:
    return _Config(
        versions=section.get("versions", {}), aggregate=_values(section["aggregate"]),
        by_tag=_groups(section["by_tag"]), by_difficulty=_groups(section["by_difficulty"]),
        per_case=section["per_case"],
        case_details={cid: _CaseDetail(detail["acl_leaks"]) for cid, detail in section["case_details"].items()},
    )


def _values(means: Mapping[str, Mapping[str, Any]]) -> dict[str, _Value]:
    return {metric: _Value(mean["value"], mean["n"], mean.get("reason")) for metric, mean in means.items()}


def _groups(groups: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, _Value]]:
    return {group: _values(means) for group, means in groups.items()}
