"""Per-case deterministic metrics on a hand-made dataset whose values are worked out by hand."""

from __future__ import annotations

import math

import pytest

from groundjudge.load.dataset import load_dataset
from groundjudge.metrics.evaluate import evaluate_dataset


@pytest.fixture
def run(mini):
    dataset = load_dataset(mini / "golden.jsonl", [mini / "traces.jsonl"], mini / "corpus.jsonl")
    return evaluate_dataset(dataset)


def values(run, case_id):
    return run.case("base", case_id).values


def test_ranked_metrics_follow_scores_and_grades(run):
    v = values(run, "c1")  # ranking by score: leave#2 (grade 1), sla#1 (unjudged), leave#1 (grade 3)
    assert v["hit@1"] == 1.0 and v["recall@1"] == 0.5 and v["precision@3"] == pytest.approx(2 / 3)
    idcg = 3 + 1 / math.log2(3)
    assert v["ndcg@3"] == pytest.approx((1 + 3 / 2) / idcg, abs=1e-12)
    assert v["ndcg_exp@3"] == pytest.approx((1 + 7 / 2) / (7 + 1 / math.log2(3)), abs=1e-12)
    assert v["map"] == pytest.approx((1 + 2 / 3) / 2)
    assert v["r_precision"] == 0.5


def test_context_and_citation_metrics(run):
    v = values(run, "c1")
    assert v["context_recall"] == 0.5 and v["context_precision"] == 0.5
    # leave#1 is cited but never reached the context: not scoped, although must_cite is covered.
    assert v["citation_scoped"] == 0.0 and v["citation_in_context"] == 0.0
    assert v["must_cite_coverage"] == 1.0
    assert v["citation_offset_accuracy"] == 1.0  # [10, 30] lies inside leave#1's [0, 44]
    assert v["recall_doc@1"] == 1.0  # leave#2 belongs to the expected document


def test_behaviour_containment_and_acl(run):
    c1, c2, c3, c4 = (values(run, c) for c in ("c1", "c2", "c3", "c4"))
    assert c1["must_contain"] == 1.0 and c1["acl_leak"] == 0.0 and c1["over_refusal"] == 0.0
    assert c2["acl_leak"] == 1.0  # a globex user was shown an acme-only chunk
    assert run.case("base", "c2").acl_leaks[0].chunk_id == "leave#1"
    assert c3["behavior_correct"] == 0.0 and c3["under_refusal"] == 1.0 and c3["forbidden_absent"] == 0.0
    assert c4["behavior_correct"] == 1.0 and c4["abstention_accuracy"] == 1.0 and c4["empty_result"] == 1.0


def test_empty_denominators_are_none_and_left_out_of_means(run):
    c4 = values(run, "c4")
    assert c4["recall@5"] is None and c4["map"] is None and c4["acl_leak"] is None
    agg = run.configs["base"].aggregate
    assert agg["recall@5"]["n"] == 2  # c3 and c4 have no relevant chunks
    assert agg["acl_leak"] == {"value": pytest.approx(2 / 3), "n": 3}
    assert agg["latency_ms.end_to_end.p50"]["value"] == pytest.approx(350.0)


def test_breakdowns_by_tag_difficulty_and_content_type(run):
    breakdown = run.configs["base"].breakdown
    assert set(breakdown["tag"]) == {"exact", "numeric", "acl", "no-answer"}
    assert breakdown["difficulty"]["easy"]["must_contain"] == {"value": 1.0, "n": 2}
    assert set(breakdown["content_type"]) == {"prose", "table", "(unknown)"}
    assert breakdown["content_type"]["table"]["hit@1"]["n"] == 1


def test_failure_stage_follows_the_pipeline():
    from groundjudge.metrics.failures import failure_stage

    assert failure_stage({"acl_leak": 1.0, "recall@10": 0.0}) == "ACL leak"
    assert failure_stage({"recall@10": 0.5, "context_recall": 0.5, "must_contain": 0.0}) == "retrieval missed"
    assert failure_stage({"recall@10": 1.0, "context_recall": 0.5}) == "context dropped"
    assert failure_stage({"recall@10": 1.0}, ["cited_support", "unsupported"]) == "answer unsupported"
    assert failure_stage({"recall@10": 1.0}, ["misattributed"]) == "citation misattributed"
    assert failure_stage({"recall@10": 1.0, "behavior_correct": 1.0}, ["cited_support"]) is None


