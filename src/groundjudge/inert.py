"""Untrusted text made inert where it is shown: on a terminal and in a Markdown reader.

Questions, answers, contexts, case ids, config ids and tags come from users' files; model ids,
batch ids and error messages from servers. Shown as they are, an escape sequence in an answer
retitles the terminal, clears it, or plants a link (OSC 8), and Markdown in an answer draws an
image, hides a comment, opens a link or breaks a table in report.md. So every value that came
from outside goes through one of these functions on its way out:

- :func:`terminal` for anything printed: control characters (C0 but tab, DEL, C1) and the bidi
  controls that reorder what a reader sees are shown in their escaped form (``\\x1b``,
  ``\\u202e``); line breaks too, unless the text is our own multi-line output.
- :func:`markdown` for text inside a Markdown line or table cell: the characters that make
  markup (``\\ * _ [ ] | ~ &``, the backtick, a ``<`` that could open a tag, and ``# - + >``
  or ``1.`` where a line would start) are backslash-escaped, so it renders as the same text;
  line breaks become spaces and control characters are shown as above.
- :func:`markdown_code` for an id shown as code: a code span no backtick inside can close.
- :func:`terminal_json` for JSON printed for a program to read (``--json``): the same
  characters as ``\\u`` escapes, so the text stays the same JSON.

The escaped forms are what a reader needs to see that something was there, and they never act.
"""

from __future__ import annotations

import re

__all__ = ["markdown", "markdown_code", "terminal", "terminal_json"]

