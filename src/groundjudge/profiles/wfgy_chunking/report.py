"""WFGY's chunking report for a shadow run and its live baseline, built part by part: retrieval,
coverage and citations, ΔS, anchors and λ, then the canary gates."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal

from groundjudge.contracts import Offsets
from groundjudge.load.adapters.wfgy_chunking import ChunkingGold, ChunkingTrace
from groundjudge.metrics.stability import topk_agreement
from groundjudge.profiles.wfgy_chunking import delta_s as ds
from groundjudge.profiles.wfgy_chunking.definitions import (
    BAD_DELTA_S,
    CONVERGENT_STATES,
    DEFAULT_GATES,
    DELTA_S_ZONES,
    KS,
    LIVE_RECALL_K,
    OFFSET_WINDOW,
    PARAPHRASES,
    CitationPolicy,
    ZoneBounds,
    mean,
    median,
    percentile,
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
) -> dict[str, Any]:
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


def _gate(name: str, value: float | None, op: str, threshold: float, reason: str | None = None) -> dict[str, Any]:
    if value is None:
        return {"gate": name, "value": None, "op": op, "threshold": threshold, "status": "skipped",
                "reason": reason or "no value"}
    passed = value >= threshold if op == ">=" else value <= threshold
    return {"gate": name, "value": value, "op": op, "threshold": threshold,
            "status": "pass" if passed else "fail", "reason": reason}


RECALL_GATE = "recall@5_drop_points"  # its name in DEFAULT_GATES; the k in it follows ``recall_k``


def recall_gate_name(recall_k: int) -> str:
    return f"recall@{recall_k}_drop_points"


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _check_zones(zones: Mapping[str, ZoneBounds]) -> dict[str, ZoneBounds]:
    unknown = set(zones) - set(DELTA_S_ZONES)
    if unknown:
        raise ValueError(f"unknown ΔS zone(s) {sorted(unknown)}; known: {list(DELTA_S_ZONES)}")
    checked = dict(DELTA_S_ZONES)
    for name, (low, high) in zones.items():
        low = None if low is None else _finite(f"zone {name} lower bound", low)
        high = None if high is None else _finite(f"zone {name} upper bound", high)
        if low is not None and high is not None and low > high:
            raise ValueError(f"zone {name}: lower bound {low} is above upper bound {high}")
        checked[name] = (low, high)
    return checked


def _thresholds(k: int, ks: Sequence[int], citation_policy: str, window: int, recall_k: int, paraphrases: int,
                seeds: int, gates: Mapping[str, float] | None) -> dict[str, float]:
    """The gate thresholds by gate name (the live recall gate named for ``recall_k``)."""
    if k < 1 or recall_k < 1 or any(n < 1 for n in ks):
        raise ValueError("k, recall_k and every value of ks must be at least 1")
    if paraphrases < 2:
        raise ValueError(f"paraphrases must be at least 2 (runs of distinct queries to compare), got {paraphrases}")
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    if citation_policy not in ("any", "first"):
        raise ValueError(f"citation_policy must be 'any' or 'first', got {citation_policy!r}")
    if window < 0:
        raise ValueError(f"window must be >= 0 bytes, got {window}")
    defaults = {recall_gate_name(recall_k) if name == RECALL_GATE else name: value
                for name, value in DEFAULT_GATES.items()}
    unknown = set(gates or {}) - set(defaults)
    if unknown:
        raise ValueError(f"unknown gate(s) {sorted(unknown)}; known: {sorted(defaults)}")
    return {**defaults, **{name: _finite(f"gate {name}", value) for name, value in (gates or {}).items()}}


def _qid_mean(per_qid: PerQid, pick: Callable[[RunScore], float | None]) -> dict[str, float]:
    """Per question, the mean of ``pick`` over its runs (questions where every value is None are left out)."""
    means = {}
    for qid, scores in per_qid.items():
        values = [v for s in scores if (v := pick(s)) is not None]
        if values:
            means[qid] = sum(values) / len(values)
    return means


def _precision_at(n: int, score: RunScore) -> float:
    return score.precision[n]


def _recall_at(n: int, score: RunScore) -> float:
    return score.recall[n]


def _retrieval_and_citations(result: dict[str, Any], per_qid: PerQid, ks: Sequence[int], has_offsets: bool) -> str | None:
    """P@k, R@k, coverage and citation accuracy; returns why citation accuracy is null, if it is."""
    for n in ks:
        result[f"P@{n}"] = mean(list(_qid_mean(per_qid, partial(_precision_at, n)).values()))
    for n in ks:
        result[f"R@{n}"] = mean(list(_qid_mean(per_qid, partial(_recall_at, n)).values()))
    result["coverage"] = mean(list(_qid_mean(per_qid, lambda s: float(s.covered)).values()))
    if not has_offsets:
        result["citation_accuracy"] = None
        return "no gold offsets: add gold_offsets to the gold lines or pass block_offsets"
    result["citation_accuracy"] = mean(list(_qid_mean(per_qid, lambda s: float(s.citation_accurate)).values()))
    return None


def _delta_s(result: dict[str, Any], per_qid: PerQid, runs: Sequence[RunScore], computed: ds.ComputedDeltaS,
             limits: ds.Limits) -> tuple[str | None, str | None]:
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
    result["ΔS_by_qid"] = ds.per_question(per_qid, limits)
    result["cited_ΔS"] = ds.cited_spread(runs, limits)
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


def _by_type(runs: Sequence[RunScore], limits: ds.Limits) -> dict[str, dict[str, Any]]:
    counts: dict[str, list[int]] = {t: [0, 0] for t in CONTENT_TYPES}
    for s in runs:
        for kind, is_relevant in s.typed_top_k:
            entry = counts.setdefault(kind or "untyped", [0, 0])
            entry[0] += 1
            entry[1] += is_relevant
    spreads = ds.per_type(runs, list(counts), limits)
    return {kind: {"retrieved": n, "relevant": rel, "precision": rel / n if n else None, "ΔS": spreads[kind]}
            for kind, (n, rel) in counts.items()}


def _bad_qids(gold: Sequence[ChunkingGold], per_qid: PerQid, flag_above: float) -> list[str]:
    """Questions with coverage 0, or whose cited snippet has ΔS above ``flag_above`` (0.60)."""
    coverage = _qid_mean(per_qid, lambda s: float(s.covered))
    bad = []
    for g in gold:
        cited = [s.cited_delta_s for s in per_qid[g.qid] if s.cited_delta_s is not None]
        if coverage.get(g.qid, 0.0) == 0.0 or any(d > flag_above for d in cited):
            bad.append(g.qid)
    return bad


def _is_triplet(runs: Sequence[RunScore], paraphrases: int, seeds: int) -> bool:
    """Whether a question's runs can show λ convergence: ``paraphrases`` distinct queries, each
    run with at least ``seeds`` distinct ``seed`` values (with ``seeds`` 1 the seed is not
    read), and a ``λ_state`` on every run."""
    if not runs or any(s.lambda_state is None for s in runs):
        return False
    seeds_of: dict[str | None, set[str]] = {}
    for s in runs:
        seeds_of.setdefault(s.query, set())
        if s.seed is not None:
            seeds_of[s.query].add(repr(s.seed))
    return sum(seeds == 1 or len(found) >= seeds for found in seeds_of.values()) >= paraphrases


def _anchors_and_lambda(result: dict[str, Any], gold: Sequence[ChunkingGold], per_qid: PerQid, paraphrases: int,
                        seeds: int) -> int:
    """Anchor hit and proximity, paraphrase agreement and λ convergence; returns the triplet count."""
    result["anchor_hit"] = mean(list(_qid_mean(
        per_qid, lambda s: None if s.anchor_hit is None else float(s.anchor_hit)).values()))
    result["anchor_proximity"] = mean(list(_qid_mean(
        per_qid, lambda s: None if s.anchor_distance is None else float(s.anchor_distance)).values()))
    agreements: list[float] = []
    convergent = triplets = 0
    for g in gold:
        real = [s for s in per_qid[g.qid] if s.has_trace]
        if len(real) >= 2 and (agreement := topk_agreement([s.top_ids for s in real], 5)) is not None:
            agreements.append(agreement)
        if _is_triplet(real, paraphrases, seeds):
            triplets += 1
            convergent += all(s.lambda_state in CONVERGENT_STATES for s in real)
    result["paraphrase_agreement@5"] = mean(agreements)
    result["λ_convergent"] = convergent / triplets if triplets else None
    result["λ_triplets"] = triplets
    return triplets


def _cited_gate(cited: Mapping[str, Any], threshold: float, reason: str | None) -> dict[str, Any]:
    """The acceptance target "ΔS <= 0.45 for the cited snippet of each answered item", over
    every run that answered with a citation: its value is the largest known cited ΔS.

    It fails as soon as one known value is above the threshold (more values cannot lower the
    largest); it passes only when every answered run's cited snippet has a ΔS; otherwise it is
    not evaluated and does not hold."""
    if not cited["answered"]:
        return _gate("cited_ΔS", None, "<=", threshold, "no answered item: no run cites a block")
    value = cited["max"]
    if value is not None and value > threshold:
        note = f"{cited['unknown']} of {cited['answered']} answered runs without a cited ΔS"
        return _gate("cited_ΔS", value, "<=", threshold, note if cited["unknown"] else None)
    if cited["unknown"]:
        why = reason or "the first citation is not among the retrieved items, or the retrieved item has no ΔS"
        return _gate("cited_ΔS", None, "<=", threshold, f"{cited['unknown']} of {cited['answered']} answered runs "
                                                        f"have no ΔS for the cited snippet ({why})")
    return _gate("cited_ΔS", value, "<=", threshold)


# Every figure of the report that the live index is compared on, and which way is better.
_HIGHER, _LOWER = "higher", "lower"


def _compared_metrics(ks: Sequence[int]) -> list[tuple[str, str]]:
    return [*((f"P@{n}", _HIGHER) for n in ks), *((f"R@{n}", _HIGHER) for n in ks),
            ("coverage", _HIGHER), ("citation_accuracy", _HIGHER), ("anchor_hit", _HIGHER),
            ("anchor_proximity", _LOWER), ("ΔS_med", _LOWER), ("ΔS_p90", _LOWER), ("cited_ΔS_med", _LOWER),
            ("cited_ΔS_p90", _LOWER), ("paraphrase_agreement@5", _HIGHER), ("λ_convergent", _HIGHER)]


def _delta(shadow: float | None, live: float | None, better: str) -> dict[str, Any]:
    """Shadow and live values, ``delta`` = shadow - live (None when either is None) and whether
    the shadow index is ``better``, ``worse`` or the ``same``."""
    if shadow is None or live is None:
        return {"shadow": shadow, "live": live, "delta": None, "better": better, "change": None}
    delta = shadow - live
    change = "same" if abs(delta) < 1e-12 else "better" if (delta > 0) == (better == _HIGHER) else "worse"
    return {"shadow": shadow, "live": live, "delta": delta, "better": better, "change": change}


def _flat(result: Mapping[str, Any]) -> dict[str, Any]:
    cited = result["cited_ΔS"]
    return {**result, "cited_ΔS_med": cited["median"], "cited_ΔS_p90": cited["p90"]}


def versus_live(shadow: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """The page's "compare with the live index as a baseline and record deltas", for every figure
    both reports have: per metric and per content type, shadow, live, delta (shadow - live) and
    whether that is better or worse. ``shadow`` and ``live`` are :func:`report` results made with
    the same settings."""
    flat_shadow, flat_live = _flat(shadow), _flat(live)
    metrics = {name: _delta(flat_shadow[name], flat_live[name], better)
               for name, better in _compared_metrics(shadow["ks"])}
    by_type = {}
    for kind in dict.fromkeys([*shadow["by_type"], *live["by_type"]]):
        mine, theirs = shadow["by_type"].get(kind), live["by_type"].get(kind)
        by_type[kind] = {
            "retrieved": {"shadow": mine["retrieved"] if mine else 0, "live": theirs["retrieved"] if theirs else 0},
            "precision": _delta(mine and mine["precision"], theirs and theirs["precision"], _HIGHER),
            "ΔS_median": _delta(mine and mine["ΔS"]["median"], theirs and theirs["ΔS"]["median"], _LOWER),
            "ΔS_p90": _delta(mine and mine["ΔS"]["p90"], theirs and theirs["ΔS"]["p90"], _LOWER),
        }
    notes = {key: live[key] for key in ("ΔS_reason", "citation_accuracy_reason") if live[key]}
    return {"metrics": metrics, "by_type": by_type, "live_runs": live["n_runs"],
            "live_missing_trace": live["missing_trace"], "live_notes": notes}


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
    zones: Mapping[str, ZoneBounds] | None = None,
    flag_above: float = BAD_DELTA_S,
    paraphrases: int = PARAPHRASES,
    seeds: int = 1,
    recall_k: int = LIVE_RECALL_K,
) -> dict[str, Any]:
    """WFGY's chunking report for the shadow run ``traces`` (and the ``live_traces`` baseline).

    Keys of WFGY's compact JSON: ``P@k`` and ``R@k`` for every k in ``ks``, ``coverage``,
    ``citation_accuracy``, ``ΔS_med``, ``ΔS_p90``, ``bad_qids`` (coverage 0, or the cited
    snippet's ΔS above ``flag_above``, 0.60) and ``by_type`` (per content type: top-k items
    retrieved, relevant ones, precision, ΔS spread and zones). groundjudge adds ``ΔS_by_qid``
    (per question: ΔS median, p90, items above 0.60, items per zone and whether the thresholds
    hold over its top-k items, and the same for its cited snippets under ``cited``),
    ``cited_ΔS`` (the cited snippet's ΔS over every answered run), ``ΔS_zones``, ``ΔS_model``
    (provenance of the model that computed ΔS), ``anchor_hit``, ``anchor_proximity``,
    ``paraphrase_agreement@5``, ``λ_convergent`` with ``λ_triplets``, ``recall@5_vs_live``
    (named for ``recall_k``) and ``vs_live`` (every figure above against the live run: shadow,
    live, delta), ``citation_unverifiable`` (qids whose citation lands in a relevant block's
    section but that block has no gold offsets), the counts and reasons behind each null, WFGY's
    ``gates`` (the canary gates and the cited snippet's ΔS target) with ``pass`` ("eligible for
    canary only if all gates hold": true only when every gate passed; a gate skipped for lack of
    data is not a gate that holds) and ``gates_not_evaluated`` (the skipped ones). Values are not
    rounded.

    ``embedder="auto"`` loads the installed embedding model only when a run has no ΔS of its
    own; ``None`` never computes ΔS. ``zones`` overrides some of the page's ΔS zones (name ->
    inclusive ``(low, high)``, None for open); ``paraphrases`` is the number of distinct queries
    that make a λ triplet, ``seeds`` how many distinct ``seed`` values each of those queries must
    have been run with (1: the seed is not read; the acceptance target asks for "three
    paraphrases and two seeds", the canary gate for paraphrase triplets only); ``recall_k`` the
    k of the live recall gate. Raises ValueError for a
    repeated gold qid, a k below 1, an unknown citation policy, a negative window, an unknown
    gate or zone name, or a threshold that is not a finite number.
    """
    _check_gold(gold)
    thresholds = _thresholds(k, ks, citation_policy, window, recall_k, paraphrases, seeds, gates)
    limits = ds.Limits(thresholds["ΔS_med"], thresholds["ΔS_p90"], _finite("flag_above", flag_above),
                       _check_zones(zones or {}))
    ks = tuple(dict.fromkeys([*ks]))
    runs_by_qid = _group(gold, traces)
    gold_by_qid = {g.qid: g for g in gold}
    computed = ds.compute_missing(gold_by_qid, traces, texts=texts or {}, embedder=embedder)

    options: dict[str, Any] = {"k": k, "ks": ks, "window": window, "citation_policy": citation_policy,
                               "gold_offsets": block_offsets}
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
    delta_reason, delta_note = _delta_s(result, per_qid, all_runs, computed, limits)
    result["ΔS_zones"] = {name: list(bounds) for name, bounds in limits.zones.items()}
    result["ΔS_flag_above"] = limits.flag_above
    result["bad_qids"] = _bad_qids(gold, per_qid, limits.flag_above)
    result["by_type"] = _by_type(all_runs, limits)
    triplets = _anchors_and_lambda(result, gold, per_qid, paraphrases, seeds)
    recall_gate = recall_gate_name(recall_k)
    live = shadow_vs_live(gold, traces, live_traces, k=recall_k, max_drop_points=thresholds[recall_gate]) \
        if live_traces is not None else None
    result[f"recall@{recall_k}_vs_live"] = live

    gate_list = [
        _gate("coverage", result["coverage"], ">=", thresholds["coverage"], None if gold else "no gold question"),
        _gate("citation_accuracy", result["citation_accuracy"], ">=", thresholds["citation_accuracy"],
              accuracy_reason),
        _gate("ΔS_med", result["ΔS_med"], "<=", thresholds["ΔS_med"], delta_reason or delta_note),
        _gate("ΔS_p90", result["ΔS_p90"], "<=", thresholds["ΔS_p90"], delta_reason or delta_note),
        _gate(recall_gate, live["drop_points"] if live else None, "<=",
              thresholds[recall_gate], None if live else "no live run to compare with"),
        _gate("λ_convergent", result["λ_convergent"], ">=", thresholds["λ_convergent"],
              None if triplets else f"no paraphrase triplet ({paraphrases} distinct queries"
                                    + (f", each run with {seeds} seeds" if seeds > 1 else "")
                                    + ") with λ_state on every run"),
        _cited_gate(result["cited_ΔS"], thresholds["cited_ΔS"], computed.unavailable),
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
        "paraphrases": paraphrases,
        "seeds": seeds,
        "recall_k": recall_k,
        "n_questions": len(gold),
        "n_runs": len(all_runs),
        "missing_trace": [g.qid for g in gold if not runs_by_qid[g.qid]],
        "unknown_trace": sorted({t.qid for t in traces if t.qid not in gold_ids}),
        "citation_accuracy_reason": accuracy_reason,
        "citation_unverifiable": sorted({s.qid for s in all_runs if s.gold_offsets_missing}),
    })
    result["vs_live"] = None
    if live_traces is not None:
        baseline = report(gold, live_traces, k=k, ks=ks, window=window, citation_policy=citation_policy,
                          block_offsets=block_offsets, texts=texts, embedder=embedder, gates=gates, zones=zones,
                          flag_above=flag_above, paraphrases=paraphrases, seeds=seeds, recall_k=recall_k)
        result["vs_live"] = versus_live(result, baseline)
    return result
