"""The day-39 lesson's eval runner, reproduced from its definitions (seed 004, "Python eval
runner"), to check groundjudge's day39 profile against: the same numbers, tables and gate.

Deliberately independent of groundjudge: plain dicts in, plain dicts out, each formula as the
lesson states it (K = 5 and 10; a case without expected chunks has no retrieval values; NDCG
with gain 2^rel - 1 and grades 3 when ``relevance`` is empty; precision over min(k, retrieved);
refusal = one of five Vietnamese phrases in the lower-cased answer; p95 = the nearest rank
over the non-zero end-to-end latencies; the gate's five thresholds and its ACL rule).
"""

from __future__ import annotations

import math
from typing import Any

K = (5, 10)
GATES = {"recall@10": 0.85, "mrr@10": 0.70, "citation_correctness": 0.95, "behavior_score": 0.90,
         "p95_latency_ms": 6000.0}
REFUSALS = ("không đủ thông tin", "không tìm thấy thông tin", "không có thông tin", "không thể xác định",
            "không có quyền")


def ids(items: list[Any] | None) -> list[str]:
    out = []
    for item in items or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and item.get("chunk_id"):
            out.append(str(item["chunk_id"]))
    return out


def case_of(row: dict[str, Any]) -> dict[str, Any]:
    expected = list(row.get("expected_chunk_ids") or [])
    grades = dict(row.get("relevance") or {}) or {c: 3 for c in expected}
    return {"id": row["id"], "question": row["question"], "expected": expected,
            "grades": {str(k): int(v) for k, v in grades.items()}, "must_cite": list(row.get("must_cite") or []),
            "difficulty": row.get("difficulty", "unknown"), "tags": list(row.get("tags") or []),
            "behavior": row.get("expected_behavior", "answer")}


def refused(answer: str) -> bool:
    return any(p in answer.lower() for p in REFUSALS)


def score(case: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    ranked, context, cited = ids(out.get("retrieved_chunks")), ids(out.get("context_chunks")), ids(out.get("citations"))
    rel = set(case["expected"])
    m: dict[str, float | None] = {}
    for k in K:
        top = ranked[:k]
        found = len(rel & set(top))
        m[f"hit@{k}"] = (1.0 if found else 0.0) if rel else None
        m[f"recall@{k}"] = found / len(rel) if rel else None
        m[f"precision@{k}"] = found / min(k, max(len(ranked), 1)) if rel else None
        first = next((i for i, c in enumerate(top, 1) if c in rel), None)
        m[f"mrr@{k}"] = (1 / first if first else 0.0) if rel else None
        gain = sum((2 ** case["grades"].get(c, 0) - 1) / math.log2(i + 1) for i, c in enumerate(top, 1))
        best = sum((2 ** g - 1) / math.log2(i + 1)
                   for i, g in enumerate(sorted(case["grades"].values(), reverse=True)[:k], 1))
        m[f"ndcg@{k}"] = gain / best if case["grades"] and best else None
    m["context_recall"] = len(rel & set(context)) / len(rel) if rel else None
    inside = set(cited) <= set(context)
    if case["behavior"] in ("abstain", "permission_denied"):
        m["citation_correctness"] = 1.0 if not cited or inside else 0.0
    elif not case["must_cite"]:
        m["citation_correctness"] = 1.0 if inside else 0.0
    else:
        need = set(case["must_cite"])
        m["citation_correctness"] = min(len(need & set(cited)) / len(need), 1.0 if inside else 0.0)
    answer = str(out.get("answer") or "")
    if case["behavior"] == "answer":
        m["behavior_score"] = 0.0 if refused(answer) else 1.0
    elif case["behavior"] in ("abstain", "permission_denied"):
        m["behavior_score"] = 1.0 if refused(answer) else 0.0
    else:
        m["behavior_score"] = 1.0
    m["latency_end_to_end_ms"] = float((out.get("latency_ms") or {}).get("end_to_end", 0.0) or 0.0)
    m["cost_usd"] = float(out.get("cost_usd", 0.0) or 0.0)
    failed = []
    if rel and m["recall@10"] == 0:
        failed.append("retrieval_miss")
    if m["context_recall"] == 0:
        failed.append("context_miss")
    if m["citation_correctness"] < 1.0:  # type: ignore[operator]
        failed.append("bad_citation")
    if m["behavior_score"] < 1.0:  # type: ignore[operator]
        failed.append("wrong_behavior")
    return {"query_id": case["id"], "config_id": out.get("config_id", "unknown"), "tags": case["tags"],
            "behavior": case["behavior"], "metrics": m, "failed": failed, "retrieved": ranked, "context": context,
            "citations": cited}


def mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summary(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    names = sorted({n for r in rows for n in r["metrics"]})
    out = {n: mean([r["metrics"].get(n) for r in rows]) for n in names}
    lat = sorted(r["metrics"]["latency_end_to_end_ms"] for r in rows if r["metrics"]["latency_end_to_end_ms"])
    out["p95_latency_ms"] = lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)] if lat else None
    out["failed_case_rate"] = sum(bool(r["failed"]) for r in rows) / max(len(rows), 1)
    return out


def run(golden: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    cases = {row["id"]: case_of(row) for row in golden}
    results: dict[str, list[dict[str, Any]]] = {}
    for out in outputs:
        row = score(cases[out["query_id"]], out)
        results.setdefault(row["config_id"], []).append(row)
    return results


def gate(rows: list[dict[str, Any]], gates: dict[str, float] = GATES) -> list[str]:
    s = summary(rows)
    failures = []
    for metric, bound in gates.items():
        value = s.get(metric)
        if value is None:
            failures.append(f"{metric}: missing")
        elif metric.endswith("_ms") and value > bound:
            failures.append(f"{metric}: {value:.3f} > {bound}")
        elif not metric.endswith("_ms") and value < bound:
            failures.append(f"{metric}: {value:.3f} < {bound}")
    critical = [r for r in rows if "acl" in r["tags"] and r["failed"]]
    if critical:
        failures.append(f"acl critical failures: {len(critical)}")
    return failures


def exit_code(results: dict[str, list[dict[str, Any]]]) -> int:
    return 1 if any(gate(rows) for rows in results.values()) else 0


def by_tag(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for tag in r["tags"]:
            out.setdefault(tag, []).append(r)
    return out


def abstention_accuracy(rows: list[dict[str, Any]]) -> float | None:
    """The lesson's "no-answer case refused correctly" (metric cheat sheet): the behaviour score
    over the cases whose expected behaviour is ``abstain``."""
    return mean([r["metrics"]["behavior_score"] for r in rows if r["behavior"] == "abstain"])