# C0 controls but tab and line feed, DEL, the C1 controls (U+009B is a CSI on some terminals),
# and the bidi embeddings, overrides and isolates (text that reads differently than it is).
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_TERMINAL = re.compile(f"[{_CONTROL}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Markup only where a line starts and text follows: a heading, a list item, a quote.
_LINE_START = re.compile(r"^(?:([#+-])(?=\s)|(>)|(\d+)([.)])(?=\s))")
_BACKTICKS = re.compile("`+")


def _visible_char(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_CONTROLS = [chr(c) for c in range(0x2070) if _TERMINAL.match(chr(c))]
# Reports escape hundreds of thousands of values, most with nothing to escape: each function
# first looks for what it would change (one regular-expression search in C), and changes only
# what it finds, without a Python call per character (the results are those of one rule per
# regular expression; a test checks them against that).
_SHOWN = str.maketrans({ch: _visible_char(ch) for ch in _CONTROLS})
_SHOWN_LINE = str.maketrans({ch: _visible_char(ch) for ch in [*_CONTROLS, "\n"]})
_ONE_LINE = str.maketrans({**{ch: _visible_char(ch) for ch in _CONTROLS},
                           **{ch: " " for ch in "\r\n\u2028\u2029\x85\t"}})
_NOT_ONE_LINE = re.compile(f"[{_CONTROL}\n\t\u2028\u2029]")
_TERMINAL_LINE = re.compile(f"[{_CONTROL}\n]")
# Markup (or an escape of markup): backslash, backtick, emphasis, links and images (``[``),
# tables, strikethrough, entities, escaped wherever they stand (the backslash first, so no
# escape is escaped again); then what depends on its neighbours: HTML, comments and autolinks
# (a ``<`` before a letter, ``/``, ``!`` or ``?``: "p < 0.05" stays as written), and an
# underscore at a word's edge (``api_002`` stays as written).
_ALWAYS_MARKUP = "\\`*[]|~&"
_MARKUP_AROUND = re.compile(r"(?=[<_])(?:<(?=[A-Za-z/!?])|(?<![^\W_])_|_(?![^\W_]))")
# The characters some rule of ``markdown`` changes: line breaks and controls, markup, ``<`` and
# ``_`` (text with none, most values of a report, can only be changed by ``_LINE_START``); and
# those of them that are markup (a line break or control is shown on one line first).
_MARKDOWN_CHARS = re.compile(f"[{_CONTROL}\n\t\u2028\u2029\\\\`*\\[\\]|~&<_]")
_MARKUP_CHARS = frozenset(_ALWAYS_MARKUP + "<_")
# An id with nothing a code span must change (no line break, control, pipe or backtick, and no
# space first, the one way a space can matter) is its span's body as it is: one match in C tells.
_PLAIN_CODE = re.compile(f"[^ {_CONTROL}\n\t\u2028\u2029|`][^{_CONTROL}\n\t\u2028\u2029|`]*")


def terminal(text: object, *, keep_newlines: bool = False) -> str:
    r"""``text`` safe to print: controls and bidi overrides shown escaped, never sent as they are.

    With ``keep_newlines`` (our own multi-line output, whose values were escaped already), line
    feeds stay; a carriage return, which would let a line overwrite itself, never does.

    >>> terminal("ok\x1b]0;pwned\x07\nnext")
    'ok\\x1b]0;pwned\\x07\\nnext'
    """
    value = str(text)
    if (_TERMINAL if keep_newlines else _TERMINAL_LINE).search(value) is None:
        return value
    return value.translate(_SHOWN if keep_newlines else _SHOWN_LINE)


def terminal_json(text: str) -> str:
    r"""JSON text safe to print, and still the same JSON: JSON writers escape C0 controls but
    leave DEL, C1 and bidi controls raw inside strings (the only place they can be); here they
    are ``\u`` escapes.

    >>> terminal_json('{"a": "x\x9by\u202e"}')
    '{"a": "x\\u009by\\u202e"}'
    """
    return _TERMINAL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _one_line(text: object) -> str:
    value = str(text)
    if _NOT_ONE_LINE.search(value) is None:
        return value
    return value.replace("\r\n", " ").translate(_ONE_LINE)


def _line_start(match: re.Match[str]) -> str:
    return f"\\{match[1] or match[2]}" if match[1] or match[2] else f"{match[3]}\\{match[4]}"


def markdown(text: object) -> str:
    r"""``text`` as literal Markdown text, on one line: safe in a paragraph, a heading, a list
    item or a table cell (a pipe is escaped too).

    >>> markdown('<img src=x> ![a](http://e) | *b* api_002 _c_\n<!-- d -->')
    '\\<img src=x> !\\[a\\](http://e) \\| \\*b\\* api_002 \\_c\\_ \\<!-- d -->'
    """
    value = str(text)
    # one pass finds every character a rule could change (most values: none; a long answer: a
    # few), and only the rules for those run
    found = _MARKDOWN_CHARS.findall(value)
    if found:
        present = set(found)
        if not present <= _MARKUP_CHARS:  # line breaks or controls, whose shown forms hold a backslash
            value = _one_line(value)
            present = set(_MARKDOWN_CHARS.findall(value))
        # Escaping the unconditional markup first changes no neighbour the conditional rules look
        # at: it only puts a backslash before a character that is not a letter, digit or ``_``.
        for ch in _ALWAYS_MARKUP:
            if ch in present:
                value = value.replace(ch, "\\" + ch)
        if "<" in present or "_" in present:
            value = _MARKUP_AROUND.sub(r"\\\g<0>", value)
    if _LINE_START.match(value) is None:
        return value
    return _LINE_START.sub(_line_start, value)


def markdown_code(text: object) -> str:
    r"""``text`` as a Markdown code span (an id, a claim's chunk), on one line. The span's fence
    is longer than any run of backticks inside, so nothing in the text can end it; a pipe is
    escaped so a table cell holds it (inside a table GitHub shows ``|``; elsewhere ``\|``).

    >>> markdown_code("a`b")
    '``a`b``'
    """
    body = str(text)
    if _PLAIN_CODE.fullmatch(body) is not None:  # most ids
        return f"`{body}`"
    body = _one_line(body)
    if "|" in body:
        body = body.replace("|", "\\|")
    fence = "`" * (max(map(len, _BACKTICKS.findall(body)), default=0) + 1) if "`" in body else "`"
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "
    return f"{fence}{body}{fence}"