NO_RELEVANCE_KEYS = ("precision@1", "precision@5", "context_precision", "context_recall", "hit@1", "recall@5",
                     "mrr@5", "mrr", "map", "r_precision", "ndcg@5", "ndcg_exp@5", "ndcg", "recall_doc@5")


def test_a_case_without_relevance_labels_has_no_precision_and_no_ranked_metric(run):
    # c3 retrieved fin#1 and put it in the context, c4 retrieved nothing; neither has relevant chunks.
    for case_id in ("c3", "c4"):
        v = values(run, case_id)
        assert [key for key in NO_RELEVANCE_KEYS if v[key] is not None] == [], case_id
    agg = run.configs["base"].aggregate
    assert agg["precision@1"] == {"value": 1.0, "n": 2}  # c1 and c2 rank a relevant chunk first
    assert agg["precision@3"] == {"value": pytest.approx((2 / 3 + 1 / 3) / 2), "n": 2}
    assert agg["context_precision"] == {"value": pytest.approx((0.5 + 1.0) / 2), "n": 2}


def test_citation_offset_accuracy_needs_a_gold_span(mini):
    from groundjudge.contracts import GoldenCase, Trace
    from groundjudge.metrics.grounding import citation_metrics

    chunks = load_dataset(mini / "golden.jsonl", [mini / "traces.jsonl"], mini / "corpus.jsonl").corpus.chunks
    trace = Trace.model_validate({"query_id": "q", "config_id": "base", "retrieved_chunks": ["fin#1"],
                                  "context_chunks": ["fin#1"], "answer": "4.2 million [fin#1].",
                                  "citations": [{"chunk_id": "fin#1", "offsets": [0, 20]}]})
    unlabelled = GoldenCase.model_validate({"id": "q", "question": "Q3 revenue?"})
    labelled = GoldenCase.model_validate({"id": "q", "question": "Q3 revenue?", "expected_chunk_ids": ["fin#1"]})
    wrong_doc = GoldenCase.model_validate({"id": "q", "question": "Q3 revenue?", "expected_chunk_ids": ["sla#1"]})
    assert citation_metrics(unlabelled, trace, chunks)["citation_offset_accuracy"] is None
    assert citation_metrics(labelled, trace, chunks)["citation_offset_accuracy"] == 1.0
    assert citation_metrics(wrong_doc, trace, chunks)["citation_offset_accuracy"] == 0.0
    assert citation_metrics(labelled, trace, {})["citation_offset_accuracy"] is None  # no corpus, no spans


@pytest.mark.parametrize("batch", [10_000, 10])
@pytest.mark.parametrize("configs", [("baseline", "candidate"), ("baseline",)])
def test_a_process_pool_scores_the_same_rows_as_one_process(monkeypatch, configs, batch):
    """evaluate_dataset with its batches (one, or one per ten pairs, some spanning two configs)
    scored in a pool of two processes gives the same rows, in the same order, the same tables
    and the same summaries as in this process."""
    from pathlib import Path

    from groundjudge.metrics import evaluate

    examples = Path(__file__).resolve().parent.parent / "examples"
    dataset = load_dataset(examples / "golden.jsonl", [examples / "traces" / f"{c}.jsonl" for c in configs],
                           examples / "corpus.jsonl")
    monkeypatch.setattr(evaluate, "BATCH", batch)
    alone = evaluate_dataset(dataset, workers=1)
    pools: list[int] = []
    real = evaluate.ProcessPoolExecutor
    monkeypatch.setattr(evaluate, "ProcessPoolExecutor", lambda n, **kw: pools.append(n) or real(n, **kw))
    split = evaluate_dataset(dataset, workers=2)
    assert pools == ([] if batch > 100 else [2])  # one batch: nothing to share out
    assert list(split.configs) == list(alone.configs) == list(configs)
    for cfg in alone.configs:
        assert split.configs[cfg].cases == alone.configs[cfg].cases
        assert [list(c.values) for c in split.configs[cfg].cases] == [list(c.values) for c in alone.configs[cfg].cases]
        assert split.configs[cfg].table.equals(alone.configs[cfg].table)
        assert split.configs[cfg].aggregate == alone.configs[cfg].aggregate
        assert split.configs[cfg].breakdown == alone.configs[cfg].breakdown
    assert split.overall == alone.overall
    assert len(alone.configs["baseline"].cases) > 20


