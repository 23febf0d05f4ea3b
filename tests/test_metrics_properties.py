"""Properties every retrieval metric must have, on random rankings (sklearn's test_common style).

The reference values live in test_metrics_retrieval.py; here hypothesis checks the
invariants that hold whatever the numbers: ranges, monotonicity, what may not matter, and
that the two code paths (an ordered ranking, a scored run) agree.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.metrics.retrieval import case_rates, evaluate_trec, retrieval_metrics, trec_order

KS = (1, 2, 3, 5, 10)
COUNTS = ("num_rel", "num_ret", "num_rel_ret")
AT_K = ("hit", "recall", "precision", "mrr", "ndcg", "ndcg_exp")

doc_ids = st.text(alphabet="abcxyz019é", min_size=1, max_size=3)
grades = st.integers(-2, 4)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], dict[str, int]]:
    """A ranking and judgments that share some documents and not others."""
    pool = draw(st.lists(doc_ids, min_size=1, max_size=25, unique=True))
    ranking = draw(st.permutations(pool))[: draw(st.integers(0, len(pool)))]
    judged = draw(st.lists(st.sampled_from(pool), unique=True)) + draw(st.lists(doc_ids, max_size=5))
    relevance = {doc: draw(grades) for doc in judged}
    return ranking, relevance


def relevant_in(docs: list[str], relevance: dict[str, int]) -> int:
    return sum(1 for doc in docs if relevance.get(doc, 0) >= 1)


def same(a: dict[str, float | None], b: dict[str, float | None]) -> bool:
    return a.keys() == b.keys() and all(
        (a[key] is None and b[key] is None)
        or (a[key] is not None and b[key] is not None and math.isclose(a[key], b[key], abs_tol=1e-12))
        for key in a
    )


@given(cases())
def test_rates_lie_in_the_unit_interval_and_none_only_without_denominator(case) -> None:
    ranking, relevance = case
    metrics = retrieval_metrics(ranking, relevance, KS)
    has_relevant = any(grade >= 1 for grade in relevance.values())
    for key, value in metrics.items():
        if key in COUNTS:
            assert isinstance(value, int) and value >= 0
            continue
        if value is None:
            assert not has_relevant and not key.startswith("precision"), key
        else:
            assert 0.0 <= value <= 1.0 + 1e-12, (key, value)
            assert not math.isnan(value)
    assert (metrics["map"] is None) == (not has_relevant)


@given(cases(), st.randoms(use_true_random=False))
def test_order_after_the_cutoff_does_not_matter(case, rng) -> None:
    ranking, relevance = case
    metrics = retrieval_metrics(ranking, relevance, KS)
    for k in KS:
        tail = ranking[k:]
        rng.shuffle(tail)
        shuffled = retrieval_metrics(ranking[:k] + tail, relevance, KS)
        for name in AT_K:
            assert shuffled[f"{name}@{k}"] == metrics[f"{name}@{k}"], (name, k)
        for key in COUNTS:
            assert shuffled[key] == metrics[key]


@given(cases(), st.randoms(use_true_random=False))
def test_which_unretrieved_document_holds_which_grade_does_not_matter(case, rng) -> None:
    ranking, relevance = case
    retrieved = set(ranking)
    unretrieved = [doc for doc in relevance if doc not in retrieved]
    moved = [relevance[doc] for doc in unretrieved]
    rng.shuffle(moved)
    permuted = {**relevance, **dict(zip(unretrieved, moved))}
    assert same(retrieval_metrics(ranking, permuted, KS), retrieval_metrics(ranking, relevance, KS))


@given(cases())
def test_unretrieved_non_relevant_judgments_change_nothing(case) -> None:
    ranking, relevance = case
    extra = {f"~unretrieved{i}": grade for i, grade in enumerate((0, -1, 0))}
    before = retrieval_metrics(ranking, relevance, KS)
    after = retrieval_metrics(ranking, {**relevance, **extra}, KS)
    assert same(before, after)


@given(cases())
def test_hit_recall_and_mrr_never_fall_as_k_grows(case) -> None:
    ranking, relevance = case
    metrics = retrieval_metrics(ranking, relevance, KS)
    for name in ("hit", "recall", "mrr"):
        values = [metrics[f"{name}@{k}"] for k in KS]
        if values[0] is not None:
            assert values == sorted(values), (name, values)


@given(cases())
def test_recall_is_one_once_every_relevant_document_is_in(case) -> None:
    ranking, relevance = case
    metrics = retrieval_metrics(ranking, relevance, KS)
    relevant = {doc for doc, grade in relevance.items() if grade >= 1}
    for k in KS:
        if relevant and relevant <= set(ranking[:k]):
            assert metrics[f"recall@{k}"] == 1.0
            assert metrics[f"hit@{k}"] == 1.0


@given(cases())
def test_precision_times_k_counts_the_relevant_in_the_top_k(case) -> None:
    ranking, relevance = case
    metrics = retrieval_metrics(ranking, relevance, KS)
    for k in KS:
        assert math.isclose(metrics[f"precision@{k}"] * k, relevant_in(ranking[:k], relevance))
    assert metrics["num_rel_ret"] == relevant_in(ranking, relevance)


@given(cases(), st.randoms(use_true_random=False))
def test_consistent_relabelling_changes_nothing(case, rng) -> None:
    ranking, relevance = case
    ids = sorted(set(ranking) | set(relevance))
    new_ids = [f"new{i}" for i in range(len(ids))]
    rng.shuffle(new_ids)
    rename = dict(zip(ids, new_ids))
    renamed = retrieval_metrics([rename[doc] for doc in ranking], {rename[d]: g for d, g in relevance.items()}, KS)
    assert same(renamed, retrieval_metrics(ranking, relevance, KS))


@settings(max_examples=200)
@given(cases(), st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, -3.0]), min_size=30, max_size=30))
def test_scored_run_path_agrees_with_trec_order_then_ranking(case, scores) -> None:
    """evaluate_trec places only the relevant documents; it must match ranking everything."""
    ranking, relevance = case
    scored = list(zip(ranking, scores))
    per_query, _ = evaluate_trec({"q": relevance}, {"q": scored}, KS)
    assert same(per_query["q"], retrieval_metrics(trec_order(scored), relevance, KS))


@given(cases(), st.sampled_from([(1,), (10, 1), (1, 2, 3, 5, 10), (3, 3, 7)]))
def test_a_cases_rates_are_retrieval_metrics_without_the_counts(case, ks) -> None:
    """case_rates skips the checks a case's scoring makes itself: the same values, bit for bit
    (None where the denominator is empty, precision too), and the counts left out."""
    ranking, relevance = case
    full = retrieval_metrics(ranking, relevance, ks, precision_without_relevant=None)
    rates = case_rates(ranking, relevance, ks)
    assert list(rates) == [key for key in full if key not in COUNTS]
    assert all(rates[key] is full[key] is None or (rates[key] is not None and rates[key].hex() == full[key].hex())
               for key in rates)


def test_a_cases_rates_refuse_what_retrieval_metrics_refuses() -> None:
    for bad in ((["d1", "d1"], {"d1": 1}, (1,)), (["d1"], {"d1": 1}, (0,)), (["d1"], {"d1": 1.5}, (1,))):
        for score in (retrieval_metrics, case_rates):
            with pytest.raises(ValueError):
                score(*bad)
    assert all(value is None for value in case_rates([], {}, (1,)).values())  # an empty ranking, no judgments
    # a few ranked positive documents are placed one by one, many by one pass: the same either way
    for hits in (0, 1, 8, 9, 30):
        ranking = [f"d{i}" for i in range(40)]
        relevance = {f"d{i * 40 // max(hits, 1)}": 1 + i % 3 for i in range(hits)} | {"x": 2, "d39": 0}
        full = retrieval_metrics(ranking, relevance, KS, precision_without_relevant=None)
        assert case_rates(ranking, relevance, KS) == {k: v for k, v in full.items() if k not in COUNTS}


def test_a_cases_rates_come_from_a_cache_of_int_grades_only_for_int_grades() -> None:
    """A case's rates are scored once per outcome (the grade at each rank and the case's grades)
    and cached: numpy's integers equal ints, but their rates are scored as they are (numpy's
    floats where retrieval_metrics gives those), before and after the same outcome in ints."""
    import numpy as np

    ranking = ["d1", "d2", "d3"]
    for relevance in ({"d2": 2, "d9": 1}, {"d2": np.int64(2), "d9": np.int64(1)}, {"d2": 2, "d9": 1}):
        full = retrieval_metrics(ranking, relevance, KS, precision_without_relevant=None)
        rates = case_rates(ranking, relevance, KS)
        assert [(k, v, type(v)) for k, v in rates.items()] == [(k, v, type(v)) for k, v in full.items()
                                                               if k not in COUNTS]


@given(cases(), st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=30, max_size=30))
def test_order_preserving_relabelling_keeps_tie_breaks(case, scores) -> None:
    ranking, relevance = case
    ids = sorted(set(ranking) | set(relevance))
    rename = {doc: f"id{i:03d}" for i, doc in enumerate(ids)}  # same string order as before
    scored = list(zip(ranking, scores))
    renamed = [(rename[doc], score) for doc, score in scored]
    assert [rename[doc] for doc in trec_order(scored)] == trec_order(renamed)


@given(st.text(alphabet=st.sampled_from(["a", "B", " ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85",
                                          "ﬁ", "Ä", "x"]), max_size=30))
def test_normalize_collapses_white_space_as_the_regex_did(text: str) -> None:
    import re
    import unicodedata

    from groundjudge.metrics.text import normalize

    assert normalize(text) == re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def reference_summary(rows: list[dict[str, float | None]]) -> dict[str, dict[str, float | int | None]]:
    """Summaries as first written, value by value: what the column-wise version must equal."""
    from groundjudge.metrics.operations import percentile

    columns: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            columns.setdefault(name, [])
            if value is not None:
                columns[name].append(value)
    expected: dict[str, dict[str, float | int | None]] = {}
    for name, values in columns.items():
        if name.startswith("latency_ms."):
            for q in (50, 95, 99):
                expected[f"{name}.p{q}"] = {"value": percentile(values, q), "n": len(values)}
            continue
        expected[name] = {"value": sum(values) / len(values) if values else None, "n": len(values)}
        if name == "cost_usd":
            expected["cost_usd.total"] = {"value": sum(values) if values else None, "n": len(values)}
    return expected


ROWS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "latency_ms.e2e", "cost_usd", "c"]),
                                st.one_of(st.none(), st.floats(-5, 5)), max_size=5), max_size=12)


@given(ROWS)
def test_summaries_are_the_value_by_value_means(rows: list[dict[str, float | None]]) -> None:
    from groundjudge.metrics.aggregate import summarize

    got, expected = summarize(iter(rows)), reference_summary(rows)
    assert got == expected and list(got) == list(expected)



def _bits(found: dict[str, dict[str, float | int | None]]) -> dict[str, tuple[object, ...]]:
    """Summaries with each float as its bits: -0.0 and 0.0 differ here."""
    return {k: tuple((f, math.copysign(1.0, v), v) if isinstance(v, float) else (f, v) for f, v in summary.items())
            for k, summary in found.items()}


@given(st.sampled_from(["a", "cost_usd", "latency_ms.e2e"]),
       st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([-0.0, 0.0, 0.1, 1e308])),
                max_size=40))
def test_a_columns_summaries_are_those_of_its_values_as_a_list(name: str, values: list[float]) -> None:
    """The summaries of a float64 column (the tables' way) are those of the same values as a
    list (summing in order, as Python's sum does), bit for bit, to the sign of a zero; a sum
    that is not finite is refused by both."""
    import numpy as np

    from groundjudge.metrics.aggregate import column_summaries, summaries

    try:
        expected = summaries({name: values})
    except ValueError:
        with pytest.raises(ValueError, match="not a finite number"):
            column_summaries(name, np.asarray(values, dtype=np.float64))
        return
    got = column_summaries(name, np.asarray(values, dtype=np.float64))
    assert _bits(got) == _bits(expected) and list(got) == list(expected)
    assert all(type(v) is float or v is None for summary in got.values() for v in [summary["value"]])

GROUPS = st.lists(st.tuples(st.lists(st.sampled_from(["hr", "it", "x"]), max_size=3),  # tags (repeats too)
                            st.sampled_from([None, "easy", "hard"]),  # difficulty
                            st.lists(st.sampled_from(["prose", "table"]), max_size=2)),  # content types
                  min_size=12, max_size=12)


@settings(deadline=None)  # the first example loads pyarrow.compute (table.take): a third of a second on a busy machine
@given(ROWS, ROWS, GROUPS)
def test_breakdowns_and_pooled_summaries_are_the_group_by_group_ones(
        rows: list[dict[str, float | None]], more: list[dict[str, float | None]],
        groups: list[tuple[list[str], str | None, list[str]]]) -> None:
    """One pass fills every group (a case in two groups counts in both, a repeated tag twice);
    pooled columns equal reading every row again."""
    from groundjudge.contracts import GoldenCase
    from groundjudge.metrics.aggregate import breakdowns, ordered_names, table_summaries
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_batch, concat

    cases = {f"c{i}": GoldenCase.model_validate({"id": f"c{i}", "question": "q", "tags": tags, "difficulty": level})
             for i, (tags, level, _) in enumerate(groups)}
    results = [CaseMetrics(f"c{i}", "cfg", row, "answer", (), tuple(groups[i][2])) for i, row in enumerate(rows)]

    def by(key):  # the definition: the group's rows, then their summary
        found: dict[str, list[dict[str, float | None]]] = {}
        for r in results:
            for k in key(r):
                found.setdefault(k, []).append(r.values)
        return {k: reference_summary(v) for k, v in sorted(found.items())}

    expected = {"tag": by(lambda r: cases[r.case_id].tags or ["(untagged)"]),
                "difficulty": by(lambda r: [cases[r.case_id].difficulty or "(unset)"]),
                "content_type": by(lambda r: r.content_types or ["(unknown)"])}

    def table(rows):
        batch, facts = as_batch([CaseMetrics(f"c{i}", "cfg", row, "answer", (), ()) for i, row in enumerate(rows)])
        return concat([batch]), [f.names for f in facts]

    mine, layouts = table(rows)
    got = breakdowns(mine, results, layouts, cases)
    assert got == expected
    assert all(list(got[k][g]) == list(expected[k][g]) for k in got for g in got[k])
    theirs, more_layouts = table(more)
    both = table_summaries([mine, theirs], ordered_names(layouts + more_layouts))
    assert both == reference_summary(rows + more) and list(both) == list(reference_summary(rows + more))


# rows of several layouts: metrics in different orders and subsets, values None, NaN or numbers
LAID_OUT = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "recall@10", "acl_leak"]),
                                    st.one_of(st.none(), st.just(math.nan), st.floats(-2, 2), st.sampled_from([0.0, 1.0])),
                                    max_size=5), max_size=12)


@given(LAID_OUT)
def test_a_batch_laid_out_by_columns_holds_each_rows_values(rows: list[dict[str, float | None]]) -> None:
    """as_batch, whatever the rows' layouts: a float64 column per metric in the order the
    metrics first appear, each row's value where it has one (a NaN stays NaN, bit for bit),
    null where it has None or lacks the metric; each row's names in its own order."""
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_batch, metric_columns

    batch, facts = as_batch([CaseMetrics(f"c{i}", "cfg", row, "answer", (), ()) for i, row in enumerate(rows)])
    order = list(dict.fromkeys(name for row in rows for name in row))
    assert metric_columns(batch) == order and batch.num_rows == len(rows)
    assert [f.names for f in facts] == [tuple(row) for row in rows]
    assert batch.column("case_id").to_pylist() == [f"c{i}" for i in range(len(rows))]
    for name in order:
        assert batch.schema.field(name).type == pa.float64()
        got = batch.column(name).to_pylist()
        for row, value in zip(rows, got, strict=True):
            expected = row.get(name)
            assert (value is None) if expected is None else (value == expected or math.isnan(value) and math.isnan(expected))



def _cells(batch: pa.RecordBatch) -> dict[str, list[object]]:
    """A batch's columns as Python values, a NaN as a marker (a NaN equals nothing)."""
    return {name: ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in batch.column(name).to_pylist()]
            for name in batch.schema.names}


@settings(deadline=None)  # the first example loads what pyarrow loads on its first list: slow on a busy machine
@given(LAID_OUT, st.integers(1, 5))
def test_a_batch_made_slice_by_slice_is_the_batch_made_at_once(rows: list[dict[str, float | None]],
                                                               size: int) -> None:
    """metric_batch lays out a batch's rows a slice at a time and joins the slices: whatever the
    slices' layouts, the joined batch has the schema and the values (a NaN stays NaN) of the
    batch made from every row at once, and the same facts."""
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import _joined, as_batch

    made = [CaseMetrics(f"c{i}", "cfg", row, "answer", (), ()) for i, row in enumerate(rows)]
    whole, facts = as_batch(made)
    if not rows:
        return
    slices = [as_batch(made[start:start + size]) for start in range(0, len(made), size)]
    joined = _joined([batch for batch, _ in slices])
    assert joined.schema == whole.schema and joined.num_rows == whole.num_rows
    assert _cells(joined) == _cells(whole)
    assert [f for _, part in slices for f in part] == facts


def test_metric_batch_gives_the_same_batch_whatever_its_slice(mini, monkeypatch) -> None:
    """A batch of real pairs scored in slices of one, two or all of its pairs: the same batch."""
    from groundjudge.load.dataset import load_dataset
    from groundjudge.metrics import table
    from groundjudge.metrics.case import MetricSettings

    dataset = load_dataset(mini / "golden.jsonl", [mini / "traces.jsonl"], mini / "corpus.jsonl")
    pairs = [(dataset.cases[cid], trace, dataset.paraphrase_traces(cfg, cid))
             for cfg, per_case in dataset.traces.items() for cid, trace in per_case.items()]
    assert len(pairs) > 2
    made = {}
    for size in (1, 2, len(pairs)):
        monkeypatch.setattr(table, "SLICE", size)
        made[size] = table.metric_batch(pairs, dataset.corpus, MetricSettings())
    for batch, facts in made.values():
        assert batch.schema == made[len(pairs)][0].schema and _cells(batch) == _cells(made[len(pairs)][0])
        assert facts == made[len(pairs)][1]

CHECKED = st.lists(st.dictionaries(st.sampled_from(["acl_leak", "behavior_correct", "must_contain", "recall@10",
                                                    "citation_scoped", "trace_error", "other"]),
                                   st.one_of(st.none(), st.sampled_from([0.0, 1.0, 0.5, -0.0, 2.0, math.nan,
                                                                         math.inf, -math.inf])),
                                   max_size=7), max_size=10)


@given(CHECKED, CHECKED)
def test_failed_checks_of_a_table_are_the_row_by_row_ones(rows: list[dict[str, float | None]],
                                                          more: list[dict[str, float | None]]) -> None:
    """The checks each row of a metric table failed, found column by column for the whole table
    (two batches: two chunks), are those the mapping-by-mapping definition finds: a None, a
    NaN or a metric the row lacks fails nothing."""
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.failures import deterministic_failures, failed_checks, failure_stage
    from groundjudge.metrics.table import as_batch, concat, views

    batches = [as_batch([CaseMetrics(f"c{i}", "cfg", row, "answer", (), ()) for i, row in enumerate(part)])
               for part in (rows, more)]
    table = concat([batch for batch, _ in batches])
    read = views(table, [f for _, facts in batches for f in facts])
    assert len(failed_checks(table)) == table.num_rows == len(rows) + len(more)
    for row, values in zip(rows + more, read, strict=True):
        assert deterministic_failures(values) == deterministic_failures(dict(row)), row
        assert failure_stage(values, ["misattributed"]) == failure_stage(dict(row), ["misattributed"])


def test_failed_checks_of_a_table_without_rows_or_without_checked_metrics():
    from groundjudge.metrics.failures import failed_checks
    from groundjudge.metrics.table import concat, metric_schema

    assert failed_checks(concat([])) == []
    assert failed_checks(metric_schema(["recall@10"]).empty_table()) == []
    only_other = pa.table({"config_id": ["c"], "case_id": ["a"], "other": [0.0]})
    assert failed_checks(only_other) == [()]


WITH_NAN = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                                    st.one_of(st.none(), st.floats(-5, 5), st.just(math.nan), st.just(-0.0)),
                                    max_size=4), max_size=12)


