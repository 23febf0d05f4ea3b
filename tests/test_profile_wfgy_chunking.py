"""The ``wfgy-chunking`` profile reproduces WFGY's chunking eval: P@k/R@k, anchor sections,
coverage, byte-offset citation accuracy, ΔS, λ across paraphrases, per-type breakdown and the
canary gates, including the shadow-vs-live Recall@5 gate."""

from __future__ import annotations

import json

import pytest

from groundjudge.contracts import Offsets
from groundjudge.load.adapters.wfgy_chunking import ChunkingGold, ChunkingTrace, read_gold, read_traces
from groundjudge.profiles import wfgy_chunking as chunking
from groundjudge.profiles.wfgy_chunking import embedder
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "wfgy-chunking"

# The gold row and the trace of WFGY's chunking page, as it prints them. The page states no
# numbers for them; the expected values below follow from its definitions.
DOC_GOLD = {
    "qid": "Q-0137",
    "paraphrases": ["How does SCU unlock safety refusals?", "Explain symbolic constraint unlock.",
                    "SCU: what is it and when to use?"],
    "relevant": ["S.4.2.p.Bk011a", "S.4.2.p.Bk011b"],
    "anchor_section": "S.4.2",
    "negatives": ["S.4.1.p.Bk010", "S.4.3.p.Bk014"],
}
DOC_TRACE = {
    "qid": "Q-0137",
    "query": "Explain symbolic constraint unlock.",
    "topk": [
        {"id": "S.4.2.p.Bk011a", "score": 0.83, "offsets": [204611, 205279], "type": "prose"},
        {"id": "S.4.1.p.Bk010", "score": 0.79, "offsets": [198002, 199112], "type": "prose"},
    ],
    "ΔS": [0.31, 0.59],
    "λ_state": "→",
    "anchor": "S.4.2",
    "index_hash": "faiss:v3:hnsw:cos",
    "ts": "2025-08-27T12:30:22Z",
}


def gold(qid="Q", relevant=("S.1.p.B1",), anchor="S.1", offsets=None, paraphrases=("q1", "q2", "q3")):
    data = {"qid": qid, "paraphrases": list(paraphrases), "relevant": list(relevant), "anchor_section": anchor}
    if offsets:
        data["gold_offsets"] = offsets
    return ChunkingGold.model_validate(data)


def run(qid="Q", ids=("S.1.p.B1",), cites=(), query="q1", delta_s=None, state=None, types=None, texts=None):
    topk = []
    for i, block in enumerate(ids):
        item = {"id": block, "score": 1.0 - i / 10, "type": (types[i] if types else "prose")}
        if texts:
            item["text"] = texts[i]
        topk.append(item)
    # A citation is an id, or (id, (start, end)) when it carries offsets.
    citations = [{"id": c[0], "offsets": list(c[1])} if isinstance(c, tuple) else {"id": c} for c in cites]
    data = {"qid": qid, "query": query, "topk": topk, "answer_citations": citations}
    if delta_s is not None:
        data["ΔS"] = list(delta_s)
    if state is not None:
        data["λ_state"] = state
    return ChunkingTrace.model_validate(data)


