"""Verdicts out as OpenTelemetry: each judge verdict as a ``gen_ai.evaluation.result`` event
(an OTLP log record with that event name) linked to the span it grades, written as OTLP JSON
Lines so that any OpenTelemetry backend (a Collector's ``otlpjsonfile`` receiver, or anything
that reads OTLP JSON logs) can ingest them beside the traces.

One event per judged case and criterion, on the trace's root span (the otel input format
carries each trace's ids as ``otel_trace_id`` and ``otel_span_id``):

- ``gen_ai.evaluation.name``: the metric the criterion feeds (``faithfulness``,
  ``correctness``, ``citation_support``);
- ``gen_ai.evaluation.score.value``: the criterion's value (0..1);
- ``gen_ai.evaluation.score.label``: ``pass``/``fail`` for a yes/no criterion, the grade for an
  ordinal one;
- ``gen_ai.evaluation.explanation``: the claims the passages do not support (faithfulness), the
  claims whose cited passages do not support them (citation support), and the judge's reason;
- ``groundjudge.*``: the rubric, the judge model, whether this run's gates trust the metric
  (and why), the config and case, the report's location.

Cases without span ids (inputs that did not come from OpenTelemetry) have no span to link to
and are counted, not written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from groundjudge.load.adapters.otlp_json import to_any_value

if TYPE_CHECKING:
    from groundjudge.judge.results import CaseJudgement
    from groundjudge.report.document import ReportDocument

__all__ = ["EVENT_NAME", "evaluation_events", "explanation"]

EVENT_NAME = "gen_ai.evaluation.result"
_BATCH = 512  # records a line, as an exporter batches them
_SEVERITY_INFO = 9


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": to_any_value(v)} for k, v in values.items() if v is not None]


def explanation(criterion: str, case: CaseJudgement) -> str:
    """Why the verdict is what it is, in a line or a few: the claims that fail it."""
    claims = case.claims
    if criterion == "citations_supported":
        bad = [c.claim for c in claims if c.cited and c.klass != "cited_support"]
        text = ("cited passages that do not support the claim: " + " | ".join(bad)) if bad else \
            "every cited passage supports its claim" if claims else ""
    elif criterion == "faithful":
        bad = [c.claim for c in claims if c.verdict != "supported"]
        text = ("unsupported claims: " + " | ".join(bad)) if bad else \
            "every claim is supported by the passages" if claims else ""
    else:
        text = ""
    reason = case.judge_reason
    return "; ".join(part for part in (text, reason) if part)


def _records(doc: ReportDocument, spans: Mapping[tuple[str, str], tuple[str, str]], time_ns: int,
             report_url: str | None) -> Iterator[dict[str, Any] | None]:
    judge = doc.judge
    identity = judge.identity
    rubric = identity.rubric
    trust = doc.gates.trust
    for config_id, section in judge.per_config.items():
        for case_id, case in section.cases.items():
            if case.status != "judged":
                continue
            ids = spans.get((config_id, case_id))
            if ids is None:
                yield None
                continue
            for criterion in judge.criteria:
                verdict = case.criteria.get(criterion.name)
                if verdict is None or verdict.label is None:  # not asked of this case (correctness without an expected answer)
                    continue
                label = verdict.label
                metric = criterion.metric or criterion.name
                trusted = trust.get(metric)
                attrs = {
                    "gen_ai.evaluation.name": metric,
                    "gen_ai.evaluation.score.value": float(verdict.value) if verdict.value is not None else None,
                    "gen_ai.evaluation.score.label": ("pass" if label else "fail") if isinstance(label, bool) else str(label),
                    "gen_ai.evaluation.explanation": explanation(criterion.name, case) or None,
                    "groundjudge.criterion": criterion.name,
                    "groundjudge.rubric": f"{rubric.id} v{rubric.version}",
                    "groundjudge.judge.model": identity.model,
                    "groundjudge.trusted": trusted.trusted if trusted is not None else None,
                    "groundjudge.trust_reason": trusted.reason if trusted is not None else None,
                    "groundjudge.config_id": config_id,
                    "groundjudge.case_id": case_id,
                    "groundjudge.report": report_url,
                }
                yield {"timeUnixNano": str(time_ns), "observedTimeUnixNano": str(time_ns),
                       "severityNumber": _SEVERITY_INFO, "severityText": "INFO", "eventName": EVENT_NAME,
                       "traceId": ids[0], "spanId": ids[1], "attributes": _attributes(attrs)}


def evaluation_events(doc: ReportDocument, spans: Mapping[tuple[str, str], tuple[str, str]], *, time_ns: int,
                      report_url: str | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """The verdicts of the run's report ``doc`` as OTLP JSON ``LogsData`` objects, one per line
    to write, each of up to 512 events; ``spans`` maps (config id, case id) to the graded span's
    (trace id, span id). Returns the objects, the number of events and the number of judged
    cases with no span to link to."""
    version = doc.provenance.tool_version
    resource = {"attributes": _attributes({"service.name": "groundjudge", "service.version": version})}
    scope = {"name": "groundjudge", "version": version or ""}
    lines: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []
    written = unlinked = 0
    for record in _records(doc, spans, time_ns, report_url):
        if record is None:
            unlinked += 1
            continue
        batch.append(record)
        written += 1
        if len(batch) == _BATCH:
            lines.append({"resourceLogs": [{"resource": resource, "scopeLogs": [{"scope": scope, "logRecords": batch}]}]})
            batch = []
    if batch:
        lines.append({"resourceLogs": [{"resource": resource, "scopeLogs": [{"scope": scope, "logRecords": batch}]}]})
    return lines, written, unlinked