@given(WITH_NAN, WITH_NAN, st.integers(0, 30), st.integers(0, 30))
def test_rows_read_as_dicts_a_column_at_a_time_are_the_rows(rows: list[dict[str, float | None]],
                                                             more: list[dict[str, float | None]],
                                                             start: int, stop: int) -> None:
    """as_dicts over any slice of a table's row views (two chunks, rows of several layouts,
    nulls, NaN), with a plain dict among them, gives each row's values: the same floats (bit for
    bit), None where the row has none, the row's metrics in order."""
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_dicts, concat, views

    batches = [as_batch_of(part, CaseMetrics) for part in (rows, more)]
    table = concat([batch for batch, _ in batches])
    read: list[Any] = views(table, [f for _, facts in batches for f in facts])[start:start + stop]
    if read:
        read.insert(len(read) // 2, {"plain": 1.0})
    got = as_dicts(read)
    expected = [dict(v) if isinstance(v, dict) else v.to_dict() for v in read]
    assert [list(d) for d in got] == [list(d) for d in expected]
    assert [[_float_bits(x) for x in d.values()] for d in got] == [[_float_bits(x) for x in d.values()] for d in expected]
    assert all(type(x) in (float, type(None)) for d in got for x in d.values())


ODD_ROWS = st.lists(st.dictionaries(st.sampled_from(["a", "hit@1", 'q"\\ü\n\x1b', "😀"]),
                                    st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                                              st.sampled_from([1e16, -2.5e300, 5e-324, -0.0])),
                                    max_size=4), max_size=12)


