"""The ``wfgy`` profile reproduces WFGY's grounded-QA report: its worked example, its
definitions and every edge case its pages name (refusal token, empty denominators, scoped
citations, short substrings, SCU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.load.adapters.wfgy import WfgyGold, WfgyTrace, read_gold, read_traces
from groundjudge.profiles import wfgy
from tests.conftest import ROOT
from tests.support import wfgy_reference

EXAMPLES = ROOT / "examples" / "wfgy"

# The three-item worked example of WFGY's eval page, gold and traces as the page prints them.
DOC_GOLD = """\
{"qid":"A0001","question":"Does X support null keys?","answerable":true,"gold_claim_substr":["rejects null keys"],"gold_citations":["p1#2"],"constraints":["X rejects null keys."]}
{"qid":"A0002","question":"Explain Z.","answerable":false,"gold_claim_substr":[],"gold_citations":[]}
{"qid":"A0003","question":"What domain is allowed?","answerable":true,"gold_claim_substr":["only domain example.com"],"gold_citations":["pB#1"]}
"""
DOC_TRACE = """\
{"qid":"A0001","q":"Does X support null keys?","retrieved_ids":["p1#1","p1#2","p2#1"],"answer_json":{"claim":"X rejects null keys.","citations":["p1#2"]}}
{"qid":"A0002","q":"Explain Z.","retrieved_ids":["p1#1","p2#1"],"answer_json":{"claim":"not in context","citations":[]}}
{"qid":"A0003","q":"What domain is allowed?","retrieved_ids":["pB#1","p1#2"],"answer_json":{"claim":"Only domain example.com is allowed.","citations":["pB#1"]}}
"""
# The output the page shows for it (its "Output (example)").
DOC_OUTPUT = {
    "answered": 2, "refused": 1, "answerable": 2, "unanswerable": 1,
    "precision": 1.0, "chr": 1.0, "under_refusal": 0.0, "over_refusal": 0.0, "recall@k": 1.0, "k": 5,
    "gates": {"precision": "0.80", "chr": "0.75", "under": "0.05", "over": "0.10"},
    "pass": True,
}


def _parse(text: str, model):
    return [model.model_validate(json.loads(line)) for line in text.splitlines() if line.strip()]


def gold(qid="Q", *, answerable=True, substr=("the answer here",), cites=("c1",), constraints=None, **extra):
    data = {"qid": qid, "question": f"question {qid}?", "answerable": answerable,
            "gold_claim_substr": None if substr is None else list(substr), "gold_citations": list(cites), **extra}
    if constraints is not None:
        data["constraints"] = list(constraints)
    return WfgyGold.model_validate(data)


def trace(qid="Q", claim="It is the answer here.", cites=("c1",), retrieved=("c1", "c2"), echo=None):
    answer = {"claim": claim, "citations": list(cites)}
    if echo is not None:
        answer["constraints_echo"] = list(echo)
    return WfgyTrace.model_validate({"qid": qid, "q": "q", "retrieved_ids": list(retrieved), "answer_json": answer})


# an unanswerable question, refused as it should be: every gate then has a denominator
UNANSWERABLE = gold("U", answerable=False, substr=(), cites=())
REFUSED = trace("U", claim="not in context", cites=())


def test_worked_example_gives_the_page_numbers():
    result = wfgy.report(_parse(DOC_GOLD, WfgyGold), _parse(DOC_TRACE, WfgyTrace))
    assert {key: result[key] for key in DOC_OUTPUT} == DOC_OUTPUT
    assert list(result)[: len(DOC_OUTPUT)] == list(DOC_OUTPUT)  # WFGY's key order first
    assert result["missing_trace"] == [] and result["offenders"] == []


def test_worked_example_in_the_bundled_files_matches_the_page():
    gold_rows = [g for _, g in read_gold(EXAMPLES / "gold.jsonl")][:3]
    trace_rows = [t for _, t in read_traces(EXAMPLES / "trace.jsonl")][:3]
    assert gold_rows == _parse(DOC_GOLD, WfgyGold) and trace_rows == _parse(DOC_TRACE, WfgyTrace)


def test_bundled_example_numbers():
    g = [r for _, r in read_gold(EXAMPLES / "gold.jsonl")]
    t = [r for _, r in read_traces(EXAMPLES / "trace.jsonl")]
    result = wfgy.report(g, t)
    assert (result["answered"], result["refused"], result["answerable"], result["unanswerable"]) == (10, 2, 9, 3)
    assert result["precision"] == 0.5  # A0001, A0003, A0007, A0008, A0011 of 10 shipped
    assert result["chr"] == 0.6  # A0004 cites the wrong chunk, A0009 an unretrieved one
    assert result["under_refusal"] == 0.6667  # A0006 answered, A0010 "Not in context."
    assert result["over_refusal"] == 0.1111  # A0005
    assert result["recall@k"] == 0.7778  # A0005 and A0011 (gold at rank 6) miss
    assert result["scu"]["violation_qids"] == ["A0001", "A0008"]
    assert result["pass"] is False
    enforced = wfgy.report(g, t, scu_enforced=True)
    assert enforced["precision"] == 0.3 and enforced["gates"]["scu_violations"] == "0"
    assert [o["qid"] for o in result["offenders"]] == ["A0004", "A0005", "A0006", "A0009", "A0010", "A0012"]


# --- empty denominators, as WFGY's scorer handles them -------------------------------------

def test_nothing_shipped_gives_precision_and_chr_of_one():
    result = wfgy.report([gold("A"), gold("U", answerable=False, substr=(), cites=())],
                         [trace("A", claim="not in context", cites=()), trace("U", claim="not in context", cites=())])
    assert result["answered"] == 0
    assert result["precision"] == 1.0 and result["chr"] == 1.0
    assert result["over_refusal"] == 1.0 and result["under_refusal"] == 0.0
    assert result["pass"] is False  # over-refusal fails


def gates_by_status(result):
    return {g["gate"]: g["status"] for g in result["gate_results"]}


def test_no_unanswerable_item_gives_under_refusal_zero_and_a_gate_that_does_not_hold():
    """The scorer's value for an empty denominator is reported as it computes it; its gate has
    nothing to hold on, so the ship gates do not pass (they used to, on no evidence)."""
    result = wfgy.report([gold("A")], [trace("A")])
    assert result["unanswerable"] == 0 and result["under_refusal"] == 0.0
    assert result["precision"] == 1.0 and result["pass"] is False
    assert gates_by_status(result) == {"precision": "pass", "chr": "pass", "under": "no_data", "over": "pass"}
    under = next(g for g in result["gate_results"] if g["gate"] == "under")
    assert under["n"] == 0 and under["passed"] is False and under["reason"].startswith("no unanswerable question")
    assert "| under | 0.0000 | <= 0.05 | NOT EVALUATED (no unanswerable question:" in wfgy.render_markdown(result)


def test_no_answerable_item_gives_over_refusal_and_recall_zero():
    result = wfgy.report([gold("U", answerable=False, substr=(), cites=())],
                         [trace("U", claim="not in context", cites=())])
    assert result["answerable"] == 0
    assert result["over_refusal"] == 0.0 and result["recall@k"] == 0.0
    assert result["pass"] is False  # nothing shipped, nothing answerable: only `under` was evaluated
    assert gates_by_status(result) == {"precision": "no_data", "chr": "no_data", "under": "pass", "over": "no_data"}


def test_empty_gold_set():
    result = wfgy.report([], [])
    assert (result["precision"], result["chr"], result["under_refusal"], result["over_refusal"],
            result["recall@k"]) == (1.0, 1.0, 0.0, 0.0, 0.0)
    assert result["scu"]["constraint_integrity"] is None


# --- the refusal token ---------------------------------------------------------------------

@pytest.mark.parametrize(("claim", "refused"), [
    ("not in context", True),
    ("  not in context\n", True),  # surrounding white space is not part of the claim
    ("Not in context", True),  # the reference scorer lower-cases the claim
    ("NOT IN CONTEXT", True),
    ("not in context.", False),  # punctuation is part of the claim
    ("The answer is not in context", False),
    ("I don't know", False),
    ("", False),
])
def test_refusal_token_is_compared_as_the_reference_scorer_does(claim, refused):
    result = wfgy.report([gold("U", answerable=False, substr=(), cites=())], [trace("U", claim=claim, cites=())])
    assert result["refused"] == int(refused)
    assert result["under_refusal"] == (0.0 if refused else 1.0)


def test_refusal_token_is_reported():
    assert wfgy.report([], [])["refusal_token"] == "not in context"


# --- citation hit --------------------------------------------------------------------------

def test_citation_outside_retrieved_ids_is_no_hit_even_when_it_is_gold():
    result = wfgy.report([gold("A", cites=("c9",))], [trace("A", cites=("c9",), retrieved=("c1", "c2"))])
    assert result["chr"] == 0.0 and result["precision"] == 0.0
    assert result["offenders"][0]["problems"] == ["cites ids never retrieved: c9"]


def test_one_unretrieved_citation_spoils_an_otherwise_good_citation_list():
    assert not wfgy.citation_hit(["c1", "c9"], ["c1"], ["c1", "c2"])
    assert wfgy.citation_hit(["c1", "c2"], ["c1"], ["c1", "c2"])  # any overlap with gold suffices


def test_no_gold_citations_means_citing_nothing():
    assert wfgy.citation_hit([], [], ["c1"])
    assert not wfgy.citation_hit(["c1"], [], ["c1"])


def test_chr_counts_shipped_unanswerable_answers_as_misses():
    # The page's formula would count this uncited answer to an unanswerable question as a hit;
    # WFGY's scorer does not, and its numbers are the ones reproduced.
    result = wfgy.report([gold("A"), gold("U", answerable=False, substr=(), cites=())],
                         [trace("A"), trace("U", claim="Made up.", cites=())])
    assert result["answered"] == 2
    assert result["chr"] == 0.5 and result["precision"] == 0.5


# --- containment ---------------------------------------------------------------------------

def test_substring_shorter_than_five_characters_never_matches():
    assert not wfgy.contains_gold_substr("Yes, it does.", ["Yes"])
    assert not wfgy.contains_gold_substr("Yes, it does.", ["does"])
    assert wfgy.contains_gold_substr("Yes, it does.", ["does", "it does"])  # a long one still counts
    assert wfgy.contains_gold_substr("Yes, it DOES.", ["t does"])  # exactly 5 characters, any case
    result = wfgy.report([gold("A", substr=("Yes",))], [trace("A", claim="Yes.")])
    assert result["precision"] == 0.0 and result["chr"] == 1.0


def test_no_gold_substrings_is_vacuous_containment():
    assert wfgy.contains_gold_substr("anything", [])
    assert wfgy.contains_gold_substr("anything", None)
    result = wfgy.report([gold("A", substr=None)], [trace("A", claim="Whatever it says.")])
    assert result["precision"] == 1.0


# --- recall@k ------------------------------------------------------------------------------

def test_recall_needs_every_gold_citation_within_k():
    retrieved = ("x1", "x2", "x3", "x4", "g1", "g2")
    assert wfgy.recall_hit(["g1"], retrieved, 5)
    assert not wfgy.recall_hit(["g2"], retrieved, 5)
    assert not wfgy.recall_hit(["g1", "g2"], retrieved, 5)
    assert wfgy.recall_hit(["g1", "g2"], retrieved, 6)
    assert wfgy.recall_hit([], retrieved, 1)  # nothing to recall


def test_recall_counts_refused_answerable_items_and_uses_k():
    g = [gold("A", cites=("c2",)), gold("B", cites=("c2",))]
    t = [trace("A", claim="not in context", cites=(), retrieved=("c1", "c2")), trace("B", retrieved=("c2",), cites=("c2",))]
    assert wfgy.report(g, t, k=2)["recall@k"] == 1.0
    assert wfgy.report(g, t, k=1)["recall@k"] == 0.5
    assert wfgy.report(g, t, k=1)["k"] == 1


# --- traces --------------------------------------------------------------------------------

def test_missing_trace_is_scored_as_an_empty_shipped_claim():
    result = wfgy.report([gold("A"), gold("U", answerable=False, substr=(), cites=())], [])
    assert result["answered"] == 2 and result["missing_trace"] == ["A", "U"]
    assert result["under_refusal"] == 1.0 and result["precision"] == 0.0


def test_last_trace_of_a_qid_wins():
    g = [gold("A")]
    result = wfgy.report(g, [trace("A", claim="not in context", cites=()), trace("A")])
    assert result["answered"] == 1 and result["superseded_traces"] == 1
    assert wfgy.report(g, [trace("A"), trace("A", claim="not in context", cites=())])["refused"] == 1


def test_traces_of_unknown_qids_are_ignored_and_listed():
    result = wfgy.report([gold("A")], [trace("A"), trace("ZZZ")])
    assert result["answered"] == 1 and result["unknown_trace"] == ["ZZZ"]


def test_q_id_spelling_is_accepted():
    t = WfgyTrace.model_validate({"q_id": "A", "retrieved_ids": ["c1"], "answer_json": {"claim": "the answer here",
                                                                                       "citations": ["c1"]}})
    assert wfgy.report([gold("A")], [t])["precision"] == 1.0


def test_repeated_gold_qid_is_an_error():
    with pytest.raises(ValueError, match="repeats qid 'A'"):
        wfgy.report([gold("A"), gold("A")], [])


# --- SCU / constraint integrity ------------------------------------------------------------

def test_constraints_echo_is_order_insensitive():
    assert wfgy.constraints_ok(["a", "b"], ["b", "a"]) is True
    assert wfgy.constraints_ok(["a", "b"], ["a"]) is False
    assert wfgy.constraints_ok(["a"], ["a", "c"]) is False
    assert wfgy.constraints_ok(["a"], None) is False  # no echo at all
    assert wfgy.constraints_ok(["Tokens expire after 24 hours."], ["tokens expire after 24 hours."]) is False
    assert wfgy.constraints_ok([], None) is None and wfgy.constraints_ok(None, ["a"]) is None


def test_contradiction_predicate_fails_an_otherwise_matching_echo():
    def negates(claim: str, constraint: str) -> bool:
        return " not " in claim and "reject" in constraint

    locked = ["X rejects null keys."]
    assert wfgy.constraints_ok(locked, locked, claim="X does not reject null keys.", contradicts=negates) is False
    assert wfgy.constraints_ok(locked, locked, claim="X rejects null keys.", contradicts=negates) is True
    assert wfgy.constraints_ok(locked, locked, claim="X does not reject null keys.") is True  # no detector


def test_scu_counts_only_when_enforced():
    g = [gold("A", constraints=["locked"]), gold("B", constraints=["locked"]), UNANSWERABLE]
    t = [trace("A", echo=["locked"]), trace("B", echo=["other"]), REFUSED]
    relaxed = wfgy.report(g, t)
    assert relaxed["precision"] == 1.0 and relaxed["pass"] is True
    assert relaxed["scu"] == {"enforced": False, "checked": 2, "violations": 1, "violation_qids": ["B"],
                              "constraint_integrity": 0.5}
    enforced = wfgy.report(g, t, scu_enforced=True)
    assert enforced["precision"] == 0.5 and enforced["pass"] is False
    assert next(r for r in enforced["gate_results"] if r["gate"] == "scu_violations")["passed"] is False


def test_scu_ignores_refusals_and_items_without_constraints():
    g = [gold("A", constraints=["locked"]), gold("B", constraints=[]), gold("C")]
    t = [trace("A", claim="not in context", cites=()), trace("B"), trace("C")]
    result = wfgy.report(g, t, scu_enforced=True)
    assert result["scu"]["checked"] == 0 and result["scu"]["constraint_integrity"] is None
    assert result["precision"] == 1.0


# --- gates ---------------------------------------------------------------------------------

def test_gates_accept_both_spellings_of_the_pages():
    assert wfgy.parse_gates("precision=0.80,chr=0.75,under=0.05,over=0.10") == wfgy.DEFAULT_GATES
    assert wfgy.parse_gates("precision=0.9 chr=0.75 under_refusal=0.01 over_refusal=0.2") == {
        "precision": "0.9", "chr": "0.75", "under": "0.01", "over": "0.2"}
    assert wfgy.parse_gates("precision=0.9")["chr"] == "0.75"
    with pytest.raises(ValueError, match="unknown gate"):
        wfgy.parse_gates("recall=0.5")
    with pytest.raises(ValueError, match="not a number"):
        wfgy.parse_gates("precision=high")


def test_gate_thresholds_are_inclusive():
    # 4 of 5 shipped answers correct: precision exactly 0.80 passes its gate.
    g = [gold(f"A{i}") for i in range(5)] + [UNANSWERABLE]
    t = [trace(f"A{i}") for i in range(4)] + [trace("A4", claim="Something else entirely."), REFUSED]
    result = wfgy.report(g, t, gates="chr=0.75")
    assert result["precision"] == 0.8 and result["pass"] is True
    assert wfgy.report(g, t, gates="precision=0.81")["pass"] is False


def test_render_markdown_shows_verdict_metrics_and_offenders():
    result = wfgy.report([gold("A"), gold("B", cites=("c9",))], [trace("A"), trace("B", cites=("c9",))])
    text = wfgy.render_markdown(result)
    assert "**FAIL**" in text and "| precision (answered) | 0.5000 | 2 shipped |" in text
    assert "| B | cites ids never retrieved: c9 |" in text
    ok = wfgy.render_markdown(wfgy.report(_parse(DOC_GOLD, WfgyGold), _parse(DOC_TRACE, WfgyTrace)))
    assert "**PASS**" in ok


def test_a_trace_file_that_shares_no_question_with_the_gold_is_an_input_error(tmp_path):
    """From Python, the profile reads its files itself: a trace file of another gold set would
    score every question as an empty shipped claim. It is refused, with the overlap."""
    from groundjudge.errors import InputError
    from groundjudge.profiles import run_profile

    other = tmp_path / "trace.jsonl"
    other.write_text(DOC_TRACE.replace('"qid":"A000', '"qid":"B000'))
    with pytest.raises(InputError) as caught:
        run_profile("wfgy", EXAMPLES / "gold.jsonl", [EXAMPLES / "trace.jsonl", other])
    (problem,) = caught.value.problems
    assert problem.file == str(other) and problem.field == "qid"
    assert problem.problem.startswith("shares no question id with the gold set") and "(0 of its 3 ids" in problem.problem


# --- against the seeds' reference scorer, on inputs written from their text ----------------------
#
# The gold and trace lines of WFGY's two pages (the RAG precision page's three-item example, the
# eval README's A0001 with its notes, timestamp and constraints echo), and one item per rule the
# pages state: the refusal token written "Not in context" (the scorer lower-cases the claim),
# an unanswerable question answered, a citation outside retrieved_ids (scoped grounding), an
# answerable question refused, gold evidence ranked below k, the right answer citing the wrong
# retrieved id (CHR@k's "picked the right ids from the retrieved pool"), a gold substring shorter
# than five characters, a qid run twice (the scorer keeps the last line), the q_id spelling, and
# constraints echoed in another order / contradicted (SCU).

SEED_GOLD = """\
{"qid":"A0001","question":"Does X support null keys?","answerable":true,"gold_claim_substr":["rejects null keys"],"gold_citations":["p1#2"],"constraints":["X rejects null keys."],"notes":"Entity+constraint co-located in p1#2"}
{"qid":"A0002","question":"Explain Z.","answerable":false,"gold_claim_substr":[],"gold_citations":[]}
{"qid":"A0003","question":"What domain is allowed?","answerable":true,"gold_claim_substr":["only domain example.com"],"gold_citations":["pB#1"]}
{"qid":"A0004","question":"Does Z support null keys?","answerable":false,"gold_claim_substr":[],"gold_citations":[]}
{"qid":"A0005","question":"Which port does X listen on?","answerable":false,"gold_claim_substr":[],"gold_citations":[]}
{"qid":"A0006","question":"Which keys does X reject?","answerable":true,"gold_claim_substr":["rejects null keys"],"gold_citations":["p1#2"]}
{"qid":"A0007","question":"Which domains are blocked?","answerable":true,"gold_claim_substr":["all but example.com"],"gold_citations":["pB#2"]}
{"qid":"A0008","question":"Where is the domain rule written?","answerable":true,"gold_claim_substr":["in the policy file"],"gold_citations":["p7#1"]}
{"qid":"A0009","question":"Is example.com allowed?","answerable":true,"gold_claim_substr":["only domain example.com"],"gold_citations":["pB#1"]}
{"qid":"A0010","question":"Does X support null keys?","answerable":true,"gold_claim_substr":["Yes"],"gold_citations":["p1#2"]}
{"qid":"A0011","question":"Does X accept empty keys?","answerable":true,"gold_claim_substr":["accepts empty keys"],"gold_citations":["p2#1"]}
{"qid":"A0012","question":"What does X do with null keys?","answerable":true,"gold_claim_substr":["rejects null keys"],"gold_citations":["p1#2"],"constraints":["X rejects null keys.","Null keys raise an error."]}
{"qid":"A0013","question":"Are null keys stored?","answerable":true,"gold_claim_substr":["never stored"],"gold_citations":["p1#3"],"constraints":["Null keys are never stored."]}
"""
SEED_TRACE = """\
{"ts":1723430400,"qid":"A0001","q":"Does X support null keys?","retrieved_ids":["p1#1","p1#2","p2#1"],"answer_json":{"claim":"X rejects null keys.","citations":["p1#2"],"constraints_echo":["X rejects null keys."]},"ok":true,"reason":"ok"}
{"qid":"A0002","q":"Explain Z.","retrieved_ids":["p1#1","p2#1"],"answer_json":{"claim":"not in context","citations":[]}}
{"qid":"A0003","q":"What domain is allowed?","retrieved_ids":["pB#1","p1#2"],"answer_json":{"claim":"Only domain example.com is allowed.","citations":["pB#1"]}}
{"qid":"A0004","q":"Does Z support null keys?","retrieved_ids":["p1#2"],"answer_json":{"claim":"Not in context","citations":[]}}
{"qid":"A0005","q":"Which port does X listen on?","retrieved_ids":["p2#1"],"answer_json":{"claim":"X listens on port 8080.","citations":["p2#1"]}}
{"qid":"A0006","q":"Which keys does X reject?","retrieved_ids":["p1#1"],"answer_json":{"claim":"X rejects null keys.","citations":["p1#2"]}}
{"qid":"A0007","q":"Which domains are blocked?","retrieved_ids":["pB#2","pB#1"],"answer_json":{"claim":"not in context","citations":[]}}
{"qid":"A0008","q":"Where is the domain rule written?","retrieved_ids":["p1#1","p2#1","p3#1","p4#1","p5#1","p7#1"],"answer_json":{"claim":"The rule is kept in the policy file.","citations":["p7#1"]}}
{"qid":"A0009","q":"Is example.com allowed?","retrieved_ids":["p1#2","pB#1"],"answer_json":{"claim":"Only domain example.com is allowed.","citations":["p1#2"]}}
{"qid":"A0010","q":"Does X support null keys?","retrieved_ids":["p1#2"],"answer_json":{"claim":"Yes, it does.","citations":["p1#2"]}}
{"qid":"A0011","q":"Does X accept empty keys?","retrieved_ids":["p2#1"],"answer_json":{"claim":"not in context","citations":[]}}
{"qid":"A0011","q":"Does X accept empty keys?","retrieved_ids":["p2#1"],"answer_json":{"claim":"X accepts empty keys.","citations":["p2#1"]}}
{"q_id":"A0012","q":"What does X do with null keys?","retrieved_ids":["p1#2"],"answer_json":{"claim":"X rejects null keys: they raise an error.","citations":["p1#2"],"constraints_echo":["Null keys raise an error.","X rejects null keys."]}}
{"qid":"A0013","q":"Are null keys stored?","retrieved_ids":["p1#3"],"answer_json":{"claim":"Null keys are never stored.","citations":["p1#3"],"constraints_echo":["Null keys are stored."]}}
"""
SCORER_KEYS = ("answered", "refused", "answerable", "unanswerable", "precision", "chr", "under_refusal",
               "over_refusal", "recall@k", "k", "pass", "chr@k")


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _ours(result: dict) -> dict:
    return {**{key: result[key] for key in SCORER_KEYS}, "scu_violations": result["scu"]["violations"]}


@pytest.mark.parametrize("k", [1, 2, 5, 10])
@pytest.mark.parametrize("gates", ["precision=0.80,chr=0.75,under=0.05,over=0.10",
                                   "precision=0.5 chr=0.5 under_refusal=0.4 over_refusal=0.2", "precision=0.3,chr=0.6"])
@pytest.mark.parametrize("scu_enforced", [False, True])
def test_profile_numbers_equal_the_reference_scorer(k, gates, scu_enforced):
    expected = wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE), k=k, gates=gates, scu_enforced=scu_enforced)
    result = wfgy.report(_parse(SEED_GOLD, WfgyGold), _parse(SEED_TRACE, WfgyTrace), k=k, gates=gates,
                         scu_enforced=scu_enforced)
    assert _ours(result) == expected
    assert all(g["n"] for g in result["gate_results"])  # every denominator holds items: pass is evidence


def test_the_seed_set_exercises_every_rule():
    """The reference's figures on the seed set, worked out by hand, so the set tests what it says."""
    got = wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE), k=5)
    # shipped: A0001 A0003 A0005 A0006 A0008 A0009 A0010 A0011 A0012 A0013; refused: A0002 A0004 A0007
    assert (got["answered"], got["refused"], got["answerable"], got["unanswerable"]) == (10, 3, 10, 3)
    # correct (C and H): A0001 A0003 A0008 A0011 A0012 A0013; A0006 cites outside retrieval,
    # A0009 cites the wrong id, A0010's only substring is short
    assert got["precision"] == 0.6 and got["chr"] == 0.7  # H also for A0010; A0005 is unanswerable: a miss
    assert got["under_refusal"] == round(1 / 3, 4) and got["over_refusal"] == 0.1  # A0005; A0007
    # A0006 (p1#2 never retrieved) and A0008 (rank 6) miss; A0007 was refused with its evidence retrieved
    assert got["recall@k"] == 0.8
    # best case: A0009 could have cited pB#1 (rank 2); A0008's p7#1 lies below k=5, A0006's was never retrieved
    assert got["chr@k"] == 0.7
    assert wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE), k=10)["chr@k"] == 0.8  # A0008 too
    assert got["scu_violations"] == 1  # A0013 echoes a contradicted constraint; A0012's other order is fine


