"""The machine-readable documents, as models: ``metrics.json`` and ``report.json``.

(The models of ``metrics.json`` are in :mod:`.metrics_document`, which loads without the judge and
gate stages: ``groundjudge metrics`` on TREC files starts in a fraction of a second.)

Both are built from the typed run once, at the edge, and their JSON Schemas
(``groundjudge schema metrics|report``) are generated from these same models, so the published
schema cannot drift from what is written. ``schema_version`` 2 is the first version built
this way (3 adds the ``unchecked`` claim verdict and ``usage.unmetered``; 4 a metric value's
``reason`` and case details whose behaviour was not recorded); readers name the version they
found when they cannot read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Any, Literal, cast

import msgspec
from pydantic import BaseModel, ConfigDict, TypeAdapter

from groundjudge.calibrate.stability import StabilityCheck
from groundjudge.contracts import GoldenCase
from groundjudge.files import compact_json, write_chunks_atomic, write_json_atomic
from groundjudge.gate import GateReport
from groundjudge.judge.results import CaseJudgement, ConfigJudgement, JudgeRun, VerdictFields, verdict_fields
from groundjudge.load.dataset import Dataset
from groundjudge.metrics.case import CaseMetrics, MetricSettings
from groundjudge.metrics.evaluate import MetricsRun
from groundjudge.metrics.table import MetricValues, as_dicts, row_runs
from groundjudge.metrics.value import MetricValue
from groundjudge.provenance import provenance
from groundjudge.report.metrics_document import (
    Accounting,
    CaseDetail,
    ConfigMetrics,
    MetricsDocument,
    MetricsSettings,
    Provenance,
)


class _Doc(BaseModel):  # as the metrics document's models
    model_config = ConfigDict(frozen=True, extra="forbid")


class CriterionAgreement(_Doc):
    model_config = ConfigDict(frozen=True, extra="allow")
    judge_vs_human: dict[str, Any]
    inter_rater: dict[str, dict[str, Any]]


class DecidingRecord(_Doc):
    """The record that decides a criterion's trust, and its evidence."""

    path: str | None
    labels_hash: str | None  # None: a legacy record, written before its labels were recorded
    n: int | None
    raters: dict[str, int]
    created: str | None = None


class RecordListing(_Doc):
    """One calibration record of this judge, and the criteria it decides (none: outranked)."""

    path: str | None
    labels_hash: str | None
    raters: dict[str, int]
    n: dict[str, int | None]
    created: str | None = None
    decides: list[str]


class CalibrationSummary(_Doc):
    """The calibration records this run's judge is held to (exactly its rubric, model, decoding):
    per criterion the figures of the record that decides it (``decided_by``, by ``rule``); the
    top-level path, raters and claims are those of the record deciding the most criteria."""

    path: str
    primary_rater: str
    raters: dict[str, int]
    criteria: dict[str, CriterionAgreement]
    claims: dict[str, Any]
    rule: str | None = None  # absent from reports written before records named their evidence
    decided_by: dict[str, DecidingRecord] = {}
    records: list[RecordListing] = []


class ReportDocument(MetricsDocument):
    """``report.json``: the deterministic metrics, the judge, the gates and calibration."""

    kind: Literal["groundjudge.metrics", "groundjudge.report"] = "groundjudge.report"
    judge: JudgeRun
    gates: GateReport
    calibration: CalibrationSummary | None
    bias_corrected: dict[str, Any] | None = None  # PPI estimates, with --labels
    escalation: JudgeRun | None = None  # the escalation judge's verdicts (selective trust)
    # verdicts inside their criterion's noise band, or why none could be checked (None: the
    # rubric has no verdict that is a support against a threshold)
    stability: StabilityCheck | None = None


def _summaries(values: dict[str, Any]) -> dict[str, MetricValue]:
    return {k: MetricValue(value=v["value"], n=v["n"], reason=v.get("reason")) for k, v in values.items()}


def _expected_behavior(case: GoldenCase) -> str | None:
    return None if "expected_behavior" in case.not_recorded else case.expected_behavior