@settings(deadline=None)
@given(ODD_ROWS, ODD_ROWS, st.integers(0, 30), st.integers(0, 30))
def test_rows_written_as_json_in_one_step_are_the_bytes_of_their_dicts(
        rows: list[dict[str, float | None]], more: list[dict[str, float | None]], start: int, stop: int) -> None:
    """report.json's metric rows, written a slice at a time from the table's row views (two
    chunks, several layouts, nulls, NaN, infinities, floats of every spelling, names that JSON
    escapes, a plain dict among them), are the bytes ``compact_json`` writes of the same rows
    as dicts: by msgspec in one step where it can, else as dicts."""
    from groundjudge.files import compact_json
    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_dicts, concat, views
    from groundjudge.report import document

    batches = [as_batch_of(part, CaseMetrics) for part in (rows, more)]
    table = concat([batch for batch, _ in batches])
    read: list[Any] = views(table, [f for _, facts in batches for f in facts])[start:start + stop]
    if read:
        read.insert(len(read) // 2, {"plain": 1, "b": True, "hit@1": 0.5})
    by_case = {f"case {i}": row for i, row in enumerate(read)}
    expected = compact_json(dict(zip(by_case, as_dicts(read), strict=True)))
    assert document._metric_rows_json(by_case) == expected
    # msgspec spells 1e+16 as 1e16, and refuses a field name with a quote, backslash or control
    one_step = not any(isinstance(v, float) and math.isfinite(v) and abs(v) >= 1e16
                       or any(ch in '"\\' or ch < " " for ch in name)
                       for d in as_dicts(read) for name, v in d.items())
    if one_step:  # the one-step way alone, for the rows it can write
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(document, "compact_json", None)
            assert document._metric_rows_json(by_case) == expected


def as_batch_of(rows: list[dict[str, float | None]], case_metrics: Any) -> Any:
    from groundjudge.metrics.table import as_batch

    return as_batch([case_metrics(f"c{i}", "cfg", row, "answer", (), ()) for i, row in enumerate(rows)])


def _float_bits(value: float | None) -> object:
    import struct

    return None if value is None else struct.pack("<d", value)
