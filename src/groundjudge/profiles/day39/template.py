"""The lesson's eval report template, filled in: Summary (with the release decision PASS /
FAIL / PASS_WITH_RISK and the traces' versions), Aggregate Metrics, Breakdown By Tag,
Regression Summary, Top Failed Queries (with root causes and fixes), Release Gate and Decision.

The runner's own report (:mod:`.runner`) is computed first and kept whole; this adds what the
template asks for on top of it. Judge columns come from a run's judge (:mod:`.judged`), or say
why there is no number.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from groundjudge.inert import markdown
from groundjudge.load.adapters.day39 import Day39Golden, Day39Output
from groundjudge.profiles.day39 import runner
from groundjudge.profiles.day39.causes import compare_configs, root_cause
from groundjudge.profiles.day39.gates import check_gates, decide
from groundjudge.profiles.day39.judged import cell_text, judge_cells
from groundjudge.profiles.day39.settings import Day39Settings, gate_specs
from groundjudge.profiles.registry import JudgedCase, JudgeFindings

__all__ = ["VERSION_KEYS", "UnknownConfig", "full_report", "render_markdown"]

VERSION_KEYS = ("eval_set", "corpus", "chunking", "embedding", "index", "reranker", "prompt", "generator")
_REFUSING = frozenset({"abstain", "permission_denied"})
# the Aggregate Metrics columns of the template: (heading, metric)
COLUMNS = (("Hit@5", "hit@5"), ("Recall@5", "recall@5"), ("Recall@10", "recall@10"), ("Precision@5", "precision@5"),
           ("MRR@10", "mrr@10"), ("NDCG@10", "ndcg@10"), ("Faithfulness", "faithfulness"),
           ("Answer relevance", "answer_relevance"), ("Citation correctness", "citation_correctness"),
           ("Abstention accuracy", "abstention_accuracy"), ("p95 latency", "p95_latency_ms"))


def _extra_values(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The per-config values the template and its gates add to the runner's: abstention accuracy
    (the behaviour score of the no-answer cases) and the counts that block a release."""
    abstain = [r["metrics"]["behavior_score"] for r in rows if r["expected_behavior"] == "abstain"]
    return {
        "abstention_accuracy": sum(abstain) / len(abstain) if abstain else None,
        "acl_critical_failures": sum(1 for r in rows if "acl" in r["tags"] and r["failed_checks"]),
        "critical_hallucinations": sum(1 for r in rows if r["expected_behavior"] in _REFUSING
                                       and r["metrics"]["behavior_score"] < 1.0),
    }


def _counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    names = {n for r in rows for n in r["metrics"]}
    out = {n: sum(1 for r in rows if r["metrics"].get(n) is not None) for n in names}
    out.update({"p95_latency_ms": sum(1 for r in rows if r["metrics"].get("latency_end_to_end_ms")),
                "failed_case_rate": len(rows), "acl_critical_failures": len(rows),
                "critical_hallucinations": len(rows),
                "abstention_accuracy": sum(1 for r in rows if r["expected_behavior"] == "abstain")})
    return out


def _summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    return {**runner.aggregate_with_latency(rows), **_extra_values(rows)}


