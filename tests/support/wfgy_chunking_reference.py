"""WFGY's chunking evaluator, reproduced from its page ("RAG precision/recall evaluation") for
the tests to hold groundjudge's ``wfgy-chunking`` profile to. Independent of groundjudge: plain
dicts as the files hold them, the standard library only.

:func:`score_run` is the page's "Minimal evaluator pseudocode" line for line (one log per qid,
the first citation of the answer, ``cited in rel`` for citation accuracy). :func:`reference`
extends it with the rest of the page, where it defines more than the pseudocode computes:
P@k and R@k over k in {1, 3, 5, 10}, anchor hit, the ΔS zones ("Stable <= 0.45, transitional
0.40-0.60, risk >= 0.60"), the cited snippet's ΔS per question ("Report ΔS median and p90 for
the cited snippet per question"), flagged qids ("coverage==0 or ΔS>0.60"), the per-type
breakdown, λ over paraphrase triplets, the acceptance target "ΔS <= 0.45 for the cited snippet
of each answered item" and the deltas against live.

Where the page leaves a choice open, the choice groundjudge documents is made here too, and
named: a question with several runs (paraphrases) scores the mean of its runs; a question with
no run scores as one that retrieved and cited nothing; the ΔS median and p90 are medians of the
per-run values (the pseudocode's ``ds_med`` / ``ds_90`` lists, one entry per run).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

KS = (1, 3, 5, 10)
ZONES = {"stable": (None, 0.45), "transitional": (0.40, 0.60), "risk": (0.60, None)}


def median(values):
    return statistics.median(values)


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), as the pseudocode's
    ``percentile(ds, 90)``."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values):
    return sum(values) / len(values)


def section_of(block_id):
    head, sep, _ = block_id.partition(".p.")
    return head if sep else None


def overlaps(off, gold, window=30):
    """"Both section_id and byte offsets overlap the gold within a 30-byte window"."""
    gap = max(0, max(off[0], gold[0]) - min(off[1], gold[1]))
    return gap <= window


def score_run(gold, logs, k=5):
    """The page's evaluator; ``logs`` maps qid -> one trace."""
    p_hits, r_hits, cov_hits, cite_ok = [], [], 0, 0
    ds_med, ds_90 = [], []
    for q in gold:
        items = logs[q["qid"]]["topk"][:k]
        got = {it["id"] for it in items}
        rel = set(q["relevant"])
        prec = len(got & rel) / max(1, len(items))
        rec = len(got & rel) / max(1, len(rel))
        p_hits.append(prec)
        r_hits.append(rec)
        ds = logs[q["qid"]]["ΔS"][:k]
        if ds:
            ds_med.append(median(ds))
            ds_90.append(percentile(ds, 90))
        ans = logs[q["qid"]].get("answer_citations", [])
        if ans:
            cited = ans[0]["id"]
            off = ans[0]["offsets"]
            if cited in rel or section_of(cited) == q["anchor_section"]:
                cov_hits += 1
            if cited in rel and overlaps(off, q["gold_offsets"][cited]):
                cite_ok += 1
    return {
        "P@k": mean(p_hits),
        "R@k": mean(r_hits),
        "coverage": cov_hits / len(gold),
        "citation_accuracy": cite_ok / len(gold),
        "ΔS_med": median(ds_med) if ds_med else None,
        "ΔS_p90": median(ds_90) if ds_90 else None,
    }


def zones_of(value, zones=ZONES):
    return [name for name, (low, high) in zones.items()
            if (low is None or value >= low) and (high is None or value <= high)]


def zone_counts(values, zones=ZONES):
    counts = dict.fromkeys(zones, 0)
    for value in values:
        for name in zones_of(value, zones):
            counts[name] += 1
    return counts


def _one_run(q, trace, k, ks):
    """The pseudocode's per-question body, for one run (``trace`` None: no run)."""
    topk = trace["topk"] if trace else []
    ids = [it["id"] for it in topk]
    rel = set(q["relevant"])
    row = {f"P@{n}": len(set(ids[:n]) & rel) / max(1, len(ids[:n])) for n in ks}
    row.update({f"R@{n}": len(set(ids[:n]) & rel) / max(1, len(rel)) for n in ks})
    ans = trace.get("answer_citations", []) if trace else []
    row["covered"] = row["cite_ok"] = 0.0
    row["cited_ds"] = None
    if ans:
        cited, off = ans[0]["id"], ans[0]["offsets"]
        row["covered"] = float(cited in rel or section_of(cited) == q["anchor_section"])
        row["cite_ok"] = float(cited in rel and overlaps(off, q["gold_offsets"][cited]))
        if cited in ids and trace.get("ΔS"):  # ΔS is logged per retrieved item
            row["cited_ds"] = trace["ΔS"][ids.index(cited)]
    row["answered"] = bool(ans)
    row["anchor_hit"] = float(any(section_of(i) == q["anchor_section"] for i in ids))
    row["ds"] = list(trace.get("ΔS") or [])[:k] if trace else []
    row["typed"] = [(it["type"], it["id"] in rel, d) for it, d in zip(topk[:k], row["ds"])] if trace else []
    return row


