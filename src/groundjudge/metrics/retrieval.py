"""Ranked retrieval metrics with trec_eval's definitions (SPEC section 4).

Pure functions, no I/O. Every rate agrees with trec_eval (and so with pytrec_eval) to 1e-9
on the real runs in ``../shared/data/trec``; ``tests/test_metrics_retrieval.py`` proves it.

Definitions, for one query with judged grades ``relevance`` and an ordered ``ranking``:

- A document is *relevant* when its grade is at least ``relevance_level`` (default 1, as
  trec_eval's ``-l``). Unjudged documents are non-relevant. ``num_rel`` counts the relevant
  judged documents, ``num_ret`` the ranked ones, ``num_rel_ret`` the relevant ranked ones.
- ``hit@k`` (trec_eval ``success_k``): 1 if a relevant document is in the top k, else 0.
- ``recall@k`` (``recall_k``): relevant documents in the top k / ``num_rel``.
- ``precision@k`` (``P_k``): relevant documents in the top k / k, even when fewer than k
  documents were ranked.
- ``mrr@k``: 1 / rank of the first relevant document if it is within the top k, else 0
  (trec_eval ``recip_rank`` on the ranking cut to k). ``mrr`` (``recip_rank``) has no cutoff.
- ``ndcg@k`` (``ndcg_cut_k``) and ``ndcg`` (``ndcg``, no cutoff): gain = grade (grades <= 0
  give no gain, whatever ``relevance_level`` is), discount ``log2(rank + 1)``; the ideal
  ranking sorts *all* judged documents by grade, not only the ranked ones.
- ``ndcg_exp@k``: as ``ndcg@k`` with gain ``2**grade - 1`` (the exponential gain of
  Burges et al.), ideal built the same way.
- ``map`` (``map``): mean over all relevant judged documents of the precision at the rank of
  each one, counting a relevant document that was not ranked as precision 0.
- ``r_precision`` (``Rprec``): relevant documents in the top ``num_rel`` / ``num_rel``.

Empty denominators. trec_eval reports 0 when a query has no relevant document; here such a
value is ``None`` (never 0, never NaN) and it is left out of means, so that a query that
cannot be missed does not count as a miss (SPEC section 4, STYLE "no value is explicit"):

- ``hit@k``, ``recall@k``, ``mrr@k``, ``mrr``, ``map``, ``r_precision`` are None when
  ``num_rel`` is 0;
- ``ndcg@k``, ``ndcg_exp@k`` and ``ndcg`` are None when the ideal DCG is 0 (no judged document
  has a positive grade);
- ``precision@k`` is 0.0 when ``num_rel`` is 0, as in trec_eval, unless the caller asks
  for None (``precision_without_relevant=None``): a golden-set case without relevance labels
  has no precision, so :mod:`groundjudge.metrics.case` asks for None; TREC runs keep
  trec_eval's 0 so that precision means equal trec_eval's;
- the ``num_*`` counts are always defined.

In the TREC reference data every evaluated query has relevant documents, so agreement with
trec_eval there is exact.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral
from operator import itemgetter
from typing import NamedTuple, cast

__all__ = [
    "DEFAULT_KS",
    "QueryCoverage",
    "case_rates",
    "evaluate_trec",
    "metric_names",
    "query_coverage",
    "retrieval_metrics",
    "trec_order",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)

_CUT_METRICS = ("hit", "recall", "precision", "mrr", "ndcg", "ndcg_exp")
_COUNTS = ("num_rel", "num_ret", "num_rel_ret")
_UNCUT_METRICS = ("mrr", "ndcg", "map", "r_precision", *_COUNTS)

_by_doc = itemgetter(0)
_by_score = itemgetter(1)


@dataclass(frozen=True)
class QueryCoverage:
    """Which queries :func:`evaluate_trec` evaluates, and which it leaves out.

    As trec_eval does by default, only queries present in both the qrels and the run are
    evaluated; the other two lists say what was left out so a report can show it.
    """

    evaluated: tuple[str, ...]
    only_in_qrels: tuple[str, ...]
    only_in_run: tuple[str, ...]


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> tuple[str, ...]:
    """Keys of :func:`retrieval_metrics`'s result for these cutoffs, in its order.

    >>> metric_names((1,))  # doctest: +NORMALIZE_WHITESPACE
    ('hit@1', 'recall@1', 'precision@1', 'mrr@1', 'ndcg@1', 'ndcg_exp@1',
     'mrr', 'ndcg', 'map', 'r_precision', 'num_rel', 'num_ret', 'num_rel_ret')
    """
    return _keys(_check_ks(ks))


def trec_order(scored: Sequence[tuple[str, float]]) -> list[str]:
    """Order ``(doc_id, score)`` pairs as trec_eval does: score descending, then doc_id descending.

    Ties in score are broken by comparing doc ids as strings, largest first, whatever order
    the pairs came in; a rank column, if the caller had one, plays no part.

    Raises
    ------
    ValueError
        If a score is NaN (it has no place in an order).

    Examples
    --------
    >>> trec_order([("d1", 1.0), ("d3", 2.0), ("d2", 2.0)])
    ['d3', 'd2', 'd1']
    """
    if any(map(math.isnan, map(_by_score, scored))):
        raise ValueError("a score is NaN; every score must be a number to rank the documents")
    # Two stable sorts on single keys: faster than one sort on (score, doc_id) tuples.
    ordered = sorted(scored, key=_by_doc, reverse=True)
    ordered.sort(key=_by_score, reverse=True)
    return [doc for doc, _ in ordered]


def retrieval_metrics(
    ranking: Sequence[str],
    relevance: Mapping[str, int],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    relevance_level: int = 1,
    precision_without_relevant: float | None = 0.0,
) -> dict[str, float | None]:
    """Ranked retrieval metrics of one query, with trec_eval's definitions.

    Parameters
    ----------
    ranking : sequence of str
        Document ids, best first (already ordered: see :func:`trec_order` for scored runs).
    relevance : mapping of str to int
        Judged grades of this query's documents. Unjudged documents are non-relevant.
    ks : sequence of int, default (1, 3, 5, 10)
        Cutoffs for the ``@k`` metrics, each a positive integer.
    relevance_level : int, keyword-only, default 1
        Smallest grade that counts as relevant (trec_eval ``-l``); does not change NDCG gains.
    precision_without_relevant : float or None, keyword-only, default 0.0
        ``precision@k`` when no judged document is relevant (``num_rel`` is 0): trec_eval's
        0.0, or None to leave such a query out of precision means, like the other rates.

    Returns
    -------
    dict
        ``hit@k``, ``recall@k``, ``precision@k``, ``mrr@k``, ``ndcg@k``, ``ndcg_exp@k`` for
        each k, then ``mrr``, ``ndcg``, ``map``, ``r_precision`` (floats) and ``num_rel``,
        ``num_ret``, ``num_rel_ret`` (ints). A metric whose denominator is empty is None
        (see the module docstring).

    Raises
    ------
    ValueError
        If the ranking lists a document twice, a k is not a positive integer, a grade is
        not an integer, or ``relevance_level`` is below 1.

    Examples
    --------
    >>> m = retrieval_metrics(["d2", "d1", "d9"], {"d1": 1, "d7": 2}, ks=(1, 3))
    >>> m["hit@1"], m["hit@3"], m["recall@3"], m["precision@3"], m["mrr"]
    (0.0, 1.0, 0.5, 0.3333333333333333, 0.5)
    >>> retrieval_metrics(["d1"], {"d1": 0})["map"] is None
    True
    >>> retrieval_metrics(["d1"], {}, ks=(1,))["precision@1"]
    0.0
    >>> retrieval_metrics(["d1"], {}, ks=(1,), precision_without_relevant=None)["precision@1"] is None
    True
    """
    if isinstance(ranking, str):
        raise ValueError("ranking must be a sequence of document ids, not a single string")  # noqa: TRY004 - the documented error of every bad argument here
    ks = _check_ks(ks)
    _check_level(relevance_level)
    if precision_without_relevant is not None and not 0.0 <= precision_without_relevant <= 1.0:
        raise ValueError(
            f"precision_without_relevant must be None or within [0, 1], got {precision_without_relevant!r}"
        )
    return _ranked(ranking, relevance, relevance_level, ks, _keys(ks), precision_without_relevant)


def case_rates(ranking: Sequence[str], relevance: Mapping[str, int], ks: Sequence[int], *,
               distinct: bool = False) -> dict[str, float | None]:
    """A golden-set case's rates: :func:`retrieval_metrics` at relevance level 1 with
    ``precision_without_relevant=None``, without the ``num_*`` counts (not a case's metrics).
    The same values, without the checks of arguments a case's scoring fixes itself.
    ``distinct``: the caller made the ranking list each document once (``case.ranking_of``
    does), so that is not checked again.

    Raises
    ------
    ValueError
        If the ranking lists a document twice, a k is not a positive integer or a grade is
        not an integer.
    """
    ks = _check_ks(ks)
    if not distinct and len(set(ranking)) != len(ranking):
        raise ValueError(f"document {_first_duplicate(ranking)!r} appears twice in the ranking")
    outcome = tuple(map(relevance.get, ranking)), tuple(relevance.values())
    if not set(map(type, relevance.values())) <= {int}:
        _check_grades(relevance)  # raises for a grade that is not an integer
        # integers of another type (numpy's) are scored as they are: an outcome equal to one of
        # int grades would otherwise be read from, or put in, the cache of the int grades
        return _outcome_rates.__wrapped__(*outcome, ks)
    return dict(_outcome_rates(*outcome, ks))  # a copy: the cached dict is every such case's


@lru_cache(maxsize=4096)
def _outcome_rates(grade_at_rank: tuple[int | None, ...], grades: tuple[int, ...], ks: tuple[int, ...],
                   ) -> dict[str, float | None]:
    """:func:`case_rates` of a ranking whose documents have the grades ``grade_at_rank`` (None:
    not judged), in a case whose judgments have ``grades``. That is all a case's rates read: the
    cases of a run share a few hundred such outcomes, so each one is scored once, by the
    arithmetic of the TREC path (``_score``)."""
    hit_ranks = [rank for rank, grade in enumerate(grade_at_rank) if grade is not None and grade > 0]
    hit_grades = [cast(int, grade_at_rank[rank]) for rank in hit_ranks]
    judged = _Judged.graded({}, [grade for grade in grades if grade > 0], 1)  # ``_score`` reads no document
    keys = _keys(ks)
    return _score(hit_ranks, hit_grades, len(grade_at_rank), judged, ks, keys[:len(keys) - len(_COUNTS)], None)


def _ranked(ranking: Sequence[str], relevance: Mapping[str, int], level: int, ks: tuple[int, ...],
            keys: tuple[str, ...], precision_without_relevant: float | None) -> dict[str, float | None]:
    """The metrics named by ``keys`` of a ranking whose arguments are checked already, but for
    a document listed twice."""
    if len(set(ranking)) != len(ranking):
        raise ValueError(f"document {_first_duplicate(ranking)!r} appears twice in the ranking")
    judged = _Judged.build(relevance, level)
    positive = judged.positive
    hit_ranks = [rank for rank, doc in enumerate(ranking) if doc in positive]
    hit_grades = [positive[ranking[rank]] for rank in hit_ranks]
    return _score(hit_ranks, hit_grades, len(ranking), judged, ks, keys, precision_without_relevant)


def query_coverage(qrels: Mapping[str, object], run: Mapping[str, object]) -> QueryCoverage:
    """Split query ids into evaluated (in both), only in the qrels, and only in the run; each sorted."""
    in_both = qrels.keys() & run.keys()
    return QueryCoverage(
        evaluated=tuple(sorted(in_both)),
        only_in_qrels=tuple(sorted(qrels.keys() - in_both)),
        only_in_run=tuple(sorted(run.keys() - in_both)),
    )


def evaluate_trec(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[tuple[str, float]]],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    relevance_level: int = 1,
) -> tuple[dict[str, dict[str, float | None]], dict[str, dict[str, float | int | None]]]:
    """Evaluate a TREC run against qrels, per query and on average.

    Each query's ``(doc_id, score)`` pairs are ordered as :func:`trec_order` orders them,
    then scored by :func:`retrieval_metrics`. As trec_eval does by default, only queries in
    both the qrels and the run are evaluated; :func:`query_coverage` names the others.

    Parameters
    ----------
    qrels : mapping
        ``{query_id: {doc_id: grade}}``, e.g. from :func:`groundjudge.load.trec.read_qrels`.
    run : mapping
        ``{query_id: [(doc_id, score), ...]}``, e.g. from :func:`groundjudge.load.trec.read_run`.
    ks : sequence of int, default (1, 3, 5, 10)
        Cutoffs for the ``@k`` metrics.
    relevance_level : int, keyword-only, default 1
        Smallest grade that counts as relevant.

    Returns
    -------
    per_query : dict
        ``{query_id: metrics}`` for the evaluated queries, in sorted query order.
    means : dict
        ``{metric: {"value": mean, "n": count}}``: the arithmetic mean over the evaluated
        queries whose value is not None, and how many those are; ``value`` is None when
        ``n`` is 0.

    Raises
    ------
    ValueError
        If a query's run lists a document twice or has a NaN score, or as
        :func:`retrieval_metrics` raises.

    Examples
    --------
    >>> per_query, means = evaluate_trec({"q1": {"d1": 1}}, {"q1": [("d0", 2.0), ("d1", 1.0)]}, ks=(1,))
    >>> per_query["q1"]["mrr"], means["precision@1"]
    (0.5, {'value': 0.0, 'n': 1})
    """
    ks = _check_ks(ks)
    _check_level(relevance_level)
    keys = _keys(ks)
    per_query: dict[str, dict[str, float | None]] = {}
    for qid in query_coverage(qrels, run).evaluated:
        try:
            judged = _Judged.build(qrels[qid], relevance_level)
        except ValueError as exc:
            raise ValueError(f"query {qid!r}: {exc}") from None
        hit_ranks, hit_grades, num_ret = _ranked_hits(run[qid], judged.positive, qid)
        per_query[qid] = _score(hit_ranks, hit_grades, num_ret, judged, ks, keys)
    return per_query, _means(per_query, keys)


class _Judged(NamedTuple):
    """What one query's judgments contribute to every ranking, computed once per query (a
    named tuple: made once per golden-set case too, where a frozen dataclass's set-up shows)."""

    positive: dict[str, int]  # judged documents with a positive grade (the only ones with gain)
    level: int
    num_rel: int
    ideal_linear: list[float]  # ideal_linear[j]: DCG of the ideal ranking's top j, gain = grade
    ideal_exp: list[float]  # the same with gain 2**grade - 1

    @classmethod
    def build(cls, relevance: Mapping[str, int], level: int) -> _Judged:
        if not set(map(type, relevance.values())) <= {int}:
            _check_grades(relevance)
        positive = {doc: grade for doc, grade in relevance.items() if grade > 0}
        return cls.graded(positive, positive.values(), level)

    @classmethod
    def graded(cls, positive: dict[str, int], grades: Iterable[int], level: int) -> _Judged:
        """From the positive-grade documents and their ``grades`` (in any order)."""
        ordered = sorted(grades, reverse=True)
        ideal_linear, ideal_exp = _dcg_prefixes(range(len(ordered)), ordered)
        num_rel = len(ordered) if level == 1 else sum(1 for grade in ordered if grade >= level)
        return cls(positive, level, num_rel, ideal_linear, ideal_exp)


def _dcg_prefixes(ranks: Iterable[int], grades: Iterable[int]) -> tuple[list[float], list[float]]:
    """Running DCG after each positive-gain document (0-based ``ranks``, ascending), both gains.

    ``linear[j]`` is the DCG of the first j of them with gain = grade, ``exp[j]`` with gain
    2**grade - 1; both start at 0.0 for j = 0. The discount of 0-based rank r is log2(r + 2).
    """
    linear = [0.0]
    exp = [0.0]
    for rank, grade in zip(ranks, grades):
        discount = math.log2(rank + 2)
        linear.append(linear[-1] + grade / discount)
        exp.append(exp[-1] + (2**grade - 1) / discount)
    return linear, exp


def _score(
    hit_ranks: list[int],
    hit_grades: list[int],
    num_ret: int,
    judged: _Judged,
    ks: tuple[int, ...],
    keys: tuple[str, ...],
    precision_without_relevant: float | None = 0.0,
) -> dict[str, float | None]:
    """All metrics from the 0-based ranks (ascending) and grades of the positive-gain hits."""
    if judged.level == 1:  # every positive grade is relevant
        rel_ranks = hit_ranks
    else:
        rel_ranks = [rank for rank, grade in zip(hit_ranks, hit_grades) if grade >= judged.level]
    num_rel = judged.num_rel
    linear, exp = _dcg_prefixes(hit_ranks, hit_grades)
    ideal_linear = judged.ideal_linear
    ideal_exp = judged.ideal_exp
    num_positive = len(ideal_linear) - 1  # judged documents with a positive grade
    first: float = rel_ranks[0] if rel_ranks else math.inf
    first_reciprocal = 1.0 / (first + 1)  # 0.0 when nothing relevant was ranked

    hit: list[float | None] = []
    recall: list[float | None] = []
    precision: list[float | None] = []
    mrr: list[float | None] = []
    ndcg: list[float | None] = []
    ndcg_exp: list[float | None] = []
    for k in ks:
        found = bisect_left(rel_ranks, k)
        if num_rel:
            precision.append(found / k)
            hit.append(1.0 if found else 0.0)
            recall.append(found / num_rel)
            mrr.append(first_reciprocal if first < k else 0.0)
        else:
            precision.append(precision_without_relevant)
            hit.append(None)
            recall.append(None)
            mrr.append(None)
        if num_positive:
            gained = bisect_left(hit_ranks, k)
            ideal_at = min(k, num_positive)
            ndcg.append(linear[gained] / ideal_linear[ideal_at])
            ndcg_exp.append(exp[gained] / ideal_exp[ideal_at])
        else:
            ndcg.append(None)
            ndcg_exp.append(None)
    values = hit + recall + precision + mrr + ndcg + ndcg_exp
    values.append(first_reciprocal if num_rel else None)
    values.append(linear[-1] / ideal_linear[-1] if num_positive else None)
    if num_rel:
        values.append(math.fsum([(n + 1) / (rank + 1) for n, rank in enumerate(rel_ranks)]) / num_rel)
        values.append(bisect_left(rel_ranks, num_rel) / num_rel)
    else:
        values.extend((None, None))
    values.extend((num_rel, num_ret, len(rel_ranks)))
    return dict(zip(keys, values))  # ``keys`` without the counts' names: a mapping without them


def _ranked_hits(
    scored: Sequence[tuple[str, float]], positive: Mapping[str, int], qid: str
) -> tuple[list[int], list[int], int]:
    """0-based trec_eval ranks (ascending) and grades of the positive-gain documents in ``scored``.

    Equivalent to ranking with :func:`trec_order` and looking every document up, but only the
    few documents with a positive grade are placed: a document's rank is the number of
    documents with a higher score, plus those with the same score and a larger doc id.
    Sorting the bare scores (fast float comparisons) and bisecting is several times cheaper
    than sorting every pair, which would be most of the work for a 1000-document TREC run.
    """
    score_of = dict(scored)
    num_ret = len(scored)
    if len(score_of) != num_ret:
        duplicate = _first_duplicate([doc for doc, _ in scored])
        raise ValueError(f"query {qid!r}: document {duplicate!r} appears twice in the run")
    # A sum is NaN when a term is NaN (or when +inf meets -inf: then look closer).
    if math.isnan(sum(score_of.values())) and any(map(math.isnan, score_of.values())):
        raise ValueError(f"query {qid!r}: a score is NaN; every score must be a number")
    # Probe the few positive documents into the run, not the run's many into the qrels.
    hits = [doc for doc in positive if doc in score_of]
    if not hits:
        return [], [], num_ret
    scores = sorted(score_of.values())
    placed: list[tuple[int, str]] = []
    tied: dict[float, list[str]] = {}
    for doc in hits:
        score = score_of[doc]
        above = bisect_right(scores, score)
        if above - bisect_left(scores, score, 0, above) > 1:
            tied[score] = []
        placed.append((num_ret - above, doc))
    if tied:
        # Rare: a positive-gain document shares its score. Count the larger ids in its tie.
        for doc, score in score_of.items():
            if score in tied:
                tied[score].append(doc)
        for group in tied.values():
            group.sort()
        placed = [(ahead + _larger_in_tie(tied, score_of[doc], doc), doc) for ahead, doc in placed]
    placed.sort()
    return [rank for rank, _ in placed], [positive[doc] for _, doc in placed], num_ret


def _larger_in_tie(tied: Mapping[float, list[str]], score: float, doc: str) -> int:
    group = tied.get(score)
    return 0 if group is None else len(group) - bisect_right(group, doc)


def _means(
    per_query: Mapping[str, Mapping[str, float | None]], keys: tuple[str, ...]
) -> dict[str, dict[str, float | int | None]]:
    means: dict[str, dict[str, float | int | None]] = {}
    rows = list(per_query.values())
    for key in keys:
        present = [row[key] for row in rows if row[key] is not None]
        means[key] = {"value": math.fsum(present) / len(present) if present else None, "n": len(present)}  # type: ignore[arg-type]
    return means


@lru_cache(maxsize=1024)
def at_k(name: str, k: int) -> str:
    """``name@k``, one string per name and cut-off for the whole run: every per-case mapping of
    a nightly run's hundreds of thousands shares its keys instead of holding copies."""
    return f"{name}@{k}"


@lru_cache(maxsize=64)
def _keys(ks: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"{name}@{k}" for name in _CUT_METRICS for k in ks) + _UNCUT_METRICS


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if type(ks) is tuple and all(type(k) is int and k >= 1 for k in ks):  # the usual, quick case
        return _unique(ks)
    return _checked_ks(ks)


@lru_cache(maxsize=64)
def _unique(ks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(ks))


def _checked_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if isinstance(ks, (str, bytes)) or not all(
        isinstance(k, Integral) and not isinstance(k, bool) and k >= 1 for k in ks
    ):
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    return tuple(dict.fromkeys(int(k) for k in ks))


def _check_level(level: int) -> None:
    if not isinstance(level, Integral) or isinstance(level, bool) or level < 1:
        raise ValueError(f"relevance_level must be an integer >= 1, got {level!r}")


def _check_grades(relevance: Mapping[str, int]) -> None:
    for doc, grade in relevance.items():
        if not isinstance(grade, Integral) or isinstance(grade, bool):
            raise ValueError(f"document {doc!r} has grade {grade!r}; grades must be integers")  # noqa: TRY004 - ValueError, as for every bad argument here


def _first_duplicate(ids: Sequence[str]) -> str:
    seen: set[str] = set()
    for doc in ids:
        if doc in seen:
            return doc
        seen.add(doc)
    raise AssertionError("no duplicate")
