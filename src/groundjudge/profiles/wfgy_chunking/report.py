"""WFGY's chunking report for a shadow run and its live baseline, built part by part: retrieval,
coverage and citations, ΔS, anchors and λ, then the canary gates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from groundjudge.contracts import Offsets
from groundjudge.load.adapters.wfgy_chunking import ChunkingGold, ChunkingTrace
from groundjudge.metrics.stability import topk_agreement
from groundjudge.profiles.wfgy_chunking import delta_s as ds
from groundjudge.profiles.wfgy_chunking.definitions import (
    BAD_DELTA_S, CONVERGENT_STATES, DEFAULT_GATES, KS, OFFSET_WINDOW, CitationPolicy, mean, median, percentile,
    recall_at,
)
from groundjudge.profiles.wfgy_chunking.embedder import Embedder
from groundjudge.profiles.wfgy_chunking.runs import RunScore, score_run

CONTENT_TYPES = ("prose", "code", "table", "figure")
PerQid = dict[str, list[RunScore]]


def _check_gold(gold: Sequence[ChunkingGold]) -> None:
    seen: set[str] = set()
    for item in gold:
        if item.qid in seen:
            raise ValueError(f"gold repeats qid {item.qid!r}")
        seen.add(item.qid)


def _group(gold: Sequence[ChunkingGold], traces: Sequence[ChunkingTrace]) -> dict[str, list[int]]:
    """Positions in ``traces`` of each gold question's runs."""
    runs: dict[str, list[int]] = {g.qid: [] for g in gold}
    for i, trace in enumerate(traces):
        if trace.qid in runs:
            runs[trace.qid].append(i)
    return runs


def _recall_mean(gold: Sequence[ChunkingGold], traces: Sequence[ChunkingTrace], k: int) -> float | None:
    runs = _group(gold, traces)
    per_qid = []
    for g in gold:
        values = [recall_at(traces[i].ids, g.relevant, k) for i in runs[g.qid]] or [0.0]
        per_qid.append(sum(values) / len(values))
    return mean(per_qid)


def shadow_vs_live(
    gold: Sequence[ChunkingGold], shadow_traces: Sequence[ChunkingTrace], live_traces: Sequence[ChunkingTrace],
    *, k: int = 5, max_drop_points: float = 2.0,
) -> dict:
    """WFGY's canary gate "Recall@5 does not drop more than 2 points absolute vs live".

    Both runs are scored on the same gold with the same R@k. ``drop_points`` is
    ``(live - shadow) * 100`` (negative when the shadow index is better); the gate passes when it
    is at most ``max_drop_points``, a drop of exactly 2 points included (compared after rounding
    to 9 decimals so that float noise cannot fail it). With no gold question, ``passed`` is None.
    """
    _check_gold(gold)
    shadow = _recall_mean(gold, shadow_traces, k)
    live = _recall_mean(gold, live_traces, k)
    if shadow is None or live is None:
        return {"k": k, f"shadow_R@{k}": None, f"live_R@{k}": None, "drop_points": None,
                "max_drop_points": max_drop_points, "passed": None}
    drop = round((live - shadow) * 100, 9)
    return {"k": k, f"shadow_R@{k}": shadow, f"live_R@{k}": live, "drop_points": drop,
            "max_drop_points": max_drop_points, "passed": drop <= max_drop_points}


def _gate(name: str, value: float | None, op: str, threshold: float, reason: str | None = None) -> dict:
    if value is None:
        return {"gate": name, "value": None, "op": op, "threshold": threshold, "status": "skipped",
                "reason": reason or "no value"}
    passed = value >= threshold if op == ">=" else value <= threshold
    return {"gate": name, "value": value, "op": op, "threshold": threshold,
            "status": "pass" if passed else "fail", "reason": reason}


