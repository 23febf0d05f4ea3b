"""The ``wfgy-chunking`` profile against WFGY's chunking page, on inputs written from the page's own
text (``tests/fixtures/wfgy_chunking_seed/``: its gold row and trace, and rows in their shape for
the content types it names), scored by the page's evaluator as reproduced in
``tests/support/wfgy_chunking_reference.py``: every figure groundjudge reports equals it.

Also: the ΔS zones ("Stable <= 0.45, transitional 0.40-0.60, risk >= 0.60") per question and per
type, the cited snippet's ΔS target as a gate ("ΔS(question, retrieved) <= 0.45 for the cited
snippet of each answered item"), the deltas against live for every figure ("Compare with the live
index as a baseline and record deltas") and the knobs the page's users set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.load.adapters.wfgy_chunking import ChunkingGold, ChunkingTrace, read_gold, read_traces
from groundjudge.load.json_stream import located_values
from groundjudge.profiles import wfgy_chunking as chunking
from groundjudge.profiles.wfgy_chunking import ChunkingSettings
from tests.support import wfgy_chunking_reference as ref

SEED = Path(__file__).resolve().parent / "fixtures" / "wfgy_chunking_seed"
GOLD, LOGS, LIVE = SEED / "gold.json", SEED / "logs.jsonl", SEED / "logs_live.jsonl"


def raw(path: Path) -> list[dict]:
    """The records of a file as plain dicts, read without groundjudge's models."""
    return [item.value for item in located_values(path.read_text(encoding="utf-8"))]


def close(ours, theirs):
    """Equal, up to the last bits of a float summed in another order."""
    if isinstance(theirs, dict):
        assert set(theirs) <= set(ours), set(theirs) - set(ours)
        for key, value in theirs.items():
            close(ours[key], value)
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    else:
        assert ours == theirs


def ours(gold_path=GOLD, logs_path=LOGS, live_path=LIVE, **options):
    gold = [g for _, g in read_gold(gold_path)]
    live = [t for _, t in read_traces(live_path)] if live_path else None
    return chunking.report(gold, [t for _, t in read_traces(logs_path)], live_traces=live, embedder=None, **options)


# --- the page's evaluator ----------------------------------------------------------------------

def test_one_run_per_question_gives_the_pages_evaluator_figures(tmp_path):
    # The evaluator reads logs[qid]: one trace per question. Take each question's first run.
    first: dict[str, dict] = {}
    for trace in raw(LOGS):
        first.setdefault(trace["qid"], trace)
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in first.values()), encoding="utf-8")
    theirs = ref.score_run(raw(GOLD), first, k=5)
    for policy in ("first", "any"):  # every answer cites one block: both policies read the same
        mine = ours(logs_path=logs, live_path=None, citation_policy=policy)
        close({"P@k": mine["P@5"], "R@k": mine["R@5"], **mine}, theirs)
    # By hand: P@5 (2/3 + 1/3 + 1/3 + 1/2 + 2/3 + 0) / 6; R@5 five of six; Q-0163 cites nothing
    # and Q-0188's citation misses its gold span; ΔS medians 0.33 0.50 0.38 0.54 0.35 0.66 and
    # p90s 0.53 0.588 0.452 0.636 0.51 0.692, whose medians are 0.44 and 0.559.
    assert theirs == {"P@k": pytest.approx(2.5 / 6), "R@k": pytest.approx(5 / 6), "coverage": pytest.approx(5 / 6),
                      "citation_accuracy": pytest.approx(4 / 6), "ΔS_med": pytest.approx(0.44),
                      "ΔS_p90": pytest.approx(0.559)}


