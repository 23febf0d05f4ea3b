"""Selection (SPEC 5.1): every (case, config) with a trace gets a decision, skips say why."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from groundjudge import api
from groundjudge.load.dataset import Dataset, load_dataset
from groundjudge.metrics.evaluate import MetricsRun, evaluate_dataset
from groundjudge.select import Selection, SelectSettings, select_cases, skip_counts

ROOT = Path(__file__).resolve().parent.parent

CORPUS = [
    {"chunk_id": "leave#1", "doc_id": "leave", "text": "Staff get 15 days of annual leave."},
    {"chunk_id": "leave#2", "doc_id": "leave", "text": "Up to 5 days carry over."},
    {"chunk_id": "sla#1", "doc_id": "sla", "text": "P1 incidents get a response within 1 hour."},
]


def case(cid: str, **extra: Any) -> dict[str, Any]:
    return {"id": cid, "question": f"Question {cid}?", "expected_answer": f"answer {cid}", **extra}


def trace(cid: str, config: str = "base", **extra: Any) -> dict[str, Any]:
    record = {"query_id": cid, "config_id": config, "retrieved_chunks": ["leave#1", "leave#2"],
              "context_chunks": ["leave#1", "leave#2"], "answer": "You get 15 days [leave#1].",
              "citations": ["leave#1"]}
    record.update(extra)
    return record


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def build(tmp_path: Path, cases: list[dict], traces: list[dict]) -> tuple[Dataset, MetricsRun]:
    dataset = load_dataset(write_jsonl(tmp_path / "golden.jsonl", cases),
                           [write_jsonl(tmp_path / "traces.jsonl", traces)],
                           write_jsonl(tmp_path / "corpus.jsonl", CORPUS))
    return dataset, evaluate_dataset(dataset)


def by_pair(selections: list[Selection]) -> dict[tuple[str, str], Selection]:
    pairs = {(s.config_id, s.case_id): s for s in selections}
    assert len(pairs) == len(selections), "a pair was decided twice"
    return pairs


GOOD = {"expected_chunk_ids": ["leave#1"], "must_contain": ["15 days"], "must_cite": ["leave#1"], "tags": ["hr"]}


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Dataset, MetricsRun]:
    cases = [
        case("ok", **GOOD),
        case("refusal", **GOOD),
        case("denied", **GOOD),
        case("error", **GOOD),
        case("empty", **GOOD),
        case("blank", **GOOD),
        case("ghost", **GOOD),
        case("inline", **GOOD),
        case("failing", **{**GOOD, "must_contain": ["22 days"]}),
        case("untraced", **GOOD),
    ]
    traces = [
        trace("ok"), trace("ok", "cand"),
        trace("refusal", answer="I don't know based on the provided documents."),
        trace("denied", answer="Sorry, you do not have permission to see this.", citations=[]),
        trace("error", error="retriever timeout", answer=None, context_chunks=[]),
        trace("empty", answer="   ", behavior="answer"),
        trace("blank", answer=""),
        trace("ghost", context_chunks=["leave#1", "ghost#9"]),
        trace("inline", context_chunks=[{"chunk_id": "leave#1"}, {"chunk_id": "extra#1", "text": "Inline text."}]),
        trace("failing"), trace("failing", "cand"),
        trace("untraced", "cand"),  # no base trace: the base config has no decision for it
    ]
    return build(tmp_path, cases, traces)


def test_every_pair_with_a_trace_gets_one_decision(mixed: tuple[Dataset, MetricsRun]) -> None:
    dataset, metrics = mixed
    selections = select_cases(dataset, metrics)
    pairs = by_pair(selections)
    with_trace = {(cfg, cid) for cfg, per_case in dataset.traces.items() for cid in per_case}
    assert set(pairs) == with_trace
    assert ("base", "untraced") not in pairs and dataset.missing_trace["base"] == ["untraced"]
    reasons = {pair: s.reason for pair, s in pairs.items() if not s.judge}
    assert reasons == {
        ("base", "refusal"): "decided deterministically: abstain has no claims to judge",
        ("base", "denied"): "decided deterministically: permission_denied has no claims to judge",
        ("base", "error"): "trace_error: retriever timeout",
        ("base", "empty"): "empty answer",
        ("base", "blank"): "decided deterministically: abstain has no claims to judge",
        ("base", "ghost"): "missing_text: no text for context chunk(s) ghost#9; they are not in the corpus "
                           f"{dataset.sources['corpus']}: give the chunks' text with --corpus FILE (one JSON line "
                           "per chunk: chunk_id and text), or inline as context_chunks[].text",
    }
    assert {pair for pair, s in pairs.items() if s.judge} == {
        ("base", "ok"), ("cand", "ok"), ("base", "inline"), ("base", "failing"), ("cand", "failing"),
        ("cand", "untraced")}
    assert all((s.item is None) == (not s.judge) for s in selections)
    assert skip_counts(selections) == {"decided deterministically": 3, "trace_error": 1, "empty answer": 1,
                                       "missing_text": 1}


def test_judge_items_carry_what_the_judge_needs(mixed: tuple[Dataset, MetricsRun]) -> None:
    dataset, metrics = mixed
    pairs = by_pair(select_cases(dataset, metrics))
    ok = pairs[("base", "ok")].item
    assert ok.case_id == "ok" and ok.config_id == "base"
    assert ok.question == "Question ok?" and ok.expected_answer == "answer ok"
    assert list(ok.contexts) == [("leave#1", "Staff get 15 days of annual leave."), ("leave#2", "Up to 5 days carry over.")]
    assert list(ok.citations) == ["leave#1"] and ok.answer == "You get 15 days [leave#1]."
    inline = pairs[("base", "inline")].item
    assert list(inline.contexts) == [("leave#1", "Staff get 15 days of annual leave."), ("extra#1", "Inline text.")]


def base_and_cand(tmp_path: Path):
    """Five cases (one failing must_contain) in two configs; the candidate changes c1's answer and
    c2's context order."""
    cases = [case(f"c{i}", **GOOD) for i in range(4)] + [case("bad", **{**GOOD, "must_contain": ["22 days"]})]
    traces = [trace(f"c{i}") for i in range(4)] + [trace("bad")]
    traces += [trace("c0", "cand"), trace("c1", "cand", answer="You get 15 days, really [leave#1]."),
               trace("c2", "cand", context_chunks=["leave#2", "leave#1"]), trace("c3", "cand"), trace("bad", "cand")]
    return build(tmp_path, cases, traces)