def _thresholds(k: int, ks: Sequence[int], citation_policy: str, window: int,
                gates: Mapping[str, float] | None) -> dict[str, float]:
    if k < 1 or any(n < 1 for n in ks):
        raise ValueError("k and every value of ks must be at least 1")
    if citation_policy not in ("any", "first"):
        raise ValueError(f"citation_policy must be 'any' or 'first', got {citation_policy!r}")
    if window < 0:
        raise ValueError(f"window must be >= 0 bytes, got {window}")
    unknown = set(gates or {}) - set(DEFAULT_GATES)
    if unknown:
        raise ValueError(f"unknown gate(s) {sorted(unknown)}; known: {sorted(DEFAULT_GATES)}")
    return {**DEFAULT_GATES, **(gates or {})}


def _qid_mean(per_qid: PerQid, pick: Callable[[RunScore], float | None]) -> dict[str, float]:
    """Per question, the mean of ``pick`` over its runs (questions where every value is None are left out)."""
    means = {}
    for qid, scores in per_qid.items():
        values = [v for s in scores if (v := pick(s)) is not None]
        if values:
            means[qid] = sum(values) / len(values)
    return means


def _retrieval_and_citations(result: dict, per_qid: PerQid, ks: Sequence[int], has_offsets: bool) -> str | None:
    """P@k, R@k, coverage and citation accuracy; returns why citation accuracy is null, if it is."""
    for n in ks:
        result[f"P@{n}"] = mean(list(_qid_mean(per_qid, lambda s, n=n: s.precision[n]).values()))
    for n in ks:
        result[f"R@{n}"] = mean(list(_qid_mean(per_qid, lambda s, n=n: s.recall[n]).values()))
    result["coverage"] = mean(list(_qid_mean(per_qid, lambda s: float(s.covered)).values()))
    if not has_offsets:
        result["citation_accuracy"] = None
        return "no gold offsets: add gold_offsets to the gold lines or pass block_offsets"
    result["citation_accuracy"] = mean(list(_qid_mean(per_qid, lambda s: float(s.citation_accurate)).values()))
    return None


def _delta_s(result: dict, per_qid: PerQid, runs: Sequence[RunScore], computed: ds.ComputedDeltaS,
             thresholds: Mapping[str, float]) -> tuple[str | None, str | None]:
    """ΔS_med and ΔS_p90 (medians of per-run values over the top k), per question and per type.

    Returns (why the figures are null, a note on partial figures). When runs needed an embedder
    and none could be had, the figures are null: a gate on the other runs alone would pass or
    fail depending on what happens to be installed.
    """
    run_medians, run_p90s = [], []
    sources = {"trace": 0, "embedding": 0, "none": 0}
    for s in runs:
        values = [d for _, d in s.top_k_delta_s()]
        if values:
            run_medians.append(median(values))
            run_p90s.append(percentile(values, 90))
        sources[s.delta_s_source or "none"] += 1
    limits = {"max_median": thresholds["ΔS_med"], "max_p90": thresholds["ΔS_p90"]}
    result["ΔS_by_qid"] = ds.per_question(per_qid, **limits)
    result["ΔS_source"] = sources
    result["ΔS_model"] = computed.model
    reason = note = None
    if computed.unavailable:
        reason = computed.unavailable
    elif not run_medians:
        reason = next(iter(computed.missing.values()), "no run has ΔS values")
    elif len(run_medians) < len(runs):
        note = f"from {len(run_medians)} of {len(runs)} runs"
    result["ΔS_med"] = median(run_medians) if run_medians and not reason else None
    result["ΔS_p90"] = median(run_p90s) if run_p90s and not reason else None
    result["ΔS_runs"] = len(run_medians)
    result["ΔS_reason"] = reason
    return reason, note