def test_a_scored_case_cannot_be_changed(run):
    """A case's results hold no list or dict a caller could change: its leaks and content
    types are tuples (equal content types of a batch are one tuple), its values a read-only
    mapping, and the record itself is frozen. Neither the record nor its values are tracked by
    the garbage collector: a run holds one of each per case."""
    import gc
    from collections.abc import Mapping

    rows = [r for cfg in run.configs.values() for r in cfg.cases]
    leaky = run.case("base", "c2")
    assert isinstance(leaky.acl_leaks, tuple) and leaky.acl_leaks
    for row in rows:
        assert type(row.acl_leaks) is tuple and type(row.content_types) is tuple
        assert not hasattr(row.values, "__setitem__")
        assert isinstance(row.values, Mapping)
        assert not gc.is_tracked(row) and not gc.is_tracked(row.values)
    with pytest.raises(AttributeError):
        leaky.content_types = ("table",)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        leaky.values._row = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        leaky.acl_leaks.append(leaky.acl_leaks[0])  # type: ignore[attr-defined]

    from groundjudge.metrics.case import CaseMetrics
    from groundjudge.metrics.table import as_batch

    # each case's own tuple in, one tuple per distinct value of the batch out
    given = [CaseMetrics(f"c{i}", "cfg", {"x": 1.0}, "answer", (), tuple("prose".split())) for i in range(3)]
    assert given[0].content_types is not given[1].content_types
    _, facts = as_batch(given)
    assert facts[0].content_types == ("prose",) and all(f.content_types is facts[0].content_types for f in facts)


def test_every_case_mapping_shares_its_key_strings(run):
    """A nightly run holds a mapping of about 60 metrics per (case, config): their keys are one
    set of strings for the run, not copies per case (about 160 MB at 100,000 x 2)."""
    rows = [r for cfg in run.configs.values() for r in cfg.cases]
    first: dict[str, str] = {}
    for row in rows:
        for key in row.values:
            assert first.setdefault(key, key) is key
    assert {"recall_doc@1", "hit_span@3", "latency_ms.end_to_end", "tokens.prompt"} <= set(first)


def test_each_case_reads_its_row_of_the_config_table(run):
    """Each (case, config) reads its values from its row of the config's Arrow table: a
    read-only mapping equal to the dict compute_case made, its own metrics in order (a metric
    another case has is not one of its keys), None where the column is null."""
    from groundjudge.metrics.table import MetricValues, metric_columns

    for cfg in run.configs.values():
        table = cfg.table
        assert table.num_rows == len(cfg.cases)
        assert table.column("case_id").to_pylist() == [c.case_id for c in cfg.cases]
        for i, case in enumerate(cfg.cases):
            assert isinstance(case.values, MetricValues)
            row = {name: table.column(name)[i].as_py() for name in metric_columns(table)}
            assert case.values == {name: row[name] for name in case.values}
            assert all(row[name] is None for name in row if name not in case.values)
    rows = [r.values for cfg in run.configs.values() for r in cfg.cases]
    assert any(None in r.values() for r in rows)  # the example has metrics that do not apply somewhere
    with pytest.raises(TypeError):
        rows[0]["recall@5"] = 0.0  # type: ignore[index]


