"""Hostile text from inputs and servers stays inert: on the terminal, in report.md, triage.md,
compare.md and the GitHub step summary (SPEC 10: untrusted text never changes the report's
markup, the terminal or a Markdown reader).

The scenario is the bundled example with hostile text planted where a user's files or a judge
can put it: an answer, a question, a tag, a case id, a config id, and the claims a judge
returns. Each file groundjudge writes and everything it prints is then checked: no control
character reaches it raw, no HTML, comment, image or link survives rendering, and every table
row has as many cells as its header.
"""

from __future__ import annotations

import doctest
import html
import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import groundjudge.inert
from groundjudge.cli import main
from groundjudge.inert import markdown, markdown_code, terminal, terminal_json
from tests.support.judge_replies import context_ids_in_request, verdict_dict
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

TITLE = "\x1b]0;pwned\x07"  # OSC 0: retitles the terminal
LINK = "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\"  # OSC 8: a hidden hyperlink
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
COLOUR = "\x1b[31mred\x1b[0m\x9b32mgreen"  # CSI, 7-bit and 8-bit
BIDI = "\u202egnp.exe"  # right-to-left override
MARKUP = ("<script>alert(1)</script><!-- hidden --><img src=x onerror=alert(2)>"
          "![pixel](http://evil.example/p.png)[phish](http://evil.example/login)"
          " | forged cell | &#x202E; *bold* `code` \\<b>escaped\\</b>\n# forged heading\r\n- forged item")
HOSTILE = TITLE + LINK + CLEAR + COLOUR + BIDI + " " + MARKUP

CASE = "q001<b>`|\x1b[2J"  # a case id, renamed in golden set and both trace files
CONFIG = "cand\x1b]0;x\x07<i>|[link](http://evil.example)"  # the candidate's config id
TAG = "<img src=x>|\x1b[5m"

RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# --- the escaping functions -------------------------------------------------------------------

def test_doctests() -> None:
    assert doctest.testmod(groundjudge.inert).failed == 0


def test_terminal_shows_every_control_escaped() -> None:
    shown = terminal(HOSTILE)
    assert not RAW_CONTROL.search(shown) and "\n" not in shown
    assert shown.startswith("\\x1b]0;pwned\\x07\\x1b]8;;http://evil.example/")
    assert "\\x9b32mgreen" in shown and "\\u202egnp.exe" in shown and "\\r\\n" in shown
    assert terminal("line 1\nline 2\r", keep_newlines=True) == "line 1\nline 2\\r"
    assert terminal("tab\tstays") == "tab\tstays"


# The escaping as one regular expression per rule (what groundjudge.inert does with translation
# tables, for speed): the two must agree on every text.
_REF_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_REF_CONTROL_LINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\n]")
_REF_BREAK = re.compile("\r\n|[\r\n\u2028\u2029\x85]")
_REF_MARKUP = re.compile(r"[\\`*\[\]|~&]|<(?=[A-Za-z/!?])|(?<![^\W_])_|_(?![^\W_])")
_REF_START = re.compile(r"^(?:([#+-])(?=\s)|(>)|(\d+)([.)])(?=\s))")


def _ref_visible(m: re.Match[str]) -> str:
    ch = m.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
    return named or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def _ref_markdown(text: str) -> str:
    line = _REF_CONTROL.sub(_ref_visible, _REF_BREAK.sub(" ", text).replace("\t", " "))
    escaped = _REF_MARKUP.sub(lambda m: "\\" + m.group(), line)
    return _REF_START.sub(lambda m: f"\\{m[1] or m[2]}" if m[1] or m[2] else f"{m[3]}\\{m[4]}", escaped)


def _ref_markdown_code(text: str) -> str:
    body = _REF_CONTROL.sub(_ref_visible, _REF_BREAK.sub(" ", text).replace("\t", " ")).replace("|", "\\|")
    fence = "`" * (max(map(len, re.findall("`+", body)), default=0) + 1)
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "
    return f"{fence}{body}{fence}"


