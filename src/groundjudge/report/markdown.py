"""The human summary (``report.md``) of the deterministic stage."""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from groundjudge.inert import markdown, markdown_code
from groundjudge.metrics.failures import DESCRIPTIONS, STAGE_ORDER, deterministic_failures, failure_stage
from groundjudge.report.numbers import number, summary
from groundjudge.report.review_section import review_lines

if TYPE_CHECKING:
    from groundjudge.report.document import CalibrationSummary, DecidingRecord, RecordListing, ReportDocument
    from groundjudge.report.document_view import MetricsView, ValueView

HEADLINE = (
    "hit@5", "recall@5", "recall@10", "mrr@10", "mrr", "ndcg@10", "ndcg_exp@10", "map", "r_precision",
    "recall_doc@5", "context_recall", "context_precision", "citation_scoped", "must_cite_coverage",
    "citation_offset_accuracy", "behavior_correct", "under_refusal", "over_refusal", "must_contain",
    "forbidden_absent", "gold_claim_hit", "constraint_integrity", "acl_leak", "paraphrase_stability@5",
    "empty_result", "latency_ms.end_to_end.p50", "latency_ms.end_to_end.p95", "cost_usd",
)
TAG_METRICS = ("recall@5", "mrr@10", "context_recall", "behavior_correct", "must_contain")


def fmt(value: ValueView | None) -> str:
    return summary(value)


def _num(value: float | None) -> str:
    return number(value, 3)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A table of cells that are Markdown already: values from the inputs are made inert by
    their callers (``inert.markdown``, ``inert.markdown_code``), pipes included."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _report(doc: MetricsView) -> ReportDocument | None:
    """``doc`` when it is a run's report (with judge, gates and calibration), else None. (No
    report can exist before its module is loaded: a metrics document alone never loads it.)"""
    loaded = sys.modules.get("groundjudge.report.document")
    return doc if loaded is not None and isinstance(doc, loaded.ReportDocument) else None


def _leak_lines(doc: MetricsView) -> list[str]:
    """ACL leaks, said in terms of the verdict: leaks in a gated config block it; leaks in a
    config no gate covers are critical for that config but do not change this verdict."""
    leaks = {cfg: [cid for cid, d in doc.per_config[cfg].case_details.items() if d.acl_leaks]
             for cfg in doc.configs}
    leaks = {cfg: ids for cfg, ids in leaks.items() if ids}
    if not leaks:
        return []
    report = _report(doc)
    gated = report.gates.gated_configs if report is not None else None
    out = []
    for cfg, ids in leaks.items():
        cases = ", ".join(map(markdown_code, ids))
        name = markdown_code(cfg)
        if gated is None:
            out.append(f"**Critical: {len(ids)} ACL leak(s) in {name}** — {cases}. They block a release of {name}.")
        elif cfg in gated:
            out.append(f"**Critical: {len(ids)} ACL leak(s) in {name}** — {cases}. They block this release.")
        else:
            out.append(f"**Critical: {len(ids)} ACL leak(s) in {name}** — {cases}. No gate covers {name} "
                       f"(gated: {', '.join(map(markdown_code, gated))}), so they do not change this verdict; "
                       f"they would block a release of {name}.")
    return out + [""]


def _unrecorded_lines(doc: MetricsView) -> list[str]:
    """The metrics left without cases because the inputs did not record what they read, per
    config and reason: null, never 0, and no finding."""
    found: dict[tuple[str, str], list[str]] = {}
    for cfg in doc.configs:
        for metric, agg in doc.per_config[cfg].aggregate.items():
            if agg.reason:
                found.setdefault((cfg, agg.reason), []).append(metric)
    if not found:
        return []
    out = ["", "### Not recorded by the inputs", "",
           ("A metric that reads what the inputs did not record is null for those cases (never 0) and "
           "reports nothing about them:"), ""]
    out += [f"- {markdown_code(cfg)}: {', '.join(map(markdown_code, metrics))}: {markdown(reason)}"
            for (cfg, reason), metrics in found.items()]
    return out


def headline_metrics(doc: MetricsView) -> list[str]:
    present = {m for cfg in doc.per_config.values() for m in cfg.aggregate}
    return [m for m in HEADLINE if m in present] or sorted(present)