def metrics_document(dataset: Dataset, run: MetricsRun, settings: MetricSettings) -> MetricsDocument:
    """Everything the deterministic stage found.

    ``aggregate`` pools every scored trace; ``per_config`` holds each config's aggregate,
    breakdowns and per-case values. With a single config, ``per_case`` (case id -> metric ->
    value) is also given at the top level.
    """
    per_config: dict[str, ConfigMetrics] = {}
    details = _Details()
    for cfg_id, cfg in run.configs.items():
        versions: dict[str, set[str]] = {}
        paraphrases = dataset.paraphrases.get(cfg_id, {})
        for trace in chain(dataset.traces[cfg_id].values(),
                           chain.from_iterable(variants.values() for variants in paraphrases.values())):
            for key, value in trace.versions.items():
                versions.setdefault(key, set()).add(value)
        small = ConfigMetrics(
            versions={key: sorted(values) for key, values in sorted(versions.items())},
            aggregate=_summaries(cfg.aggregate),
            by_tag={g: _summaries(v) for g, v in cfg.breakdown["tag"].items()},
            by_difficulty={g: _summaries(v) for g, v in cfg.breakdown["difficulty"].items()},
            by_content_type={g: _summaries(v) for g, v in cfg.breakdown["content_type"].items()},
            per_case={}, case_details={})
        # The per-case parts are built from typed records already: not validated again, the
        # metric values are the metrics stage's own mappings, not copies, and equal details are
        # one (frozen) object (nightly runs hold hundreds of thousands of them).
        per_config[cfg_id] = small.model_copy(update={
            "per_case": {c.case_id: _floats(c.values) for c in cfg.cases},
            "case_details": {c.case_id: details.of(c, _expected_behavior(dataset.cases[c.case_id])) for c in cfg.cases}})
    return MetricsDocument(
        provenance=Provenance.model_validate(provenance()), inputs=dataset.sources,
        settings=MetricsSettings(ks=list(settings.ks), offset_window_bytes=settings.offset_window,
                                 stability_k=settings.stability_k, refusal_token=settings.rules.refusal_token),
        configs=list(run.configs),
        accounting=Accounting(cases=len(dataset.cases), scored={cfg: len(c.cases) for cfg, c in run.configs.items()},
                              missing_trace=dataset.missing_trace, missing_text=dataset.missing_text,
                              unresolved_chunk_ids=dataset.unresolved_chunks,
                              skipped_traces=dataset.skipped_traces or None),
        aggregate=_summaries(run.overall), per_config=per_config,
        per_case=next(iter(per_config.values())).per_case if len(per_config) == 1 else None,
    )


