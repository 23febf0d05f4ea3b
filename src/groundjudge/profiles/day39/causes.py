"""Root causes of the day-39 report: where in the pipeline a failed case went wrong, read off
its trace as the lesson reads it (section "Trace bắt buộc", "Error analysis theo root cause"
and the regression runbook), and the lesson's fix for it.

A case's cause is the earliest stage that lost it, each one of the lesson's root-cause labels
(or, for a miss the trace cannot place, ``retrieval``, the runbook's step 4):

1. ``acl``: a case tagged ``acl`` with a failed check (block the release: runbook step 8);
2. ``generator``: a case that must be refused (``abstain``, ``permission_denied``) answered
   with content (``failed_abstention``: a critical hallucination);
3. an expected chunk not among the top 10 retrieved: ``stale_index`` when another version of
   that chunk was retrieved (``doc:v2026-01:chunk_003`` for ``doc:v2026-02:chunk_003``),
   ``reranker`` when it was retrieved below the top 10, else ``retrieval`` (parser, chunking,
   embedding, BM25 analyzer, index or filter);
4. ``context_builder``: retrieved in the top 10 but not in the context (``reranker`` when the
   trace's ``reranked_chunks`` left it out of their top 10);
5. ``generator``: the evidence was in the context but the answer refused, or the judge found
   it unfaithful, off the question or incomplete;
6. ``citation``: the rest holds but a citation is missing or outside the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundjudge.load.adapters.day39 import Day39Golden, Day39Output
from groundjudge.profiles.registry import JudgedCase

__all__ = ["FIXES", "REGRESSION_METRICS", "compare_configs", "root_cause"]

TOP_K = 10  # the runner's retrieval checks read the top 10
_REFUSING = frozenset({"abstain", "permission_denied"})
# tags the lesson files under the BM25 analyzer: keywords, error codes, acronyms, no diacritics
_LEXICAL_TAGS = frozenset({"acronym", "error-code", "no-diacritic", "sku", "code"})

# The lesson's fix per root cause ("Cách sửa").
FIXES: dict[str, str] = {
    "acl": "Mandatory filters, security tests, policy-as-code; block the release until it holds",
    "stale_index": "Index version, document freshness, reindex job",
    "reranker": "Change the reranker, tune its prompt or model, train pairwise",
    "retrieval": "Check parser, chunking, embedding, BM25 analyzer, index and filter (runbook step 4)",
    "context_builder": "Dedup, token budgeting, context packing",
    "generator": "Prompt, model, constrained output, few-shot",
    "citation": "Claim-citation alignment, citation validator",
}
# (metric, what the judge criterion is named) compared between baseline and candidate
REGRESSION_METRICS: tuple[str, ...] = ("recall@10", "mrr@10", "ndcg@10", "context_recall", "citation_correctness",
                                       "behavior_score")
JUDGED_REGRESSION: dict[str, str] = {"faithful": "faithfulness", "relevant": "answer_relevance",
                                     "complete": "completeness", "correct": "correctness"}


def _parts(chunk_id: str) -> tuple[str, str, str] | None:
    parts = chunk_id.split(":")
    return (parts[0], parts[1], ":".join(parts[2:])) if len(parts) >= 3 else None


def _older_version(expected: str, retrieved: Sequence[str]) -> str | None:
    """A retrieved chunk that is ``expected`` in another version of its document, if any."""
    mine = _parts(expected)
    if mine is None:
        return None
    for cid in retrieved:
        theirs = _parts(cid)
        if theirs is not None and theirs[0] == mine[0] and theirs[2] == mine[2] and theirs[1] != mine[1]:
            return cid
    return None


def _reranked_ids(output: Day39Output) -> list[str] | None:
    raw = (output.model_extra or {}).get("reranked_chunks")
    if not isinstance(raw, list):
        return None
    ids = [r if isinstance(r, str) else r.get("chunk_id") for r in raw if isinstance(r, (str, dict))]
    return [str(i) for i in ids if i]


def _cause(label: str, why: str) -> dict[str, str]:
    return {"root_cause": label, "evidence": why, "fix": FIXES[label]}


def _retrieval_cause(case: Day39Golden, output: Day39Output) -> dict[str, str] | None:
    ranked = output.retrieved_ids
    top = ranked[:TOP_K]
    missed = [c for c in case.expected_chunk_ids if c not in top]
    if not missed:
        return None
    for cid in missed:
        older = _older_version(cid, ranked)
        if older is not None:
            return _cause("stale_index", f"retrieved {older}, another version of the expected {cid}")
    for cid in missed:
        if cid in ranked:
            return _cause("reranker", f"{cid} retrieved at rank {ranked.index(cid) + 1}, outside the top {TOP_K}")
    lexical = sorted(_LEXICAL_TAGS & set(case.tags))
    hint = f" (tagged {', '.join(lexical)}: the lesson points at the BM25 analyzer)" if lexical else ""
    return _cause("retrieval", f"{', '.join(missed)} not among the {len(ranked)} retrieved{hint}")


def root_cause(case: Day39Golden, row: Mapping[str, Any], output: Day39Output,
               judged: JudgedCase | None = None) -> dict[str, str] | None:
    """The earliest stage that lost this case (see the module docstring), with the evidence and
    the lesson's fix; None when nothing failed."""
    failed = list(row["failed_checks"])
    verdicts = _judge_findings(judged)
    if not failed and not verdicts:
        return None
    if "acl" in case.tags and failed:
        why = f"tagged acl, failed: {', '.join(failed)}"
        if (case.expected_behavior in _REFUSING and "wrong_behavior" not in failed
                and not set(case.expected_chunk_ids) & {*output.retrieved_ids, *output.context_ids}):
            why += ("; the refusal was right and no expected chunk was retrieved: if this user may not read "
                    "them, the label, not the system, is at fault (golden_label_issue)")
        return _cause("acl", why)
    if case.expected_behavior in _REFUSING and "wrong_behavior" in failed:
        return _cause("generator", f"expected {case.expected_behavior}, answered with content (failed_abstention: a "
                                   "critical hallucination)")
    found = _retrieval_cause(case, output)
    if found is not None:
        return found
    dropped = [c for c in case.expected_chunk_ids if c not in output.context_ids]
    reranked = _reranked_ids(output)
    if dropped and reranked is not None:
        cut = [c for c in dropped if c not in reranked[:TOP_K]]
        if cut:
            return _cause("reranker", f"retrieved but left out of the reranked top {TOP_K}: {', '.join(cut)}")
    if dropped:
        ranks = ", ".join(f"{c} (rank {output.retrieved_ids.index(c) + 1})" for c in dropped)
        return _cause("context_builder", f"retrieved but not in the context: {ranks}")
    if "wrong_behavior" in failed:
        return _cause("generator", "the evidence was in the context, the answer refused")
    if verdicts:
        return _cause("generator", "the judge: " + "; ".join(verdicts))
    if "bad_citation" in failed:
        outside = [c for c in output.citation_ids if c not in output.context_ids]
        uncited = [c for c in case.must_cite if c not in output.citation_ids]
        why = "; ".join(([f"cites {', '.join(outside)}, outside the context"] if outside else [])
                        + ([f"does not cite {', '.join(uncited)}"] if uncited else []))
        return _cause("citation", why or "citation correctness below 1")
    return _cause("generator", "failed: " + ", ".join(failed))