def test_worked_example_from_the_page():
    result = chunking.report([ChunkingGold.model_validate(DOC_GOLD)], [ChunkingTrace.model_validate(DOC_TRACE)])
    # top-k = [Bk011a (relevant), Bk010 (a hard negative)]; two relevant blocks.
    assert [result[f"P@{k}"] for k in (1, 3, 5, 10)] == [1.0, 0.5, 0.5, 0.5]  # |R_k| is 1, then 2
    assert [result[f"R@{k}"] for k in (1, 3, 5, 10)] == [0.5, 0.5, 0.5, 0.5]
    assert result["anchor_hit"] == 1.0  # S.4.2.p.Bk011a lies in S.4.2
    assert result["coverage"] == 0.0  # the trace has no answer_citations
    assert result["bad_qids"] == ["Q-0137"]
    assert result["citation_accuracy"] is None and "no gold offsets" in result["citation_accuracy_reason"]
    assert result["ΔS_med"] == pytest.approx(0.45)  # median of [0.31, 0.59]
    assert result["ΔS_p90"] == pytest.approx(0.31 + 0.9 * (0.59 - 0.31))
    assert result["ΔS_source"] == {"trace": 1, "embedding": 0, "none": 0}
    prose = result["by_type"]["prose"]
    assert (prose["retrieved"], prose["relevant"], prose["precision"]) == (2, 1, 0.5)
    assert prose["ΔS"]["n"] == 2 and prose["ΔS"]["median"] == pytest.approx(0.45)
    assert result["by_type"]["code"] == {"retrieved": 0, "relevant": 0, "precision": None, "ΔS": {
        "n": 0, "median": None, "p90": None, "above_0.60": 0, "zones": {"stable": 0, "transitional": 0, "risk": 0},
        "within_thresholds": None}}
    # the page's zones: 0.31 is stable, 0.59 transitional
    assert prose["ΔS"]["zones"] == {"stable": 1, "transitional": 1, "risk": 0}
    assert result["ΔS_by_qid"]["Q-0137"]["zones"] == {"stable": 1, "transitional": 1, "risk": 0}
    assert result["ΔS_by_qid"]["Q-0137"]["within_thresholds"] is False  # median 0.45 > 0.40
    assert result["ΔS_model"] is None  # nothing was computed
    gates = {g["gate"]: g["status"] for g in result["gates"]}
    assert gates == {"coverage": "fail", "citation_accuracy": "skipped", "ΔS_med": "fail", "ΔS_p90": "fail",
                     "recall@5_drop_points": "skipped", "λ_convergent": "skipped", "cited_ΔS": "skipped"}
    assert result["cited_ΔS"]["answered"] == 0  # the page's trace carries no answer_citations
    assert result["pass"] is False


def test_bundled_example_uses_the_page_rows_and_runs():
    g = [r for _, r in read_gold(EXAMPLES / "gold.jsonl")]
    t = [r for _, r in read_traces(EXAMPLES / "trace.jsonl")]
    live = [r for _, r in read_traces(EXAMPLES / "trace_live.jsonl")]
    assert g[0] == ChunkingGold.model_validate(DOC_GOLD) and t[0] == ChunkingTrace.model_validate(DOC_TRACE)
    # Every run but the page's own carries block texts instead of ΔS; with no embedder ΔS is null
    # (tests/test_profile_wfgy_chunking_embedder.py runs the real model on the same files).
    result = chunking.report(g, t, live_traces=live, embedder=None)
    assert result["n_questions"] == 7 and result["n_runs"] == 10
    assert result["ΔS_med"] is None and result["ΔS_source"] == {"trace": 1, "embedding": 0, "none": 9}
    assert result["missing_trace"] == ["Q-0206"]
    assert result["coverage"] == pytest.approx(11 / 21)
    assert result["λ_triplets"] == 2 and result["λ_convergent"] == 0.5  # Q-0205 has a divergent run
    assert result["bad_qids"] == ["Q-0137", "Q-0203", "Q-0206"]
    assert result["recall@5_vs_live"]["passed"] is False
    assert result["pass"] is False
    text = chunking.render_markdown(result)
    assert "NOT eligible for canary" in text and "| recall@5_drop_points |" in text


# --- ids, sections, title tree ---------------------------------------------------------------

def test_section_id_is_the_prefix_before_dot_p_dot():
    assert chunking.section_of("S.4.2.p.Bk011a") == "S.4.2"
    assert chunking.section_of("A.3.1.p.bk012.p.x") == "A.3.1"  # the first ".p." splits
    assert chunking.section_of("S.4.2") is None
    assert chunking.section_of("S.4.2.pBk1") is None
    assert chunking.section_of(".p.Bk1") is None