def _versions(outputs: Sequence[Day39Output], configs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cfg in configs:
        mine = [o for o in outputs if o.config_id == cfg]
        values: dict[str, set[str]] = defaultdict(set)
        for o in mine:
            for key, value in o.versions.items():
                values[key].add(value)
        keys = [k for k in VERSION_KEYS if k in values] + sorted(k for k in values if k not in VERSION_KEYS)
        out[cfg] = {"values": {k: sorted(values[k]) for k in keys},
                    "outputs_without_versions": sum(1 for o in mine if not o.versions), "outputs": len(mine)}
    return out


def _yes_no(expected: Sequence[str], found: Sequence[str], ranked: bool) -> str:
    if not expected:
        return "n/a"
    hit = [c for c in expected if c in found]
    if not hit:
        return "no"
    where = f" (rank {', '.join(str(found.index(c) + 1) for c in hit)})" if ranked else ""
    return ("yes" if len(hit) == len(expected) else f"partly ({len(hit)} of {len(expected)})") + where


def _answer_cell(case: Day39Golden, row: Mapping[str, Any], judged: JudgedCase | None,
                 trust: Mapping[str, tuple[bool, str]] | None) -> str:
    if case.expected_behavior in _REFUSING:
        return "yes (refused)" if row["metrics"]["behavior_score"] == 1.0 else "no (answered; must refuse)"
    if "wrong_behavior" in row["failed_checks"]:
        return "no (refused)"
    if judged is None:
        return "not judged (metrics)"
    if judged.status != "judged":
        return f"not judged ({(judged.reason or judged.status).split(':')[0]})"
    grade = judged.labels.get("correct")
    if grade is None:
        return "not judged (no expected answer)"
    mark = "" if trust and trust.get("correctness", (False, ""))[0] else ", untrusted"
    return f"{'yes' if grade == 3 else 'partly' if grade else 'no'} (judge: {grade}/3{mark})"


def _severity(case: Day39Golden, row: Mapping[str, Any], cause: Mapping[str, str]) -> tuple[int, int]:
    critical = "acl" in case.tags or (case.expected_behavior in _REFUSING and "wrong_behavior" in row["failed_checks"])
    return (0 if critical else 1, -len(row["failed_checks"]))


def _top_failed(golden: Mapping[str, Day39Golden], rows: Sequence[Mapping[str, Any]],
                outputs: Mapping[tuple[str, str], Day39Output], config: str, findings: JudgeFindings | None,
                limit: int) -> tuple[list[dict[str, Any]], int]:
    found = []
    for index, row in enumerate(rows):
        cid = row["query_id"]
        case, out = golden[cid], outputs[(config, cid)]
        judged = findings.cases.get((config, cid)) if findings else None
        cause = root_cause(case, row, out, judged)
        if cause is None:
            continue
        found.append((_severity(case, row, cause), index, {
            "query_id": cid, "question": case.question,
            "expected_source": ", ".join(case.must_cite or case.expected_chunk_ids) or "none (no-answer case)",
            "retrieved": _yes_no(case.expected_chunk_ids, out.retrieved_ids, True),
            "context": _yes_no(case.expected_chunk_ids, out.context_ids, False),
            "answer_correct": _answer_cell(case, row, judged, findings.trust if findings else None),
            "citation_correct": "yes" if row["metrics"]["citation_correctness"] == 1.0
            else f"no ({row['metrics']['citation_correctness']:.2f})",
            "failed_checks": list(row["failed_checks"]), **cause}))
    found.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in found[:limit]], len(found)


def _tag_table(golden: Mapping[str, Day39Golden], rows: Sequence[Mapping[str, Any]],
               outputs: Mapping[tuple[str, str], Day39Output], config: str, findings: JudgeFindings | None,
               ) -> dict[str, Any]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        for tag in row["tags"]:
            grouped[tag].append(row)
    out = {}
    for tag, tag_rows in sorted(grouped.items()):
        s = runner.aggregate(tag_rows)
        causes: Counter[str] = Counter()
        for r in tag_rows:
            judged = findings.cases.get((config, r["query_id"])) if findings else None
            cause = root_cause(golden[r["query_id"]], r, outputs[(config, r["query_id"])], judged)
            if cause is not None:
                causes[cause["root_cause"]] += 1
        cells = judge_cells(findings, {config: [r["query_id"] for r in tag_rows]})[config]
        out[tag] = {"cases": len(tag_rows), "recall@10": s.get("recall@10"), "mrr@10": s.get("mrr@10"),
                    "faithfulness": cells["faithfulness"], "citation_correctness": s.get("citation_correctness"),
                    "failures": sum(1 for r in tag_rows if r["failed_checks"]),
                    "root_causes": dict(causes.most_common())}
    return out


