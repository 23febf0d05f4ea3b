"""The Markdown summary of a WFGY chunking report."""

from __future__ import annotations

from typing import Any

from groundjudge.inert import markdown
from groundjudge.profiles.wfgy_chunking.definitions import BAD_DELTA_S

ABOVE = f"above_{BAD_DELTA_S:.2f}"


def _fmt(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _not_evaluated(result: dict[str, Any]) -> list[str]:
    skipped = result.get("gates_not_evaluated") or []
    if not skipped:
        return []
    return ["", f"{len(skipped)} of {len(result['gates'])} gates could not be evaluated ({', '.join(skipped)}): "
                "eligible only when every gate holds, and a gate without data does not."]


def _headline(result: dict[str, Any]) -> list[str]:
    ks = result["ks"]
    lines = [
        "# WFGY chunking eval",
        "",
        f"**{'Eligible for canary' if result['pass'] else 'NOT eligible for canary'}** "
        f"({result['n_questions']} questions, {result['n_runs']} runs, top-{result['k']}, "
        f"citations: {result['citation_policy']}).",
        *_not_evaluated(result),
        "",
        "| k | " + " | ".join(str(n) for n in ks) + " |",
        "|---|" + "---|" * len(ks),
        "| P@k | " + " | ".join(_fmt(result[f"P@{n}"]) for n in ks) + " |",
        "| R@k | " + " | ".join(_fmt(result[f"R@{n}"]) for n in ks) + " |",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key in ("coverage", "citation_accuracy", "anchor_hit", "anchor_proximity", "ΔS_med", "ΔS_p90",
                "paraphrase_agreement@5", "λ_convergent"):
        value = _fmt(result[key])
        if key == "citation_accuracy" and result["citation_accuracy_reason"]:
            value += f" ({result['citation_accuracy_reason']})"
        if key.startswith("ΔS"):
            value += f" ({result['ΔS_reason']})" if result["ΔS_reason"] else f" over {result['ΔS_runs']} runs"
        if key == "λ_convergent":
            value += f" over {result['λ_triplets']} triplets"
        lines.append(f"| {key} | {value} |")
    return lines


def _delta_s_tables(result: dict[str, Any]) -> list[str]:
    model = result["ΔS_model"]
    sources = result["ΔS_source"]
    origin = f"runs with ΔS from the trace: {sources['trace']}, computed: {sources['embedding']}, " \
             f"none: {sources['none']}"
    if model:
        origin += f"; model {markdown(model['name'])} (weights sha256 {markdown(str(model['weights_sha256'])[:12])}…)"
    lines = ["", "## ΔS per question (top-k items of all its runs)", "", origin + ".", "",
             f"| qid | runs | items | median | p90 | > {BAD_DELTA_S:.2f} | within thresholds |",
             "|---|---|---|---|---|---|---|"]
    for qid, row in result["ΔS_by_qid"].items():
        lines.append(f"| {markdown(qid)} | {row['runs']} | {row['n']} | {_fmt(row['median'])} | {_fmt(row['p90'])} | "
                     f"{row[ABOVE]} | {_fmt(row['within_thresholds'])} |")
    lines += ["", "## By content type (top-k)", "",
              "| type | retrieved | relevant | precision | ΔS items | ΔS median | ΔS p90 |",
              "|---|---|---|---|---|---|---|"]
    for kind, row in result["by_type"].items():
        spread = row["ΔS"]
        lines.append(f"| {markdown(kind)} | {row['retrieved']} | {row['relevant']} | {_fmt(row['precision'])} | "
                     f"{spread['n']} | {_fmt(spread['median'])} | {_fmt(spread['p90'])} |")
    return lines


def _gates_and_notes(result: dict[str, Any]) -> list[str]:
    lines = ["", "## Canary gates", "", "| gate | value | threshold | result |", "|---|---|---|---|"]
    for gate in result["gates"]:
        status = {"fail": "FAIL", "skipped": "NOT EVALUATED"}.get(gate["status"], gate["status"])
        if gate["reason"]:
            status += f" ({gate['reason']})"
        lines.append(f"| {gate['gate']} | {_fmt(gate['value'])} | {gate['op']} {gate['threshold']} | {status} |")
    live = result["recall@5_vs_live"]
    if live:
        lines += ["", f"Recall@5: shadow {_fmt(live['shadow_R@5'])}, live {_fmt(live['live_R@5'])}, "
                      f"drop {_fmt(live['drop_points'])} points (at most {live['max_drop_points']})."]
    notes = []
    if result["bad_qids"]:
        notes.append(f"- Flagged (coverage 0 or cited ΔS > {BAD_DELTA_S}): "
                     + ", ".join(map(markdown, result["bad_qids"])))
    if result["missing_trace"]:
        notes.append(f"- No run (scored as retrieving nothing): {', '.join(map(markdown, result['missing_trace']))}")
    if result["unknown_trace"]:
        notes.append("- Runs for qids not in the gold set (ignored): "
                     + ", ".join(map(markdown, result["unknown_trace"])))
    if notes:
        lines += ["", "## Notes", "", *notes]
    return lines


def render_markdown(result: dict[str, Any]) -> str:
    """A Markdown summary of a :func:`report` result: P@k/R@k, coverage, ΔS, types, gates."""
    lines = _headline(result) + _delta_s_tables(result) + _gates_and_notes(result)
    return "\n".join(lines) + "\n"