def test_not_in_context_with_a_capital_is_a_refusal_here_as_in_the_scorer(tmp_path):
    """An edge set of the two unanswerable questions, both refused, one spelled "Not in context":
    under-refusal 0.0 in the scorer, in the profile and in the native metrics (it was 0.5)."""
    gold_text = "".join(line + "\n" for line in SEED_GOLD.splitlines() if '"A0002"' in line or '"A0004"' in line)
    trace_text = "".join(line + "\n" for line in SEED_TRACE.splitlines() if '"A0002"' in line or '"A0004"' in line)
    gold_file, trace_file = tmp_path / "gold.jsonl", tmp_path / "trace.jsonl"
    gold_file.write_text(gold_text)
    trace_file.write_text(trace_text)
    assert wfgy_reference.score(_lines(gold_text), _lines(trace_text))["under_refusal"] == 0.0
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold_file),
                                       "--traces", str(trace_file), "--out", str(tmp_path / "out"), "--quiet"])
    own = json.loads((tmp_path / "out" / "profile-wfgy.json").read_text())
    native = json.loads((tmp_path / "out" / "metrics.json").read_text())["aggregate"]
    assert (own["under_refusal"], own["refused"]) == (0.0, 2)
    assert native["under_refusal"] == {"value": 0.0, "n": 2} and native["abstention_accuracy"]["value"] == 1.0
    assert result.exit_code == 1  # nothing shipped: precision and CHR gates have no evidence, and do not hold


