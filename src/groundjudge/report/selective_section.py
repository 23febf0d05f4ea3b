"""Selective trust in report.md and triage.md: who decided each judge gate's items, the agreement
level guaranteed, what the all-or-nothing rule would have said, the human queue, and the
record's reliability and coverage-vs-agreement figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groundjudge.inert import markdown, markdown_code
from groundjudge.report.numbers import number

if TYPE_CHECKING:
    from groundjudge.calibrate.cascade import Abstention, Cutoff, QueueItem, SelectiveTrust
    from groundjudge.report.document import ReportDocument

QUEUE_SHOWN = 50


def queue_lines(selective: SelectiveTrust | None) -> list[str]:
    """The items no trusted judge and no person has decided yet (``selective``: the gates'
    selective trust, None without it): the human queue."""
    if selective is None or not selective.queue:
        return []
    queue = selective.queue
    out = [f"### Human queue ({len(queue)} item(s))", "",
           ("Verdicts below the cut-off that no trusted judge settled: label these (`groundjudge label` offers "
           "them first; each is a `awaits_person` row of triage.jsonl) to raise the gates' coverage."), ""]
    out += [f"- {markdown_code(q.case_id)} ({markdown(q.config_id)}): {', '.join(map(markdown, q.criteria))}"
            + _why(q) for q in queue[:QUEUE_SHOWN]]
    if len(queue) > QUEUE_SHOWN:
        out.append(f"- … and {len(queue) - QUEUE_SHOWN} more in report.json (`gates.selective.queue`)")
    return out + [""]


def abstention_text(a: dict[str, Any]) -> str:
    """Plain text (triage.jsonl's ``why``): Markdown makes it inert where it is shown."""
    return f"`{a['judge']}` ({a['role']}): {a['reason']}"


def _abstention_markdown(a: Abstention) -> str:
    return f"{markdown_code(a.judge)} ({markdown(a.role)}): {markdown(a.reason)}"


def _why(item: QueueItem) -> str:
    parts = [f"{markdown(r.criterion)}: " + "; ".join(_abstention_markdown(a) for a in r.abstained)
             for r in item.reasons]
    return (" — " + " | ".join(parts)) if parts else ""


def _cutoff_row(judge: str, name: str, c: Cutoff) -> str:
    lam = "none: keeps nothing" if c.cutoff is None else f"{c.cutoff:g}"
    return (f"| {judge} | {markdown(name)} | {lam} | {c.target_agreement:g} | {c.risk:g} | "
            f"{number(c.coverage, 3)} "
            f"(n={c.n}) | {number(c.bound, 3)} |")


def _figures(name: str, block: dict[str, Any]) -> list[str]:
    """A criterion's ``selective`` block of the calibration record (a JSON object, as the record
    has it): reliability bins and the coverage-vs-agreement curve."""
    rel, fit, kt = block["reliability"], block["cutoff"], block["kappa_threshold"]
    threshold = ("" if kt is None else
                 f" Kappa-maximising threshold on P(True) {number(kt['threshold'], 2)}: cross-fitted kappa "
                 f"{number(kt['cross_fitted_kappa'], 3)} over {kt['folds']} folds, against "
                 f"{number(kt['kappa_at_default'], 3)} at the rubric's {kt['default']:g}.")
    out = [f"#### {markdown_code(name)}: calibration figures", "",
           (f"Verdict confidence: {markdown(block['verdict_confidence'])}. Expected calibration error "
           f"{number(rel['ece'], 3)} (n={rel['n']}).{threshold}"), "",
           "| confidence | n | mean confidence | agreement |", "|---|---|---|---|"]
    out += [f"| {b['low']:g}–{b['high']:g} | {b['n']} | {number(b['confidence'], 3)} | {number(b['agreement'], 3)} |"
            for b in rel["bins"] if b["n"]]
    out += ["", f"Coverage against agreement ({markdown(fit['reason'])}):", "",
            "| cut-off | kept | coverage | agreement | lower bound | test |", "|---|---|---|---|---|---|"]
    rows: dict[int, dict[str, Any]] = {}  # kept -> the lowest cut-off keeping them, tested ones first
    for p in fit["curve"]:
        have = rows.get(p["kept"])
        if p["kept"] and (have is None or p["bound"] is not None or have["bound"] is None):
            rows[p["kept"]] = p
    for p in sorted(rows.values(), key=lambda p: -p["cutoff"]):
        out.append(f"| {p['cutoff']:g} | {p['kept']} | {number(p['kept'] / fit['n'] if fit['n'] else None, 3)} | "
                   f"{number(p['agreement'], 3)} | {number(p['bound'], 3)} | {p['status'].replace('_', ' ')} |")
    return out + [""]


def render_selective_markdown(doc: ReportDocument) -> str:
    """The section, or "" when no judge of the run has a guaranteed cut-off."""
    selective = doc.gates.selective
    if selective is None:
        return ""
    out = ["## Selective trust", "",
           ("Each judged item is decided by the first judge's verdict when its confidence reaches that judge's "
           "cut-off lambda (`trusted`), else by a human label, else by the escalation judge's verdict at its own "
           "cut-off (`escalated`); otherwise it waits in the human queue. With probability at least 1 - risk, "
           "verdicts at or above lambda agree with people at least `target` of the time."), "",
           "| judge | criterion | lambda | target | risk | coverage on calibration | lower bound |",
           "|---|---|---|---|---|---|---|"]
    first_model = doc.judge.identity.model
    out += [_cutoff_row(markdown_code(first_model), name, c) for name, c in selective.first.items()]
    out += [_cutoff_row(f"{markdown_code(selective.escalation_model)} (escalation)", name, c)
            for name, c in selective.escalation.items()]
    if selective.escalation_model and not selective.escalation:
        out.append(f"| {markdown_code(selective.escalation_model)} (escalation) | – | no calibration record for "
                   "it: its verdicts are never trusted | | | | |")
    for name, why in selective.all_or_nothing.items():
        out.append(f"| {markdown_code(first_model)} | {markdown(name)} | – | all-or-nothing rule: {markdown(why)} "
                   "| | | |")
    out += ["", ("Ordinal criteria: a verdict agrees with people only on the exact grade; their rate is the mean "
            "grade of the decided items."), ""] if any(
        c.kind == "ordinal" for per in selective.per_config.values() for c in per.values()) else [""]
    out += [("| config | criterion | items | trusted | escalated | human | queued | coverage | rate (True) or "
            "mean grade | guaranteed agreement | PPI rate [95% CI] |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg, per in selective.per_config.items():
        for name, c in per.items():
            k = c.counts
            level = ("–" if c.guaranteed is None or c.guarantee_risk is None else
                     f">= {c.guaranteed:.3f} (prob. >= {1 - c.guarantee_risk:.2f})")
            ppi = c.ppi  # the bias-corrected rate's figures: a JSON object
            ppi_text = ("–" if not ppi or ppi["corrected"] is None else
                        f"{ppi['corrected']:.3f} [{ppi['ci_low']:.3f}, {ppi['ci_high']:.3f}] (n={ppi['n_labelled']})")
            out.append(f"| {markdown(cfg)} | {markdown(name)} | {c.items} | {k['trusted']} | {k['escalated']} | "
                       f"{k['human']} | "
                       f"{k['queued']} | {number(c.coverage, 3)} | {number(c.rate, 3)} | {level} | {ppi_text} |")
    gates = [g for g in doc.gates.results if g.all_or_nothing]
    if gates:
        out += ["", "| gate | under selective trust | under the all-or-nothing rule |", "|---|---|---|"]
        out += [f"| {markdown(g.name)} | {g.status}: {markdown(g.reason)} | {markdown(g.all_or_nothing)} |"
                for g in gates]
    esc = doc.escalation
    if esc is not None:
        u = esc.totals.usage
        out += ["", (f"Escalation judge {markdown_code(esc.identity.model)}: {esc.to_judge} item(s) sent, "
                f"{u.requests} HTTP requests, {u.prompt_tokens} prompt + {u.completion_tokens} completion "
                f"tokens, ${u.cost_usd:.4f}; {esc.totals.cache_hits} from the cache.")]
    out.append("")
    out += queue_lines(selective)
    calibration = doc.calibration
    for name, st in (calibration.criteria if calibration is not None else {}).items():
        block = (st.model_extra or {}).get("selective")  # the record's figures, as it has them
        if block:
            out += _figures(name, block)
    return "\n".join(out) + "\n"
