"""The day-39 lesson's eval runner: its metrics, tables and release gate, in its own terms.

Pure functions over records read by :mod:`groundjudge.load.adapters.day39`. The runner's
definitions, per case (``relevant`` = the case's ``expected_chunk_ids``; rankings are the
output's own order, nothing is re-sorted):

- for k in 5 and 10: ``hit@k`` (1 if a relevant chunk is in the top k), ``recall@k``
  (relevant chunks in the top k / relevant chunks), ``precision@k`` (relevant chunks in the top
  k / ``min(k, max(retrieved, 1))``: fewer than k retrieved chunks shrink the denominator),
  ``mrr@k`` (1 / rank of the first relevant chunk within k, else 0), ``ndcg@k`` (gain
  ``2**grade - 1``, discount ``log2(rank + 1)``, ideal from the k best grades of the case's
  grades); each is None when the case has no relevant chunk (NDCG: no positive grade);
- ``context_recall``: relevant chunks in the context / relevant chunks (None without any);
- ``citation_correctness``: for ``abstain`` / ``permission_denied``: 1 when there is no
  citation or every citation is in the context, else 0; with no ``must_cite``: 1 when every
  citation is in the context, else 0; otherwise the smaller of (share of ``must_cite``
  cited) and (1 if every citation is in the context else 0);
- ``behavior_score``: ``answer`` scores 1 unless the answer contains a refusal phrase;
  ``abstain`` / ``permission_denied`` score 1 only if it does; ``escalate`` always scores 1.
  The phrases are the runner's five Vietnamese ones (lower-cased, NFC-normalised match);
- ``latency_end_to_end_ms`` (``latency_ms.end_to_end``, 0 when missing) and ``cost_usd``
  (0 when missing);
- failed checks: ``retrieval_miss`` (expected chunks and recall@10 == 0), ``context_miss``
  (context recall == 0), ``bad_citation`` (citation correctness < 1), ``wrong_behavior``
  (behaviour score < 1).

Per config: every metric is the mean of its non-None values; ``p95_latency_ms`` is the
nearest-rank percentile (sorted, index ``min(n - 1, ceil(0.95 * n) - 1)``) of the non-zero
end-to-end latencies; ``failed_case_rate`` is the share of cases with a failed check. The
release gate (:data:`DEFAULT_GATES`) fails a config when a metric is missing, below its
threshold (``*_ms`` metrics: above it), or when any case tagged ``acl`` has a failed check,
whatever the averages. The exit code is 1 when any config fails, else 0.
"""

from __future__ import annotations

import math
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from groundjudge.inert import markdown
from groundjudge.load.adapters.day39 import Day39Golden, Day39Output

__all__ = [
    "ABSTAIN_PHRASES",
    "DEFAULT_GATES",
    "K_VALUES",
    "MAX_FAILED_ROWS",
    "abstained",
    "aggregate",
    "aggregate_with_latency",
    "behavior_score",
    "citation_correctness",
    "evaluate_one",
    "ndcg_at_k",
    "p95",
    "percentile",
    "precision_at_k",
    "release_gate",
    "render_markdown",
    "report",
]

K_VALUES: tuple[int, ...] = (5, 10)
MAX_FAILED_ROWS = 30
DEFAULT_GATES: dict[str, float] = {
    "recall@10": 0.85,
    "mrr@10": 0.70,
    "citation_correctness": 0.95,
    "behavior_score": 0.90,
    "p95_latency_ms": 6000.0,
}
ABSTAIN_PHRASES: tuple[str, ...] = (
    "không đủ thông tin",
    "không tìm thấy thông tin",
    "không có thông tin",
    "không thể xác định",
    "không có quyền",
)
_REFUSING = frozenset({"abstain", "permission_denied"})

Row = dict[str, Any]


# --- per-case metrics ------------------------------------------------------------------


def _hit(ranked: Sequence[str], relevant: set[str], k: int) -> float | None:
    if not relevant:
        return None
    return 1.0 if relevant.intersection(ranked[:k]) else 0.0