# --- the scorer's options, as knobs: --k, --gates, --scu_enforced, [profile.wfgy] ----------------

def _seed_files(folder: Path) -> tuple[Path, Path]:
    gold_file, trace_file = folder / "gold.jsonl", folder / "trace.jsonl"
    gold_file.write_text(SEED_GOLD)
    trace_file.write_text(SEED_TRACE)
    return gold_file, trace_file


def _metrics(folder: Path, *args: str | Path) -> tuple[int, dict]:
    gold_file, trace_file = _seed_files(folder)
    out = folder / "out"
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold_file), "--traces",
                                       str(trace_file), *map(str, args), "--out", str(out), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads((out / "profile-wfgy.json").read_text())


def test_command_line_knobs_give_the_reference_scorer_numbers(tmp_path):
    gates = "precision=0.5 chr=0.5 under_refusal=0.4 over_refusal=0.2"
    code, own = _metrics(tmp_path, "--k", "10", "--gates", *gates.split(), "--scu_enforced")
    expected = wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE), k=10, gates=gates, scu_enforced=True)
    assert _ours(own) == expected and own["k"] == 10
    assert own["gates"] == {"precision": "0.5", "chr": "0.5", "under": "0.4", "over": "0.2", "scu_violations": "0"}
    assert own["scu"]["enforced"] is True
    assert own["pass"] is False and code == 1  # A0013 violates a locked constraint: "SCU violations = 0" fails
    assert {g["gate"]: g["status"] for g in own["gate_results"]}["scu_violations"] == "fail"