def test_anchor_hit_uses_every_retrieved_id_and_is_null_without_anchor():
    g = gold(relevant=["S.1.p.B1"], anchor="S.9")
    deep = run(ids=[f"S.2.p.X{i}" for i in range(10)] + ["S.9.p.Z"])
    assert chunking.report([g], [deep])["anchor_hit"] == 1.0  # the 11th item still counts
    assert chunking.report([g], [run(ids=["S.1.p.B1"])])["anchor_hit"] == 0.0
    assert chunking.report([gold(anchor=None)], [run()])["anchor_hit"] is None


def test_anchor_proximity_is_the_title_tree_distance():
    assert chunking.title_distance("S.4.2", "S.4.2") == 0
    assert chunking.title_distance("S.4.2", "S.4") == 1
    assert chunking.title_distance("S.4.2", "S.4.3") == 2
    assert chunking.title_distance("S.4.2", "S.5.1") == 4
    g = gold(relevant=["S.4.2.p.B1"], anchor="S.4.2")
    far = run(ids=["S.5.1.p.X"], cites=["S.5.1.p.X", "S.4.3.p.Y"])
    assert chunking.report([g], [far])["anchor_proximity"] == 2.0  # "any": the closest citation
    assert chunking.report([g], [far], citation_policy="first")["anchor_proximity"] == 4.0
    assert chunking.report([g], [run(ids=["S.4.2.p.B1"])])["anchor_proximity"] is None  # nothing cited


# --- P@k and R@k -----------------------------------------------------------------------------

def test_precision_divides_by_the_items_actually_retrieved():
    assert chunking.precision_at(["a", "b"], {"a"}, 5) == 0.5  # not 1/5
    assert chunking.precision_at([], {"a"}, 5) == 0.0  # max(1, 0)
    assert chunking.recall_at(["a"], set(), 5) == 0.0  # max(1, 0)
    assert chunking.recall_at(["x", "a", "b"], {"a", "b"}, 2) == 0.5


def test_questions_count_equally_and_runs_average_within_a_question():
    g = [gold("A", relevant=["S.1.p.B1"]), gold("B", relevant=["S.2.p.B2"], anchor="S.2")]
    t = [run("A", ids=["S.1.p.B1"]), run("A", ids=["S.9.p.X"], query="q2"), run("B", ids=["S.2.p.B2"])]
    result = chunking.report(g, t)
    assert result["R@1"] == pytest.approx((0.5 + 1.0) / 2)


def test_missing_trace_scores_zero_and_is_listed():
    result = chunking.report([gold("A"), gold("B")], [run("A")])
    assert result["R@5"] == 0.5 and result["P@1"] == 0.5
    assert result["missing_trace"] == ["B"] and "B" in result["bad_qids"]


# --- coverage and citation accuracy ------------------------------------------------------------

def test_coverage_counts_relevant_ids_and_blocks_of_the_anchor_section():
    g = gold(relevant=["S.1.p.B1"], anchor="S.1")
    assert chunking.report([g], [run(cites=["S.1.p.B1"])])["coverage"] == 1.0
    assert chunking.report([g], [run(cites=["S.1.p.OTHER"])])["coverage"] == 1.0  # within the anchor section
    assert chunking.report([g], [run(cites=["S.2.p.B9"])])["coverage"] == 0.0
    assert chunking.report([g], [run(cites=[])])["coverage"] == 0.0


def test_first_citation_policy_reproduces_the_evaluator():
    g = gold(relevant=["S.1.p.B1"], anchor="S.1")
    t = [run(cites=["S.2.p.B9", "S.1.p.B1"])]
    assert chunking.report([g], t)["coverage"] == 1.0
    assert chunking.report([g], t, citation_policy="first")["coverage"] == 0.0


