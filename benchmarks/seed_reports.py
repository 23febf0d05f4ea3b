"""Each seed system's own report beside groundjudge's, on the inputs the seed tests write from
the seeds' text (WFGY grounded QA, WFGY chunking, kb-eval, the day 39 runner).

Run from the repository root:

    .venv/bin/python benchmarks/seed_reports.py

For each of the four systems it runs `groundjudge metrics --profile NAME` (in process, through
click's CliRunner, exactly as the tests do) on the seed inputs, runs the reference scorer
reproduced from the seed's definitions (tests/support/*_reference.py) on the same inputs, and
prints one table per system: figure | seed reference | groundjudge | equal?

Values are shown to 4 decimals; they are compared at full precision (floats within 1e-12,
which only absorbs sums taken in another order; everything else exactly). Nothing is written
outside a temporary folder. The exit code is 0 when every figure is equal, 1 otherwise.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
if not (ROOT / "tests" / "support" / "wfgy_reference.py").exists():
    sys.exit("run this from the groundjudge repository root")
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner

from groundjudge.cli import main

TOTAL = {"rows": 0, "unequal": []}


# --- comparing and printing -------------------------------------------------------------------

def same(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return ours is theirs
    if isinstance(theirs, float) or isinstance(ours, float):
        if ours is None or theirs is None:
            return ours is theirs
        return math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and set(ours) == set(theirs) and all(same(ours[k], theirs[k]) for k in theirs)
    if isinstance(theirs, (list, tuple)):
        return isinstance(ours, (list, tuple)) and len(ours) == len(theirs) and all(
            same(a, b) for a, b in zip(ours, theirs))
    return ours == theirs


def show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {show(v)}" for k, v in value.items()) or "{}"
    if isinstance(value, (list, tuple)):
        return " / ".join(show(v) for v in value) if value else "[]"
    return str(value)


class Table:
    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, figure: str, theirs: Any, ours: Any) -> None:
        equal = same(ours, theirs)
        self.rows.append((figure, show(theirs), show(ours), "yes" if equal else "NO"))
        TOTAL["rows"] += 1
        if not equal:
            TOTAL["unequal"].append(f"{self.title}: {figure}")

    def add_summary(self, figure: str, theirs: str, ours: str, equal: bool) -> None:
        """A row over many values, shown by count; ``equal`` compares every one of them."""
        self.rows.append((figure, theirs, ours, "yes" if equal else "NO"))
        TOTAL["rows"] += 1
        if not equal:
            TOTAL["unequal"].append(f"{self.title}: {figure}")

    def print(self) -> None:
        print(f"\n### {self.title}\n")
        print("| figure | seed reference | groundjudge | equal? |")
        print("|---|---|---|---|")
        for row in self.rows:
            print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")


def cli(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def command(*args: str | Path, names: dict[Path, str]) -> str:
    """The command line as a user would type it, the temporary paths shown by their file names."""
    def short(a: str | Path) -> str:
        text = str(a)
        for path, name in names.items():
            text = text.replace(str(path), name)
        return text
    return "groundjudge " + " ".join(short(a) for a in args)


# --- WFGY grounded QA (seeds 001, 003) --------------------------------------------------------

def wfgy(tmp: Path) -> None:
    from groundjudge.load.adapters.wfgy import WfgyGold, WfgyTrace
    from groundjudge.profiles import wfgy as profile
    from tests.support import wfgy_reference as ref
    from tests.test_profile_wfgy import SEED_GOLD, SEED_TRACE

    def lines(text: str) -> list[dict]:
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def parsed(text: str, model: Any) -> list[Any]:
        return [model.model_validate(row) for row in lines(text)]

    def ours_of(result: dict) -> dict:
        keys = ("answered", "refused", "answerable", "unanswerable", "precision", "chr", "under_refusal",
                "over_refusal", "recall@k", "k", "pass", "chr@k")
        return {**{key: result[key] for key in keys}, "scu_violations": result["scu"]["violations"]}

    folder = tmp / "wfgy"
    folder.mkdir()
    gold, trace = folder / "gold.jsonl", folder / "trace.jsonl"
    gold.write_text(SEED_GOLD)
    trace.write_text(SEED_TRACE)
    gates = "precision=0.5 chr=0.5 under_refusal=0.4 over_refusal=0.2"
    args = ["metrics", "--profile", "wfgy", "--golden", gold, "--traces", trace, "--k", "10", "--gates",
            *gates.split(), "--scu_enforced", "--out", folder / "out", "--quiet"]
    result = cli(*args)
    own = json.loads((folder / "out" / "profile-wfgy.json").read_text())
    theirs = ref.score(lines(SEED_GOLD), lines(SEED_TRACE), k=10, gates=gates, scu_enforced=True)

    table = Table("WFGY grounded QA, `--profile wfgy`")
    print("\n## WFGY grounded QA (seeds 001, 003)\n\ninputs: the 13 gold lines and 14 trace lines of "
          "tests/test_profile_wfgy.py (SEED_GOLD, SEED_TRACE)\n\ncommand:\n\n    "
          + command(*args, names={gold: "gold.jsonl", trace: "trace.jsonl", folder / "out": "out"})
          + f"\n\nreference: wfgy_reference.score(gold, trace, k=10, gates={gates!r}, scu_enforced=True)")
    mine = ours_of(own)
    for key in theirs:
        table.add(key, theirs[key], mine[key])
    table.add("gates as read", ref.gate_dict(gates) | {"scu": "0"},
              {("scu" if k == "scu_violations" else k): v for k, v in own["gates"].items()})
    table.add("SCU enforced", True, own["scu"]["enforced"])
    table.add("exit code (1 = gates fail)", 0 if theirs["pass"] else 1, result.exit_code)

    # every combination the seed test checks, through the profile function
    combos = equal = 0
    for k in (1, 2, 5, 10):
        for spec in ("precision=0.80,chr=0.75,under=0.05,over=0.10",
                     "precision=0.5 chr=0.5 under_refusal=0.4 over_refusal=0.2", "precision=0.3,chr=0.6"):
            for scu in (False, True):
                combos += 1
                expected = ref.score(lines(SEED_GOLD), lines(SEED_TRACE), k=k, gates=spec, scu_enforced=scu)
                got = profile.report(parsed(SEED_GOLD, WfgyGold), parsed(SEED_TRACE, WfgyTrace), k=k, gates=spec,
                                     scu_enforced=scu)
                equal += same(ours_of(got), expected)
    table.add_summary("k 1, 2, 5, 10 x 3 gate specs x SCU off/on (profile function): reports with all 13 "
                      "figures equal", f"{combos} reports", f"{equal} of {combos}", equal == combos)

    # without knobs: WFGY's defaults
    cli("metrics", "--profile", "wfgy", "--golden", gold, "--traces", trace, "--out", folder / "plain", "--quiet")
    plain = json.loads((folder / "plain" / "profile-wfgy.json").read_text())
    default = ref.score(lines(SEED_GOLD), lines(SEED_TRACE))
    table.add_summary("no knobs (WFGY's defaults): k; the 13 figures", f"k {default['k']}; 13 figures",
                      f"k {plain['k']}; {sum(same(ours_of(plain)[key], v) for key, v in default.items())} equal",
                      same(ours_of(plain), default))
    for key in ("precision", "recall@k", "chr@k"):
        table.add(f"no knobs: {key}", default[key], plain[key])

    # the refusal edge set: A0002 "not in context" and A0004 "Not in context"
    keep = ('"A0002"', '"A0004"')
    edge_gold = "".join(line + "\n" for line in SEED_GOLD.splitlines() if any(q in line for q in keep))
    edge_trace = "".join(line + "\n" for line in SEED_TRACE.splitlines() if any(q in line for q in keep))
    (folder / "edge_gold.jsonl").write_text(edge_gold)
    (folder / "edge_trace.jsonl").write_text(edge_trace)
    cli("metrics", "--profile", "wfgy", "--golden", folder / "edge_gold.jsonl", "--traces",
        folder / "edge_trace.jsonl", "--out", folder / "edge", "--quiet")
    edge = json.loads((folder / "edge" / "profile-wfgy.json").read_text())
    native = json.loads((folder / "edge" / "metrics.json").read_text())["aggregate"]
    expected = ref.score(lines(edge_gold), lines(edge_trace))["under_refusal"]
    table.add("edge set A0002 + A0004 (\"Not in context\"): under_refusal, profile", expected, edge["under_refusal"])
    table.add("same edge set: under_refusal, native metrics", expected, native["under_refusal"]["value"])
    table.print()


# --- WFGY chunking (seed 000) -------------------------------------------------------------------

def wfgy_chunking(tmp: Path) -> None:
    from groundjudge.load.json_stream import located_values
    from tests.support import wfgy_chunking_reference as ref

    seed = ROOT / "tests" / "fixtures" / "wfgy_chunking_seed"
    gold, logs, live = seed / "gold.json", seed / "logs.jsonl", seed / "logs_live.jsonl"

    def raw(path: Path) -> list[dict]:
        return [item.value for item in located_values(path.read_text(encoding="utf-8"))]

    folder = tmp / "chunking"
    args = ["metrics", "--profile", "wfgy-chunking", "--golden", gold, "--traces", logs, "--live", live,
            "--out", folder / "out", "--quiet"]
    result = cli(*args)
    own = json.loads((folder / "out" / "profile-wfgy-chunking.json").read_text(encoding="utf-8"))
    shadow, on_live = ref.reference(raw(gold), raw(logs)), ref.reference(raw(gold), raw(live))

    print(f"\n## WFGY chunking (seed 000)\n\ninputs: tests/fixtures/wfgy_chunking_seed/ (gold.json a JSON array of "
          f"{len(raw(gold))} questions, logs.jsonl {len(raw(logs))} pretty-printed runs, logs_live.jsonl "
          f"{len(raw(live))} runs as JSON Lines)\n\ncommand:\n\n    "
          + command(*args, names={seed: "tests/fixtures/wfgy_chunking_seed", folder / "out": "out"})
          + "\n\nreference: wfgy_chunking_reference.reference(gold, logs) and (gold, logs_live); deltas() of the two")
    table = Table("WFGY chunking, `--profile wfgy-chunking`")
    ks = ref.KS
    table.add("P@1 / P@3 / P@5 / P@10", [shadow[f"P@{k}"] for k in ks], [own[f"P@{k}"] for k in ks])
    table.add("R@1 / R@3 / R@5 / R@10", [shadow[f"R@{k}"] for k in ks], [own[f"R@{k}"] for k in ks])
    for key in ("coverage", "citation_accuracy", "anchor_hit", "ΔS_med", "ΔS_p90"):
        table.add(key, shadow[key], own[key])
    cited = ("answered", "unknown", "n", "median", "p90", "max")
    table.add("cited snippet ΔS: " + " / ".join(cited), [shadow["cited_ΔS"][c] for c in cited],
              [own["cited_ΔS"][c] for c in cited])
    table.add("cited snippet ΔS zones", shadow["cited_ΔS"]["zones"], own["cited_ΔS"]["zones"])
    for qid, row in shadow["ΔS_by_qid"].items():
        mine = own["ΔS_by_qid"][qid]
        table.add(f"{qid}: ΔS zones (top-k items); cited median",
                  [row["zones"], row["cited"]["median"]], [mine["zones"], mine["cited"]["median"]])
    for kind, row in shadow["by_type"].items():
        mine = own["by_type"][kind]
        table.add(f"type {kind}: retrieved / relevant / precision; ΔS zones",
                  [row["retrieved"], row["relevant"], row["precision"], row["ΔS"]["zones"]],
                  [mine["retrieved"], mine["relevant"], mine["precision"], mine["ΔS"]["zones"]])
    table.add("flagged qids (coverage 0 or cited ΔS > 0.60)", shadow["bad_qids"], own["bad_qids"])
    table.add("λ triplets / λ convergent", [shadow["λ_triplets"], shadow["λ_convergent"]],
              [own["λ_triplets"], own["λ_convergent"]])
    gates = {g["gate"]: g["status"] for g in own["gates"]}
    holds = {"pass": True, "fail": False}.get(gates["cited_ΔS"])
    table.add("cited snippet ΔS <= 0.45 for every answered run (gate)", shadow["cited_target_holds"], holds)
    deltas = ref.deltas(shadow, on_live)
    table.add("R@5 drop vs live, points (live - shadow; groundjudge rounds it to 9 decimals)",
              round((on_live["R@5"] - shadow["R@5"]) * 100, 9), own["recall@5_vs_live"]["drop_points"])
    mine = {name: row["delta"] for name, row in own["vs_live"]["metrics"].items()}
    groups = [[f"P@{k}" for k in ks], [f"R@{k}" for k in ks], ["coverage", "citation_accuracy", "anchor_hit"],
              ["ΔS_med", "ΔS_p90", "cited_ΔS_med", "cited_ΔS_p90"], ["λ_convergent"]]
    for names in groups:
        table.add("Δ vs live (shadow - live): " + " / ".join(names), [deltas[n] for n in names],
                  [mine[n] for n in names])
    listed = sorted(n for g in groups for n in g)
    extra = sorted(set(mine) - set(listed))

    # the page's pseudocode evaluator, one run per question (its logs[qid])
    first: dict[str, dict] = {}
    for trace in raw(logs):
        first.setdefault(trace["qid"], trace)
    one = folder / "first_run.jsonl"
    one.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in first.values()), encoding="utf-8")
    cli("metrics", "--profile", "wfgy-chunking", "--golden", gold, "--traces", one, "--out", folder / "one",
        "--quiet")
    single = json.loads((folder / "one" / "profile-wfgy-chunking.json").read_text(encoding="utf-8"))
    pseudo = ref.score_run(raw(gold), first, k=5)
    mapped = {"P@k": single["P@5"], "R@k": single["R@5"], **{k: single[k] for k in pseudo if k in single}}
    table.add("page's pseudocode, first run per question: " + " / ".join(pseudo), list(pseudo.values()),
              [mapped[k] for k in pseudo])
    # the reference holds one of the canary gates (the cited snippet's target): when it fails, exit 1 follows
    table.add("exit code (1 = not eligible; the reference's cited-snippet target alone fails it)",
              1 if shadow["cited_target_holds"] is False else "not determined by the reference", result.exit_code)
    table.print()
    print("\ngroundjudge's canary gates: " + ", ".join(f"{k} {v}" for k, v in gates.items())
          + f". groundjudge also reports Δ vs live for {', '.join(extra)}, which the reference does not define.")


# --- kb-eval (seed 002) ---------------------------------------------------------------------------

def kb_eval(tmp: Path) -> None:
    import yaml

    from tests.support import kb_eval_reference as ref
    from tests.support.kb_eval_seed import (
        CHUNKS,
        GOLDEN_YAML,
        RUN_A,
        RUN_B,
        RUN_C,
        make_database,
        seed_database,
        stored_aggregate,
    )

    folder = tmp / "kb"
    folder.mkdir()
    golden, db = seed_database(folder)
    queries = {q["id"]: q for q in yaml.safe_load(GOLDEN_YAML)}
    store = {c for c, _ in CHUNKS}
    args = ["metrics", "--profile", "kb-eval", "--golden", golden, "--traces", f"{db}#run_a", "--traces",
            f"{db}#run_b", "--out", folder / "out", "--quiet"]
    result = cli(*args)
    own = json.loads((folder / "out" / "profile-kb-eval.json").read_text())
    theirs = ref.compare(queries, RUN_A, RUN_B, store)
    print("\n## kb-eval (seed 002)\n\ninputs: tests/support/kb_eval_seed.py (golden_queries.yaml, 6 queries; "
          "kb.sqlite in the seed's schema holding run_a, run_b, run_c and the chunks table)\n\ncommand:\n\n    "
          + command(*args, names={golden: "golden_queries.yaml", db: "kb.sqlite", folder / "out": "out"})
          + "\n\nreference: kb_eval_reference.compare(golden, RUN_A, RUN_B, chunk_store)")
    table = Table("kb-eval, `--profile kb-eval` (run_a against run_b)")
    table.add("run_a / run_b", [theirs["run_a"], theirs["run_b"]], [own["run_a"], own["run_b"]])
    for side in ("aggregate_a", "aggregate_b", "deltas"):
        for name, value in theirs[side].items():
            table.add(f"{side}.{name}", value, own[side].get(name))
    mine = {q["query_id"]: q for q in own["per_query"]}
    for q in theirs["per_query"]:
        got = mine.get(q["query_id"], {})
        table.add(f"{q['query_id']}: kind (rank in a, rank in b)", [q["kind"], q["a_hit_rank"], q["b_hit_rank"]],
                  [got.get("kind"), got.get("a_hit_rank"), got.get("b_hit_rank")])
    table.add("query ids compared", [q["query_id"] for q in theirs["per_query"]], list(mine))
    for run in ("run_a", "run_b"):
        expected_json, stored = theirs[f"aggregate_{run[-1]}"], stored_aggregate(db, run)
        table.add_summary(f"eval_runs.aggregate_json of {run}, as written back to kb.sqlite",
                          f"aggregate_{run[-1]} above ({len(expected_json)} fields)",
                          f"{len(stored)} fields, {'equal' if same(stored, expected_json) else 'different'}",
                          same(stored, expected_json))
    table.add("eval_runs.aggregate_json of run_c (not asked for)", {}, stored_aggregate(db, "run_c"))
    table.add("exit code (kb-eval has no gate: 0)", 0, result.exit_code)
    agreement = json.loads((folder / "out" / "metrics.json").read_text())["profile"]["agreement"]

    # across chunker versions: run_a against run_c falls back to doc_id + span overlap
    cli("metrics", "--profile", "kb-eval", "--golden", golden, "--traces", f"{db}#run_a", "--traces", f"{db}#run_c",
        "--out", folder / "ac", "--quiet")
    ac = json.loads((folder / "ac" / "profile-kb-eval.json").read_text())
    expected = ref.compare(queries, RUN_A, RUN_C, store)
    table.add("run_a vs run_c: chunker_version_match", expected["deltas"]["chunker_version_match"],
              ac["deltas"]["chunker_version_match"])
    table.add("run_a vs run_c: kinds q1..q6 (q4 not ranked)", [q["kind"] for q in expected["per_query"]],
              [q["kind"] for q in ac["per_query"]])
    whole = {**ac, "per_query": [{k: v for k, v in q.items() if k != "note"} for q in ac["per_query"]]}
    table.add_summary("run_a vs run_c: the whole CompareReport (aggregates, deltas, per query), notes aside",
                      f"{len(expected)} fields", f"{len(whole)} fields, equal" if same(whole, expected)
                      else f"{len(whole)} fields, different", same(whole, expected))

    # --strict-chunker-version on the same two runs
    fresh = tmp / "kb_strict"
    fresh.mkdir()
    g2, db2 = seed_database(fresh)
    strict = cli("metrics", "--profile", "kb-eval", "--golden", g2, "--traces", f"{db2}#run_a", "--traces",
                 f"{db2}#run_c", "--strict-chunker-version", "--out", fresh / "out")
    try:
        ref.compare(queries, RUN_A, RUN_C, store, strict=True)
        refused = "no refusal"
    except ref.StrictRefusal:
        refused = "refused"
    table.add("--strict-chunker-version, run_a vs run_c (v1, v2)", refused,
              "refused" if strict.exit_code == 2 and not (fresh / "out").exists() else f"exit {strict.exit_code}")

    # the seed's own unit test: a citation to a chunk that does not exist gives 0.0
    broken = tmp / "kb_broken"
    broken.mkdir()
    (broken / "golden_queries.yaml").write_text(GOLDEN_YAML)
    run = {"run_id": "r1", "chunker_version": "md-heading-v1", "created_at": "2026-05-01T00:00:00Z", "results": [
        {"query_id": "q1", "hits_top_k": [{"chunk_id": "c-md-1", "doc_id": "doc-md"}],
         "answer": {"text": "heading boundary [#1]", "citations": [{"citation": "[#1]", "chunk_id": "c-md-404"}],
                    "grounded": True}}]}
    db3 = make_database(broken / "kb.sqlite", [run], [("c-md-1", "doc-md")])
    cli("metrics", "--profile", "kb-eval", "--golden", broken / "golden_queries.yaml", "--traces", db3,
        "--out", broken / "out", "--quiet")
    one = json.loads((broken / "out" / "profile-kb-eval.json").read_text())
    table.add("citation to a chunk not in the DB (c-md-404): citation_coverage",
              ref.aggregate(queries, run["results"], {"c-md-1"})["citation_coverage"],
              one["aggregate_json"]["citation_coverage"])
    table.print()

    print(f"\ngroundjudge's own per-case comparison beside kb-eval's (run_a vs run_b, from metrics.json): "
          f"{agreement['agree']} of {agreement['compared']} queries agree; only groundjudge decides "
          f"{', '.join(agreement['only_groundjudge']) or 'none'}.")
    for row in agreement["differ"]:
        print(f"- {row['case_id']}: kb-eval {row['kb-eval']}, groundjudge {row['groundjudge']}: {row['why']}")


# --- day 39 runner (seed 004) -----------------------------------------------------------------------

def day39(tmp: Path) -> None:
    from tests.support import day39_reference as ref
    from tests.support import day39_seed as seed

    folder = tmp / "day39"
    files = seed.write_seed_files(folder)
    args = ["metrics", "--profile", "day39", "--golden", files["golden"], "--traces", files["baseline"],
            "--traces", files["candidate"], "--out", folder / "out", "--quiet"]
    result = cli(*args)
    own = json.loads((folder / "out" / "profile-day39.json").read_text())
    expected = ref.run(seed.GOLDEN, seed.BASELINE + seed.CANDIDATE)
    configs = list(expected)
    print(f"\n## day 39 runner (seed 004)\n\ninputs: tests/support/day39_seed.py ({len(seed.GOLDEN)} golden cases, "
          f"the first without user_context; {len(seed.BASELINE)} outputs of {configs[0]} and {len(seed.CANDIDATE)} "
          f"of {configs[1]})\n\ncommand:\n\n    "
          + command(*args, names={files["golden"]: "golden/day39_golden_v1.jsonl",
                                  files["baseline"]: "runs/baseline_outputs.jsonl",
                                  files["candidate"]: "runs/candidate_outputs.jsonl", folder / "out": "out"})
          + "\n\nreference: day39_reference.run(golden, baseline + candidate), summary(), gate(), exit_code()")
    table = Table(f"day 39 runner, `--profile day39` (each cell: {configs[0]} / {configs[1]})")
    summaries = {cfg: ref.summary(rows) for cfg, rows in expected.items()}
    for metric in summaries[configs[0]]:
        table.add(metric, [summaries[c][metric] for c in configs], [own["aggregate"][c].get(metric) for c in configs])
    table.add("cases", [len(expected[c]) for c in configs], [own["aggregate"][c]["cases"] for c in configs])
    table.add("abstention accuracy (template column)", [ref.abstention_accuracy(expected[c]) for c in configs],
              [own["report_template"]["aggregate_metrics"][c]["abstention_accuracy"] for c in configs])
    template = ("hit@5", "recall@5", "recall@10", "precision@5", "mrr@10", "ndcg@10", "citation_correctness",
                "p95_latency_ms")
    for cfg in configs:
        table.add(f"{cfg}: template's Aggregate Metrics columns " + ", ".join(template),
                  [summaries[cfg][m] for m in template],
                  [own["report_template"]["aggregate_metrics"][cfg][m] for m in template])
    theirs_failed = [r["failed"] for c in configs for r in expected[c]]
    mine_failed = [r["failed_checks"] for c in configs for r in own["results"][c]]
    table.add_summary("per-query failed checks (retrieval_miss, context_miss, bad_citation, wrong_behavior)",
                      f"{len(theirs_failed)} lists, {sum(map(len, theirs_failed))} checks",
                      f"{sum(same(m, t) for m, t in zip(mine_failed, theirs_failed))} lists equal, "
                      f"{sum(map(len, mine_failed))} checks", same(mine_failed, theirs_failed))
    for cfg in configs:
        tags = ref.by_tag(expected[cfg])
        theirs = {t: [len(rows), sum(bool(r["failed"]) for r in rows),
                      *(ref.summary(rows)[m] for m in ("recall@10", "mrr@10", "citation_correctness"))]
                  for t, rows in tags.items()}
        mine = {t: [row["cases"], row["failures"], row["recall@10"], row["mrr@10"], row["citation_correctness"]]
                for t, row in own["breakdown_by_tag"][cfg].items()}
        equal = set(mine) == set(theirs) and all(same(mine[t], v) for t, v in theirs.items())
        table.add_summary(f"{cfg}: breakdown by tag (cases, failures, recall@10, mrr@10, citation correctness)",
                          f"{len(theirs)} tags", f"{len(mine)} tags, {sum(same(mine.get(t), v) for t, v in theirs.items())} equal",
                          equal)
    for cfg in configs:
        table.add(f"{cfg}: runner's release gate failures", ref.gate(expected[cfg]),
                  own["release_gate"][cfg]["failures"])
    table.add("exit code (runner)", ref.exit_code(expected), own["runner_exit_code"])
    table.add("exit code (groundjudge metrics --profile day39)", ref.exit_code(expected), result.exit_code)
    table.print()
    decisions = own["report_template"]["decision"]
    print("\nThe template's Release Gate / Decision (runner gate set): "
          + "; ".join(f"{cfg} {decisions[cfg]['status']}" for cfg in configs)
          + ". Faithfulness and answer relevance are not judged by `metrics`; each cell says so: "
          + repr(own["report_template"]["aggregate_metrics"][configs[1]]["faithfulness"]["reason"]) + ".")


def main_() -> int:
    with tempfile.TemporaryDirectory(prefix="seed_side_by_side_") as name:
        tmp = Path(name)
        print("# Issue 25: each seed's reference scorer beside groundjudge, on the seed tests' inputs")
        print("\nValues shown to 4 decimals, compared at full precision (floats within 1e-12).")
        for system in (wfgy, wfgy_chunking, kb_eval, day39):
            system(tmp)
    print(f"\n## Result\n\n{TOTAL['rows'] - len(TOTAL['unequal'])} of {TOTAL['rows']} rows equal.")
    for item in TOTAL["unequal"]:
        print(f"- NOT EQUAL: {item}")
    return 1 if TOTAL["unequal"] else 0


if __name__ == "__main__":
    sys.exit(main_())