def test_without_knobs_the_scorer_defaults_apply(tmp_path):
    _, own = _metrics(tmp_path)
    assert own["k"] == 5 and own["gates"] == wfgy.DEFAULT_GATES and own["scu"]["enforced"] is False
    assert _ours(own) == wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE))


@pytest.mark.parametrize("spelling", [["--gates", "precision=0.5,chr=0.5,under=0.4,over=0.2"],
                                      ["--gates=precision=0.5", "chr=0.5", "under_refusal=0.4", "over_refusal=0.2"],
                                      ["--gates", "precision=0.5 chr=0.5 under=0.4 over=0.2"]])
def test_gates_flag_takes_both_spellings_of_the_pages(tmp_path, spelling):
    code, own = _metrics(tmp_path, *spelling)
    assert own["gates"] == {"precision": "0.5", "chr": "0.5", "under": "0.4", "over": "0.2"}
    assert own["pass"] is True and code == 0  # 0.6, 0.8, 0.3333, 0.1 against the lowered bounds


def test_gates_flag_takes_a_gate_file(tmp_path):
    gate_file = tmp_path / "gates.txt"
    gate_file.write_text("# ship gates, frozen for this release\nprecision=0.5 chr=0.5\nunder_refusal=0.4\n"
                         "over_refusal=0.2  # after the re-chunk\n")
    code, own = _metrics(tmp_path, "--gates", gate_file)
    assert own["gates"] == {"precision": "0.5", "chr": "0.5", "under": "0.4", "over": "0.2"} and code == 0