_TRICKY = st.sampled_from(list("<>_*`[]|~&\\#+-.)1 a\n\r\t\x1b\x85\u2028\u202e\x9b/!?é_"))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_TRICKY, st.characters()), max_size=30).map("".join))
def test_the_fast_escaping_is_the_rule_by_rule_escaping(text: str) -> None:
    assert markdown(text) == _ref_markdown(text)
    assert markdown_code(text) == _ref_markdown_code(text)
    assert terminal(text) == _REF_CONTROL_LINE.sub(_ref_visible, text)
    assert terminal(text, keep_newlines=True) == _REF_CONTROL.sub(_ref_visible, text)


def test_an_id_with_any_one_character_is_the_rule_by_rule_code_span() -> None:
    """``markdown_code`` takes most ids as they are (``_PLAIN_CODE``): every character, alone,
    first, last or between others, spans as the rule by rule escaping spans it."""
    for code in [*range(0x3000), 0xFEFF, 0xFFFD, 0x1F600, 0xE0001, 0x10FFFF]:
        ch = chr(code)
        for text in (ch, f"{ch}a", f"a{ch}", f"a{ch}b", f"{ch} a {ch}"):
            assert markdown_code(text) == _ref_markdown_code(text), repr(text)


# Most values of a report have nothing to escape and take a shorter way: plain words, digits,
# punctuation that makes no markup, and the characters that make markup only at a line's start.
_PLAIN = st.sampled_from(list("abc XYZ 019 .,:;'\"()/!?=%$@é日-#+>"))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_PLAIN, _TRICKY), max_size=20).map("".join))
def test_text_with_nothing_to_escape_is_the_rule_by_rule_escaping(text: str) -> None:
    assert markdown(text) == _ref_markdown(text)
    assert markdown(text.replace("#", "x")) == _ref_markdown(text.replace("#", "x"))
    assert markdown(7) == "7" and markdown(None) == "None" and markdown("3) x") == "3\\) x"


def test_terminal_json_is_the_same_json() -> None:
    text = json.dumps({"answer": HOSTILE}, ensure_ascii=False)
    safe = terminal_json(text)
    assert not RAW_CONTROL.search(safe) and json.loads(safe) == {"answer": HOSTILE}


def rendered(text: str) -> str:
    return MarkdownIt("commonmark").enable("table").enable("strikethrough").render(text)


@pytest.mark.parametrize("value", [HOSTILE, CASE, CONFIG, TAG, "a\\", "`", "``x`` y", "1. x", "# x"])
def test_markdown_renders_as_the_same_text(value: str) -> None:
    for inline in (markdown(value), markdown_code(value)):
        assert "\n" not in inline and not RAW_CONTROL.search(inline)
        page = rendered(f"| h |\n|---|\n| {inline} |\n\nbefore {inline} after\n")
        assert "<script" not in page and "<img" not in page and "<a " not in page and "<!--" not in page
        assert "<b>" not in page and "<i>" not in page and "<em>" not in page and "<h1>" not in page
        assert page.count("<td>") == 1 and "<th>h</th>" in page  # one cell: no pipe escaped the table
    # the reader sees the text itself: line breaks as spaces, controls in their escaped form
    expected = terminal(re.sub("\r\n|[\r\n\u2028\u2029\x85]", " ", value).replace("\t", " ")).strip()
    text = rendered(markdown(value)).removeprefix("<p>").removesuffix("</p>\n")
    assert html.unescape(text) == expected
    code = rendered(markdown_code(value)).removeprefix("<p><code>").removesuffix("</code></p>\n")
    assert html.unescape(code).replace("\\|", "|").strip() == expected


# --- the example, with hostile text planted, end to end -----------------------------------------

