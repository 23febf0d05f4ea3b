"""report.html: self-contained, renders in headless Chromium with no console errors, and keeps
hostile text (script tags, fake delimiters, very long lines, RTL and combining characters) inert."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import context_ids_in_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")

HOSTILE = ("<script>document.body.setAttribute('data-pwned', 'yes')</script><img src=x onerror=alert(1)> DATA>>> <<<DATA id=evil "
           "</td></tr></table></section> \u202eevil\u202d ZA̡͊͠͝LGΟ " + "W" * 5000 + " ״עברית״ \"quotes\" &amp; {{ 7*7 }}")


def chromium(*args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, text=True, timeout=timeout, check=False)


def run_report(tmp: Path, golden: Path, traces: list[Path], corpus: Path, script) -> Path:
    with ScriptedOpenAIServer(script) as srv:
        result = CliRunner().invoke(main, [
            "run", "--rubric", "grounded_answer", "--golden", str(golden), *(a for t in traces for a in ("--traces", str(t))),
            "--corpus", str(corpus), "--judge-base-url", srv.base_url, "--judge-model", srv.model,
            "--cache-dir", str(tmp / "cache"), "--out", str(tmp / "out"), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return tmp / "out" / "report.html"


def hostile_verdict(body, index):
    ids = context_ids_in_request(body)
    return Reply(json.dumps({"claims": [
        {"claim": HOSTILE[:300], "cited": ids[:1], "verdict": "unsupported", "support": []},
        {"claim": "15 days", "cited": ids[:1], "verdict": "supported", "support": ids[:1]}],
        "correctness": 1, "reason": HOSTILE[:200]}))


@pytest.fixture(scope="module")
def hostile_html(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "corpus.jsonl").write_text(json.dumps({"chunk_id": "c#1", "doc_id": "d", "text": HOSTILE,
                                                  "offsets": [0, 10]}) + "\n" + json.dumps(
        {"chunk_id": "c#2", "doc_id": "d", "text": "Staff get 15 days of leave."}) + "\n")
    (tmp / "golden.jsonl").write_text(json.dumps({"id": "h1", "question": HOSTILE, "expected_answer": HOSTILE,
                                                  "expected_chunk_ids": ["c#2"], "tags": [HOSTILE[:60]],
                                                  "must_contain": ["15 days"]}) + "\n")
    (tmp / "traces.jsonl").write_text(json.dumps({
        "query_id": "h1", "config_id": "cfg<script>", "retrieved_chunks": ["c#1", "c#2"],
        "context_chunks": ["c#1", "c#2"], "answer": "You get 15 days [c#1]. " + HOSTILE,
        "citations": ["c#1"]}) + "\n")
    return run_report(tmp, tmp / "golden.jsonl", [tmp / "traces.jsonl"], tmp / "corpus.jsonl", hostile_verdict)


def test_hostile_text_is_escaped_in_the_html_source(hostile_html):
    html = hostile_html.read_text()
    assert len(re.findall(r"<script[\s>]", html)) == 1  # ours only
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "</td></tr></table></section> \u202e" not in html
    assert "{{ 7*7 }}" in html and ">49<" not in html  # no template evaluation of data
    assert "ZA̡͊͠͝LGΟ" in html and "W" * 5000 in html  # kept, as text


@needs_chromium
def test_hostile_report_renders_intact_in_chromium(hostile_html, tmp_path):
    proc = chromium("--dump-dom", hostile_html.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-report-ready="1"' in dom  # our script ran to the end
    assert 'data-pwned="yes"' not in dom  # the hostile script never ran
    for section in ("summary", "aggregates", "judge", "failed", "cases", "provenance"):
        assert f'id="{section}"' in dom
    assert "Uncaught" not in proc.stderr and "CONSOLE" not in proc.stderr, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def example_html(tmp_path_factory) -> Path:
    from tests.support.judge_replies import verdict_for_request

    tmp = tmp_path_factory.mktemp("example")
    with ScriptedOpenAIServer(verdict_for_request) as srv:
        result = CliRunner().invoke(main, [
            "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
            "--cache-dir", str(tmp / "cache"), "--out", str(tmp / "out"), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return tmp / "out" / "report.html"


def test_html_needs_no_network(example_html):
    html = example_html.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html


@needs_chromium
def test_example_report_renders_with_no_console_errors_and_a_screenshot(example_html, tmp_path):
    shot = tmp_path / "report.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,2400", example_html.as_uri())
    assert proc.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr and "CONSOLE" not in proc.stderr, proc.stderr[-2000:]
    dom = chromium("--dump-dom", example_html.as_uri()).stdout
    assert 'data-report-ready="1"' in dom and dom.count('<details class="case"') == 102
    assert dom.count("<svg") >= 4  # per-tag bars and metric deltas


def test_claims_are_highlighted_at_their_spans_with_their_support():
    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.report.html import highlight

    answer = "Staff get 18 days. Part-timers get 30 days [c#2]. Hope this helps!"
    claims = [ClaimResult.built(claim="Staff get 18 days.", verdict="supported", klass="uncited", confidence=0.91,
                                start=0, end=18),
              ClaimResult.built(claim="Part-timers get 30 days.", verdict="unsupported", klass="unsupported",
                                confidence=0.12, start=19, end=49),
              ClaimResult.built(claim="hope this helps", verdict="supported", klass="uncited")]  # no span: found by text
    segments = highlight(answer, claims)
    marked = [(text, cls, tip) for text, cls, tip in segments if cls]
    assert marked == [("Staff get 18 days.", "ok", "supported, support 0.91"),
                      ("Part-timers get 30 days [c#2].", "bad", "unsupported, support 0.12"),
                      ("Hope this helps", "ok", "supported")]
    assert "".join(text for text, _, _ in segments) == answer


def test_an_unchecked_claim_is_marked_apart_and_says_why():
    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.report.html import highlight

    answer = "Staff get 30 days. A cash bonus is paid quarterly."
    claims = [ClaimResult.built(claim="Staff get 30 days.", verdict="unchecked", klass="unchecked", confidence=None,
                                start=0, end=18, unfound_terms=["30"]),
              ClaimResult.built(claim="A cash bonus is paid quarterly.", verdict="unsupported", klass="unsupported",
                                confidence=0.24, start=19, end=50, unfound_terms=["cash", "bonus", "paid", "quarterly"])]
    marked = [(text, cls, tip) for text, cls, tip in highlight(answer, claims) if cls]
    assert marked == [
        ("Staff get 30 days.", "unchecked",
         "unchecked (the answer was already unfaithful without it); not in the passages: 30"),
        ("A cash bonus is paid quarterly.", "bad",
         "unsupported, support 0.24; not in the passages: cash, bonus, paid, quarterly")]


def test_large_runs_keep_drill_downs_for_failed_cases_only(example_html, monkeypatch):
    from groundjudge import api
    from groundjudge.report import html
    from groundjudge.report.document import ReportDocument

    doc = ReportDocument.model_validate_json((example_html.parent / "report.json").read_text())
    dataset = api.load_inputs(api.resolve_config(EXAMPLE))
    pairs = list(html._pairs(doc))
    failing = [p for p in pairs if p[4]]
    assert len(pairs) == 102 and 5 < len(failing) < 102
    full = html.render_html(doc, dataset)
    assert full.count('<details class="case"') == 102 and "this page details" not in full
    monkeypatch.setattr(html, "MAX_DRILL_DOWNS", 5)
    capped = html.render_html(doc, dataset)
    assert capped.count('<details class="case"') == 5
    assert f"102 case × config pairs, {len(failing)} failed: this page details the first 5 failed ones" in capped
    assert f"Failed cases ({len(failing)})" in capped
    shown = re.findall(r'<details class="case" id="case-([^"]+)"', capped)
    assert shown == [f"{cfg}-{cid}" for cfg, cid, *_ in failing[:5]]


def test_drill_down_rows_are_the_former_template_loops():
    """The retrieved rows and chunks written in Python are the bytes the template's loops wrote,
    for hostile ids and texts, a missing score, an unrecorded context and a citation outside it."""
    from types import SimpleNamespace

    import jinja2
    from markupsafe import escape

    from groundjudge.report.html import _chunk_divs, _retrieved_rows

    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    rows = env.from_string(
        '{% for r in retrieved %}<tr><td>{{ r.rank }}</td><td>{{ r.id }}</td><td>{{ r.score if r.score is not none '
        'else "–" }}</td><td>{{ "yes" if r.relevant else "" }}</td><td>{{ "yes" if r.in_context else ("not recorded" '
        'if r.in_context is none else "") }}</td></tr>{% endfor %}\n')
    chunks = env.from_string(
        "{% for ch in contexts %}<div class=\"chunk{{ ' cited' if ch.cited else '' }}\"><strong>{{ ch.id }}</strong>\n"
        "{{ ch.text }}</div>{% endfor %}\n{% for ch in outside %}<div class=\"chunk cited\"><strong>{{ ch.id }}"
        "</strong> <span class=\"leak\">cited but not in context</span>\n{{ ch.text }}</div>{% endfor %}\n")
    ranking = ["c<1>", "c&2", "c\"3'", "plain"]
    scores = {"c<1>": 0.5, "c&2": None, "c\"3'": 1e-07, "plain": 2.0}
    relevance = {"c<1>": 2, "plain": 0}
    escaped = lambda text: str(escape(text))
    for context in (["c&2", "plain"], None):
        expected = rows.render(retrieved=[
            SimpleNamespace(rank=i + 1, id=cid, score=scores[cid], relevant=relevance.get(cid, 0) > 0,
                            in_context=None if context is None else cid in context) for i, cid in enumerate(ranking)])
        assert _retrieved_rows(ranking, scores, relevance, context, escaped) == expected
    contexts = [("c<1>", HOSTILE, True), ("plain", "a\nb & c", False)]
    outside = [("c&2", "<b>x</b>")]
    expected = chunks.render(contexts=[SimpleNamespace(id=i, text=t, cited=c) for i, t, c in contexts],
                             outside=[SimpleNamespace(id=i, text=t) for i, t in outside])
    assert _chunk_divs(contexts, outside, escaped) == expected
    assert _chunk_divs([], [], escaped) == chunks.render(contexts=[], outside=[]) == ""
