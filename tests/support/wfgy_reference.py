"""WFGY's grounded-QA scorer, re-implemented for the tests from the definitions of its two pages,
independently of ``groundjudge.profiles.wfgy``: what groundjudge's ``wfgy`` profile reports is
checked against what this prints.

- Its "Reference scorer" (the RAG precision page): gold and trace lines as parsed JSON, the
  last trace line of a qid kept (``qid`` or ``q_id``), a missing trace read as an empty claim;
  a refusal is a claim that, stripped and lower-cased, is ``not in context``; containment is
  any gold substring of at least 5 characters in the lower-cased claim, or no substrings at all
  when the list is empty (the code: ``subs == []``, so a line without the field is not
  contained); a citation hit needs every citation among ``retrieved_ids`` and an overlap with
  ``gold_citations``, or no citation when there is no gold citation; CHR and precision count
  answerable items only; empty denominators give precision and CHR 1.0, the refusal rates and
  recall 0.0; ``--gates`` is ``name=value`` pairs, compared unrounded; output rounded to 4.
- Its eval README: constraint OK (K) when the gold item locks constraints:
  ``constraints_echo`` equals them as a set (no contradiction detector is defined, so none is
  detected here); with ``--scu_enforced`` K joins precision and the gate is "SCU violations = 0"
  over shipped answers; CHR@k, "best-case CHR if the model always picked the right ids from the
  retrieved pool", here: each shipped answer cites exactly the gold ids found among its first k
  retrieved ids, then CHR as above (null when nothing shipped: the README gives no convention).
"""

from __future__ import annotations

from typing import Any

REFUSAL = "not in context"
DEFAULT_GATES = "precision=0.80,chr=0.75,under=0.05,over=0.10"
# the README's long gate names are the scorer's short ones
LONG_NAMES = {"under_refusal": "under", "over_refusal": "over", "scu_violations": "scu"}


def contained(claim: str, substrings: list[str] | None) -> bool:
    text = claim.lower()
    if any(len(s) >= 5 and s.lower() in text for s in substrings or []):
        return True
    return substrings == []


def hit(citations: Any, gold: list[str] | None, retrieved: list[str]) -> bool:
    if not isinstance(citations, list) or not set(citations) <= set(retrieved):
        return False
    return bool(set(citations) & set(gold)) if gold else citations == []


def constraint_ok(gold: dict[str, Any], answer: dict[str, Any]) -> bool | None:
    locked = gold.get("constraints")
    if not locked:
        return None
    echo = answer.get("constraints_echo")
    return echo is not None and set(echo) == set(locked)


def gate_dict(spec: str) -> dict[str, str]:
    pairs = [part.split("=", 1) for part in spec.replace(",", " ").split()]
    return {LONG_NAMES.get(name, name): value for name, value in pairs}


def score(gold_lines: list[dict[str, Any]], trace_lines: list[dict[str, Any]], *, k: int = 5,
          gates: str = DEFAULT_GATES, scu_enforced: bool = False) -> dict[str, Any]:
    gold = {g["qid"]: g for g in gold_lines}
    traces: dict[str, dict[str, Any]] = {}
    for t in trace_lines:
        qid = t.get("qid") or t.get("q_id")
        if qid:
            traces[qid] = t
    shipped = refused = answerable = unanswerable = 0
    correct = chr_hits = best_hits = under = over = recalled = violations = 0
    for qid, g in gold.items():
        t = traces.get(qid, {})
        answer = t.get("answer_json") or {}
        claim = (answer.get("claim") or "").strip()
        citations = answer.get("citations") or []
        retrieved = t.get("retrieved_ids") or []
        is_shipped = claim.lower() != REFUSAL
        answerable += bool(g.get("answerable"))
        unanswerable += not g.get("answerable")
        shipped += is_shipped
        refused += not is_shipped
        if is_shipped:
            ok = constraint_ok(g, answer)
            violations += ok is False
            if g.get("answerable") is False:
                under += 1
            else:
                h = hit(citations, g.get("gold_citations"), retrieved)
                picked = [i for i in retrieved[:k] if i in set(g.get("gold_citations") or [])]
                chr_hits += h
                best_hits += hit(picked, g.get("gold_citations"), retrieved)
                k_ok = ok is not False if scu_enforced else True
                correct += contained(claim, g.get("gold_claim_substr")) and h and k_ok
        elif g.get("answerable") is True:
            over += 1
        if g.get("answerable") is True:
            recalled += set(g.get("gold_citations") or []) <= set(retrieved[:k])
    precision = correct / shipped if shipped else 1.0
    chr_rate = chr_hits / shipped if shipped else 1.0
    under_rate = under / unanswerable if unanswerable else 0.0
    over_rate = over / answerable if answerable else 0.0
    recall = recalled / answerable if answerable else 0.0
    limits = {**gate_dict(DEFAULT_GATES), **gate_dict(gates)}
    passed = (precision >= float(limits["precision"]) and chr_rate >= float(limits["chr"])
              and under_rate <= float(limits["under"]) and over_rate <= float(limits["over"]))
    if scu_enforced:
        passed = passed and violations <= float(limits.get("scu", "0"))
    return {
        "answered": shipped, "refused": refused, "answerable": answerable, "unanswerable": unanswerable,
        "precision": round(precision, 4), "chr": round(chr_rate, 4), "under_refusal": round(under_rate, 4),
        "over_refusal": round(over_rate, 4), "recall@k": round(recall, 4), "k": k, "pass": passed,
        "chr@k": round(best_hits / shipped, 4) if shipped else None, "scu_violations": violations,
    }