def _by_type(runs: Sequence[RunScore], thresholds: Mapping[str, float]) -> dict[str, dict]:
    counts: dict[str, list[int]] = {t: [0, 0] for t in CONTENT_TYPES}
    for s in runs:
        for kind, is_relevant in s.typed_top_k:
            entry = counts.setdefault(kind or "untyped", [0, 0])
            entry[0] += 1
            entry[1] += is_relevant
    spreads = ds.per_type(runs, list(counts), max_median=thresholds["ΔS_med"], max_p90=thresholds["ΔS_p90"])
    return {kind: {"retrieved": n, "relevant": rel, "precision": rel / n if n else None, "ΔS": spreads[kind]}
            for kind, (n, rel) in counts.items()}


def _bad_qids(gold: Sequence[ChunkingGold], per_qid: PerQid) -> list[str]:
    """Questions with coverage 0, or whose cited snippet has ΔS above 0.60."""
    coverage = _qid_mean(per_qid, lambda s: float(s.covered))
    bad = []
    for g in gold:
        cited = [s.cited_delta_s for s in per_qid[g.qid] if s.cited_delta_s is not None]
        if coverage.get(g.qid, 0.0) == 0.0 or any(d > BAD_DELTA_S for d in cited):
            bad.append(g.qid)
    return bad


def _anchors_and_lambda(result: dict, gold: Sequence[ChunkingGold], per_qid: PerQid) -> int:
    """Anchor hit and proximity, paraphrase agreement and λ convergence; returns the triplet count."""
    result["anchor_hit"] = mean(list(_qid_mean(
        per_qid, lambda s: None if s.anchor_hit is None else float(s.anchor_hit)).values()))
    result["anchor_proximity"] = mean(list(_qid_mean(
        per_qid, lambda s: None if s.anchor_distance is None else float(s.anchor_distance)).values()))
    agreements, convergent, triplets = [], 0, 0
    for g in gold:
        real = [s for s in per_qid[g.qid] if s.has_trace]
        if len(real) >= 2:
            agreements.append(topk_agreement([s.top_ids for s in real], 5))
        if len({s.query for s in real}) >= 3 and all(s.lambda_state is not None for s in real):
            triplets += 1
            convergent += all(s.lambda_state in CONVERGENT_STATES for s in real)
    result["paraphrase_agreement@5"] = mean(agreements)
    result["λ_convergent"] = convergent / triplets if triplets else None
    result["λ_triplets"] = triplets
    return triplets