def _tag_summaries(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, float | None]],
                                                              dict[str, dict[str, int]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        for tag in row["tags"]:
            grouped[tag].append(row)
    return ({t: _summary(r) for t, r in grouped.items()}, {t: _counts(r) for t, r in grouped.items()})


def _order(outputs: Sequence[Day39Output]) -> list[str]:
    return list(dict.fromkeys(o.config_id for o in outputs))


class UnknownConfig(ValueError):
    """A setting names a config the outputs do not have: ``field`` (``candidate``) and the message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def _pick(name: str | None, configs: Sequence[str], default: str | None, what: str) -> str | None:
    if name is not None and name not in configs:
        raise UnknownConfig(what, f"{name!r} is not a config of these outputs ({', '.join(configs)})")
    return name if name is not None else default


def full_report(golden: Mapping[str, Day39Golden], outputs: Sequence[Day39Output], settings: Day39Settings,
                judge: JudgeFindings | None = None) -> dict[str, Any]:
    """The runner's report (its keys as :func:`runner.report` gives them) plus
    ``report_template``: the lesson's template, filled in. ``exit_code`` is 1 when a config the
    release gate decides is FAIL (with the default gate set: exactly the runner's exit code),
    and the runner's own is kept as ``runner_exit_code``.

    Raises :class:`UnknownConfig` when ``settings`` name a config the outputs do not have."""
    base = runner.report(golden, outputs)
    order = _order(outputs)
    gated = list(settings.configs) or order
    for cfg in gated:
        _pick(cfg, order, None, "configs")
    baseline = _pick(settings.baseline, order, order[0] if len(order) > 1 else None, "baseline")
    candidate = _pick(settings.candidate, order, order[-1] if order else None, "candidate")
    if baseline == candidate:
        baseline = None
    results = base["results"]
    by_key = {(o.config_id, o.query_id): o for o in outputs}
    cells = judge_cells(judge, {cfg: [r["query_id"] for r in results[cfg]] for cfg in order})
    specs = gate_specs(settings)
    gates: dict[str, Any] = {}
    for cfg in order:
        rows = results[cfg]
        tag_values, tag_counts = _tag_summaries(rows)
        gates[cfg] = {"checks": check_gates(specs, _summary(rows), _counts(rows), tag_values, tag_counts, cells[cfg])}
    first = [c for c in gated if c != candidate]
    for cfg in [*first, *([candidate] if candidate in gated else [])]:
        ref = gates.get(baseline, {}).get("decision", {}).get("status") if baseline else None
        gates[cfg]["decision"] = decide(cfg, gates[cfg]["checks"], baseline=baseline if cfg == candidate else None,
                                        baseline_status=ref)
    aggregate = {cfg: {metric: (cells[cfg][metric] if metric in cells[cfg] else _summary(results[cfg]).get(metric))
                       for _, metric in COLUMNS} for cfg in order}
    versions = _versions(outputs, order)
    top, failing = (_top_failed(golden, results[candidate], by_key, candidate, judge, settings.top_failed)
                    if candidate else ([], 0))
    decision = gates[candidate]["decision"] if candidate in gated and candidate else None
    regression = (compare_configs(golden, results[baseline], results[candidate], by_key, baseline, candidate,
                                  judge.cases if judge else None) if baseline and candidate else None)
    when = settings.date or datetime.now(UTC).date()
    cand_versions = versions.get(candidate, {}).get("values", {}) if candidate else {}
    template = {
        "summary": {
            "date": when.isoformat(), "owner": settings.owner, "config_under_test": candidate,
            "baseline_config": baseline, "eval_set_version": cand_versions.get("eval_set", []),
            "corpus_index_version": cand_versions.get("corpus", []) + cand_versions.get("index", []),
            "prompt_model_version": cand_versions.get("prompt", []) + cand_versions.get("generator", []),
            "release_decision": decision["status"] if decision else None,
            "judge": {"rubric": judge.rubric, "model": judge.model} if judge else None,
        },
        "versions": versions,
        "aggregate_metrics": aggregate,
        "judge": cells,
        "also_judged": {cfg: {m: cells[cfg][m] for m in ("completeness", "correctness", "citation_support")}
                        for cfg in order},
        "breakdown_by_tag": _tag_table(golden, results[candidate], by_key, candidate, judge) if candidate else {},
        "regression_summary": regression,
        "top_failed_queries": top,
        "failed_queries_total": failing,
        "release_gate": {"set": settings.release_gate, "configs": gated, "gates": [s.model_dump() for s in specs],
                         "per_config": {cfg: gates[cfg] for cfg in gated}},
        "decision": {cfg: gates[cfg]["decision"] for cfg in gated},
    }
    failed = any(gates[cfg]["decision"]["status"] == "FAIL" for cfg in gated)
    return {**base, "runner_exit_code": base["exit_code"], "exit_code": 1 if failed else 0,
            "settings": settings.model_dump(mode="json"), "report_template": template}


# --- Markdown ------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|", *("| " + " | ".join(r) + " |" for r in rows)]


def _list(values: Sequence[str]) -> str:
    return ", ".join(markdown(v) for v in values) if values else "not in the traces"


def _summary_lines(t: Mapping[str, Any]) -> list[str]:
    s = t["summary"]
    judge = s["judge"]
    others = {cfg: d["status"] for cfg, d in t["decision"].items() if cfg != s["config_under_test"]}
    decision = s["release_decision"] or "not decided (the config under test is not among the gated configs)"
    lines = ["## Summary", "",
             f"- Date: {s['date']}",
             f"- Owner: {markdown(s['owner']) if s['owner'] else 'not set ([profile.day39] owner)'}",
             f"- Config under test: {markdown(s['config_under_test'] or 'none')}",
             f"- Baseline config: {markdown(s['baseline_config']) if s['baseline_config'] else 'none (one config)'}",
             f"- Eval set version: {_list(s['eval_set_version'])}",
             f"- Corpus/index version: {_list(s['corpus_index_version'])}",
             f"- Prompt/model version: {_list(s['prompt_model_version'])}",
             f"- Release decision: **{decision}**"
             + (" (other gated configs: " + ", ".join(f"{markdown(c)} {d}" for c, d in others.items()) + ")"
                if others else ""),
             f"- Judge: {markdown(judge['rubric'])}, {markdown(judge['model'])}" if judge
             else "- Judge: none (`groundjudge metrics`; `groundjudge run --profile day39` judges the answers)",
             "", "### Versions (from the traces)", ""]
    versions = t["versions"]
    given = {k for v in versions.values() for k in v["values"]}
    keys = [k for k in VERSION_KEYS if k in given] + sorted(given - set(VERSION_KEYS))
    if keys:
        lines += _table(["Config", *map(markdown, keys), "Outputs without versions"],
                        [[markdown(cfg), *(", ".join(map(markdown, v["values"].get(k, []))) or "—" for k in keys),
                          f"{v['outputs_without_versions']} of {v['outputs']}"] for cfg, v in versions.items()],
                        ["---"] * (len(keys) + 1) + ["---:"])
    else:
        lines.append("No output carries `versions`.")
    return lines + [""]


def _aggregate_lines(t: Mapping[str, Any]) -> list[str]:
    rows = []
    for cfg, values in t["aggregate_metrics"].items():
        cells = []
        for _, metric in COLUMNS:
            value = values[metric]
            cells.append(cell_text(value) if isinstance(value, Mapping) else _num(value, 0 if metric.endswith("_ms")
                                                                                   else 3))
        rows.append([markdown(cfg), *cells])
    lines = ["## Aggregate Metrics", ""] + _table(["Config", *(h for h, _ in COLUMNS)], rows,
                                                  ["---"] + ["---:"] * len(COLUMNS))
    # one note per reason a judge column has no number, or an untrusted one: which columns, which configs
    notes: dict[str, tuple[list[str], list[str]]] = {}
    for cfg, metrics in t["judge"].items():
        for heading, metric in (("Faithfulness", "faithfulness"), ("Answer relevance", "answer_relevance")):
            cell = metrics[metric]
            if cell["state"] != "trusted":
                columns, configs = notes.setdefault(cell["reason"], ([], []))
                columns.append(heading) if heading not in columns else None
                configs.append(cfg) if cfg not in configs else None
    lines += [""] + [f"- {' and '.join(cols)} ({', '.join(map(markdown, cfgs))}): {markdown(text)}"
                     for text, (cols, cfgs) in notes.items()]
    also = [f"{markdown(cfg)}: " + "; ".join(f"{m} {cell_text(c)}" for m, c in cells.items())
            for cfg, cells in t["also_judged"].items() if any(c["state"] in ("trusted", "untrusted")
                                                              for c in cells.values())]
    if also:
        lines += ["", "Also judged: " + " — ".join(also)]
    return lines + [""]


def _tag_lines(t: Mapping[str, Any]) -> list[str]:
    cfg = t["summary"]["config_under_test"]
    lines = ["## Breakdown By Tag", "", f"Config under test: {markdown(cfg or 'none')}.", ""]
    rows = [[markdown(tag), str(s["cases"]), _num(s["recall@10"]), _num(s["mrr@10"]), cell_text(s["faithfulness"]),
             _num(s["citation_correctness"]), str(s["failures"]),
             ", ".join(f"{markdown(k)} {n}" for k, n in s["root_causes"].items()) or "—"]
            for tag, s in t["breakdown_by_tag"].items()]
    return lines + _table(["Tag", "Cases", "Recall@10", "MRR@10", "Faithfulness", "Citation correctness", "Failures",
                           "Notes (root causes)"], rows,
                          ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---"]) + [""]


def _regression_lines(t: Mapping[str, Any]) -> list[str]:
    reg = t["regression_summary"]
    lines = ["## Regression Summary", ""]
    if reg is None:
        return lines + ["One config: nothing to compare (name a baseline with [profile.day39] baseline).", ""]
    c = reg["cases"]
    lines += [(f"{markdown(reg['candidate'])} against {markdown(reg['baseline'])}: {c['improved']} cases improved, "
              f"{c['regressed']} regressed, {c['unchanged']} unchanged."), ""]
    rows = [[markdown(r["query_id"]), markdown(r["metric"]), _num(r["baseline"]), _num(r["candidate"]),
             markdown(f"{r['root_cause']}: {r['evidence']}" if r["evidence"] else r["root_cause"]),
             markdown(r["decision"])]
            for r in reg["rows"]]
    return lines + _table(["Query ID", "Metric changed", "Baseline", "Candidate", "Root cause", "Decision"], rows,
                          ["---", "---", "---:", "---:", "---", "---"]) + [""]


def _failed_lines(t: Mapping[str, Any]) -> list[str]:
    top = t["top_failed_queries"]
    lines = ["## Top Failed Queries", ""]
    rows = [[markdown(r["query_id"]), markdown(r["question"]), markdown(r["expected_source"]), markdown(r["retrieved"]),
             r["context"], markdown(r["answer_correct"]), r["citation_correct"],
             markdown(f"{r['root_cause']}: {r['evidence']}"), markdown(r["fix"])] for r in top]
    lines += _table(["Query ID", "Question", "Expected source", "Retrieved?", "Context?", "Answer correct?",
                     "Citation correct?", "Root cause", "Fix"], rows, ["---"] * 9)
    if t["failed_queries_total"] > len(top):
        lines.append(f"\n{len(top)} of {t['failed_queries_total']} failed queries shown (most severe first: ACL and "
                     "critical hallucinations, then the most failed checks); [profile.day39] top_failed shows more.")
    return lines + [""]


def _gate_lines(t: Mapping[str, Any]) -> list[str]:
    gate = t["release_gate"]
    lines = ["## Release Gate", "", f"Gate set: {gate['set']}.", ""]
    for cfg, entry in gate["per_config"].items():
        lines += [f"### {markdown(cfg)}", ""]
        for c in entry["checks"]:
            box = "x" if c["status"] == "pass" else " "
            status = {"pass": "", "fail": "FAIL: ", "advisory": "advisory: ", "no_data": "no data: "}[c["status"]]
            lines.append(f"- [{box}] {markdown(c['label'])} — {status}{markdown(c['reason'])}")
        lines.append("")
    return lines


def _decision_lines(t: Mapping[str, Any]) -> list[str]:
    lines = ["## Decision", ""]
    for cfg, d in t["decision"].items():
        lines.append(f"- **{markdown(cfg)}: {d['status']}** — {markdown(d['text'])}")
    return lines + [""]


def render_markdown(report: Mapping[str, Any]) -> str:
    """The template report, then the runner's own tables and gate (as the runner prints them)."""
    t = report["report_template"]
    lines = ["# RAG Evaluation Report", ""]
    lines += _summary_lines(t) + _aggregate_lines(t) + _tag_lines(t) + _regression_lines(t) + _failed_lines(t)
    lines += _gate_lines(t) + _decision_lines(t)
    # the runner's report as it prints it (its exit code: its five gates), without its title
    own = runner.render_markdown({**report, "exit_code": report["runner_exit_code"]}).split("\n", 2)[2]
    lines += ["## The runner's own tables", "", own.replace("\n## ", "\n### ").replace("## ", "### ", 1)]
    if report["exit_code"] != report["runner_exit_code"]:
        lines += [f"This report's exit code: {report['exit_code']} (the release gate above decides it)."]
    return "\n".join(lines).rstrip() + "\n"