@pytest.mark.parametrize(("cited", "gap", "match"), [
    ((100, 200), 0, True),     # identical
    ((150, 250), 0, True),     # overlapping
    ((200, 300), 0, True),     # touching [100, 200)
    ((230, 300), 30, True),    # exactly at the 30-byte window edge
    ((231, 300), 31, False),   # one byte past it
    ((0, 70), 30, True),       # the same edge before the gold span
    ((0, 69), 31, False),
])
def test_offsets_match_within_a_30_byte_window_inclusive(cited, gap, match):
    gold_span, cited_span = Offsets(start=100, end=200), Offsets(start=cited[0], end=cited[1])
    assert chunking.span_gap(cited_span, gold_span) == gap
    assert chunking.spans_match(cited_span, gold_span) is match


@pytest.mark.parametrize(("start", "accurate"), [(230, 1.0), (231, 0.0)])
def test_citation_accuracy_at_the_window_edge(start, accurate):
    g = gold(relevant=["S.1.p.B1"], offsets={"S.1.p.B1": [100, 200]})
    t = run(cites=[("S.1.p.B1", (start, start + 50))])
    assert chunking.report([g], [t])["citation_accuracy"] == accurate
    assert chunking.report([g], [t], window=31)["citation_accuracy"] == 1.0


def test_citation_accuracy_matches_by_section_and_offsets_not_by_block_id():
    # Re-chunking renamed the block; section id and byte span still agree with the gold.
    g = gold(relevant=["S.6.3.p.Bk041"], anchor="S.6.3", offsets={"S.6.3.p.Bk041": [88000, 88420]})
    renamed = run(ids=["S.6.3.p.Bk041x"], cites=[("S.6.3.p.Bk041x", (88010, 88400))])
    assert chunking.report([g], [renamed])["citation_accuracy"] == 1.0
    elsewhere = run(ids=["S.6.4.p.Bk050"], cites=[("S.6.4.p.Bk050", (88010, 88400))])
    assert chunking.report([g], [elsewhere])["citation_accuracy"] == 0.0  # right bytes, wrong section
    no_offsets = run(cites=["S.6.3.p.Bk041"])
    assert chunking.report([g], [no_offsets])["citation_accuracy"] == 0.0


def test_citation_accuracy_takes_offsets_from_block_offsets_and_flags_gaps():
    g = gold(relevant=["S.1.p.B1"])
    t = [run(cites=[("S.1.p.B1", (100, 200))])]
    assert chunking.report([g], t)["citation_accuracy"] is None
    with_corpus = chunking.report([g], t, block_offsets={"S.1.p.B1": Offsets(start=120, end=180)})
    assert with_corpus["citation_accuracy"] == 1.0
    partial = chunking.report([g, gold("Z", relevant=["S.2.p.B2"], anchor="S.2", offsets={"S.2.p.B2": [0, 9]})],
                              t + [run("Z", cites=[("S.2.p.B2", (0, 9))])])
    assert partial["citation_accuracy"] == 0.5 and partial["citation_unverifiable"] == ["Q"]


# --- ΔS ----------------------------------------------------------------------------------------

@pytest.fixture
def no_model(monkeypatch):
    """The ``[embeddings]`` extra is not installed."""
    monkeypatch.setattr(embedder, "_installed", lambda module: False)
    chunking.load_embedder.cache_clear()
    yield
    chunking.load_embedder.cache_clear()


def test_delta_s_without_trace_values_or_model_is_null_and_its_gates_skip(no_model):
    g = gold(relevant=["S.1.p.B1"], offsets={"S.1.p.B1": [0, 10]})
    result = chunking.report([g], [run(cites=[("S.1.p.B1", (0, 10))], texts=["some text"])])
    assert result["ΔS_med"] is None and result["ΔS_p90"] is None
    assert result["ΔS_reason"] == chunking.NOT_INSTALLED
    assert "pip install -e '.[embeddings]'" in chunking.NOT_INSTALLED
    skipped = {g["gate"]: g["reason"] for g in result["gates"] if g["status"] == "skipped"}
    assert skipped["ΔS_med"] == skipped["ΔS_p90"] == chunking.NOT_INSTALLED
    assert "pip install -e '.[embeddings]'" in chunking.render_markdown(result)
    assert skipped["cited_ΔS"] == "1 of 1 answered runs have no ΔS for the cited snippet (" + chunking.NOT_INSTALLED + ")"
    # coverage and citation accuracy pass and nothing failed, but five gates were not evaluated:
    # WFGY's "eligible for canary only if all gates hold" is false (it used to say eligible)
    assert result["pass"] is False
    assert result["gates_not_evaluated"] == ["ΔS_med", "ΔS_p90", "recall@5_drop_points", "λ_convergent", "cited_ΔS"]
    assert ("5 of 7 gates could not be evaluated (ΔS_med, ΔS_p90, recall@5_drop_points, λ_convergent, cited_ΔS)"
            in chunking.render_markdown(result))