def test_the_seed_run_from_the_command_line_equals_the_reference(tmp_path):
    """The README's command on the seed files (gold.json an array, logs pretty-printed, the live
    logs JSON Lines): every figure of the profile's JSON equals the reference scorer's."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--profile", "wfgy-chunking", "--golden", str(GOLD),
                                       "--traces", str(LOGS), "--live", str(LIVE), "--out", str(out), "--quiet"])
    mine = json.loads((out / "profile-wfgy-chunking.json").read_text(encoding="utf-8"))
    shadow, live = ref.reference(raw(GOLD), raw(LOGS)), ref.reference(raw(GOLD), raw(LIVE))
    figures = {key: shadow[key] for key in [*(f"P@{k}" for k in ref.KS), *(f"R@{k}" for k in ref.KS), "coverage",
                                             "citation_accuracy", "anchor_hit", "ΔS_med", "ΔS_p90", "cited_ΔS",
                                             "ΔS_by_qid", "bad_qids", "by_type", "λ_triplets", "λ_convergent"]}
    close(mine, figures)
    assert mine["bad_qids"] == ["Q-0163", "Q-0188"]  # no citation; a cited snippet at ΔS 0.62
    close({name: row["delta"] for name, row in mine["vs_live"]["metrics"].items()}, ref.deltas(shadow, live))
    gates = {g["gate"]: g["status"] for g in mine["gates"]}
    assert gates == {"coverage": "pass", "citation_accuracy": "fail", "ΔS_med": "fail", "ΔS_p90": "pass",
                     "recall@5_drop_points": "pass", "λ_convergent": "fail", "cited_ΔS": "fail"}
    assert shadow["cited_target_holds"] is False and mine["pass"] is False and result.exit_code == 1
    assert mine["recall@5_vs_live"]["drop_points"] == pytest.approx((live["R@5"] - shadow["R@5"]) * 100)
    text = (out / "profile-wfgy-chunking.md").read_text(encoding="utf-8")
    assert "## Shadow vs live (delta = shadow - live)" in text
    assert "| citation_accuracy | 0.6111 | 0.8333 | -0.2222 | worse |" in text
    assert "| Q-0188 |" in text and "stable | transitional | risk" in text


# --- ΔS zones ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, zones", [
    (0.31, ["stable"]), (0.40, ["stable", "transitional"]), (0.45, ["stable", "transitional"]),
    (0.46, ["transitional"]), (0.59, ["transitional"]), (0.60, ["transitional", "risk"]), (0.62, ["risk"]),
])
def test_zones_as_the_page_bounds_them(value, zones):
    # "Stable <= 0.45, transitional 0.40-0.60, risk >= 0.60": the ranges overlap and both count.
    assert chunking.zones_of(value) == zones == ref.zones_of(value)


def test_zones_per_question_and_per_type_count_top_k_items_and_cited_snippets():
    result = ours()
    q137 = result["ΔS_by_qid"]["Q-0137"]  # ΔS 0.28 0.33 0.58 | 0.31 0.59 | 0.52 0.40
    assert q137["zones"] == {"stable": 4, "transitional": 4, "risk": 0}
    assert q137["cited"]["zones"] == {"stable": 3, "transitional": 1, "risk": 0}  # 0.28, 0.31, 0.40
    assert result["ΔS_by_qid"]["Q-0188"]["cited"] | {"zones": None} == {
        "answered": 1, "unknown": 0, "n": 1, "median": 0.62, "p90": 0.62, "max": 0.62, "above_0.60": 1, "zones": None}
    assert result["by_type"]["code"]["ΔS"]["zones"] == {"stable": 1, "transitional": 2, "risk": 1}
    assert result["by_type"]["figure"]["ΔS"]["zones"] == {"stable": 1, "transitional": 1, "risk": 0}


# --- the cited snippet's ΔS target -------------------------------------------------------------

def _g():
    return ChunkingGold.model_validate({"qid": "Q", "paraphrases": ["q1", "q2", "q3"], "relevant": ["S.1.p.B1"],
                                        "anchor_section": "S.1"})


def _t(cites, delta_s=(0.2, 0.3), qid="Q", ids=("S.1.p.B1", "S.1.p.B2")):
    return ChunkingTrace.model_validate({"qid": qid, "query": "q1", "topk": [{"id": i} for i in ids],
                                         "ΔS": list(delta_s) if delta_s is not None else None,
                                         "answer_citations": [{"id": c} for c in cites]})


def cited_gate(result):
    return next(g for g in result["gates"] if g["gate"] == "cited_ΔS")


def test_a_cited_snippet_at_exactly_045_holds_the_target():
    result = chunking.report([_g()], [_t(["S.1.p.B1"], (0.45, 0.9))])
    assert cited_gate(result) | {"reason": None} == {"gate": "cited_ΔS", "value": 0.45, "op": "<=", "threshold": 0.45,
                                                     "status": "pass", "reason": None}
    assert cited_gate(chunking.report([_g()], [_t(["S.1.p.B1"], (0.46, 0.1))]))["status"] == "fail"


def test_the_cited_snippet_is_the_answers_first_citation():
    # "Log ΔS for the chosen citation"; the evaluator reads ans[0]. The second citation's ΔS (0.9) is not it.
    result = chunking.report([_g()], [_t(["S.1.p.B1", "S.1.p.B2"], (0.3, 0.9))])
    assert result["cited_ΔS"]["max"] == 0.3 and cited_gate(result)["status"] == "pass"


def test_a_cited_snippet_without_a_delta_s_leaves_the_target_unevaluated_and_not_held():
    # The first citation was never retrieved: no ΔS is logged for it. Another run holds the target.
    runs = [_t(["S.9.p.B9"]), _t(["S.1.p.B1"], (0.2, 0.3))]
    result = chunking.report([_g()], runs)
    gate = cited_gate(result)
    assert gate["status"] == "skipped" and gate["value"] is None
    assert gate["reason"].startswith("1 of 2 answered runs have no ΔS for the cited snippet")
    assert "cited_ΔS" in result["gates_not_evaluated"] and result["pass"] is False
    # a known value above the target fails it, whatever the unknown ones would be
    failing = chunking.report([_g()], [_t(["S.9.p.B9"]), _t(["S.1.p.B1"], (0.5, 0.3))])
    assert cited_gate(failing)["status"] == "fail" and cited_gate(failing)["reason"] == \
        "1 of 2 answered runs without a cited ΔS"


def test_no_answered_item_leaves_the_target_unevaluated():
    gate = cited_gate(chunking.report([_g()], [_t([])]))
    assert gate["status"] == "skipped" and gate["reason"] == "no answered item: no run cites a block"


def test_all_seven_gates_holding_is_eligible():
    g = ChunkingGold.model_validate({"qid": "Q", "paraphrases": ["q1", "q2", "q3"], "relevant": ["S.1.p.B1"],
                                     "anchor_section": "S.1", "gold_offsets": {"S.1.p.B1": [0, 100]}})
    runs = [ChunkingTrace.model_validate({"qid": "Q", "query": q, "topk": [{"id": "S.1.p.B1", "type": "prose"}],
                                          "ΔS": [0.3], "λ_state": "→",
                                          "answer_citations": [{"id": "S.1.p.B1", "offsets": [0, 100]}]})
            for q in ("q1", "q2", "q3")]
    result = chunking.report([g], runs, live_traces=runs[:1])
    assert [x["status"] for x in result["gates"]] == ["pass"] * 7 and result["pass"] is True
    assert "**Eligible for canary**" in chunking.render_markdown(result)


# --- λ over paraphrases and seeds ------------------------------------------------------------

def test_lambda_on_three_paraphrases_and_two_seeds_when_asked():
    # "λ remains convergent on three paraphrases and two seeds" (acceptance target); the canary
    # gate asks for paraphrase triplets only, which stays the default.
    runs = [{"qid": "Q", "query": q, "seed": seed, "topk": [{"id": "S.1.p.B1"}], "λ_state": "→"}
            for q in ("q1", "q2", "q3") for seed in (1, 2)]
    traces = [ChunkingTrace.model_validate(r) for r in runs]
    assert chunking.report([_g()], traces, seeds=2)["λ_convergent"] == 1.0
    one_seed_short = traces[:-1]  # q3 ran with seed 1 only
    result = chunking.report([_g()], one_seed_short, seeds=2)
    assert result["λ_triplets"] == 0 == ref.reference([_g().model_dump()], runs[:-1], seeds=2)["λ_triplets"]
    gate = next(g for g in result["gates"] if g["gate"] == "λ_convergent")
    assert gate["status"] == "skipped" and "each run with 2 seeds" in gate["reason"]
    assert chunking.report([_g()], one_seed_short)["λ_triplets"] == 1  # the default reads no seed
    assert ref.reference(raw(GOLD), raw(LOGS), seeds=2)["λ_triplets"] == ours(seeds=2)["λ_triplets"] == 0


# --- deltas against live -----------------------------------------------------------------------

def test_every_figure_is_compared_with_live_and_says_which_way_is_better():
    result = ours()
    metrics = result["vs_live"]["metrics"]
    assert set(metrics) == {*(f"P@{k}" for k in ref.KS), *(f"R@{k}" for k in ref.KS), "coverage",
                            "citation_accuracy", "anchor_hit", "anchor_proximity", "ΔS_med", "ΔS_p90",
                            "cited_ΔS_med", "cited_ΔS_p90", "paraphrase_agreement@5", "λ_convergent"}
    assert metrics["R@5"]["change"] == "better" and metrics["ΔS_med"]["change"] == "better"  # 0.435 < 0.4825
    assert metrics["ΔS_p90"]["change"] == "worse" and metrics["P@5"]["change"] == "same"
    assert metrics["λ_convergent"] == {"shadow": 0.5, "live": None, "delta": None, "better": "higher", "change": None}
    code = result["vs_live"]["by_type"]["code"]
    assert code["retrieved"] == {"shadow": 3, "live": 2}
    assert code["precision"]["delta"] == pytest.approx(1 / 3 - 1 / 2) and code["precision"]["change"] == "worse"
    assert result["vs_live"]["live_runs"] == 6
    assert ours(live_path=None)["vs_live"] is None


# --- knobs -------------------------------------------------------------------------------------

def test_the_knobs_default_to_the_pages_values():
    options = ChunkingSettings().report_options()
    assert options["ks"] == (1, 3, 5, 10) and options["k"] == 5 and options["window"] == 30
    assert options["zones"] == chunking.DELTA_S_ZONES and options["flag_above"] == 0.60
    assert options["paraphrases"] == 3 and options["seeds"] == 1 and options["recall_k"] == 5
    assert options["gates"] == {}
    assert ours(**options) == ours()


def test_each_knob_reaches_the_report():
    settings = ChunkingSettings(ks=[5, 10], top_k=2, recall_k=10, window=10, citation_policy="first",
                                paraphrases=2, flag_above=0.44, stable_max=0.40, transitional_min=0.35,
                                transitional_max=0.65, risk_min=0.65,
                                gates="coverage=0.80 delta_s_p90=0.60 cited_delta_s=0.65 recall_drop_points=1")
    result = ours(**settings.report_options())
    shadow = ref.reference(raw(GOLD), raw(LOGS), k=2, ks=(5, 10), flag_above=0.44, paraphrases=2)
    assert [key for key in result if key.startswith(("P@", "R@"))] == ["P@5", "P@10", "R@5", "R@10"]
    assert result["ΔS_med"] == pytest.approx(shadow["ΔS_med"])  # over the top 2
    assert result["ΔS_by_qid"]["Q-0137"]["zones"] == {"stable": 4, "transitional": 3, "risk": 0}
    # cited snippets above 0.44: Q-0140 (0.45), Q-0171 (0.50 in one run), Q-0188 (0.62)
    assert result["bad_qids"] == shadow["bad_qids"] == ["Q-0140", "Q-0163", "Q-0171", "Q-0188"]
    assert result["λ_triplets"] == 2  # two distinct queries make a triplet now: still Q-0137 and Q-0171
    gates = {g["gate"]: (g["status"], g["threshold"]) for g in result["gates"]}
    assert gates["coverage"] == ("fail", 0.80) and gates["ΔS_p90"][1] == 0.60 and gates["cited_ΔS"] == ("pass", 0.65)
    assert gates["recall@10_drop_points"] == ("pass", 1.0) and "recall@10_vs_live" in result
    assert result["window"] == 10 and result["citation_policy"] == "first"


@pytest.mark.parametrize("values, words", [
    ({"gates": "coverage=high"}, "not a number"),
    ({"gates": "recall=0.5"}, "unknown gate 'recall'"),
    ({"gates": "coverage"}, "is not name=value"),
    ({"gates": {"coverage": float("nan")}}, "not a finite number"),
    ({"gates": "recall@10_drop_points=1"}, "set recall_k = 10"),
    ({"ks": [0]}, "at least 1"),
    ({"ks": []}, "at least 1 item"),
    ({"top_k": 0}, "greater than or equal to 1"),
    ({"window": -1}, "greater than or equal to 0"),
    ({"citation_policy": "last"}, "'any' or 'first'"),
    ({"paraphrases": 1}, "greater than or equal to 2"),
    ({"seeds": 0}, "greater than or equal to 1"),
    ({"flag_above": float("inf")}, "finite number"),
    ({"transitional_min": 0.7}, "above transitional_max"),
    ({"k": 5}, "Extra inputs are not permitted"),
])
def test_a_knob_refuses_what_cannot_be_evaluated(values, words):
    with pytest.raises(ValueError, match=None) as caught:
        ChunkingSettings.model_validate(values)
    assert words in str(caught.value)


def test_the_profile_reads_its_files_with_the_knobs_given():
    from groundjudge.profiles import get_profile, run_profile

    assert get_profile("wfgy-chunking").settings is ChunkingSettings
    settings = ChunkingSettings(ks=[5], gates="coverage=0.9")
    result = run_profile("wfgy-chunking", GOLD, [LOGS], [LIVE], settings)
    assert result.report["ks"] == [5] and result.passed is False
    assert next(g for g in result.report["gates"] if g["gate"] == "coverage")["threshold"] == 0.9
    assert run_profile("wfgy-chunking", GOLD, [LOGS], [LIVE]).report["ks"] == [1, 3, 5, 10]


# --- knobs from the command line and the config file -----------------------------------------

def metrics(tmp_path, *args):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--golden", str(GOLD), "--traces", str(LOGS), "--live", str(LIVE),
                                       "--out", str(out), "--quiet", *args])
    own = out / "profile-wfgy-chunking.json"
    return result, json.loads(own.read_text(encoding="utf-8")) if own.exists() else None


def test_knobs_reach_the_profile_from_the_command_line(tmp_path):
    result, own = metrics(tmp_path, "--profile", "wfgy-chunking", "--k", "5", "--k", "10", "--top-k", "2",
                          "--window", "0", "--citation-policy", "first", "--paraphrases", "2", "--seeds", "2",
                          "--flag-above", "0.44",
                          "--stable-max", "0.40", "--gates", "coverage=0.70", "cited_delta_s=0.65",
                          "recall_drop_points=1")
    assert result.exit_code == 1, result.output
    assert own["ks"] == [5, 10] and own["k"] == 2 and own["window"] == 0 and own["citation_policy"] == "first"
    assert own["paraphrases"] == 2 and own["ΔS_zones"]["stable"] == [None, 0.40]
    assert own["seeds"] == 2 and own["λ_triplets"] == 0  # no question ran two paraphrases with two seeds each
    assert own["bad_qids"] == ["Q-0140", "Q-0163", "Q-0171", "Q-0188"]
    # a window of 0: Q-0140's citation, 30 bytes past its gold span, no longer matches
    assert own["citation_accuracy"] == pytest.approx(ref.reference(raw(GOLD), raw(LOGS))["citation_accuracy"] - 1 / 6)
    gates = {g["gate"]: (g["status"], g["threshold"]) for g in own["gates"]}
    assert gates["cited_ΔS"] == ("pass", 0.65) and gates["recall@5_drop_points"] == ("pass", 1.0)
    assert gates["coverage"] == ("pass", 0.70)
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert doc["settings"]["ks"] == [5, 10]  # --k is also the native cut-offs' flag: one flag sets both


def test_knobs_reach_the_profile_from_the_config_file_and_flags_win(tmp_path):
    config = tmp_path / "groundjudge.toml"
    config.write_text('[profile.wfgy-chunking]\nks = [5]\nrecall_k = 3\ntop_k = 2\n'
                      '[profile.wfgy-chunking.gates]\ncoverage = 0.9\ncited_delta_s = 0.65\n', encoding="utf-8")
    _, own = metrics(tmp_path, "--config", str(config), "--profile", "wfgy-chunking")
    gates = {g["gate"]: (g["status"], g["threshold"]) for g in own["gates"]}
    assert own["ks"] == [5] and own["k"] == 2 and own["recall_k"] == 3 and "recall@3_vs_live" in own
    assert gates["coverage"] == ("fail", 0.9) and gates["cited_ΔS"] == ("pass", 0.65)
    assert "recall@3_drop_points" in gates
    _, own = metrics(tmp_path, "--config", str(config), "--profile", "wfgy-chunking", "--k", "1", "--top-k", "5")
    assert own["ks"] == [1] and own["k"] == 5 and own["recall_k"] == 3


@pytest.mark.parametrize("args, toml, message", [
    (["--top-k", "0"], None, "command line: --top-k: Input should be greater than or equal to 1"),
    (["--gates", "recall=1"], None, "command line: --gates: unknown gate 'recall'"),
    (["--flag-above", "nan"], None, "command line: --flag-above: Input should be a finite number"),
    ([], "[profile.wfgy-chunking.gates]\ncoverage = inf\n",
     "profile.wfgy-chunking.gates: gate coverage: inf is not a finite number"),
    ([], "[profile.wfgy-chunking]\ntransitional_min = 0.7\n",
     "profile.wfgy-chunking: transitional_min 0.7 is above transitional_max 0.6"),
    ([], "[profile.wfgy-chunking]\nk = 5\n", "profile.wfgy-chunking.k: unknown setting of the wfgy-chunking profile"),
])
def test_a_knob_that_cannot_be_evaluated_is_exit_2_before_anything_is_written(tmp_path, args, toml, message):
    extra = []
    if toml is not None:
        (tmp_path / "c.toml").write_text(toml, encoding="utf-8")
        extra = ["--config", str(tmp_path / "c.toml")]
    result, own = metrics(tmp_path, "--profile", "wfgy-chunking", *extra, *args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert own is None and not (tmp_path / "out").exists()


def test_a_knob_without_its_profile_is_an_input_error(tmp_path):
    result, _ = metrics(tmp_path, "--stable-max", "0.4")
    assert result.exit_code == 2
    assert "--stable-max: a setting of the wfgy-chunking profile: add --profile wfgy-chunking" in result.stderr