class _Details:
    """One ``CaseDetail`` object per distinct detail without ACL leaks: a nightly run's pairs
    have only a handful of distinct ones, and an object per pair would cost memory for nothing."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str | None, str | None, tuple[str, ...]], CaseDetail] = {}

    def of(self, case: CaseMetrics, expected: str | None) -> CaseDetail:
        if case.acl_leaks:
            return CaseDetail.model_construct(observed_behavior=case.behavior, expected_behavior=expected,
                                              acl_leaks=[asdict(leak) for leak in case.acl_leaks],
                                              content_types=list(case.content_types))
        key = (case.behavior, expected, tuple(case.content_types))
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = CaseDetail.model_construct(
                observed_behavior=case.behavior, expected_behavior=expected, acl_leaks=[],
                content_types=list(case.content_types))
        return found


_JSON_FLOAT = {float, type(None)}


def _floats(values: Mapping[str, float | None]) -> Mapping[str, float | None]:
    """The values as the document's ``float | None`` type holds them (an int or bool becomes a
    float, as validation would make it); the same mapping when they are already (a
    ``MetricValues`` always is)."""
    if isinstance(values, MetricValues) or set(map(type, values.values())) <= _JSON_FLOAT:
        return values
    return {k: None if v is None else float(v) for k, v in values.items()}


class _Entries:
    """A large mapping of a document (a config's per-case values, details or verdicts), written
    a slice of entries at a time, each value made plain JSON by ``dump`` (a slice of values in, a
    list of JSON values out): the whole document as JSON would cost as much memory again as the
    typed run it is made from. ``encode``, where given, writes a slice (a mapping) as JSON bytes
    in one step, the same bytes as ``compact_json`` of its values dumped."""

    __slots__ = ("dump", "encode", "mapping")

    def __init__(self, mapping: Mapping[str, Any], dump: Callable[[list[Any]], list[Any]],
                 encode: Callable[[dict[str, Any]], bytes] | None = None) -> None:
        self.mapping, self.dump, self.encode = mapping, dump, encode

    def _parts(self) -> Iterator[list[tuple[str, Any]]]:
        items = list(self.mapping.items())
        for start in range(0, len(items), _SLICE):
            yield items[start:start + _SLICE]

    def slices(self) -> Iterator[dict[str, Any]]:
        for part in self._parts():
            yield dict(zip((k for k, _ in part), self.dump([v for _, v in part]), strict=True))

    def encoded(self) -> Iterator[bytes]:
        """Each slice as a JSON object (compact)."""
        if self.encode is None:
            yield from map(compact_json, self.slices())
        else:
            encode = self.encode
            yield from (encode(dict(part)) for part in self._parts())


_SLICE = 1000
# verdicts written as their fields (``verdict_fields``): what pydantic writes for a verdict, with
# no Python call per verdict while writing
_VERDICTS: TypeAdapter[list[Any]] = TypeAdapter(list[VerdictFields])
_VERDICTS_BY_CASE: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, VerdictFields])


def _metric_rows(values: list[Mapping[str, float | None]]) -> list[Any]:
    return as_dicts(values)


# a float as msgspec writes one with a positive exponent (``1e16``), where pydantic and orjson
# write ``1e+16``; a value of a JSON object or array, so the digits end at one of ``,}]``
_MSGSPEC_EXPONENT = re.compile(rb"e[0-9]+[,}\]]")


@lru_cache(maxsize=64)
def _row_type(names: tuple[str, ...]) -> type[msgspec.Struct]:
    """A struct with the fields ``names``, in order, that msgspec writes as the JSON object of a
    row of those metrics (the fields are named by position: a metric's name need not be one)."""
    fields = [f"m{i}" for i in range(len(names))]
    return msgspec.defstruct("Row", fields, rename=dict(zip(fields, names, strict=True)), gc=False)


def _metric_rows_json(rows: dict[str, Mapping[str, float | None]]) -> bytes:
    """Rows by case id as compact JSON: the bytes ``compact_json`` writes of the rows as dicts
    (``_metric_rows``), made without a dict per row. Each run of rows (``row_runs``) becomes
    structs of its metrics, made a column at a time, and msgspec writes them in one step
    (``_by_msgspec``; msgspec also refuses a name with a quote, backslash or control character)."""
    values = list(rows.values())

    def as_structs() -> bytes:
        made: list[Any] = []
        for names, columns, size in row_runs(values):
            row = _row_type(names)
            made += map(row, *columns) if columns else (row() for _ in range(size))
        return msgspec.json.encode(dict(zip(rows, made, strict=True)))

    return _by_msgspec(as_structs, lambda: compact_json(dict(zip(rows, _metric_rows(values), strict=True))))


def _by_msgspec(write: Callable[[], bytes], slower: Callable[[], bytes]) -> bytes:
    """The bytes msgspec writes (``write``), which are orjson's but for a float of a positive
    exponent; where they may hold one, or msgspec refuses a value (a lone surrogate, say), the
    bytes of ``slower`` (orjson), which also says what is wrong."""
    try:
        written = write()
    except Exception:  # noqa: BLE001 (the slower way raises what is wrong, as it always has)
        return slower()
    return slower() if _MSGSPEC_EXPONENT.search(written) is not None else written


def _verdicts(cases: list[CaseJudgement]) -> list[Any]:
    dumped: list[Any] = _VERDICTS.dump_python(list(map(verdict_fields, cases)), mode="json", by_alias=True)
    return dumped


def _verdicts_json(cases: dict[str, CaseJudgement]) -> bytes:
    """Verdicts by case id as compact JSON: the bytes pydantic writes for them
    (``_VERDICTS_BY_CASE``; a test holds the two to the same bytes), made without a Python call
    per verdict. msgspec writes the verdicts and their claims (structs) in one step; the few
    models they hold (criterion values and usage, most of them shared by many verdicts) are
    dumped once each (``_by_msgspec``; else made plain values first and written by
    ``compact_json``)."""
    dumped: dict[int, Any] = {}

    def model(value: Any) -> Any:
        found = dumped.get(id(value))
        if found is None:
            if not isinstance(value, BaseModel):
                raise TypeError(f"a verdict holds a {type(value).__name__}")
            found = dumped[id(value)] = (value, value.model_dump(mode="json", by_alias=True))
        return found[1]

    return _by_msgspec(lambda: msgspec.json.encode(cases, enc_hook=model),
                       lambda: compact_json(msgspec.to_builtins(cases, enc_hook=model)))


def _details() -> Callable[[list[CaseDetail]], list[Any]]:
    """Details as JSON, each distinct object dumped once (most are shared: ``_Details``)."""
    dumped: dict[int, Any] = {}

    def dump(details: list[CaseDetail]) -> list[Any]:
        out = []
        for d in details:
            found = dumped.get(id(d))
            if found is None:
                found = dumped[id(d)] = d.model_dump(mode="json")
            out.append(found)
        return out

    return dump


def _layout(document: BaseModel) -> dict[str, Any]:
    """The document as it is written, field by field, with its per-case mappings left as
    :class:`_Entries` (the claim classes under their JSON name ``class``)."""
    if not isinstance(document, MetricsDocument):
        return document.model_dump(mode="json", by_alias=True, exclude_none=False)
    exclude: dict[str, Any] = {"per_case": True,
                               "per_config": {cfg: {"per_case", "case_details"} for cfg in document.per_config}}
    judges = {name: run for name in ("judge", "escalation")
              if isinstance(run := getattr(document, name, None), JudgeRun)}
    for name, run in judges.items():
        exclude[name] = {"per_config": {cfg: {"cases"} for cfg in run.per_config}}
    dumped = document.model_dump(mode="json", by_alias=True, exclude_none=False, exclude=exclude)
    details = _details()
    per_case = {cfg: _Entries(section.per_case, _metric_rows, _metric_rows_json)
                for cfg, section in document.per_config.items()}
    per_config = {cfg: _in_field_order(ConfigMetrics, dumped["per_config"][cfg], per_case=per_case[cfg],
                                       case_details=_Entries(section.case_details, details))
                  for cfg, section in document.per_config.items()}
    top = per_case[next(iter(per_case))] if document.per_case is not None else None
    return _in_field_order(type(document), dumped, per_config=per_config, per_case=top,
                           **{name: _judge_layout(run, dumped[name]) for name, run in judges.items()})


def _judge_layout(run: JudgeRun, dumped: dict[str, Any]) -> dict[str, Any]:
    per_config = {cfg: _in_field_order(ConfigJudgement, dumped["per_config"][cfg],
                                       cases=_Entries(section.cases, _verdicts, _verdicts_json))
                  for cfg, section in run.per_config.items()}
    return _in_field_order(JudgeRun, dumped, per_config=per_config)


def _in_field_order(model: type[BaseModel], dumped: dict[str, Any], **put: Any) -> dict[str, Any]:
    return {name: put[name] if name in put else dumped[name] for name in model.model_fields}


def _plain(value: Any) -> Any:
    if isinstance(value, _Entries):
        return {k: v for part in value.slices() for k, v in part.items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def document_json(document: BaseModel) -> dict[str, Any]:
    """The document as JSON values (dicts, lists, strings, numbers), as it is written to disk."""
    return cast("dict[str, Any]", _plain(_layout(document)))


def document_chunks(document: BaseModel) -> Iterator[bytes]:
    """The document as one line of compact JSON, in pieces: its per-case mappings a slice of
    entries at a time, so that the whole text is never held (a nightly report.json is hundreds
    of megabytes)."""
    yield from json_chunks(_layout(document))


def json_chunks(value: Any) -> Iterator[bytes]:
    """``value`` (JSON values, string keys; a mapping to write in slices as ``_Entries``) as compact
    JSON in pieces: the same bytes as one ``compact_json`` of it."""
    if isinstance(value, _Entries):
        sep = b"{"
        for part in value.encoded():
            yield sep + part[1:-1]
            sep = b","
        yield b"{}" if sep == b"{" else b"}"
    elif isinstance(value, dict) and value:
        sep = b"{"
        for key, item in value.items():
            yield sep + compact_json(key) + b":"
            yield from json_chunks(item)
            sep = b","
        yield b"}"
    else:
        yield compact_json(value)


def write_document(path: Path, document: BaseModel, *, compact: bool) -> None:
    """Write the document atomically: indented JSON, or one compact line written piece by piece
    (``document_chunks``) for a document too large to read by eye anyway."""
    if compact:
        write_chunks_atomic(path, chain(document_chunks(document), (b"\n",)))
    else:
        write_json_atomic(path, document_json(document))