def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def hostile_example(tmp_path: Path) -> Path:
    """A copy of the example with hostile text planted; returns its config file."""
    golden = _records(EXAMPLES / "golden.jsonl")
    for case in golden:
        if case["id"] == "q001":
            case["id"] = CASE
            case["question"] += " " + HOSTILE
            case["tags"] = [*case["tags"], TAG]
    traces = {}
    for name in ("baseline", "candidate"):
        rows = _records(EXAMPLES / "traces" / f"{name}.jsonl")
        for row in rows:
            if row["query_id"] == "q001":
                row["query_id"] = CASE
                row["answer"] += " " + HOSTILE
            if name == "candidate":
                row["config_id"] = CONFIG
        traces[name] = _write(tmp_path / "in" / "traces" / f"{name}.jsonl", rows)
    _write(tmp_path / "in" / "golden.jsonl", golden)
    text = (EXAMPLES / "groundjudge.toml").read_text(encoding="utf-8")
    text = text.replace('corpus = "corpus.jsonl"', f'corpus = {json.dumps(str(EXAMPLES / "corpus.jsonl"))}')
    text = text.replace('labels = ["../calibration/labels/example_rater_a.jsonl", '
                        '"../calibration/labels/example_rater_b.jsonl"]', "")
    text = text.replace('configs = ["candidate"]', f"configs = [{json.dumps(CONFIG)}]")
    text = text.replace('candidate = "candidate"', f"candidate = {json.dumps(CONFIG)}")  # the regression gate
    text = text.replace('records_dir = "../calibration/records"', f'records_dir = "{tmp_path / "records"}"')
    config = tmp_path / "in" / "groundjudge.toml"
    config.write_text(text, encoding="utf-8")
    return config


def hostile_judge(body: dict[str, Any], index: int) -> Reply:
    """A judge whose claims carry hostile text (a model can be made to write anything)."""
    verdict = verdict_dict(context_ids_in_request(body))
    verdict["claims"][-1]["claim"] = "detail " + HOSTILE
    verdict["reason"] = HOSTILE
    return Reply(json.dumps(verdict))


def markdown_problems(text: str) -> list[str]:
    """What hostile text did to a Markdown file, if anything."""
    problems = []
    if RAW_CONTROL.search(text):
        problems.append(f"raw control character {RAW_CONTROL.search(text).group()!r}")
    html = rendered(text)
    for tag in ("<script", "<img", "<a ", "<!--", "<b>", "<i>", "<h1>forged", "<li>forged"):
        if tag in html:
            problems.append(f"rendered {tag}")
    for block in _tables(text):
        widths = {len(_cells(row)) for row in block}
        if len(widths) != 1:
            problems.append(f"table rows of different widths {sorted(widths)}: {block[0][:60]}")
    return problems