def _judge_findings(judged: JudgedCase | None) -> list[str]:
    if judged is None or judged.status != "judged":
        return []
    says = {"faithful": "claims the context does not support", "relevant": "does not answer the question",
            "complete": "misses facts of the expected answer"}
    return [text for name, text in says.items() if judged.labels.get(name) is False]


def _moved_down(expected: Sequence[str], before: Sequence[str], after: Sequence[str]) -> str | None:
    """The expected chunk that lost most rank from ``before`` to ``after`` (gone: last of all)."""
    def rank(cid: str, ranked: Sequence[str]) -> int:
        return ranked.index(cid) if cid in ranked else 10**6

    moved = [(rank(c, after) - rank(c, before), c) for c in expected if rank(c, after) > rank(c, before)]
    return max(moved)[1] if moved else None


def _rank(cid: str, ranked: Sequence[str]) -> str:
    return f"rank {ranked.index(cid) + 1}" if cid in ranked else f"not among the {len(ranked)} retrieved"


def compare_configs(golden: Mapping[str, Day39Golden], base_rows: Sequence[Mapping[str, Any]],
                    cand_rows: Sequence[Mapping[str, Any]], outputs: Mapping[tuple[str, str], Day39Output],
                    baseline: str, candidate: str,
                    judged: Mapping[tuple[str, str], JudgedCase] | None = None) -> dict[str, Any]:
    """The Regression Summary: per case both configs scored, each metric that moved (the
    runner's, and the judge's verdicts where both answers were judged), with the cause of a
    drop and a decision; and how many cases improved, regressed or stayed unchanged."""
    base = {r["query_id"]: r for r in base_rows}
    rows: list[dict[str, Any]] = []
    counts = {"improved": 0, "regressed": 0, "unchanged": 0}
    for cand in cand_rows:
        cid = cand["query_id"]
        before = base.get(cid)
        if before is None:
            continue
        case, out_b, out_c = golden[cid], outputs[(baseline, cid)], outputs[(candidate, cid)]
        moved = [(m, before["metrics"].get(m), cand["metrics"].get(m)) for m in REGRESSION_METRICS]
        jb, jc = (judged or {}).get((baseline, cid)), (judged or {}).get((candidate, cid))
        if jb is not None and jc is not None and jb.status == jc.status == "judged":
            for name, metric in JUDGED_REGRESSION.items():
                a, b = jb.labels.get(name), jc.labels.get(name)
                if a is not None and b is not None:
                    moved.append((metric, float(a), float(b)))
        down = [(m, a, b) for m, a, b in moved if a is not None and b is not None and b < a]
        up = [(m, a, b) for m, a, b in moved if a is not None and b is not None and b > a]
        counts["regressed" if down else "improved" if up else "unchanged"] += 1
        if not down:
            continue
        cause = root_cause(case, cand, out_c, jc)
        new_failures = [f for f in cand["failed_checks"] if f not in before["failed_checks"]]
        if "acl" in case.tags:
            decision = "block: ACL case"
        elif new_failures or any(m in JUDGED_REGRESSION.values() for m, _, _ in down):
            decision = "fix before release" + (f" (now fails {', '.join(new_failures)})" if new_failures else "")
        else:
            decision = "review: still passes its checks"
        moved_chunk = _moved_down(case.expected_chunk_ids, out_b.retrieved_ids, out_c.retrieved_ids)
        for metric, a, b in down:
            evidence = cause["evidence"] if cause else ""
            if metric in ("recall@10", "mrr@10", "ndcg@10") and moved_chunk is not None:
                evidence = (f"{moved_chunk}: {_rank(moved_chunk, out_b.retrieved_ids)} in {baseline}, "
                            f"{_rank(moved_chunk, out_c.retrieved_ids)} in {candidate}")
            rows.append({"query_id": cid, "metric": metric, "baseline": a, "candidate": b,
                         "root_cause": cause["root_cause"] if cause else "review", "evidence": evidence,
                         "decision": decision})
    return {"baseline": baseline, "candidate": candidate, "cases": counts, "rows": rows}