def test_priority_deterministic_failures_then_changes_then_the_rest(tmp_path: Path) -> None:
    dataset, metrics = base_and_cand(tmp_path)
    chosen = [s for s in select_cases(dataset, metrics) if s.judge]
    order = [(s.config_id, s.case_id, s.priority) for s in chosen]
    assert order == [("base", "bad", 0), ("cand", "bad", 0), ("cand", "c1", 1), ("cand", "c2", 1),
                     ("base", "c0", 2), ("base", "c1", 2), ("base", "c2", 2), ("base", "c3", 2),
                     ("cand", "c0", 2), ("cand", "c3", 2)]
    bad = next(s for s in chosen if s.case_id == "bad")
    assert bad.reason == "deterministic failure: must_contain"
    assert next(s for s in chosen if s.case_id == "c1" and s.config_id == "cand").reason == \
        "answer or context changed since base"
    # another baseline changes what "changed" means
    alt = [s for s in select_cases(dataset, metrics, SelectSettings(baseline_config="cand")) if s.judge]
    assert {(s.config_id, s.case_id) for s in alt if s.priority == 1} == {("base", "c1"), ("base", "c2")}


def test_max_cases_keeps_deterministic_failures_first(tmp_path: Path) -> None:
    cases = [case(f"c{i}", **GOOD) for i in range(5)] + [case("bad", **{**GOOD, "forbidden": ["15 days"]})]
    traces = [trace(c["id"]) for c in cases]
    dataset, metrics = build(tmp_path, cases, traces)
    selections = select_cases(dataset, metrics, SelectSettings(max_cases=2))
    assert len(selections) == 6  # nothing disappears
    chosen = [s.case_id for s in selections if s.judge]
    assert chosen == ["bad", "c0"]
    cut = [s for s in selections if not s.judge]
    assert [s.case_id for s in cut] == ["c1", "c2", "c3", "c4"]
    assert all(s.reason == "budget: max_cases 2" and s.item is None for s in cut)
    assert skip_counts(selections) == {"budget": 4}
    # deterministic: the same call gives the same answer
    assert select_cases(dataset, metrics, SelectSettings(max_cases=2)) == selections
    assert [s.case_id for s in select_cases(dataset, metrics, SelectSettings(max_cases=0))
            if not s.judge] == ["bad", "c0", "c1", "c2", "c3", "c4"]


