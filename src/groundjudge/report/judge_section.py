"""The judge's part of the report: every (case, config) accounted for, and judge aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundjudge.judge.engine import JudgeOutcome, JudgeTotals, outcome_record
from groundjudge.judge.rubric import Rubric
from groundjudge.load.dataset import Dataset
from groundjudge.provenance import provenance
from groundjudge.select import Selection, skip_counts


def _mean(values: list[float]) -> dict[str, Any]:
    return {"value": sum(values) / len(values) if values else None, "n": len(values)}


def judge_aggregate(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in records.values() if r["status"] == "judged"]
    scores = [r["scores"] for r in judged]

    def collect(name: str) -> list[float]:
        return [s[name] for s in scores if s[name] is not None]

    statuses: dict[str, int] = {}
    for r in records.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "faithfulness": _mean(collect("faithfulness")),
        "correctness": _mean(collect("correctness")),
        "citation_support": _mean(collect("citation_support")),
        "unsupported_claims": sum(s["unsupported_claims"] for s in scores),
        "contradicted_claims": sum(s["contradicted_claims"] for s in scores),
        "misattributed_citations": sum(s["misattributed_citations"] for s in scores),
        "claims": sum(s["claims"] for s in scores),
        "status_counts": statuses,
        "judge_error_rate": {"value": statuses.get("judge_error", 0) / (len(judged) + statuses.get("judge_error", 0))
                             if judged or statuses.get("judge_error") else None,
                             "n": len(judged) + statuses.get("judge_error", 0)},
    }


def judge_document(dataset: Dataset, selections: Sequence[Selection], outcomes: Sequence[JudgeOutcome],
                   totals: JudgeTotals, cache_stats: dict[str, Any], *, rubric: Rubric, model: str,
                   base_url: str, decoding: dict[str, Any]) -> dict[str, Any]:
    by_pair = {(o.config_id, o.case_id): o for o in outcomes}
    per_config: dict[str, dict[str, Any]] = {}
    for cfg in dataset.config_ids:
        records: dict[str, dict[str, Any]] = {}
        for case_id in dataset.cases:
            if case_id in dataset.missing_trace.get(cfg, []):
                records[case_id] = {"status": "skipped", "reason": "missing_trace: no trace for this config"}
        for s in selections:
            if s.config_id != cfg:
                continue
            if not s.judge:
                records[s.case_id] = {"status": "skipped", "reason": s.reason}
            else:
                record = outcome_record(by_pair[(cfg, s.case_id)])
                record["selected_because"] = s.reason
                records[s.case_id] = record
        ordered = {cid: records[cid] for cid in dataset.cases if cid in records}
        per_config[cfg] = {"aggregate": judge_aggregate(ordered), "per_case": ordered}
    return {
        "provenance": {
            "rubric": {"id": rubric.id, "version": rubric.version, "hash": rubric.content_hash},
            "model": model,
            "base_url": base_url,
            "decoding": decoding,
            "output_mode_used": totals.mode,
            **provenance(),
        },
        "selection": {"to_judge": sum(1 for s in selections if s.judge), "skip_reasons": skip_counts(selections)},
        "totals": {"requests": totals.requests, "prompt_tokens": totals.prompt_tokens,
                   "completion_tokens": totals.completion_tokens, "cost_usd": totals.cost_usd,
                   "cache_hits": totals.cache_hits, "judge_errors": totals.errors, "stopped": totals.stopped},
        "cache": cache_stats,
        "per_config": per_config,
    }


def _fmt(summary: dict[str, Any]) -> str:
    return "–" if summary["value"] is None else f"{summary['value']:.3f} (n={summary['n']})"


def render_judge_markdown(doc: dict[str, Any]) -> str:
    judge = doc["judge"]
    prov = judge["provenance"]
    out = ["## Judge", "",
           f"Rubric `{prov['rubric']['id']}` v{prov['rubric']['version']} (hash `{prov['rubric']['hash'][:12]}`), "
           f"model `{prov['model']}`, decoding {prov['decoding']}. "
           "Judge scores are advisory until calibrated against human labels.", ""]
    configs = list(judge["per_config"])
    rows = [("faithfulness", lambda a: _fmt(a["faithfulness"])),
            ("correctness (0-3)", lambda a: _fmt(a["correctness"])),
            ("citation support", lambda a: _fmt(a["citation_support"])),
            ("claims", lambda a: str(a["claims"])),
            ("unsupported claims", lambda a: str(a["unsupported_claims"])),
            ("contradicted claims", lambda a: str(a["contradicted_claims"])),
            ("misattributed citations", lambda a: str(a["misattributed_citations"])),
            ("judged / skipped / judge_error", lambda a: " / ".join(
                str(a["status_counts"].get(s, 0)) for s in ("judged", "skipped", "judge_error")))]
    out += ["| metric | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    for name, get in rows:
        out.append(f"| {name} | " + " | ".join(get(judge["per_config"][c]["aggregate"]) for c in configs) + " |")
    t = judge["totals"]
    cache = judge["cache"]
    out += ["", f"Calls: {t['requests']} HTTP requests, {t['prompt_tokens']} prompt + {t['completion_tokens']} "
            f"completion tokens, ${t['cost_usd']:.4f}. Cache: {t['cache_hits']} hits, {cache['entries']} entries "
            f"({cache['size_bytes']} bytes) in `{cache['directory']}`."]
    if t["stopped"]:
        out += ["", f"**The judge stopped sending**: {t['stopped']}"]
    skips = judge["selection"]["skip_reasons"]
    if skips:
        out += ["", "Skipped (reason: count): " + ", ".join(f"{k}: {v}" for k, v in sorted(skips.items()))]
    errors = [(c, cid, r["reason"]) for c in configs for cid, r in judge["per_config"][c]["per_case"].items()
              if r["status"] == "judge_error"]
    if errors:
        out += ["", "### Judge errors", ""] + [f"- `{cid}` ({c}): {reason}" for c, cid, reason in errors]
    bad = [(c, cid, claim) for c in configs for cid, r in judge["per_config"][c]["per_case"].items()
           for claim in r.get("claims", []) if claim["class"] in ("unsupported", "contradicted", "misattributed")]
    if bad:
        out += ["", "### Unsupported claims and bad citations", "", "| case | config | class | claim | cited | support |",
                "|---|---|---|---|---|---|"]
        for c, cid, claim in bad[:40]:
            text = claim["claim"].replace("|", "\\|").replace("\n", " ")
            out.append(f"| `{cid}` | {c} | {claim['class']} | {text} | {', '.join(claim['cited'])} | "
                       f"{', '.join(claim['support'])} |")
    return "\n".join(out) + "\n"