def test_a_bad_gate_file_names_its_line(tmp_path):
    gate_file = tmp_path / "gates.txt"
    gate_file.write_text("precision=0.5\nrecall=0.9\nchr=high\n")
    gold_file, trace_file = _seed_files(tmp_path)
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold_file), "--traces",
                                       str(trace_file), "--gates", str(gate_file), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    assert f"{gate_file}:2: gates: unknown gate 'recall'" in result.stderr
    assert f"{gate_file}:3: gates: gate 'chr': 'high' is not a number" in result.stderr
    missing = CliRunner().invoke(main, ["metrics", "--profile", "wfgy", "--golden", str(gold_file), "--traces",
                                        str(trace_file), "--gates", "precision", "--out", str(tmp_path / "out")])
    assert missing.exit_code == 2
    assert "--gates: 'precision' is neither gates written name=value" in missing.stderr


def test_profile_table_sets_the_knobs_and_its_gate_file_is_relative_to_the_config(tmp_path):
    gold_file, trace_file = _seed_files(tmp_path)
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "gates.txt").write_text("precision=0.5,chr=0.5,under=0.4,over=0.2\n")
    config = tmp_path / "ci" / "groundjudge.toml"
    config.write_text(f'[inputs]\ngolden = "{gold_file}"\ntraces = ["{trace_file}"]\n\n'
                      '[profile.wfgy]\nk = 10\ngates = "gates.txt"\nscu_enforced = true\n')
    result = CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "wfgy",
                                       "--out", str(tmp_path / "out"), "--quiet"])
    own = json.loads((tmp_path / "out" / "profile-wfgy.json").read_text())
    assert (own["k"], own["gates"]["precision"], own["scu"]["enforced"]) == (10, "0.5", True)
    assert result.exit_code == 1  # the SCU gate, enforced from the table
    flags = CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "wfgy", "--k", "1",
                                      "--gates", "precision=0.9", "--out", str(tmp_path / "flags"), "--quiet"])
    own = json.loads((tmp_path / "flags" / "profile-wfgy.json").read_text())
    assert (own["k"], own["gates"]["precision"], own["gates"]["chr"]) == (1, "0.9", "0.75")  # flags win
    table = config.read_text().replace('gates = "gates.txt"', "gates = { precision = 0.5, under_refusal = 0.4 }")
    config.write_text(table)
    CliRunner().invoke(main, ["metrics", "--config", str(config), "--profile", "wfgy", "--out", str(tmp_path / "t")])
    own = json.loads((tmp_path / "t" / "profile-wfgy.json").read_text())
    assert (own["gates"]["precision"], own["gates"]["under"], own["gates"]["chr"]) == ("0.5", "0.4", "0.75")
    assert flags.exit_code == 1