def test_delta_s_is_computed_with_an_embedder_when_the_trace_has_none():
    vectors = {"question": [1.0, 0.0], "same": [1.0, 0.0], "orthogonal": [0.0, 1.0]}

    def embed(texts):
        return [vectors[t] for t in texts]

    t = run(ids=["S.1.p.B1", "S.1.p.B2", "S.1.p.B3"], query="question")
    result = chunking.report([gold()], [t], embedder=embed, texts={"S.1.p.B1": "same", "S.1.p.B2": "orthogonal"})
    # B3 has no text: its ΔS is unknown and left out. Run values: [0.0, 1.0].
    assert result["ΔS_med"] == pytest.approx(0.5) and result["ΔS_p90"] == pytest.approx(0.9)
    assert result["ΔS_source"] == {"trace": 0, "embedding": 1, "none": 0}
    assert result["ΔS_model"]["name"].endswith("embed") and result["ΔS_model"]["weights_sha256"] is None
    assert chunking.delta_s_from_embeddings("question", ["same", None], embed) == [0.0, None]


def test_a_missing_model_nulls_delta_s_even_when_some_runs_carry_their_own(no_model):
    # Gating on the runs that happen to carry ΔS would pass or fail with what is installed.
    g = [gold("A"), gold("B")]
    t = [run("A", delta_s=[0.1]), run("B", texts=["block text"])]
    result = chunking.report(g, t)
    assert result["ΔS_med"] is None and result["ΔS_reason"] == chunking.NOT_INSTALLED
    assert result["ΔS_by_qid"]["A"]["median"] == pytest.approx(0.1)  # what there is stays visible
    assert result["ΔS_by_qid"]["B"]["n"] == 0
    # A run with no text is a fact of the input, not of the install: the others still count.
    partial = chunking.report(g, [run("A", delta_s=[0.1]), run("B")], embedder=lambda texts: pytest.fail("no text"))
    assert partial["ΔS_med"] == pytest.approx(0.1)
    gate = next(x for x in partial["gates"] if x["gate"] == "ΔS_med")
    assert gate["status"] == "pass" and gate["reason"] == "from 1 of 2 runs"


def test_every_distinct_text_is_embedded_once_in_one_batch():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return [[1.0, float(len(t))] for t in texts]

    t = [run("A", ids=["S.1.p.B1", "S.1.p.B2"], texts=["x", "yy"], query="q"),
         run("A", ids=["S.1.p.B2"], texts=["yy"], query="q")]
    chunking.report([gold("A")], t, embedder=embed)
    assert calls == [["q", "x", "yy"]]