def report(
    gold: Sequence[ChunkingGold],
    traces: Sequence[ChunkingTrace],
    *,
    live_traces: Sequence[ChunkingTrace] | None = None,
    k: int = 5,
    ks: Sequence[int] = KS,
    window: int = OFFSET_WINDOW,
    citation_policy: CitationPolicy = "any",
    block_offsets: Mapping[str, Offsets] | None = None,
    texts: Mapping[str, str] | None = None,
    embedder: Embedder | Literal["auto"] | None = "auto",
    gates: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """WFGY's chunking report for the shadow run ``traces`` (and the ``live_traces`` baseline).

    Keys of WFGY's compact JSON: ``P@k`` and ``R@k`` for every k in ``ks``, ``coverage``,
    ``citation_accuracy``, ``ΔS_med``, ``ΔS_p90``, ``bad_qids`` (coverage 0, or the cited
    snippet's ΔS above 0.60) and ``by_type`` (per content type: top-k items retrieved, relevant
    ones, precision, ΔS spread). groundjudge adds ``ΔS_by_qid`` (ΔS median, p90, items above
    0.60 and whether the thresholds hold, per question), ``ΔS_model`` (provenance of the model
    that computed ΔS), ``anchor_hit``, ``anchor_proximity``, ``paraphrase_agreement@5``,
    ``λ_convergent`` with ``λ_triplets``, ``recall@5_vs_live``, ``citation_unverifiable`` (qids
    whose citation lands in a relevant block's section but that block has no gold offsets), the
    counts and reasons behind each null, WFGY's canary ``gates`` with ``pass`` ("eligible for
    canary only if all gates hold": true only when every gate passed; a gate skipped for lack of
    data is not a gate that holds) and ``gates_not_evaluated`` (the skipped ones). Values are not
    rounded.

    ``embedder="auto"`` loads the installed embedding model only when a run has no ΔS of its
    own; ``None`` never computes ΔS. Raises ValueError for a repeated gold qid, a k below 1, an
    unknown citation policy, a negative window or an unknown gate name.
    """
    _check_gold(gold)
    thresholds = _thresholds(k, ks, citation_policy, window, gates)
    ks = tuple(dict.fromkeys([*ks]))
    runs_by_qid = _group(gold, traces)
    gold_by_qid = {g.qid: g for g in gold}
    computed = ds.compute_missing(gold_by_qid, traces, texts=texts or {}, embedder=embedder)

    options = {"k": k, "ks": ks, "window": window, "citation_policy": citation_policy, "gold_offsets": block_offsets}
    per_qid: PerQid = {}
    for g in gold:
        per_qid[g.qid] = [
            score_run(g, traces[i], **options, delta_s=computed.values.get(i),
                      delta_s_source="embedding" if i in computed.values else None)
            for i in runs_by_qid[g.qid]
        ] or [score_run(g, None, **options)]
    all_runs = [s for scores in per_qid.values() for s in scores if s.has_trace]

    result: dict[str, Any] = {}
    has_offsets = bool(block_offsets) or any(g.gold_offsets for g in gold)
    accuracy_reason = _retrieval_and_citations(result, per_qid, ks, has_offsets)
    delta_reason, delta_note = _delta_s(result, per_qid, all_runs, computed, thresholds)
    result["bad_qids"] = _bad_qids(gold, per_qid)
    result["by_type"] = _by_type(all_runs, thresholds)
    triplets = _anchors_and_lambda(result, gold, per_qid)
    live = shadow_vs_live(gold, traces, live_traces, k=5, max_drop_points=thresholds["recall@5_drop_points"]) \
        if live_traces is not None else None
    result["recall@5_vs_live"] = live

    gate_list = [
        _gate("coverage", result["coverage"], ">=", thresholds["coverage"], None if gold else "no gold question"),
        _gate("citation_accuracy", result["citation_accuracy"], ">=", thresholds["citation_accuracy"],
              accuracy_reason),
        _gate("ΔS_med", result["ΔS_med"], "<=", thresholds["ΔS_med"], delta_reason or delta_note),
        _gate("ΔS_p90", result["ΔS_p90"], "<=", thresholds["ΔS_p90"], delta_reason or delta_note),
        _gate("recall@5_drop_points", live["drop_points"] if live else None, "<=",
              thresholds["recall@5_drop_points"], None if live else "no live run to compare with"),
        _gate("λ_convergent", result["λ_convergent"], ">=", thresholds["λ_convergent"],
              None if triplets else "no paraphrase triplet with λ_state on every run"),
    ]
    # WFGY: "eligible for canary if" every gate holds. A gate skipped for lack of data does not
    # hold: the shadow index is not eligible until it is evaluated (SPEC 7).
    result["gates"] = gate_list
    result["gates_not_evaluated"] = [g["gate"] for g in gate_list if g["status"] == "skipped"]
    result["pass"] = all(g["status"] == "pass" for g in gate_list)
    gold_ids = set(runs_by_qid)
    result.update({
        "k": k,
        "ks": list(ks),
        "window": window,
        "citation_policy": citation_policy,
        "n_questions": len(gold),
        "n_runs": len(all_runs),
        "missing_trace": [g.qid for g in gold if not runs_by_qid[g.qid]],
        "unknown_trace": sorted({t.qid for t in traces if t.qid not in gold_ids}),
        "citation_accuracy_reason": accuracy_reason,
        "citation_unverifiable": sorted({s.qid for s in all_runs if s.gold_offsets_missing}),
    })
    return result
