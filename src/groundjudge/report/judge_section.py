"""The judge's part of report.md, and the trust banner shown wherever judge findings are read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from groundjudge.inert import markdown, markdown_code
from groundjudge.report.numbers import summary

if TYPE_CHECKING:
    from groundjudge.calibrate.trust import TrustStatus
    from groundjudge.judge.results import ConfigJudgeSummary
    from groundjudge.metrics.value import MetricValue
    from groundjudge.report.document import ReportDocument

README_TRUST = "section \"Calibration: when may judge scores gate?\" of docs/calibration.md"
BAD_CLAIMS = ("unsupported", "contradicted", "misattributed")


def trust_lines(trust: Mapping[str, TrustStatus]) -> list[str]:
    """Whether each judge metric may gate, with kappa and the reason (``trust``: the gates'
    trust, judge metric -> its status): the first thing a reader of judge findings needs to know."""
    if not trust:
        return []
    trusted = [m for m, t in trust.items() if t.trusted]
    head = ("**Judge trust: every judge metric is calibrated and may gate.**" if len(trusted) == len(trust)
            else "**Judge trust: " + ("untrusted" if not trusted else "partly trusted") + "** — findings of an "
            "untrusted judge are advisory: its agreement with human labels is not proven, so read each one "
            f"against the chunks before acting on it (see the {README_TRUST}).")
    return [head, ""] + [f"- {markdown_code(m)}: {markdown(t.reason)}" for m, t in trust.items()] + [""]


def _fmt(value: MetricValue) -> str:
    return summary(value, 3)


def _metric_cell(metric: str) -> Callable[[ConfigJudgeSummary], str]:
    return lambda s: _fmt(s.metrics[metric])


def _class_cell(klass: str) -> Callable[[ConfigJudgeSummary], str]:
    return lambda s: str(s.claim_classes.get(klass, 0))


def render_judge_markdown(doc: ReportDocument) -> str:
    judge = doc.judge
    ident = judge.identity
    out = ["## Judge", "",
           (f"Rubric {markdown_code(ident.rubric.id)} v{ident.rubric.version} "
           f"(hash {markdown_code(ident.rubric.hash[:12])}), model {markdown_code(ident.model)}, "
           f"decoding {markdown(ident.decoding)}."), ""]
    out += trust_lines(doc.gates.trust)
    configs = list(judge.per_config)
    summaries = {c: judge.per_config[c].summary for c in configs}
    rows: list[tuple[str, Callable[[ConfigJudgeSummary], str]]] = [
        (f"{markdown(crit.metric)} ({markdown(crit.name)}" + (", 0-3" if crit.kind == "ordinal" else "") + ")",
         _metric_cell(crit.metric)) for crit in judge.criteria]
    rows += [("claims", lambda s: str(s.claims))]
    rows += [(f"claims: {k}", _class_cell(k)) for k in BAD_CLAIMS]
    if any(s.claim_classes.get("unchecked") for s in summaries.values()):
        rows += [("claims: unchecked (answer already decided)", lambda s: str(s.claim_classes.get("unchecked", 0)))]
    rows += [("judged / skipped / judge_error", lambda s: " / ".join(
        str(s.status_counts.get(x, 0)) for x in ("judged", "skipped", "judge_error")))]
    out += ["| metric | " + " | ".join(map(markdown, configs)) + " |", "|---|" + "---|" * len(configs)]
    for name, get in rows:
        out.append(f"| {name} | " + " | ".join(get(summaries[c]) for c in configs) + " |")
    t = judge.totals
    u = t.usage
    cache = judge.cache  # the cache's own description: a JSON object
    out += ["", (f"Calls: {u.requests} HTTP requests, {u.prompt_tokens} prompt + {u.completion_tokens} "
            f"completion tokens, ${u.cost_usd:.4f}. Cache: {t.cache_hits} hits, {cache['entries']} entries "
            f"({cache['size_bytes']} bytes) in {markdown_code(cache['directory'])}.")]
    if u.unmetered:
        out[-1] += (f" {u.unmetered} of the replies came with no token count from the endpoint, so the "
                    "token figures leave them out.")
    if t.stopped:
        out += ["", f"**The judge stopped sending**: {markdown(t.stopped)}"]
    skips = judge.skip_reasons
    if skips:
        out += ["", "Skipped (reason: count): " + ", ".join(f"{markdown(k)}: {v}" for k, v in sorted(skips.items()))]
    errors = [(c, cid, r.reason) for c in configs for cid, r in judge.per_config[c].cases.items()
              if r.status == "judge_error"]
    if errors:
        out += ["", "### Judge errors", ""] + [f"- {markdown_code(cid)} ({markdown(c)}): {markdown(reason)}"
                                                for c, cid, reason in errors]
    bad = [(c, cid, claim) for c in configs for cid, r in judge.per_config[c].cases.items()
           for claim in r.claims if claim.klass in BAD_CLAIMS]
    if bad:
        out += ["", "### Unsupported claims and bad citations", "",
                "| case | config | class | claim | support | not in the passages | cited | supported by |",
                "|---|---|---|---|---|---|---|---|"]
        for c, cid, claim in bad[:40]:
            text = markdown(claim.claim)
            conf = "–" if claim.confidence is None else f"{claim.confidence:.2f}"
            terms = claim.unfound_terms
            unfound = "–" if terms is None else ", ".join(map(markdown, terms)) or "none"
            cited = ", ".join(map(markdown_code, claim.cited))
            support = ", ".join(map(markdown_code, claim.support))
            out.append(f"| {markdown_code(cid)} | {markdown(c)} | {claim.klass} | {text} | {conf} | {unfound} | "
                       f"{cited} | {support} |")
        if len(bad) > 40:
            out.append(f"\n… and {len(bad) - 40} more in report.json and triage.md.")
    return "\n".join(out) + "\n"