def test_delta_s_per_question_and_per_type():
    g = [gold("A"), gold("B")]
    t = [run("A", ids=["a", "b", "c"], types=["prose", "code", "prose"], delta_s=[0.2, 0.7, 0.4]),
         run("A", ids=["d"], types=["prose"], delta_s=[0.3], query="q2"),
         run("B", ids=["e", "f"], types=["table", "table"], delta_s=[0.1, 0.3])]
    result = chunking.report(g, t)
    a = result["ΔS_by_qid"]["A"]
    assert (a["runs"], a["n"], a["above_0.60"]) == (2, 4, 1)
    assert a["median"] == pytest.approx(0.35)  # of [0.2, 0.3, 0.4, 0.7]
    assert a["p90"] == pytest.approx(0.4 + 0.7 * (0.7 - 0.4))  # rank 0.9 * 3 = 2.7
    assert a["within_thresholds"] is False  # p90 0.61 > 0.55
    assert result["ΔS_by_qid"]["B"]["within_thresholds"] is True
    by_type = result["by_type"]
    assert by_type["prose"]["ΔS"]["n"] == 3 and by_type["prose"]["ΔS"]["median"] == pytest.approx(0.3)
    assert by_type["code"]["ΔS"]["median"] == pytest.approx(0.7)
    assert by_type["code"]["ΔS"]["within_thresholds"] is False
    assert by_type["table"]["ΔS"]["p90"] == pytest.approx(0.28)
    assert by_type["figure"]["ΔS"]["n"] == 0


def test_trace_delta_s_wins_and_uses_the_top_k():
    t = run(ids=[f"S.1.p.B{i}" for i in range(7)], delta_s=[0.1, 0.2, 0.3, 0.4, 0.5, 0.9, 0.9])
    result = chunking.report([gold()], [t], embedder=lambda texts: pytest.fail("must not embed"))
    assert result["ΔS_med"] == pytest.approx(0.3)  # median of the first five


def test_delta_s_medians_are_medians_of_per_run_values():
    g = [gold("A"), gold("B")]
    t = [run("A", ids=["a", "b"], delta_s=[0.2, 0.4]), run("B", ids=["c"], delta_s=[0.5]),
         run("B", ids=["d"], delta_s=[0.9], query="q2")]
    result = chunking.report(g, t)
    assert result["ΔS_med"] == pytest.approx(0.5)  # median of [0.3, 0.5, 0.9]


def test_cited_snippet_above_060_is_flagged():
    g = gold(relevant=["S.1.p.B1", "S.1.p.B2"])
    high = run(ids=["S.1.p.B1", "S.1.p.B2"], cites=["S.1.p.B2"], delta_s=[0.2, 0.61])
    low = run(ids=["S.1.p.B1", "S.1.p.B2"], cites=["S.1.p.B1"], delta_s=[0.2, 0.61])
    assert chunking.report([g], [high])["bad_qids"] == ["Q"]
    assert chunking.report([g], [low])["bad_qids"] == []


def test_delta_s_must_have_one_value_per_topk_item():
    with pytest.raises(ValueError, match="2 values for 1 topk items"):
        run(ids=["a"], delta_s=[0.1, 0.2])


# --- paraphrases and λ -------------------------------------------------------------------------

def test_lambda_convergence_over_paraphrase_triplets():
    g = [gold("A"), gold("B"), gold("C")]
    t = [run("A", query=q, state="→") for q in ("q1", "q2", "q3")]
    t += [run("B", query=q, state=s) for q, s in (("q1", "→"), ("q2", "←"), ("q3", "→"))]
    t += [run("C", query=q, state="→") for q in ("q1", "q1", "q2")]  # two seeds, two paraphrases
    result = chunking.report(g, t)
    assert result["λ_triplets"] == 2 and result["λ_convergent"] == 0.5
    assert next(x for x in result["gates"] if x["gate"] == "λ_convergent")["status"] == "fail"


def test_lambda_gate_skips_when_runs_carry_no_lambda_state():
    t = [run(query=q) for q in ("q1", "q2", "q3")]
    result = chunking.report([gold()], t)
    assert result["λ_convergent"] is None
    gate = next(x for x in result["gates"] if x["gate"] == "λ_convergent")
    assert gate["status"] == "skipped" and "λ_state" in gate["reason"]


def test_paraphrase_agreement_is_mean_pairwise_jaccard_of_top5():
    t = [run(ids=["a", "b"], query="q1"), run(ids=["a", "c"], query="q2")]
    assert chunking.report([gold()], t)["paraphrase_agreement@5"] == pytest.approx(1 / 3)
    assert chunking.report([gold()], t[:1])["paraphrase_agreement@5"] is None


