"""Compare two runs or two configs: per-metric deltas with a paired test, per-case outcomes.

Per metric, the delta of the means is tested with a paired sign-flip permutation test over
the cases both sides define (seeded, so the verdict is reproducible): ``real`` when p < alpha,
else ``noise``. Per case, the deterministic checks decide: ``regression`` (A passed every check,
B fails one), ``win`` (B fails fewer checks than A), ``loss`` (B fails more, A already failed
some), ``draw``.

When the two sides were chunked differently (``versions.chunking`` differs), chunk ids cannot
be matched across them; retrieval is then re-scored by matching chunks on document id plus at
least 50% span overlap, and the report says so. ``strict_chunker_version`` refuses instead.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from groundjudge.inert import markdown, markdown_code
from groundjudge.metrics.failures import deterministic_failures
from groundjudge.metrics.spans import SPAN_METRIC_PREFIXES

ALPHA = 0.05


# retrieval metrics that match chunks by id (meaningless across chunker versions)
ID_MATCHED = {"hit", "recall", "precision", "mrr", "ndcg", "ndcg_exp", "map", "r_precision", "context_recall",
              "context_precision", "citation_scoped", "must_cite_coverage"}
assert not ID_MATCHED & set(SPAN_METRIC_PREFIXES)


class ChunkerMismatch(ValueError):
    pass


def paired_permutation_p(diffs: Sequence[float], *, reps: int = 10000, seed: int = 0) -> float | None:
    """Two-sided p-value of the mean paired difference under random sign flips."""
    n = len(diffs)
    if n == 0:
        return None
    observed = abs(sum(diffs))
    if observed == 0:
        return 1.0
    rng = random.Random(seed)
    hits = 0
    for _ in range(reps):
        total = sum(d if rng.random() < 0.5 else -d for d in diffs)
        hits += abs(total) >= observed - 1e-12
    return (hits + 1) / (reps + 1)


def _case_outcome(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> str:
    fa, fb = deterministic_failures(a), deterministic_failures(b)
    if not fa and fb:
        return "regression"
    if len(fb) < len(fa):
        return "win"
    if len(fb) > len(fa):
        return "loss"
    return "draw"


def compare_configs(side_a: Mapping[str, Any], side_b: Mapping[str, Any], *, label_a: str, label_b: str,
                    chunking: tuple[set[str], set[str]] = (set(), set()),
                    strict_chunker_version: bool = False, seed: int = 0, reps: int = 10000) -> dict[str, Any]:
    """``side_a``/``side_b``: ``{"aggregate": ..., "per_case": {case: {metric: value}}}`` of one config each."""
    versions_a, versions_b = chunking
    differ = bool(versions_a and versions_b and versions_a != versions_b)
    if differ and strict_chunker_version:
        raise ChunkerMismatch(f"chunker versions differ ({sorted(versions_a)} vs {sorted(versions_b)}) and "
                              "--strict-chunker-version is set")
    mode = "doc_id+span_overlap>=50%" if differ else "chunk_id"
    cases = [c for c in side_a["per_case"] if c in side_b["per_case"]]
    per_a = {c: dict(side_a["per_case"][c]) for c in cases}
    per_b = {c: dict(side_b["per_case"][c]) for c in cases}
    if differ:
        # Chunk ids of one chunker mean nothing to the other: compare retrieval on the
        # span-matched metrics only, and drop the id-matched ones from both sides.
        for per in (per_a, per_b):
            for values in per.values():
                for name in [m for m in values if m.split("@")[0] in ID_MATCHED]:
                    del values[name]
    metrics: dict[str, Any] = {}
    names = sorted({m for c in cases for m in per_a[c]} & {m for c in cases for m in per_b[c]})
    for name in names:
        pairs = [(per_a[c].get(name), per_b[c].get(name)) for c in cases]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        mean_a = sum(x for x, _ in pairs) / len(pairs)
        mean_b = sum(y for _, y in pairs) / len(pairs)
        p = paired_permutation_p([y - x for x, y in pairs], reps=reps, seed=seed)
        metrics[name] = {"a": mean_a, "b": mean_b, "delta": mean_b - mean_a, "n_paired": len(pairs),
                         "p_value": p, "verdict": "real" if p is not None and p < ALPHA else "noise"}
    outcomes = {c: _case_outcome(per_a[c], per_b[c]) for c in cases}
    counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("win", "loss", "draw", "regression")}
    return {
        "a": label_a, "b": label_b, "matching_mode": mode,
        "chunker_versions": {"a": sorted(versions_a), "b": sorted(versions_b)},
        "cases_compared": len(cases),
        "only_in_a": sorted(set(side_a["per_case"]) - set(side_b["per_case"])),
        "only_in_b": sorted(set(side_b["per_case"]) - set(side_a["per_case"])),
        "test": {"kind": "paired sign-flip permutation", "reps": reps, "seed": seed, "alpha": ALPHA},
        "metrics": metrics, "per_case": outcomes, "counts": counts,
    }


def render_compare_markdown(result: dict[str, Any], metrics: Sequence[str]) -> str:
    out = [f"# Comparison: {markdown_code(result['a'])} → {markdown_code(result['b'])}", "",
           f"Cases compared: {result['cases_compared']}. Chunk matching: **{result['matching_mode']}** "
           f"(chunker versions {markdown(result['chunker_versions']['a'])} vs "
           f"{markdown(result['chunker_versions']['b'])}).",
           f"Significance: {result['test']['kind']}, {result['test']['reps']} resamples, alpha {result['test']['alpha']}.",
           "", "| metric | A | B | delta | n | p | verdict |", "|---|---|---|---|---|---|---|"]
    for name in metrics:
        m = result["metrics"].get(name)
        if m:
            out.append(f"| {markdown(name)} | {m['a']:.4f} | {m['b']:.4f} | {m['delta']:+.4f} | {m['n_paired']} | "
                       f"{m['p_value']:.4f} | {m['verdict']} |")
    c = result["counts"]
    out += ["", f"Per case: {c['win']} win, {c['loss']} loss, {c['draw']} draw, {c['regression']} regression.", ""]
    regressions = [cid for cid, o in result["per_case"].items() if o == "regression"]
    if regressions:
        out.append("Regressions: " + ", ".join(map(markdown_code, regressions)))
    return "\n".join(out) + "\n"
