"""Verdicts back into Phoenix: span annotations on each graded trace's root span.

Per judged case, one annotation per criterion the judge answered (``faithfulness``,
``citation_support``, ``correctness``): label ``pass``/``fail`` (or the grade), score, and an
explanation naming the unsupported claims; the metadata carries the verdict, the unsupported
claims' text, the rubric and judge model, whether this run's gates trust the metric (and why),
and the link to the run's report. Every annotation has the identifier ``groundjudge``: Phoenix
keeps one annotation per (name, span, identifier) and updates it, so a re-run replaces its
annotations instead of adding more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from groundjudge.report.otel_events import explanation

if TYPE_CHECKING:
    from groundjudge.report.document import ReportDocument

__all__ = ["IDENTIFIER", "annotate", "span_annotations"]

IDENTIFIER = "groundjudge"


def span_annotations(doc: ReportDocument, spans: Mapping[tuple[str, str], tuple[str, str]],
                     report_url: str | None) -> list[dict[str, Any]]:
    """The span annotations for the run's report ``doc`` (Phoenix's SpanAnnotationData shape);
    ``spans`` maps (config id, case id) to the graded (trace id, span id)."""
    judge = doc.judge
    identity = judge.identity
    rubric = identity.rubric
    trust = doc.gates.trust
    out = []
    for config_id, section in judge.per_config.items():
        for case_id, case in section.cases.items():
            ids = spans.get((config_id, case_id))
            if case.status != "judged" or ids is None:
                continue
            unsupported = [c.claim for c in case.claims if c.verdict != "supported"]
            for criterion in judge.criteria:
                verdict = case.criteria.get(criterion.name)
                label = verdict.label if verdict is not None else None
                if verdict is None or label is None:
                    continue
                metric = criterion.metric or criterion.name
                trusted = trust.get(metric)
                result: dict[str, Any] = {"label": ("pass" if label else "fail") if isinstance(label, bool) else str(label)}
                if verdict.value is not None:
                    result["score"] = float(verdict.value)
                why = explanation(criterion.name, case)
                if why:
                    result["explanation"] = why
                out.append({
                    "name": metric, "annotator_kind": "LLM", "span_id": ids[1], "identifier": IDENTIFIER,
                    "result": result,
                    "metadata": {criterion.name: label, "unsupported_claims": unsupported,
                                 "rubric": f"{rubric.id} v{rubric.version}",
                                 "rubric_hash": rubric.hash, "judge_model": identity.model,
                                 "trusted": trusted.trusted if trusted is not None else None,
                                 "trust_reason": trusted.reason if trusted is not None else None,
                                 "config_id": config_id, "case_id": case_id, "report": report_url},
                })
    return out


def annotate(client: Any, doc: ReportDocument, spans: Mapping[tuple[str, str], tuple[str, str]],
             report_url: str | None) -> int:
    """Write the annotations through Phoenix's client (``phoenix.client.Client``); returns how many."""
    rows = span_annotations(doc, spans, report_url)
    for start in range(0, len(rows), 500):  # requests of a bounded size
        client.spans.log_span_annotations(span_annotations=rows[start:start + 500], sync=True)
    return len(rows)