def test_a_null_stays_none_and_a_computed_nan_stays_nan():
    """In a record batch a metric that does not apply is null and a NaN a metric computed is
    NaN; read back they are None and NaN."""
    import math

    import pyarrow as pa

    from groundjudge.metrics.table import MetricValues, RowReader, metric_schema

    schema = metric_schema(["m", "n"])
    batch = pa.RecordBatch.from_arrays([pa.array(["c", "c"]), pa.array(["a", "b"]),
                                        pa.array([None, None], type=schema.field("not_recorded").type),
                                        pa.array([None, math.nan]), pa.array([1.0, 2.0])], schema=schema)
    assert batch.column("m").null_count == 1 and batch.schema.field("m").type == pa.float64()
    reader = RowReader(pa.Table.from_batches([batch]))
    first, second = MetricValues(reader, 0, 0, ("m", "n")), MetricValues(reader, 0, 1, ("m", "n"))
    assert first["m"] is None and first.get("m", "default") is None and first["n"] == 1.0
    assert math.isnan(second["m"]) and second["n"] == 2.0
    only_n = MetricValues(reader, 0, 0, ("n",))
    assert "m" not in only_n and only_n.get("m", "absent") == "absent" and list(only_n.items()) == [("n", 1.0)]
    # compared as a mapping by its items, either way round, with == and with !=
    assert only_n == {"n": 1.0} and {"n": 1.0} == only_n
    assert (only_n != {"n": 1.0}) is False and ({"n": 1.0} != only_n) is False
    assert only_n != {"n": 2.0} and {"n": 1.0, "m": None} != only_n and only_n != first and dict(only_n) == {"n": 1.0}
    with pytest.raises(KeyError):
        only_n["m"]


def test_a_ranking_already_in_trec_order_is_the_one_trec_order_gives():
    """ranking_of takes the trace's own order when its scores strictly fall and each id comes
    once; on every other trace it sorts. Both agree with trec_order on the best-score pairs."""
    import random

    from groundjudge.contracts import Trace
    from groundjudge.metrics.case import ranking_of
    from groundjudge.metrics.retrieval import trec_order

    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(1, 8)
        ids = [f"c{rng.randint(0, 6)}" for _ in range(n)]
        scores = [rng.choice([1.0, 0.5, 0.25, rng.random(), -0.0, 0.0]) for _ in range(n)]
        if rng.random() < 0.5:
            scores.sort(reverse=True)
        trace = Trace.model_validate({"query_id": "q", "config_id": "c", "retrieved_chunks": [
            {"chunk_id": cid, "score": score} for cid, score in zip(ids, scores)]})
        best: dict[str, float] = {}
        for cid, score in zip(ids, scores):
            best[cid] = max(best.get(cid, float("-inf")), score)
        assert ranking_of(trace) == trec_order(list(best.items())), (ids, scores)
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="finite number"):  # a NaN score never gets this far
        Trace.model_validate({"query_id": "q", "config_id": "c",
                              "retrieved_chunks": [{"chunk_id": "a", "score": float("nan")}]})


def test_a_traces_constraints_echo_is_read_from_its_read_only_unknown_fields():
    """``constraints_echo`` arrives as an unknown field, held as a tuple like every sequence of
    a record: the echo still counts (it lacks the constraint here, so integrity is 0)."""
    from groundjudge.contracts import GoldenCase, Trace
    from groundjudge.load.dataset import Corpus
    from groundjudge.metrics.case import compute_case
    from groundjudge.metrics.evaluate import MetricSettings

    case = GoldenCase.model_validate({"id": "q", "question": "Null keys?", "constraints": ["X rejects null keys."]})
    answer = {"query_id": "q", "config_id": "base", "answer": "X rejects null keys."}
    plain = Trace.model_validate(answer)
    echoed = Trace.model_validate({**answer, "constraints_echo": ["Something else."]})
    assert echoed.model_extra["constraints_echo"] == ("Something else.",)
    values = {name: compute_case(case, t, Corpus(), MetricSettings()).values["constraint_integrity"]
              for name, t in (("plain", plain), ("echoed", echoed))}
    assert values == {"plain": 1.0, "echoed": 0.0}