def test_smoke_mode_samples_per_tag(tmp_path: Path) -> None:
    cases = [case(f"{tag}{i}", **{**GOOD, "tags": [tag]}) for tag in ("hr", "it", "sla") for i in range(5)]
    cases += [case(f"none{i}", **{**GOOD, "tags": []}) for i in range(3)]
    dataset, metrics = build(tmp_path, cases, [trace(c["id"]) for c in cases])
    selections = select_cases(dataset, metrics, SelectSettings(smoke=True, smoke_per_tag=2, seed=1))
    assert len(selections) == len(cases)
    judged = [s.case_id for s in selections if s.judge]
    per_tag = Counter(dataset.cases[cid].tags[0] if dataset.cases[cid].tags else "(untagged)" for cid in judged)
    assert per_tag == {"hr": 2, "it": 2, "sla": 2, "(untagged)": 2}
    assert all(s.reason == "smoke: outside the stratified sample" for s in selections if not s.judge)
    again = select_cases(dataset, metrics, SelectSettings(smoke=True, smoke_per_tag=2, seed=1))
    assert [s.case_id for s in again if s.judge] == judged
    other_seeds = {tuple(s.case_id for s in select_cases(dataset, metrics, SelectSettings(smoke=True, seed=k))
                         if s.judge) for k in range(2, 8)}
    assert len(other_seeds) > 1  # the seed picks the sample


def test_smoke_skips_do_not_hide_other_reasons(tmp_path: Path) -> None:
    cases = [case("r", **GOOD)]
    dataset, metrics = build(tmp_path, cases, [trace("r", answer="I don't know based on the provided documents.")])
    (only,) = select_cases(dataset, metrics, SelectSettings(smoke=True))
    assert not only.judge and only.reason.startswith("decided deterministically")


def test_bundled_example_every_pair_decided() -> None:
    config = api.resolve_config(ROOT / "examples" / "groundjudge.toml", environ={})
    dataset = api.load_inputs(config)
    metrics = evaluate_dataset(dataset, api.metric_settings(config))
    selections = select_cases(dataset, metrics)
    pairs = by_pair(selections)
    assert len(pairs) == sum(len(dataset.cases) - len(dataset.missing_trace[c]) for c in dataset.config_ids)
    assert all(s.reason for s in selections if not s.judge)
    # the planted deterministic failures come first
    chosen = [s for s in selections if s.judge]
    assert [s.priority for s in chosen] == sorted(s.priority for s in chosen)
    assert ("baseline", "q045") in {(s.config_id, s.case_id) for s in chosen if s.priority == 0}


def test_items_naming_the_same_chunk_share_its_text_pair():
    """Two configs' items that put the same corpus chunk in context hold one (id, text) pair."""
    from pathlib import Path

    from groundjudge.load.dataset import load_dataset
    from groundjudge.metrics.evaluate import evaluate_dataset
    from groundjudge.select import select_cases

    examples = Path(__file__).resolve().parent.parent / "examples"
    ds = load_dataset(examples / "golden.jsonl", [examples / "traces" / "baseline.jsonl",
                                                  examples / "traces" / "candidate.jsonl"], examples / "corpus.jsonl")
    items = [s.item for s in select_cases(ds, evaluate_dataset(ds)) if s.item is not None]
    by_id: dict[str, tuple[str, str]] = {}
    for item in items:
        for pair in item.contexts:
            assert by_id.setdefault(pair[0], pair) == pair
    assert all(pair is by_id[pair[0]] for item in items for pair in item.contexts)
    assert len(by_id) < sum(len(item.contexts) for item in items)


def test_the_gated_configs_come_first_taking_turns_each_in_its_priority_order(tmp_path: Path) -> None:
    dataset, metrics = base_and_cand(tmp_path)

    def order(**settings):
        return [(s.config_id, s.case_id) for s in select_cases(dataset, metrics, SelectSettings(**settings)) if s.judge]

    assert order(gated_configs=("cand",)) == [
        ("cand", "bad"), ("cand", "c1"), ("cand", "c2"), ("cand", "c0"), ("cand", "c3"),
        ("base", "bad"), ("base", "c0"), ("base", "c1"), ("base", "c2"), ("base", "c3")]
    # one pair of each config per turn (the more informative first within a turn)
    assert order(gated_configs=("base", "cand"))[:6] == [
        ("base", "bad"), ("cand", "bad"), ("cand", "c1"), ("base", "c0"), ("cand", "c2"), ("base", "c1")]
    budget = select_cases(dataset, metrics, SelectSettings(gated_configs=("cand",), max_cases=3))
    assert [(s.config_id, s.case_id) for s in budget if s.judge] == [("cand", "bad"), ("cand", "c1"), ("cand", "c2")]


