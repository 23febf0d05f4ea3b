"""``report.html``: one self-contained file (no CDN, no network) with charts and drill-downs.

Every piece of text from the data (questions, chunks, answers, claims, ids) goes through
Jinja's autoescaping; the charts escape their own labels; the only script sorts and filters
the failed-case table and reads nothing from the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import resources
from types import SimpleNamespace
from typing import Any

import jinja2
from markupsafe import Markup, escape

from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.results import CaseJudgement
from groundjudge.load.dataset import Dataset
from groundjudge.metrics.case import ranking_of
from groundjudge.metrics.failures import DESCRIPTIONS, deterministic_failures
from groundjudge.metrics.value import MetricValue
from groundjudge.report import charts
from groundjudge.report.document import ReportDocument
from groundjudge.report.judge_section import README_TRUST
from groundjudge.report.markdown import TAG_METRICS, headline_metrics
from groundjudge.report.numbers import number
from groundjudge.report.stability_section import unstable_by_case, unstable_text

VERDICT_CLASS = {"supported": "ok", "partially_supported": "partial", "unsupported": "bad", "contradicted": "bad",
                 "unchecked": "unchecked"}


def highlight(answer: str, claims: Sequence[ClaimResult]) -> list[tuple[str, str | None, str]]:
    """Split the answer into segments ``(text, verdict class, tooltip)``, marking each claim: at
    its span where the judge split the answer itself (claim_check), else where its text is found
    verbatim (case-insensitive). The tooltip names the verdict and, where known, its support."""
    marks: list[tuple[int, int, str, str]] = []
    low = answer.casefold()
    for claim in claims:
        tip = claim.verdict.replace("_", " ")
        if claim.verdict == "unchecked":
            tip += " (the answer was already unfaithful without it)"
        if claim.confidence is not None:
            tip += f", support {claim.confidence:.2f}"
        if claim.unfound_terms:
            tip += f"; not in the passages: {', '.join(claim.unfound_terms)}"
        if claim.start is not None and claim.end is not None:
            s, e = claim.start, claim.end
        else:
            text = claim.claim.strip().rstrip(".")
            s = low.find(text.casefold()) if text else -1
            e = s + len(text)
        if 0 <= s < e <= len(answer) and not any(a < e and s < b for a, b, _, _ in marks):
            marks.append((s, e, VERDICT_CLASS.get(claim.verdict, "bad"), tip))
    segments: list[tuple[str, str | None, str]] = []
    pos = 0
    for s, e, cls, tip in sorted(marks):
        segments += [(answer[pos:s], None, ""), (answer[s:e], cls, tip)]
        pos = e
    segments.append((answer[pos:], None, ""))
    return [seg for seg in segments if seg[0]]


NOT_RECORDED = "not recorded"

# Above this many (case, config) pairs the report keeps drill-downs for the failed ones only, up
# to this many, and says so: a page with 200,000 drill-downs is neither small nor usable.
MAX_DRILL_DOWNS = 2000

# (config, case, metric values, judge verdict (None: not judged), failed?)
Pair = tuple[str, str, Mapping[str, float | None], CaseJudgement | None, bool]
_OK_CLAIMS = ("supported", "unchecked")


def _pairs(doc: ReportDocument) -> Iterator[Pair]:
    """(config, case, metric values, judge verdict, failed?) for every scored pair, in order."""
    for cfg in doc.configs:
        section = doc.judge.per_config.get(cfg)
        verdicts = section.cases if section is not None else {}
        for case_id, values in doc.per_config[cfg].per_case.items():
            verdict = verdicts.get(case_id)
            failed = bool(deterministic_failures(values)) or (verdict is not None and (
                verdict.status == "judge_error" or any(cl.verdict not in _OK_CLAIMS for cl in verdict.claims)))
            yield cfg, case_id, values, verdict, failed


def _case_views(doc: ReportDocument, dataset: Dataset, pairs: list[Pair]) -> list[SimpleNamespace]:
    """What the page shows of each pair, as attributes (the template reads an attribute at once,
    a mapping's key only after an attribute lookup failed)."""
    criteria = doc.judge.criteria
    headline = criteria[0].name if criteria else None
    shaky = unstable_by_case(doc.stability)
    # the drill-downs' retrieved rows and chunks are written here, each distinct id or chunk text
    # escaped once (pairs share their chunks), not value by value in the template
    seen: dict[str, str] = {}

    def escaped(text: str) -> str:
        found = seen.get(text)
        if found is None:
            found = seen[text] = str(escape(text))
        return found

    views = []
    for cfg, case_id, values, verdict, failed in pairs:
        case, trace = dataset.cases[case_id], dataset.trace(cfg, case_id)
        if trace is None:
            continue
        claims = verdict.claims if verdict is not None else []
        value = verdict.criteria.get(headline) if verdict is not None and headline is not None else None
        ranking = ranking_of(trace)
        scores = {c.chunk_id: c.score for c in trace.retrieved_chunks}
        context_known = "context_chunks" not in trace.not_recorded
        context_ids = [c.chunk_id for c in trace.context_chunks]
        cited = [c.chunk_id for c in trace.citations]
        failures = deterministic_failures(values)
        details = doc.per_config[cfg].case_details[case_id]
        views.append(SimpleNamespace(
            anchor=f"case-{cfg}-{case_id}", config=cfg, id=case_id, tags=case.tags,
            difficulty=case.difficulty or "", question=case.question,
            expected=case.expected_answer or "", expected_behavior=details.expected_behavior or NOT_RECORDED,
            observed_behavior=details.observed_behavior or NOT_RECORDED,
            failures=[DESCRIPTIONS[f] for f in failures],
            judge_status=verdict.status if verdict is not None else "–",
            judge_reason=(verdict.reason if verdict is not None else None) or "",
            headline=value.value if value is not None else None,
            retrieved=_retrieved_rows(ranking[:10], scores, case.relevance, context_ids if context_known else None,
                                      escaped),
            chunks=_chunk_divs([(c.chunk_id, c.text if c.text is not None
                                 else (dataset.corpus.text_of(c.chunk_id) or "(no text)"), c.chunk_id in cited)
                                for c in trace.context_chunks],
                               [(cid, dataset.corpus.text_of(cid) or "(no text)")
                                for cid in cited if context_known and cid not in context_ids], escaped),
            answer=highlight(trace.answer or "", claims),
            claims=claims, failed=failed,
            unstable=[unstable_text(u) for u in shaky.get((cfg, case_id), [])],
            leaks=details.acl_leaks,
        ))
    return views


def _retrieved_rows(ranking: Sequence[str], scores: Mapping[str, float | None], relevance: Mapping[str, int],
                    context_ids: Sequence[str] | None, escaped: Callable[[str], str]) -> Markup:
    """A drill-down's rows of its retrieved chunks (rank, id, score, relevant, in context);
    ``context_ids`` None: the trace did not record its context."""
    return Markup("".join([
        f"<tr><td>{rank}</td><td>{escaped(cid)}</td><td>{'–' if (score := scores.get(cid)) is None else score}</td>"
        f"<td>{'yes' if relevance.get(cid, 0) > 0 else ''}</td>"
        f"<td>{'not recorded' if context_ids is None else 'yes' if cid in context_ids else ''}</td></tr>"
        for rank, cid in enumerate(ranking, 1)]))


def _chunk_divs(contexts: Sequence[tuple[str, str, bool]], outside: Sequence[tuple[str, str]],
                escaped: Callable[[str], str]) -> Markup:
    """A drill-down's context chunks (id, text, cited?), then the cited chunks outside its context."""
    return Markup("".join(
        [f'<div class="chunk{" cited" if cited else ""}"><strong>{escaped(cid)}</strong>\n{escaped(text)}</div>'
         for cid, text, cited in contexts]
        + [f'<div class="chunk cited"><strong>{escaped(cid)}</strong> <span class="leak">cited but not in '
           f'context</span>\n{escaped(text)}</div>' for cid, text in outside]))


def _value(values: Mapping[str, MetricValue], metric: str) -> float | None:
    found = values.get(metric)
    return found.value if found is not None else None


def _charts(doc: ReportDocument) -> dict[str, Markup]:
    configs = doc.configs
    out: dict[str, Markup] = {}
    tags = sorted({t for c in configs for t in doc.per_config[c].by_tag})
    for metric in TAG_METRICS[:2] + ("behavior_correct",):
        series: dict[str, Sequence[float | None]] = {
            c: [_value(doc.per_config[c].by_tag.get(t, {}), metric) for t in tags] for c in configs}
        out[f"tag_{metric}"] = Markup(charts.grouped_bars(f"{metric} by tag", tags, series))
    if len(configs) >= 2:
        a, b = configs[0], configs[-1]
        deltas = []
        for m in headline_metrics(doc):
            va = _value(doc.per_config[a].aggregate, m)
            vb = _value(doc.per_config[b].aggregate, m)
            if va is not None and vb is not None and abs(va) <= 1 and abs(vb) <= 1:
                deltas.append((m, vb - va))
        out["deltas"] = Markup(charts.delta_bars(f"metric deltas: {b} minus {a}", deltas))
    calibration = doc.calibration
    if calibration is not None:
        rows = []
        for criterion, stats in calibration.criteria.items():
            j = stats.judge_vs_human
            rows.append((f"judge~human {criterion}", j["kappa"], j["ci_low"], j["ci_high"]))
            for pair, inter in stats.inter_rater.items():
                rows.append((f"{pair} {criterion}", inter["kappa"], inter["ci_low"], inter["ci_high"]))
            out[f"confusion_{criterion}"] = Markup(charts.confusion(
                f"{criterion}: judge vs {calibration.primary_rater}", j["labels"], j["confusion"]))
        out["kappa"] = Markup(charts.interval("Cohen's kappa with 95% CI", rows,
                                              threshold=doc.gates.rules.min_kappa))
        for criterion, stats in calibration.criteria.items():
            # the record's selective block: an extra field of the criterion, as the record has it
            block = (stats.model_extra or {}).get("selective")
            if block:
                fit = block["cutoff"]
                out[f"reliability_{criterion}"] = Markup(charts.reliability_diagram(
                    f"{criterion}: reliability", block["reliability"]["bins"], ece=block["reliability"]["ece"]))
                out[f"coverage_{criterion}"] = Markup(charts.coverage_curve(
                    f"{criterion}: coverage vs agreement", fit["curve"], fit["n"], target=fit["target_agreement"],
                    cutoff=fit["cutoff"]))
    return out


def _trust_note(doc: ReportDocument) -> Markup:
    """The judge's trust status, shown above every place where its findings are read."""
    trust = doc.gates.trust
    if not trust:
        return Markup("")
    ok = all(t.trusted for t in trust.values())
    head = ("Judge trusted: its agreement with human labels is proven for every metric." if ok else
            "Judge untrusted: its findings are advisory. Its agreement with human labels is not proven "
            f"(see the {README_TRUST}); read each finding against the chunks before acting on it.")
    items = Markup("").join(Markup("<li><code>{}</code>: {}</li>").format(m, t.reason) for m, t in trust.items())
    return Markup('<div class="trust{}"><strong>{}</strong><ul>{}</ul></div>').format(" ok" if ok else "", head, items)


def _trust_short(doc: ReportDocument) -> str:
    trust = doc.gates.trust
    if not trust:
        return "no trust status"
    if all(t.trusted for t in trust.values()):
        return "judge trusted"
    return "judge untrusted, findings advisory: " + "; ".join(f"{m}: {t.reason}" for m, t in trust.items())


def _trend_chart(trend: dict[str, Any]) -> Markup:
    return Markup(charts.trend_lines(
        f"{trend['config']}: last {len(trend['runs'])} runs", trend["runs"], trend["series"],
        breaks=trend["breaks"], drops=[(i, m) for i, m in trend["drops"]]))


def render_html(doc: ReportDocument, dataset: Dataset, trend: dict[str, Any] | None = None) -> str:
    """The page for the run's typed report ``doc``. ``trend``: the run history's points for the
    trend chart (``history.trend_view``), if kept."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = number
    source = resources.files("groundjudge.report").joinpath("templates/report.html.j2").read_text("utf-8")
    template = env.from_string(source)
    # Only what the page can show is kept: the first MAX_DRILL_DOWNS pairs and failed pairs (a
    # nightly run's pairs, all listed, would take memory for nothing)
    first: list[Pair] = []
    failing: list[Pair] = []
    total = failed_total = 0
    for pair in _pairs(doc):
        total += 1
        if len(first) < MAX_DRILL_DOWNS:
            first.append(pair)
        if pair[4]:
            failed_total += 1
            if len(failing) < MAX_DRILL_DOWNS:
                failing.append(pair)
    cap_note = None
    if total > MAX_DRILL_DOWNS:
        shown = failing
        cap_note = (f"{total:,} case × config pairs, {failed_total:,} failed: this page details the first "
                    f"{len(shown):,} failed ones only. Every case is in report.json, and every failure in "
                    "triage.jsonl and triage.md.")
    else:
        shown = first
    cases = _case_views(doc, dataset, shown)
    criteria = doc.judge.criteria
    return template.render(
        doc=doc, configs=doc.configs, metrics=headline_metrics(doc), charts=_charts(doc), cases=cases,
        trend=trend, trend_chart=_trend_chart(trend) if trend else None,
        trust_note=_trust_note(doc), trust_short=_trust_short(doc),
        headline_metric=criteria[0].metric if criteria else None,
        failed=[c for c in cases if c.failed], failed_total=failed_total, cap_note=cap_note,
        verdict_class=VERDICT_CLASS,
    )