# --- per type --------------------------------------------------------------------------------

def test_per_type_breakdown_over_the_top_k():
    g = gold(relevant=["S.1.p.code", "S.1.p.table"])
    t = run(ids=["S.1.p.code", "S.1.p.prose", "S.1.p.table", "S.1.p.fig", "S.1.p.t2", "S.1.p.late"],
            types=["code", "prose", "table", "figure", "table", "code"])
    by_type = {kind: (row["retrieved"], row["relevant"], row["precision"])
               for kind, row in chunking.report([g], [t])["by_type"].items()}
    assert by_type["code"] == (1, 1, 1.0)  # the 6th item is past k=5
    assert by_type["table"] == (2, 1, 0.5)
    assert by_type["figure"] == (1, 0, 0.0)
    assert by_type["prose"][2] == 0.0


# --- shadow vs live ----------------------------------------------------------------------------

def _fifty(hits: int):
    g = [gold(f"Q{i}", relevant=[f"S.{i}.p.B"], anchor=f"S.{i}") for i in range(50)]
    t = [run(f"Q{i}", ids=[f"S.{i}.p.B" if i < hits else "S.0.p.X"]) for i in range(50)]
    return g, t


def test_recall_drop_of_exactly_two_points_passes():
    g, live = _fifty(50)
    _, shadow = _fifty(49)  # one question of fifty lost: 2 points
    gate = chunking.shadow_vs_live(g, shadow, live)
    assert gate["drop_points"] == 2.0 and gate["passed"] is True
    _, worse = _fifty(48)
    assert chunking.shadow_vs_live(g, worse, live)["passed"] is False
    better = chunking.shadow_vs_live(g, live, shadow)
    assert better["drop_points"] == -2.0 and better["passed"] is True


def test_recall_drop_of_two_points_is_not_failed_by_float_noise():
    g = [gold(f"Q{i}", relevant=[f"S.{i}.p.B"], anchor=f"S.{i}") for i in range(100)]
    live = [run(f"Q{i}", ids=[f"S.{i}.p.B" if i < 75 else "x"]) for i in range(100)]
    shadow = [run(f"Q{i}", ids=[f"S.{i}.p.B" if i < 73 else "x"]) for i in range(100)]
    assert (0.75 - 0.73) * 100 > 2  # what a naive comparison would see
    assert chunking.shadow_vs_live(g, shadow, live)["passed"] is True


def test_report_carries_the_live_gate():
    g, live = _fifty(50)
    _, shadow = _fifty(48)
    result = chunking.report(g, shadow, live_traces=live)
    gate = next(x for x in result["gates"] if x["gate"] == "recall@5_drop_points")
    assert gate["status"] == "fail" and gate["value"] == 4.0
    assert result["recall@5_vs_live"]["live_R@5"] == 1.0


# --- input checks ------------------------------------------------------------------------------

def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="repeats qid"):
        chunking.report([gold("A"), gold("A")], [])
    with pytest.raises(ValueError, match="citation_policy"):
        chunking.report([gold()], [], citation_policy="last")
    with pytest.raises(ValueError, match="unknown gate"):
        chunking.report([gold()], [], gates={"recall": 0.5})


def test_unknown_trace_qids_are_ignored_and_listed():
    result = chunking.report([gold("A")], [run("A"), run("ZZ")])
    assert result["unknown_trace"] == ["ZZ"] and result["n_runs"] == 1


def test_empty_gold_gives_nulls():
    result = chunking.report([], [])
    assert result["P@5"] is None and result["coverage"] is None and result["anchor_hit"] is None


def test_report_is_json_serialisable():
    result = chunking.report([ChunkingGold.model_validate(DOC_GOLD)], [ChunkingTrace.model_validate(DOC_TRACE)])
    json.dumps(result, allow_nan=False, ensure_ascii=False)
