"""The Markdown summary of a WFGY chunking report."""

from __future__ import annotations

from typing import Any

from groundjudge.inert import markdown


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
    return ["", (f"{len(skipped)} of {len(result['gates'])} gates could not be evaluated ({', '.join(skipped)}): "
                "eligible only when every gate holds, and a gate without data does not.")]


def _headline(result: dict[str, Any]) -> list[str]:
    ks = result["ks"]
    lines = [
        "# WFGY chunking eval",
        "",
        (f"**{'Eligible for canary' if result['pass'] else 'NOT eligible for canary'}** "
        f"({result['n_questions']} questions, {result['n_runs']} runs, top-{result['k']}, "
        f"citations: {result['citation_policy']}, offset window {result['window']} bytes)."),
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


def _zones(result: dict[str, Any]) -> tuple[list[str], str]:
    """The zone names and a sentence giving their bounds, as the report used them."""
    parts = []
    for name, (low, high) in result["ΔS_zones"].items():
        bounds = f"<= {high}" if low is None else f">= {low}" if high is None else f"{low}-{high}"
        parts.append(f"{name} {bounds}")
    return list(result["ΔS_zones"]), "ΔS zones: " + ", ".join(parts) + " (bounds inclusive; a value where two " \
                                                                   "zones overlap counts in both)."


def _delta_s_tables(result: dict[str, Any]) -> list[str]:
    model = result["ΔS_model"]
    sources = result["ΔS_source"]
    above = f"above_{result['ΔS_flag_above']:.2f}"
    names, zone_note = _zones(result)
    origin = f"runs with ΔS from the trace: {sources['trace']}, computed: {sources['embedding']}, " \
             f"none: {sources['none']}"
    if model:
        origin += f"; model {markdown(model['name'])} (weights sha256 {markdown(str(model['weights_sha256'])[:12])}…)"
    zone_heads = " | ".join(names)
    cited = result["cited_ΔS"]
    lines = ["", "## ΔS per question (top-k items of all its runs; the cited snippet of each answered run)", "",
             origin + ".", zone_note, "",
             (f"Cited snippet over all answered runs: {cited['answered']} answered, {cited['unknown']} without ΔS, "
             f"median {_fmt(cited['median'])}, p90 {_fmt(cited['p90'])}, max {_fmt(cited['max'])}."), "",
             f"| qid | runs | items | median | p90 | > {result['ΔS_flag_above']:.2f} | {zone_heads} "
             f"| within thresholds | cited: answered | cited: no ΔS | cited median | cited p90 | "
             + " | ".join(f"cited {n}" for n in names) + " |",
             "|---|" + "---|" * (9 + 2 * len(names))]
    for qid, row in result["ΔS_by_qid"].items():
        c = row["cited"]
        zones = " | ".join(str(row["zones"][n]) for n in names)
        cited_zones = " | ".join(str(c["zones"][n]) for n in names)
        lines.append(f"| {markdown(qid)} | {row['runs']} | {row['n']} | {_fmt(row['median'])} | {_fmt(row['p90'])} | "
                     f"{row[above]} | {zones} | {_fmt(row['within_thresholds'])} | {c['answered']} | {c['unknown']} | "
                     f"{_fmt(c['median'])} | {_fmt(c['p90'])} | {cited_zones} |")
    lines += ["", "## By content type (top-k)", "",
              f"| type | retrieved | relevant | precision | ΔS items | ΔS median | ΔS p90 | {zone_heads} |",
              "|---|---|---|---|---|---|---|" + "---|" * len(names)]
    for kind, row in result["by_type"].items():
        spread = row["ΔS"]
        zones = " | ".join(str(spread["zones"][n]) for n in names)
        lines.append(f"| {markdown(kind)} | {row['retrieved']} | {row['relevant']} | {_fmt(row['precision'])} | "
                     f"{spread['n']} | {_fmt(spread['median'])} | {_fmt(spread['p90'])} | {zones} |")
    return lines


def _delta_row(name: str, row: dict[str, Any]) -> str:
    delta = row["delta"]
    shown = "null" if delta is None else f"{delta:+.4f}"
    return f"| {name} | {_fmt(row['shadow'])} | {_fmt(row['live'])} | {shown} | {row['change'] or '-'} |"


def _versus_live(result: dict[str, Any]) -> list[str]:
    versus = result["vs_live"]
    if not versus:
        return []
    lines = ["", "## Shadow vs live (delta = shadow - live)", "",
             f"Live: {versus['live_runs']} runs.", "",
             "| metric | shadow | live | delta | shadow is |", "|---|---|---|---|---|"]
    lines += [_delta_row(name, row) for name, row in versus["metrics"].items()]
    lines += ["", "| type | retrieved (shadow / live) | precision delta | ΔS median delta | ΔS p90 delta |",
              "|---|---|---|---|---|"]
    for kind, row in versus["by_type"].items():
        cells = []
        for key in ("precision", "ΔS_median", "ΔS_p90"):
            delta = row[key]["delta"]
            cells.append("null" if delta is None else f"{delta:+.4f} ({row[key]['change']})")
        lines.append(f"| {markdown(kind)} | {row['retrieved']['shadow']} / {row['retrieved']['live']} | "
                     + " | ".join(cells) + " |")
    for key, note in versus["live_notes"].items():
        lines.append(f"\nLive {key}: {markdown(str(note))}")
    return lines


def _gates_and_notes(result: dict[str, Any]) -> list[str]:
    lines = ["", "## Gates (the canary gates and the cited snippet's ΔS target)", "",
             "| gate | value | threshold | result |", "|---|---|---|---|"]
    for gate in result["gates"]:
        status = {"fail": "FAIL", "skipped": "NOT EVALUATED"}.get(gate["status"], gate["status"])
        if gate["reason"]:
            status += f" ({gate['reason']})"
        lines.append(f"| {gate['gate']} | {_fmt(gate['value'])} | {gate['op']} {gate['threshold']} | {status} |")
    k = result["recall_k"]
    live = result[f"recall@{k}_vs_live"]
    if live:
        lines += ["", (f"Recall@{k}: shadow {_fmt(live[f'shadow_R@{k}'])}, live {_fmt(live[f'live_R@{k}'])}, "
                      f"drop {_fmt(live['drop_points'])} points (at most {live['max_drop_points']}).")]
    notes = []
    if result["bad_qids"]:
        notes.append(f"- Flagged (coverage 0 or cited ΔS > {result['ΔS_flag_above']}): "
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
    """A Markdown summary of a :func:`report` result: P@k/R@k, coverage, ΔS and its zones per
    question and type, the deltas against live, gates."""
    lines = _headline(result) + _delta_s_tables(result) + _versus_live(result) + _gates_and_notes(result)
    return "\n".join(lines) + "\n"