def _tables(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return blocks + ([current] if current else [])


def _cells(row: str) -> list[str]:
    # a pipe after an odd number of backslashes is text, not a cell border
    return re.split(r"(?<!\\)(?:\\\\)*\|", row.strip())[1:-1] or re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_hostile_text_in_the_example_stays_inert_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = hostile_example(tmp_path)
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "out"
    runner = CliRunner()
    with ScriptedOpenAIServer(hostile_judge) as srv:
        result = runner.invoke(main, ["run", "--config", str(config), "--rubric", "grounded_answer",
                                      "--judge-base-url", srv.base_url, "--judge-model", srv.model,
                                      "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
                                      "--junit", str(tmp_path / "junit.xml")])
    assert result.exit_code in (0, 1), result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    # the hostile text was read and kept as data: it is in report.json as it was
    assert CONFIG in report["configs"] and CASE in report["per_config"][CONFIG]["per_case"]
    claims = [c["claim"] for c in report["judge"]["per_config"][CONFIG]["cases"][CASE]["claims"]]
    assert "detail " + HOSTILE in claims

    printed = {"run": result.stdout + result.stderr}
    for args in (["triage", str(out)], ["triage", str(out), "--json"], ["compare", str(out), "--out", str(out)],
                 ["history", "--history", str(tmp_path / "history.sqlite")],
                 ["metrics", "--config", str(config), "--out", str(tmp_path / "metrics")]):
        shown = runner.invoke(main, args)
        assert shown.exit_code == 0, (args, shown.output)
        printed[args[0] + (" --json" if "--json" in args else "")] = shown.stdout + shown.stderr
    for command, text in printed.items():
        found = RAW_CONTROL.search(text)
        assert found is None, (command, found and found.group(), text[max(0, found.start() - 80):found.start() + 20])
    assert "\\x1b]0;x\\x07" in printed["run"]  # the config id, shown escaped in the summary table
    rows = [json.loads(line) for line in printed["triage --json"].splitlines()]
    assert any(r.get("claim") == "detail " + HOSTILE for r in rows)  # --json is the same JSON

    written = {name: (out / name).read_text(encoding="utf-8") for name in ("report.md", "triage.md", "compare.md")}
    written["step summary"] = summary.read_text(encoding="utf-8")
    written["metrics report.md"] = (tmp_path / "metrics" / "report.md").read_text(encoding="utf-8")
    for name, text in written.items():
        assert markdown_problems(text) == [], name
    # the HTML report escapes it (autoescaped templates, escaped SVG text); JUnit stays XML
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>alert(1)" not in page and "<img src=x" not in page and "&lt;script&gt;alert(1)" in page
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(junit)
    names = {case.get("classname") for case in ElementTree.fromstring(junit.encode()).iter("testcase")}
    assert f"groundjudge.gates.{terminal(CONFIG)}" in names
    # and a reader still sees what was there
    assert markdown_code(CASE) in written["triage.md"] and "detail " + markdown(HOSTILE) in written["triage.md"]
    assert markdown(CONFIG) in written["report.md"]


def test_error_messages_quote_input_values_inertly(tmp_path: Path) -> None:
    golden = _write(tmp_path / "golden.jsonl", [{"id": "a\x1b]0;x\x07", "question": "q"},
                                                 {"id": "a\x1b]0;x\x07", "question": "q"}])
    traces = _write(tmp_path / "t.jsonl", [{"query_id": "zzz\x1b[2J", "config_id": "c"}])
    for args in (["metrics", "--golden", str(golden), "--traces", str(traces)],
                 ["metrics", "--golden", str(EXAMPLES / "golden.jsonl"), "--traces", str(traces)]):
        result = CliRunner().invoke(main, args + ["--out", str(tmp_path / "o")])
        assert result.exit_code == 2 and not RAW_CONTROL.search(result.stderr), result.stderr
        assert "\\x1b" in result.stderr


@pytest.mark.parametrize("system", ["wfgy", "day39"])
def test_a_replaced_systems_own_report_keeps_hostile_ids_inert(tmp_path: Path, system: str) -> None:
    folder = EXAMPLES / system
    gold_name, trace_name, id_field, trace_id = (("gold.jsonl", "trace.jsonl", "qid", "qid") if system == "wfgy"
                                                 else ("golden.jsonl", "outputs.jsonl", "id", "query_id"))
    gold, traces = _records(folder / gold_name), _records(folder / trace_name)
    first, config = gold[0][id_field], traces[0].get("config_id")
    gold[0][id_field] = CASE
    for row in traces:
        if row[trace_id] == first:
            row[trace_id] = CASE
        if system == "day39" and row["config_id"] == config:
            row["config_id"] = CONFIG
    _write(tmp_path / gold_name, gold)
    _write(tmp_path / trace_name, traces)
    result = CliRunner().invoke(main, ["metrics", "--profile", system, "--golden", str(tmp_path / gold_name),
                                       "--traces", str(tmp_path / trace_name), "--out", str(tmp_path / "out")])
    assert result.exit_code in (0, 1), result.output
    assert not RAW_CONTROL.search(result.stdout + result.stderr)
    for name in (f"profile-{system}.md", "report.md"):
        assert markdown_problems((tmp_path / "out" / name).read_text(encoding="utf-8")) == [], name
