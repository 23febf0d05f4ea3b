"""Stability in report.md, triage and the HTML report: each criterion's noise band, the verdicts
inside it (unstable), or that this judge has no stability figures (``calibrate/stability.py``)."""

from __future__ import annotations

from groundjudge.calibrate.stability import StabilityCheck, UnstableVerdict
from groundjudge.inert import markdown, markdown_code
from groundjudge.report.numbers import number

UNSTABLE_SHOWN = 50


def unstable_by_case(stability: StabilityCheck | None) -> dict[tuple[str, str], list[UnstableVerdict]]:
    """(config id, case id) -> its unstable verdicts (the run's stability check, report.json
    ``stability.unstable``); {} without a check."""
    out: dict[tuple[str, str], list[UnstableVerdict]] = {}
    for u in stability.unstable if stability is not None else ():
        out.setdefault((u.config_id, u.case_id), []).append(u)
    return out


def unstable_text(u: UnstableVerdict) -> str:
    """Plain text (triage.jsonl's ``why``, the HTML): Markdown makes it inert where it is shown."""
    return (f"{u.criterion}: support {u.support:.3f} inside the noise band [{u.low:.3f}, {u.high:.3f}): "
            "asked again, this verdict could come out the other way")


def stability_note(stability: StabilityCheck | None) -> str | None:
    """One line on what the stability check found, for report and triage headers; None when the
    rubric has nothing to check."""
    if stability is None:
        return None
    if stability.status == "no_figures":
        return f"**Stability unknown**: {stability.reason}."
    return f"**Stability**: {stability.reason} (marked unstable; selective trust never trusts them)."


def render_stability_markdown(stability: StabilityCheck | None) -> str:
    """The report.md section of the run's stability check, or "" when the rubric has no verdict
    a band applies to (``stability`` None)."""
    if stability is None:
        return ""
    out = ["## Stability", ""]
    if stability.status == "no_figures":
        return "\n".join([*out, markdown(stability.reason) + ".", "", ""])
    out += [("A verdict is unstable when its support lies inside its criterion's noise band [cut - w, cut + w), "
            "w being the largest support spread measured by re-asking the same questions "
            f"(record {markdown_code((stability.record or '').split('/')[-1])}): asked again, it could come "
            "out the other way. Selective trust never trusts an unstable verdict."), "",
            markdown(stability.reason) + ".", "",
            "| criterion | cut | noise band | questions re-asked | asks each | flip rate | verdicts checked | unstable |",
            "|---|---|---|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    for u in stability.unstable:
        counts[u.criterion] = counts.get(u.criterion, 0) + 1
    for name, band in stability.bands.items():
        out.append(f"| {markdown(name)} | {band.cut:g} | [{number(band.low, 3)}, {number(band.high, 3)}) | "
                   f"{band.questions} | {band.repeats} | {number(band.flip_rate, 3)} | "
                   f"{stability.checked.get(name, 0)} | {counts.get(name, 0)} |")
    if stability.unstable:
        out += ["", "Unstable verdicts:", ""]
        out += [f"- {markdown_code(u.case_id)} ({markdown(u.config_id)}): {markdown(u.criterion)} "
                f"{markdown(str(u.label).lower())}, support {u.support:.3f}"
                for u in stability.unstable[:UNSTABLE_SHOWN]]
        if len(stability.unstable) > UNSTABLE_SHOWN:
            out.append(f"- … and {len(stability.unstable) - UNSTABLE_SHOWN} more in report.json "
                       "(`stability.unstable`) and triage.jsonl")
    return "\n".join([*out, "", ""])