def _skipped_lines(skipped: Mapping[str, str] | None) -> list[str]:
    """Traces an export held that could not be graded, counted by reason (a night's export can
    skip thousands for one reason), with one trace id as an example of each."""
    if not skipped:
        return []
    by_reason: dict[str, list[str]] = {}
    for trace_id, reason in skipped.items():
        by_reason.setdefault(reason, []).append(trace_id)
    lines = [f"- traces not graded: {len(skipped)}"]
    for reason, ids in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"  - {len(ids)}: {markdown(reason)} (e.g. {markdown_code(ids[0])})")
    return lines


def render_markdown(doc: MetricsView, *, top_failed: int = 15, title: str = "groundjudge metrics report",
                    preface: str = "") -> str:
    """report.md of ``doc``: a run's metrics document (typed, or a dict's view:
    :mod:`.document_view`), or its whole report (a
    :class:`~groundjudge.report.document.ReportDocument`: then with the judge's findings among
    the failed cases, the gates' view of ACL leaks, and calibration)."""
    configs = doc.configs
    acc = doc.accounting
    report = _report(doc)
    out = [f"# {title}", ""] + ([preface] if preface else [])
    out += _leak_lines(doc)
    trec = "qrels" in doc.inputs
    out += ["## Accounting", "",
            f"- queries in the qrels: {acc.cases}" if trec
            else f"- cases in the golden set: {acc.cases}" if doc.inputs.get("golden", "-")
            else f"- cases (no golden set: one per trace): {acc.cases}",
            *(f"- {markdown_code(cfg)}: {n} scored, {len(acc.missing_trace.get(cfg, []))} without a trace"
              + (f" ({', '.join(map(markdown, acc.missing_trace[cfg][:10]))})"
                 if acc.missing_trace.get(cfg) else "")
              for cfg, n in acc.scored.items()),
            *([] if trec else [
                f"- context chunks with no text anywhere (`missing_text`): {sum(map(len, acc.missing_text.values()))}",
                f"- retrieved or cited ids unknown to the corpus: {sum(map(len, acc.unresolved_chunk_ids.values()))}"]),
            *([f"- run queries not in the qrels (left out of means): {len(acc.run_queries_not_in_qrels)}"]
              if trec and acc.run_queries_not_in_qrels is not None else []),
            *_skipped_lines(acc.skipped_traces),
            ""]
    out += ["## Aggregate metrics per config", "",
            "Each value is a mean over the cases where the metric is defined; n is that count.", ""]
    out += _table(["metric", *map(markdown, configs)],
                  [[markdown(m), *(fmt(doc.per_config[cfg].aggregate.get(m)) for cfg in configs)]
                   for m in headline_metrics(doc)])
    out += _unrecorded_lines(doc)
    breakdowns = (("By tag", "tag", {cfg: doc.per_config[cfg].by_tag for cfg in configs}),
                  ("By difficulty", "difficulty", {cfg: doc.per_config[cfg].by_difficulty for cfg in configs}))
    for heading, column, per_config in breakdowns:
        if not any(per_config.values()):
            continue  # TREC runs have neither tags nor difficulty
        out += ["", f"## {heading}", ""]
        for cfg in configs:
            groups = per_config[cfg]
            metrics = [m for m in TAG_METRICS if any(m in s for s in groups.values())]
            out += [f"### {markdown_code(cfg)}", ""]
            out += _table([column, *map(markdown, metrics)],
                          [[markdown(g), *(fmt(s.get(m)) for m in metrics)] for g, s in groups.items()])
            out.append("")
    out.append("")
    out += ["## Top failed cases", "",
            ("Stage: where the case went wrong first (ACL leak, wrong behaviour, retrieval missed, context "
            "dropped, answer unsupported, citation misattributed)."), ""]
    count, top = _top_failed(doc, report, top_failed)
    if count:
        out += _table(["case", "config", "stage", "failed checks"],
                      [[markdown_code(cid), markdown(cfg), stage,
                        "; ".join(DESCRIPTIONS[f] for f in failed) or "judge findings only"]
                       for cfg, cid, stage, failed in top])
        if count > top_failed:
            where = "report.json" if doc.kind == "groundjudge.report" else "metrics.json"
            out.append(f"\n… and {count - top_failed} more in {where}.")
    else:
        out.append("None.")
    calibration = report.calibration if report is not None else None
    if calibration is not None:
        out += calibration_lines(calibration)
        out += review_lines(calibration)
    out += _version_lines(doc)
    prov = doc.provenance
    out += ["", "## Provenance", "",
            f"groundjudge {markdown(prov.tool_version)}, commit {markdown(prov.git_commit or 'unknown')}"
            + (" (dirty)" if prov.git_dirty else "") + f", Python {prov.python}.", ""]
    return "\n".join(out)