def test_bad_knobs_are_input_errors(tmp_path):
    gold_file, trace_file = _seed_files(tmp_path)
    base = ["metrics", "--profile", "wfgy", "--golden", str(gold_file), "--traces", str(trace_file)]
    two = CliRunner().invoke(main, [*base, "--k", "1", "--k", "5", "--out", str(tmp_path / "a")])
    assert two.exit_code == 2 and "--k: the wfgy profile takes one value, got 2: 1, 5" in two.stderr
    nan = CliRunner().invoke(main, [*base, "--gates", "precision=nan", "--out", str(tmp_path / "b")])
    assert nan.exit_code == 2 and "--gates: gate 'precision': 'nan' is not a finite number" in nan.stderr
    config = tmp_path / "groundjudge.toml"
    config.write_text("[profile.wfgy]\nk = 0\nscu = true\n")
    table = CliRunner().invoke(main, [*base, "--config", str(config), "--out", str(tmp_path / "c")])
    assert table.exit_code == 2
    assert f"{config}: profile.wfgy.k: Input should be greater than or equal to 1" in table.stderr
    assert f"{config}: profile.wfgy.scu: unknown setting of the wfgy profile (its settings: k, gates, " \
           "scu_enforced)" in table.stderr
    alone = CliRunner().invoke(main, ["metrics", "--golden", str(gold_file), "--traces", str(trace_file),
                                      "--scu_enforced", "--out", str(tmp_path / "d")])
    assert alone.exit_code == 2 and "--scu_enforced: a setting of the wfgy profile: add --profile wfgy" in alone.stderr


def test_run_takes_the_knobs_too(tmp_path, monkeypatch):
    from tests.support.judge_replies import verdict_for_request
    from tests.support.openai_server import ScriptedOpenAIServer

    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    gold_file, trace_file = _seed_files(tmp_path)
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        result = CliRunner().invoke(main, [
            "run", "--profile", "wfgy", "--golden", str(gold_file), "--traces", str(trace_file),
            "--k", "10", "--gates", "precision=0.5", "chr=0.5", "under=0.4", "over=0.2", "--scu-enforced",
            "--judge-base-url", srv.base_url, "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out"), "--no-history"])
    own = json.loads((tmp_path / "out" / "profile-wfgy.json").read_text())
    expected = wfgy_reference.score(_lines(SEED_GOLD), _lines(SEED_TRACE), k=10,
                                    gates="precision=0.5,chr=0.5,under=0.4,over=0.2", scu_enforced=True)
    assert _ours(own) == expected and own["scu"]["enforced"] is True
    assert "profile wfgy: FAIL" in result.output and result.exit_code == 1