def _recall(ranked: Sequence[str], relevant: set[str], k: int) -> float | None:
    if not relevant:
        return None
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def precision_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float | None:
    """Relevant chunks in the top k over ``min(k, max(len(ranked), 1))``; None with no relevant chunk.

    >>> precision_at_k(["a", "b"], {"a"}, 5)
    0.5
    """
    if not relevant:
        return None
    return len(relevant.intersection(ranked[:k])) / min(k, max(len(ranked), 1))


def _mrr(ranked: Sequence[str], relevant: set[str], k: int) -> float | None:
    if not relevant:
        return None
    for rank, chunk_id in enumerate(ranked[:k], start=1):
        if chunk_id in relevant:
            return 1.0 / rank
    return 0.0


def _dcg(grades: Sequence[int]) -> float:
    return sum((2.0**grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float | None:
    """Exponential-gain NDCG@k; ideal from the k best grades; None when no grade is positive.

    >>> round(ndcg_at_k(["b", "a"], {"a": 3, "b": 1}, 5), 4)
    0.7098
    """
    if not grades:
        return None
    ideal = _dcg(sorted(grades.values(), reverse=True)[:k])
    if ideal == 0:
        return None
    return _dcg([grades.get(chunk_id, 0) for chunk_id in ranked[:k]]) / ideal


def abstained(answer: str) -> bool:
    """True when the answer contains one of the runner's refusal phrases."""
    text = unicodedata.normalize("NFC", answer).lower()
    return any(phrase in text for phrase in ABSTAIN_PHRASES)


def citation_correctness(case: Day39Golden, citations: Sequence[str], context_ids: Sequence[str]) -> float:
    """The runner's citation score of one case (see the module docstring); always a number."""
    cited, context = set(citations), set(context_ids)
    in_context = 1.0 if cited <= context else 0.0
    if case.expected_behavior in _REFUSING:
        return 1.0 if not cited or cited <= context else 0.0
    if not case.must_cite:
        return in_context
    required = set(case.must_cite)
    return min(len(required & cited) / len(required), in_context)


def behavior_score(case: Day39Golden, answer: str) -> float:
    """1.0 when the answer's refusal (or not) matches the expected behaviour; escalate always 1.0."""
    if case.expected_behavior == "answer":
        return 0.0 if abstained(answer) else 1.0
    if case.expected_behavior in _REFUSING:
        return 1.0 if abstained(answer) else 0.0
    return 1.0


def evaluate_one(case: Day39Golden, output: Day39Output, *, k_values: Sequence[int] = K_VALUES) -> Row:
    """One result row, in the runner's JSON shape: ids, tags, ``metrics`` and ``failed_checks``."""
    if output.query_id != case.id:
        raise ValueError(f"output for {output.query_id!r} scored against case {case.id!r}")
    retrieved, context, citations = output.retrieved_ids, output.context_ids, output.citation_ids
    relevant = set(case.expected_chunk_ids)
    answer = output.answer or ""
    grades = case.grades
    metrics: dict[str, float | None] = {}
    for k in k_values:
        metrics[f"hit@{k}"] = _hit(retrieved, relevant, k)
        metrics[f"recall@{k}"] = _recall(retrieved, relevant, k)
        metrics[f"precision@{k}"] = precision_at_k(retrieved, relevant, k)
        metrics[f"mrr@{k}"] = _mrr(retrieved, relevant, k)
        metrics[f"ndcg@{k}"] = ndcg_at_k(retrieved, grades, k)
    metrics["context_recall"] = len(relevant.intersection(context)) / len(relevant) if relevant else None
    metrics["citation_correctness"] = citation_correctness(case, citations, context)
    metrics["behavior_score"] = behavior_score(case, answer)
    metrics["latency_end_to_end_ms"] = float(output.latency_ms.get("end_to_end") or 0.0)
    metrics["cost_usd"] = float(output.cost_usd or 0.0)

    failed: list[str] = []
    if relevant and metrics.get("recall@10") == 0:
        failed.append("retrieval_miss")
    if metrics["context_recall"] == 0:
        failed.append("context_miss")
    if metrics["citation_correctness"] < 1.0:  # type: ignore[operator]
        failed.append("bad_citation")
    if metrics["behavior_score"] < 1.0:  # type: ignore[operator]
        failed.append("wrong_behavior")
    return {
        "query_id": case.id,
        "config_id": output.config_id,
        "difficulty": case.difficulty,
        "tags": list(case.tags),
        "expected_behavior": case.expected_behavior,
        "metrics": metrics,
        "failed_checks": failed,
        "retrieved_ids": retrieved,
        "context_ids": context,
        "citations": citations,
    }


# --- per-config summaries --------------------------------------------------------------


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Mean of each metric over the rows where it is not None (None when it never is)."""
    names = sorted({name for row in rows for name in row["metrics"]})
    return {name: _mean([row["metrics"].get(name) for row in rows]) for name in names}


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile as the runner computes it: ``sorted[min(n-1, ceil(p/100*n) - 1)]``.

    >>> percentile([float(v) for v in range(1, 21)], 95), percentile([5.0], 95), percentile([], 95)
    (19.0, 5.0, None)
    """
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil((p / 100) * len(ordered)) - 1)]