def _spread(values):
    if not values:
        return {"n": 0, "median": None, "p90": None, "zones": zone_counts([])}
    return {"n": len(values), "median": median(values), "p90": percentile(values, 90), "zones": zone_counts(values)}


def _triplet(runs, paraphrases, seeds):
    """"λ remains convergent on three paraphrases and two seeds": the question's runs cover
    ``paraphrases`` queries, each run with ``seeds`` distinct seeds, and log λ on every run."""
    if not runs or not all("λ_state" in t for t in runs):
        return False
    per_query = defaultdict(set)
    for t in runs:
        per_query[t["query"]]
        if "seed" in t:
            per_query[t["query"]].add(t["seed"])
    return sum(seeds == 1 or len(found) >= seeds for found in per_query.values()) >= paraphrases


def reference(gold, traces, *, k=5, ks=KS, cited_target=0.45, flag_above=0.60, paraphrases=3,
              seeds=1) -> dict[str, Any]:
    """The page's figures for gold rows and traces (dicts as in the files), several runs per
    qid allowed (see the module docstring for the choices)."""
    runs = defaultdict(list)
    for t in traces:
        runs[t["qid"]].append(t)
    per_q = {q["qid"]: [_one_run(q, t, k, ks) for t in runs[q["qid"]]] or [_one_run(q, None, k, ks)] for q in gold}
    out: dict[str, Any] = {}
    for key in [*(f"P@{n}" for n in ks), *(f"R@{n}" for n in ks)]:
        out[key] = mean([mean([r[key] for r in rows]) for rows in per_q.values()])
    out["coverage"] = mean([mean([r["covered"] for r in rows]) for rows in per_q.values()])
    out["citation_accuracy"] = mean([mean([r["cite_ok"] for r in rows]) for rows in per_q.values()])
    out["anchor_hit"] = mean([mean([r["anchor_hit"] for r in rows]) for rows in per_q.values()])
    real = [r for q in gold for r in per_q[q["qid"]] if runs[q["qid"]]]
    ds_med = [median(r["ds"]) for r in real if r["ds"]]
    ds_90 = [percentile(r["ds"], 90) for r in real if r["ds"]]
    out["ΔS_med"] = median(ds_med) if ds_med else None
    out["ΔS_p90"] = median(ds_90) if ds_90 else None
    answered = [r for r in real if r["answered"]]
    cited = [r["cited_ds"] for r in answered if r["cited_ds"] is not None]
    out["cited_ΔS"] = {"answered": len(answered), "unknown": len(answered) - len(cited), **_spread(cited),
                       "max": max(cited) if cited else None}
    out["ΔS_by_qid"] = {}
    out["bad_qids"] = []
    for q in gold:
        rows = per_q[q["qid"]] if runs[q["qid"]] else []
        row = _spread([d for r in rows for d in r["ds"]])
        q_cited = [r["cited_ds"] for r in rows if r["answered"] and r["cited_ds"] is not None]
        row["cited"] = {"answered": sum(r["answered"] for r in rows), **_spread(q_cited)}
        out["ΔS_by_qid"][q["qid"]] = row
        coverage = mean([r["covered"] for r in per_q[q["qid"]]])
        if coverage == 0 or any(d > flag_above for d in q_cited):
            out["bad_qids"].append(q["qid"])
    by_type: dict[str, dict[str, Any]] = {}
    for kind in ("prose", "code", "table", "figure"):
        items = [(is_rel, d) for r in real for t, is_rel, d in r["typed"] if t == kind]
        by_type[kind] = {"retrieved": len(items), "relevant": sum(is_rel for is_rel, _ in items),
                         "precision": sum(is_rel for is_rel, _ in items) / len(items) if items else None,
                         "ΔS": _spread([d for _, d in items])}
    out["by_type"] = by_type
    triplets = [q["qid"] for q in gold if _triplet(runs[q["qid"]], paraphrases, seeds)]
    convergent = [qid for qid in triplets if all(t["λ_state"] == "→" for t in runs[qid])]
    out["λ_triplets"] = len(triplets)
    out["λ_convergent"] = len(convergent) / len(triplets) if triplets else None
    # "ΔS(question, retrieved) <= 0.45 for the cited snippet of each answered item"
    out["cited_target_holds"] = None if out["cited_ΔS"]["unknown"] or not answered else \
        all(d <= cited_target for d in cited)
    return out


def deltas(shadow: dict[str, Any], live: dict[str, Any], ks=KS) -> dict[str, float | None]:
    """"Compare with the live index as a baseline and record deltas": shadow - live."""
    names = [*(f"P@{n}" for n in ks), *(f"R@{n}" for n in ks), "coverage", "citation_accuracy", "anchor_hit",
             "ΔS_med", "ΔS_p90", "λ_convergent"]
    out = {name: None if shadow[name] is None or live[name] is None else shadow[name] - live[name] for name in names}
    for key, part in (("cited_ΔS_med", "median"), ("cited_ΔS_p90", "p90")):
        s, l = shadow["cited_ΔS"][part], live["cited_ΔS"][part]
        out[key] = None if s is None or l is None else s - l
    return out