def test_doc_recall_counts_each_wanted_document_found_in_the_top_k():
    """doc_recall places each wanted document at its first rank; that is the share of wanted
    documents among the top k's documents, with documents repeated, unknown, or given by the
    trace rather than the corpus, and the wanted ones stated or read off the relevant chunks."""
    import random

    from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
    from groundjudge.load.dataset import Corpus
    from groundjudge.metrics.case import doc_recall, ranking_of

    corpus = Corpus({f"c{i}": CorpusChunk(chunk_id=f"c{i}", doc_id=f"d{i % 4}", text="t") for i in range(8)})
    rng = random.Random(11)
    ks = (1, 2, 3, 5, 10)
    for _ in range(1500):
        ids = [f"c{rng.randint(0, 10)}" for _ in range(rng.randint(0, 9))]
        trace = Trace.model_validate({"query_id": "q", "config_id": "c", "retrieved_chunks": [
            {"chunk_id": cid, **({"doc_id": rng.choice(["d1", "d9"])} if rng.random() < 0.3 else {})} for cid in ids]})
        relevance = {f"c{rng.randint(0, 10)}": rng.randint(0, 3) for _ in range(rng.randint(0, 4))}
        expected = rng.choice([None, (), tuple(rng.sample(["d0", "d1", "d2", "d9"], rng.randint(1, 3)))])
        case = GoldenCase.model_validate({"id": "q", "question": "q?", "relevance": relevance,
                                          "expected_doc_ids": expected})
        ranking = ranking_of(trace)
        wanted = set(expected) if expected is not None else {
            d for cid in case.relevant_chunk_ids if (d := corpus.doc_of(cid))}
        doc_by_chunk = {c.chunk_id: c.doc_id for c in trace.retrieved_chunks if c.doc_id}
        docs = [doc_by_chunk.get(cid) or corpus.doc_of(cid) for cid in ranking]
        want = {f"recall_doc@{k}": len(wanted & set(docs[:k])) / len(wanted) if wanted else None for k in ks}
        got = doc_recall(case, trace, ranking, corpus, ks)
        assert got == want and got == doc_recall(case, trace, ranking, corpus, ks, relevant=case.relevant_chunk_ids)


def test_a_ranking_with_a_missing_score_keeps_the_traces_order_each_id_once():
    from groundjudge.contracts import Trace
    from groundjudge.metrics.case import ranking_of

    def ranked(*chunks: tuple[str, float | None]) -> list[str]:
        return ranking_of(Trace.model_validate({"query_id": "q", "config_id": "c", "retrieved_chunks": [
            {"chunk_id": cid, "score": score} for cid, score in chunks]}))

    assert ranked() == []
    assert ranked(("b", 0.1), ("a", None), ("b", 0.9)) == ["b", "a"]
    assert ranked(("b", None), ("a", None), ("a", None)) == ["b", "a"]
    assert ranked(("b", 0.0), ("a", -0.0), ("c", 0.0)) == ["c", "b", "a"]  # ties: larger id first
    assert ranked(("a", 0.5), ("b", 0.7), ("a", 0.9)) == ["a", "b"]  # a repeat at its best score


