"""The disagreement review (``calibrate.review``) in report.md: per reviewed criterion of the
deciding record, the disagreements by cause and direction, one example each. Text from answers
and labels goes through ``groundjudge.inert``: it is data, never markup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groundjudge.inert import markdown, markdown_code
from groundjudge.report.numbers import number

if TYPE_CHECKING:
    from groundjudge.report.document import CalibrationSummary

CLAIM_SHOWN = 160  # characters of a claim or span in a table cell; report.json keeps it whole


def _short(text: str) -> str:
    return text if len(text) <= CLAIM_SHOWN else text[: CLAIM_SHOWN - 1] + "…"


def _example(e: dict[str, Any]) -> str:
    parts = [markdown_code(e["item"])]
    if e.get("claim"):
        parts.append(f"“{markdown(_short(e['claim']))}”")
    if e.get("unfound_terms"):
        parts.append("not in the passages: " + ", ".join(map(markdown, e["unfound_terms"])))
    if e.get("claim"):
        p_yes = number(e["p_yes"], 2) if e.get("p_yes") is not None else "not asked"
        parts.append(f"support {number(e.get('support'), 2)}, P(yes) {p_yes}")
    if e.get("human_span"):
        parts.append(f"people marked “{markdown(_short(e['human_span']))}”")
    return "; ".join(parts)


def review_lines(calibration: CalibrationSummary) -> list[str]:
    """Markdown lines, nothing when no criterion of the record carries a review (a criterion's
    ``review``, as the record has it: a JSON object)."""
    out: list[str] = []
    for name, stats in calibration.criteria.items():
        review = (stats.model_extra or {}).get("review")
        if not review:
            continue
        out += ["", f"### {markdown(name)}: disagreements by cause ({review['disagreements']})", "",
                ("Each disagreement counted once, under the first cause whose rule matches (docs/calibration.md, "
                 "disagreement review). Too strict: the judge said false, people true."), "",
                "| cause | judge too strict | judge too lenient | example |", "|---|---|---|---|"]
        out += [f"| {markdown(c['title'])} ({markdown_code(key)}) | {c['too_strict']} | {c['too_lenient']} | "
                f"{_example(c['examples'][0]) if c['examples'] else '–'} |"
                for key, c in review["causes"].items() if c["n"]]
    return out
