"""The ``wfgy`` profile reproduces WFGY's grounded-QA report: its worked example, its
definitions and every edge case its pages name (refusal token, empty denominators, scoped
citations, short substrings, SCU)."""

from __future__ import annotations

import json

import pytest

from groundjudge.load.adapters.wfgy import WfgyGold, WfgyTrace, read_gold, read_traces
from groundjudge.profiles import wfgy
from tests.conftest import ROOT

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
    ("Not in context", False),
    ("NOT IN CONTEXT", False),
    ("not in context.", False),
    ("The answer is not in context", False),
    ("I don't know", False),
    ("", False),
])
def test_refusal_token_must_be_exact(claim, refused):
    result = wfgy.report([gold("U", answerable=False, substr=(), cites=())], [trace("U", claim=claim, cites=())])
    assert result["refused"] == int(refused)
    assert result["under_refusal"] == (0.0 if refused else 1.0)


def test_case_insensitive_refusal_reproduces_the_reference_scorer():
    g, t = [gold("U", answerable=False, substr=(), cites=())], [trace("U", claim="Not In Context", cites=())]
    assert wfgy.report(g, t)["under_refusal"] == 1.0
    assert wfgy.report(g, t, refusal_case_insensitive=True)["under_refusal"] == 0.0


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
    assert [r for r in enforced["gate_results"] if r["gate"] == "scu_violations"][0]["passed"] is False


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