def test_context_and_citation_metrics_follow_their_definitions_on_random_traces():
    """Each rate as its docstring defines it, written out plainly, on traces with repeated,
    unknown and uncited chunks, citations with and without offsets, with and without a corpus."""
    import random

    from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
    from groundjudge.metrics.grounding import citation_metrics, context_metrics, spans_overlap

    rng = random.Random(5)
    corpus = {f"c{i}": CorpusChunk.model_validate({"chunk_id": f"c{i}", "doc_id": f"d{i % 3}", "text": "t",
                                                   "offsets": (10 * i, 10 * i + 8) if i % 2 else None})
              for i in range(6)}
    ids = [f"c{i}" for i in range(9)]
    for _ in range(1500):
        cited = [{"chunk_id": rng.choice(ids), **({"offsets": sorted(rng.sample(range(80), 2))} if rng.random() < 0.5
                                                   else {})} for _ in range(rng.randint(0, 4))]
        trace = Trace.model_validate({"query_id": "q", "config_id": "c", "retrieved_chunks": rng.sample(ids, rng.randint(0, 5)),
                                      "context_chunks": [rng.choice(ids) for _ in range(rng.randint(0, 4))],
                                      "citations": cited})
        case = GoldenCase.model_validate({"id": "q", "question": "q?",
                                          "relevance": {cid: rng.randint(0, 3) for cid in rng.sample(ids, 3)},
                                          "must_cite": rng.sample(ids, rng.randint(0, 2))})
        chunks = rng.choice([corpus, {}])
        relevant = case.relevant_chunk_ids
        context = [c.chunk_id for c in trace.context_chunks]
        retrieved = {c.chunk_id for c in trace.retrieved_chunks}
        cited_ids = [c.chunk_id for c in trace.citations]

        def rate(hits: int, total: int) -> float | None:
            return hits / total if total else None

        assert context_metrics(case, trace) == ({"context_recall": None, "context_precision": None} if not relevant else {
            "context_recall": rate(len(relevant & set(context)), len(relevant)),
            "context_precision": rate(sum(1 for cid in context if cid in relevant), len(context))})
        gold = list(case.must_cite) or list(relevant)
        spans = [chunks[g] for g in gold if g in chunks and chunks[g].offsets is not None]
        with_offsets = [c for c in trace.citations if c.offsets is not None]
        accurate = sum(1 for c in with_offsets if any(
            g.doc_id == (chunks[c.chunk_id].doc_id if c.chunk_id in chunks else None)
            and spans_overlap(c.offsets, g.offsets, 30) for g in spans))
        known = chunks.keys() if chunks else retrieved | set(context)
        assert citation_metrics(case, trace, chunks) == {
            "citation_scoped": rate(sum(1 for cid in cited_ids if cid in known and cid in retrieved and cid in context),
                                    len(cited_ids)),
            "citation_in_context": rate(sum(1 for cid in cited_ids if cid in context), len(cited_ids)),
            "must_cite_coverage": rate(len(set(case.must_cite) & set(cited_ids)), len(case.must_cite)),
            "citation_offset_accuracy": rate(accurate, len(with_offsets)) if spans else None}


def test_containment_normalises_the_answer_once_with_the_same_results_as_contains():
    import random

    from groundjudge.contracts import GoldenCase
    from groundjudge.metrics.containment import MIN_CLAIM_CHARS, constraint_metrics, containment_metrics
    from groundjudge.metrics.text import contains

    rng = random.Random(3)
    parts = ["Leave", "LEAVE", " ", "\n", "ß", "ss", "ﬁ", "fi", "20 days", "đ", "É", "e\u0301", "\u00a0", "x"]

    def text() -> str:
        return "".join(rng.choice(parts) for _ in range(rng.randint(0, 6)))

    for _ in range(1500):
        case = GoldenCase.model_validate({"id": "q", "question": "q?",
                                          "must_contain": [text() for _ in range(rng.randint(0, 2))],
                                          "forbidden": [text() for _ in range(rng.randint(0, 2))],
                                          "gold_claim_substrings": [text() for _ in range(rng.randint(0, 2))],
                                          "constraints": [text() for _ in range(rng.randint(0, 2))]})
        answer = rng.choice([None, text(), text() + text()])
        echo = rng.choice([None, [text(), text()]])
        claims = [c for c in case.gold_claim_substrings if len(c.strip()) >= MIN_CLAIM_CHARS]
        shipped = answer or ""
        assert containment_metrics(case, answer) == {
            "must_contain": float(all(contains(shipped, s) for s in case.must_contain)) if case.must_contain else None,
            "forbidden_absent": float(not any(contains(shipped, s) for s in case.forbidden)) if case.forbidden else None,
            "gold_claim_hit": float(any(contains(shipped, c) for c in claims)) if claims else None}
        restated = all(contains(shipped, c) for c in case.constraints) and (
            echo is None or all(contains("\n".join(echo), c) for c in case.constraints))
        assert constraint_metrics(case, answer, echo) == {
            "constraint_integrity": float(restated) if case.constraints else None}
