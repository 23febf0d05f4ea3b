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
  of those per-run values, as in WFGY's evaluator. Gates: ``ΔS_med`` <= 0.40, ``ΔS_p90`` <=
  0.55; a question whose cited snippet has ΔS above 0.60 is flagged. Per question and per
  content type, the median and p90 of the pooled top-k values are reported beside them, with
  how many values lie in each of WFGY's zones: stable <= 0.45, transitional 0.40-0.60, risk
  >= 0.60 (bounds inclusive; the ranges overlap, and a value in two zones counts in both).
- the cited snippet: the answer's first citation (the page logs "ΔS for the chosen citation";
  its evaluator reads the first). Its ΔS is the one logged for that block among the retrieved
  items. Per question, and over all answered runs, its median, p90, maximum and zones; the
  acceptance target "ΔS <= 0.45 for the cited snippet of each answered item" is a gate
  (``cited_ΔS``, the largest value): it fails on one known value above 0.45, and is not
  evaluated (does not hold) while an answered run's cited snippet has no ΔS.
- λ (paraphrase convergence): a qid whose runs cover at least three distinct queries is a
  paraphrase triplet (with ``seeds=2``, the acceptance target's "three paraphrases and two
  seeds": each of those queries run with two distinct ``seed`` values); it is convergent when
  every run's ``λ_state`` is convergent (``→``).
  ``paraphrase_agreement@5`` (mean pairwise Jaccard overlap of the top-5 sets of a qid's runs)
  is reported beside it.
- against live ("compare with the live index as a baseline and record deltas"): with live
  traces, every figure above is computed for the live run with the same settings and reported
  as shadow, live, delta = shadow - live and whether that is better or worse, overall and per
  content type (``vs_live``); the Recall@5 drop is a gate (at most 2 points).

The knobs (k values, thresholds, window, zones) are :class:`ChunkingSettings`
(:mod:`.settings`); :func:`report` takes them as keywords.

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
  all-MiniLM-L6-v2 sentence-embedding model of the ``[embeddings]`` extra (see
  :mod:`.embedder`), from block texts given inline (``topk[].text``) or in ``texts``. When runs
  need the model and it is not installed, ``ΔS_med`` and ``ΔS_p90`` are null with the reason and
  the install command, and the ΔS gates are skipped.
- "A shadow index is eligible for canary if" every gate holds, the cited snippet's ΔS target
  included: a gate skipped for lack of data (no gold offsets, no ΔS, no live run, no
  paraphrase triplet, no answered run) does not hold, so ``pass`` is false and the report lists
  the gates it could not evaluate.

Empty denominators: the page's evaluator divides by the number of gold questions and by
``max(1, ...)`` per question; where it says nothing (no gold question at all, no question with
an anchor section, no citation with a section id, no triplet) the value is null.

Parts: :mod:`.definitions` (thresholds, zones, ids, spans, P@k/R@k), :mod:`.embedder` (the
model), :mod:`.runs` (one run), :mod:`.delta_s` (ΔS computed and summarised), :mod:`.report`
(the report, the deltas against live and the gates), :mod:`.render` (Markdown),
:mod:`.settings` (the knobs).
"""

from __future__ import annotations

from groundjudge.profiles.wfgy_chunking.definitions import (
    BAD_DELTA_S,
    CONVERGENT_STATES,
    DEFAULT_GATES,
    DELTA_S_ZONES,
    KS,
    OFFSET_WINDOW,
    percentile,
    precision_at,
    recall_at,
    section_of,
    span_gap,
    spans_match,
    title_distance,
    zone_counts,
    zones_of,
)
from groundjudge.profiles.wfgy_chunking.embedder import (
    INSTALL_COMMAND,
    NOT_INSTALLED,
    EmbeddingModel,
    delta_s_from_embeddings,
    load_embedder,
)
from groundjudge.profiles.wfgy_chunking.render import render_markdown
from groundjudge.profiles.wfgy_chunking.report import report, shadow_vs_live, versus_live
from groundjudge.profiles.wfgy_chunking.runs import RunScore, score_run
from groundjudge.profiles.wfgy_chunking.settings import ChunkingSettings

__all__ = [
    "BAD_DELTA_S",
    "CONVERGENT_STATES",
    "DEFAULT_GATES",
    "DELTA_S_ZONES",
    "INSTALL_COMMAND",
    "KS",
    "NOT_INSTALLED",
    "OFFSET_WINDOW",
    "ChunkingSettings",
    "EmbeddingModel",
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
    "versus_live",
    "zone_counts",
    "zones_of",
]