def test_a_trace_whose_source_did_not_record_the_passages_or_answer_is_not_judged(tmp_path: Path) -> None:
    """Claims with no passages are not sent: the judge would find every claim unsupported by
    nothing, a verdict about the format, not the answer. A context recorded empty still goes."""
    no_prompt = "the wfgy format records no context chunks"
    dataset, metrics = build(tmp_path, [case("q1", **GOOD), case("q2", **GOOD), case("q3", **GOOD)], [
        trace("q1", context_chunks=[], not_recorded={"context_chunks": no_prompt}),
        trace("q2", answer=None, citations=[], not_recorded={"answer": "an index-only run", "citations": "idem"}),
        trace("q3", context_chunks=[]),
    ])
    decided = by_pair(select_cases(dataset, metrics))
    assert decided["base", "q1"].reason == f"no passages: {no_prompt}" and not decided["base", "q1"].judge
    assert decided["base", "q2"].reason == "not recorded: an index-only run" and not decided["base", "q2"].judge
    assert decided["base", "q3"].judge and decided["base", "q3"].item.contexts == ()
    assert skip_counts(list(decided.values())) == {"no passages": 1, "not recorded": 1}


def test_kb_eval_answers_go_to_no_judge_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from groundjudge.cli import main
    from tests.support.judge_replies import verdict_for_request
    from tests.support.openai_server import ScriptedOpenAIServer
    from tests.test_metrics_unrecorded import KB_GOLDEN, KB_NO_CONTEXT, KB_RESULTS

    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    golden, results = tmp_path / "golden.jsonl", tmp_path / "results_a.jsonl"
    golden.write_text(KB_GOLDEN)
    results.write_text(KB_RESULTS)
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        CliRunner().invoke(main, ["run", "--golden", str(golden), "--traces", str(results), "--judge-base-url",
                                  srv.base_url, "--judge-model", srv.model, "--cache-dir", str(tmp_path / "cache"),
                                  "--out", str(tmp_path / "out"), "--no-history", "--quiet"])
        calls = srv.call_count
    judge = json.loads((tmp_path / "out" / "report.json").read_text())["judge"]
    assert calls == 0 and judge["to_judge"] == 0
    assert judge["skip_reasons"] == {"no passages": 1, "decided deterministically": 1, "not recorded": 1}
    reasons = {cid: c["reason"] for cid, c in judge["per_config"]["run-a"]["cases"].items()}
    assert reasons["q1"] == f"no passages: {KB_NO_CONTEXT}"


def test_pairs_with_the_same_reason_hold_one_text_and_records_stay_frozen(tmp_path: Path) -> None:
    """Judged pairs that failed the same checks (or changed the same way) hold one reason text,
    equal to the one made for each; selections and judge items refuse every change."""
    failing = {**GOOD, "must_contain": ["22 days"]}
    cases = [case(f"f{n}", **failing) for n in range(3)] + [case(f"c{n}", **GOOD) for n in range(2)]
    traces = ([trace(f"f{n}") for n in range(3)] + [trace(f"f{n}", "cand") for n in range(3)]
              + [trace(f"c{n}") for n in range(2)]
              + [trace(f"c{n}", "cand", answer=f"Changed answer {n}: 15 days [leave#1].") for n in range(2)])
    dataset, metrics = build(tmp_path, cases, traces)
    pairs = by_pair(select_cases(dataset, metrics))
    failed = [pairs[(cfg, f"f{n}")] for cfg in ("base", "cand") for n in range(3)]
    assert {s.reason for s in failed} == {"deterministic failure: must_contain"}
    assert len({id(s.reason) for s in failed}) == 1
    changed = [pairs[("cand", f"c{n}")] for n in range(2)]
    assert [s.reason for s in changed] == ["answer or context changed since base"] * 2
    assert changed[0].reason is changed[1].reason
    chosen = pairs[("cand", "c0")]
    for record, name in ((chosen, "reason"), (chosen.item, "answer")):
        with pytest.raises(AttributeError, match="immutable|cannot assign"):  # frozen structs
            setattr(record, name, "x")
    for record in (chosen, chosen.item):  # slotted: no per-record dict to change or to pay for
        assert not hasattr(record, "__dict__")