def p95(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """p95 of the rows' end-to-end latencies, leaving out zeros (a missing latency is 0)."""
    return percentile([r["metrics"]["latency_end_to_end_ms"] for r in rows
                       if r["metrics"].get("latency_end_to_end_ms")], 95)


def aggregate_with_latency(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """:func:`aggregate` plus ``p95_latency_ms`` and ``failed_case_rate``."""
    summary = aggregate(rows)
    summary["p95_latency_ms"] = p95(rows)
    summary["failed_case_rate"] = sum(bool(r["failed_checks"]) for r in rows) / max(len(rows), 1)
    return summary


def _by_tag(rows: Sequence[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        for tag in row["tags"]:
            grouped[tag].append(row)
    return dict(grouped)


def release_gate(rows: Sequence[Row], gates: Mapping[str, float] = DEFAULT_GATES) -> dict[str, Any]:
    """The runner's gate for one config: ``passed``, ``status`` (PASS/FAIL) and ``failures``.

    A metric fails when it is missing (None), above its threshold for ``*_ms`` metrics, or
    below it otherwise. Any case tagged ``acl`` with a failed check is a critical failure that
    fails the gate whatever the averages are.
    """
    summary = aggregate_with_latency(rows)
    failures: list[str] = []
    for metric, threshold in gates.items():
        value = summary.get(metric)
        if value is None:
            failures.append(f"{metric}: missing")
        elif metric.endswith("_ms"):
            if value > threshold:
                failures.append(f"{metric}: {value:.3f} > {threshold}")
        elif value < threshold:
            failures.append(f"{metric}: {value:.3f} < {threshold}")
    critical = [r["query_id"] for r in rows if "acl" in r["tags"] and r["failed_checks"]]
    if critical:
        failures.append(f"acl critical failures: {len(critical)}")
    return {"passed": not failures, "status": "FAIL" if failures else "PASS", "failures": failures,
            "acl_critical_failures": critical}


# --- the report ------------------------------------------------------------------------


def report(
    golden: Mapping[str, Day39Golden],
    outputs: Sequence[Day39Output],
    *,
    gates: Mapping[str, float] = DEFAULT_GATES,
    k_values: Sequence[int] = K_VALUES,
    max_failed_rows: int = MAX_FAILED_ROWS,
) -> dict[str, Any]:
    """The runner's whole report for these outputs, grouped by config.

    Keys: ``results`` (config -> result rows, the runner's JSON report), ``aggregate`` (config
    -> :func:`aggregate_with_latency` plus ``cases``), ``breakdown_by_tag`` (config -> tag ->
    ``cases``, ``recall@10``, ``mrr@10``, ``citation_correctness``, ``failures``),
    ``failed_queries`` (config -> the first ``max_failed_rows`` failed rows, in output order),
    ``release_gate`` (config -> :func:`release_gate`), ``gates``, ``exit_code`` (1 when any
    config fails its gate, else 0) and ``missing_outputs`` (config -> golden ids it has no
    output for; the runner itself ignores them).

    Raises
    ------
    ValueError
        If an output names a case that is not in ``golden``.
    """
    unknown = sorted({o.query_id for o in outputs if o.query_id not in golden})
    if unknown:
        raise ValueError(f"outputs reference unknown query_id(s): {', '.join(unknown)}")
    results: dict[str, list[Row]] = defaultdict(list)
    for output in outputs:
        row = evaluate_one(golden[output.query_id], output, k_values=k_values)
        results[row["config_id"]].append(row)
    configs = sorted(results)
    gate_results = {cfg: release_gate(results[cfg], gates) for cfg in configs}
    breakdown: dict[str, Any] = {}
    for cfg in configs:
        breakdown[cfg] = {}
        for tag, tag_rows in sorted(_by_tag(results[cfg]).items()):
            summary = aggregate(tag_rows)
            breakdown[cfg][tag] = {
                "cases": len(tag_rows),
                "recall@10": summary.get("recall@10"),
                "mrr@10": summary.get("mrr@10"),
                "citation_correctness": summary.get("citation_correctness"),
                "failures": sum(bool(r["failed_checks"]) for r in tag_rows),
            }
    return {
        "results": {cfg: results[cfg] for cfg in configs},
        "aggregate": {cfg: {"cases": len(results[cfg]), **aggregate_with_latency(results[cfg])} for cfg in configs},
        "breakdown_by_tag": breakdown,
        "failed_queries": {cfg: [r for r in results[cfg] if r["failed_checks"]][:max_failed_rows] for cfg in configs},
        "release_gate": gate_results,
        "gates": dict(gates),
        "exit_code": 1 if any(not g["passed"] for g in gate_results.values()) else 0,
        "missing_outputs": {cfg: _missing(golden, results[cfg]) for cfg in configs},
    }


def _missing(golden: Mapping[str, Day39Golden], rows: Sequence[Row]) -> list[str]:
    scored = {row["query_id"] for row in rows}
    return [cid for cid in golden if cid not in scored]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _cell(text: Any) -> str:
    return markdown(text)  # ids and tags from the files: inert, pipes included


def render_markdown(report: Mapping[str, Any]) -> str:
    """The runner's Markdown report: aggregate, breakdown by tag, failed queries, then the gate."""
    lines = ["# RAG Evaluation Report", "", "## Aggregate", "",
             ("| Config | Cases | Recall@10 | MRR@10 | NDCG@10 | Context recall | Citation correctness "
             "| Behavior score | Failed case rate | p95 latency ms |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cfg, s in report["aggregate"].items():
        cells = [_cell(cfg), str(s["cases"])] + [_fmt(s.get(m)) for m in (
            "recall@10", "mrr@10", "ndcg@10", "context_recall", "citation_correctness", "behavior_score",
            "failed_case_rate", "p95_latency_ms")]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Breakdown By Tag", "",
              "| Config | Tag | Cases | Recall@10 | MRR@10 | Citation correctness | Failures |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for cfg, tags in report["breakdown_by_tag"].items():
        for tag, s in tags.items():
            lines.append(f"| {_cell(cfg)} | {_cell(tag)} | {s['cases']} | {_fmt(s['recall@10'])} | "
                         f"{_fmt(s['mrr@10'])} | {_fmt(s['citation_correctness'])} | {s['failures']} |")
    lines += ["", "## Failed Queries", "",
              "| Config | Query ID | Expected behavior | Failed checks | Retrieved top 3 | Context IDs | Citations |",
              "|---|---|---|---|---|---|---|"]
    for cfg, rows in report["failed_queries"].items():
        for r in rows:
            lines.append("| " + " | ".join(_cell(c) for c in (
                cfg, r["query_id"], r["expected_behavior"], ", ".join(r["failed_checks"]),
                ", ".join(r["retrieved_ids"][:3]), ", ".join(r["context_ids"]), ", ".join(r["citations"]))) + " |")
    lines += ["", "## Release Gate", ""]
    for cfg, gate in report["release_gate"].items():
        lines.append(f"- {_cell(cfg)}: {gate['status']}")
        lines += [f"  - {markdown(failure)}" for failure in gate["failures"]]
    lines += ["", f"Exit code: {report['exit_code']}"]
    missing = {cfg: ids for cfg, ids in report.get("missing_outputs", {}).items() if ids}
    if missing:
        lines += ["", "## Golden Cases Without Output", ""]
        lines += [f"- {_cell(cfg)}: {', '.join(map(markdown, ids))}" for cfg, ids in missing.items()]
    return "\n".join(lines) + "\n"