def _top_failed(doc: MetricsView, report: ReportDocument | None, n: int,
                ) -> tuple[int, list[tuple[str, str, str, list[str]]]]:
    """How many (config, case) pairs went wrong somewhere, and the first ``n`` of them by stage
    (in pipeline order), then most failed checks, config and case: (config, case, stage, failed
    checks). A pair's checks are read once; its stage depends on those and its claims' classes
    alone, so it is found once per distinct pair of them. Only the first ``n`` are kept."""
    count = 0
    stages: dict[tuple[tuple[str, ...], tuple[str, ...]], str | None] = {}

    def ranked() -> Iterator[tuple[int, int, str, str]]:
        nonlocal count
        for cfg in doc.configs:
            for cid, values in doc.per_config[cfg].per_case.items():
                verdict = report.judge.case(cfg, cid) if report is not None else None
                failed = tuple(deterministic_failures(values))
                key = (failed, tuple(c.klass for c in verdict.claims) if verdict is not None else ())
                if key in stages:
                    stage = stages[key]
                else:
                    stage = stages[key] = failure_stage(values, list(key[1]))
                if stage:
                    count += 1
                    yield STAGE_ORDER.index(stage), -len(failed), cfg, cid

    pairs = ranked()
    top = heapq.nsmallest(n, pairs)
    for _ in pairs:  # counted to the end (nothing is left unless n is 0)
        pass
    return count, [(cfg, cid, STAGE_ORDER[stage], deterministic_failures(doc.per_config[cfg].per_case[cid]))
                   for stage, _, cfg, cid in top]


def _version_lines(doc: MetricsView) -> list[str]:
    """The versions the traces carry (eval set, corpus, chunking, index, prompt, generator...),
    per config: what a number in this report was measured on."""
    per = {cfg: doc.per_config[cfg].versions for cfg in doc.configs}
    keys = sorted({k for v in per.values() for k in v})
    if not keys:
        return []
    return ["", "## Versions (from the traces)", ""] + _table(
        ["config", *map(markdown, keys)],
        [[markdown(cfg), *(", ".join(map(markdown, v.get(k, []))) or "—" for k in keys)] for cfg, v in per.items()])


def _record_cell(ref: DecidingRecord | RecordListing | None, fallback: str) -> str:
    if ref is None:
        return markdown_code(Path(fallback).name)
    labels = f"labels {markdown(ref.labels_hash[:12])}" if ref.labels_hash \
        else "labels unrecorded (legacy record)"
    raters = ", ".join(f"{markdown(name)} {count}" for name, count in ref.raters.items())
    return f"{markdown_code(Path(ref.path or '').name)} ({labels}, raters {raters})"


def calibration_lines(calibration: CalibrationSummary) -> list[str]:
    """Per criterion, the agreement of the record that decides its trust and that record (file,
    labels hash, raters; n in its own column), then this judge's records that decide nothing."""
    rule = calibration.rule
    out = ["", "## Calibration", "",
           (f"Judge against {markdown_code(calibration.primary_rater)}, beside human–human agreement; per "
           f"criterion, the record that decides trust ({markdown(rule or 'the newest record')}).")]
    decided_by = calibration.decided_by
    out += [""] + _table(
        ["criterion", "n", "agreement", "kappa", "95% CI", "human~human kappa", "deciding record"],
        [[markdown(name), str(st.judge_vs_human["n"]), _num(st.judge_vs_human["observed"]),
          _num(st.judge_vs_human["kappa"]),
          f"[{_num(st.judge_vs_human['ci_low'])}, {_num(st.judge_vs_human['ci_high'])}]",
          "; ".join(f"{_num(i['kappa'])} (n={i['n']})" for i in st.inter_rater.values()) or "–",
          _record_cell(decided_by.get(name), calibration.path)]
         for name, st in calibration.criteria.items()])
    idle = [r for r in calibration.records if not r.decides]
    if idle:
        out += ["", "Other records of this judge, outranked for every criterion: " + "; ".join(
            _record_cell(r, "") + " n " + ", ".join(f"{markdown(c)} {n}" for c, n in r.n.items()) for r in idle) + "."]
    return out
