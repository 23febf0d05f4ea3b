"""Split an answer into sentences (claims) without a model, for the ``claim_check`` rubric.

Pure functions, no I/O. The split is deterministic and rule-based:

* Every newline ends a sentence; a list item (``1.``, ``2)``, ``a.``, ``-``, ``*``, ``+``, ``•``) or
  a markdown heading at the start of a line is its own sentence (further split if it holds
  several). A fenced code block is one sentence with nothing to check.
* Inside a line, ``.``, ``!``, ``?``, ``…`` (and runs such as ``...`` or ``?!``) end a sentence
  when followed by white space and a sentence-like start (capital letter, digit, opening quote
  or bracket, a letter of an uncased script), after any closing quotes or brackets and any
  citation markers. ``。！？`` end a sentence with no space after them.
* A ``.`` does not end a sentence after a title (``Dr.``, ``Mr.``...), a Latin abbreviation
  (``e.g.``, ``i.e.``, ``vs.``...), a number abbreviation before a digit (``No. 5``, ``ext. 4357``),
  or an enumerator number (``1.`` at the start of a segment or right after a colon). After an
  ambiguous abbreviation (``etc.``, ``U.S.``, ``a.m.``, ``Inc.``) or a single capital initial,
  it ends a sentence only when the next word is a common sentence opener (``The``, ``It``...).
  Decimals, versions and URLs never break because no space follows their dots.
* Citation markers ``[id]``, ``[id1, id2]``, ``[id1][id2]``, ``【id】`` inside a sentence or right
  after its end belong to it; a line holding only markers belongs to the sentence before. The
  claim text has markers, list bullets, heading hashes, emphasis and link targets removed and
  white space collapsed; nothing else is rewritten ("Based on the passages, ..." stays).

Sentences with nothing to check keep ``check=False`` and name the rule: ``greeting``,
``closing``, ``heading`` (markdown heading, a short line ending in ``:``, or a short line that
is all bold), ``lead_in`` (a longer sentence ending in ``:``, e.g. "Here is how to make ribs:";
the list items after it are checked on their own), ``meta_refusal`` (a statement about the
context itself, such as "The passages do not say"), ``empty_after_markers`` (nothing but
markers and punctuation), ``no_words`` (no letter or digit, e.g. a table rule) and
``code_block``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["RULES", "Sentence", "split_claims", "split_nuggets"]

RULES = ("greeting", "closing", "heading", "lead_in", "meta_refusal", "empty_after_markers", "no_words",
         "code_block")


@dataclass(frozen=True)
class Sentence:
    """One sentence of an answer: its claim text, cited chunk ids and span in the answer."""

    text: str
    citations: tuple[str, ...]
    start: int
    end: int
    check: bool
    rule: str | None = None


# --- citation markers -------------------------------------------------------------------------

_ID = r"[^\W_][\w.\-:/#]*"
_IDS = rf"{_ID}(?:\s*[,;]\s*{_ID})*"
_MARKER = re.compile(rf"\[\s*(?P<a>{_IDS})\s*\]|【\s*(?P<b>{_IDS})\s*】")


def _marker_ids(match: re.Match[str]) -> list[str] | None:
    """The ids of a marker, or None if the bracket is not a citation (e.g. ``[sic]``, ``[x]``)."""
    raw = match.group("a") or match.group("b")
    ids = [part.strip() for part in re.split(r"[,;]", raw)]
    # A citation id is a number or carries a digit, '#', '-' or '_': this keeps ``[sic]``,
    # ``[x]`` (task boxes) and ``[Note]`` out.
    if not all(i.isdigit() or re.search(r"[\d#\-_]", i) for i in ids):
        return None
    if match.group("a") is not None and _IMAGE_OR_LINK.match(match.string, match.start()):
        return None  # markdown link [text](url); "[id](" with no closing parenthesis is a citation
    return ids


def _find_markers(answer: str) -> list[tuple[int, int, list[str]]]:
    found = []
    for m in _MARKER.finditer(answer):
        ids = _marker_ids(m)
        if ids is not None:
            found.append((m.start(), m.end(), ids))
    return found


# --- sentence boundaries ----------------------------------------------------------------------

_TITLES = {"mr", "mrs", "ms", "mx", "dr", "prof", "st", "sr", "jr", "gen", "col", "capt", "lt", "sgt", "rev",
           "hon", "sen", "rep", "gov", "pres", "mt", "ft", "messrs", "mme", "mlle",
           # Vietnamese: Thành phố, Thạc sĩ, Tiến sĩ, Giáo sư, Phó giáo sư, Bác sĩ, Kỹ sư
           "tp", "ths", "ts", "gs", "pgs", "bs", "ks"}
_NEVER_END = {"e.g", "i.e", "eg", "ie", "cf", "vs", "viz", "approx", "ca", "al", "incl", "esp", "resp", "w.r.t",
              "aka", "a.k.a", "etc.,"}
_BEFORE_NUMBER = {"no", "nos", "nr", "fig", "figs", "vol", "vols", "p", "pp", "ext", "tel", "art", "sec", "ch",
                  "chap", "para", "ref", "eq", "op", "ver", "v", "rev", "jan", "feb", "mar", "apr", "jun", "jul",
                  "aug", "sep", "sept", "oct", "nov", "dec", "est", "ste", "apt", "rm", "tr"}
_AMBIGUOUS = {"etc", "inc", "ltd", "co", "corp", "llc", "plc", "bros", "dept", "univ", "assn", "min", "max", "avg",
              "mon", "tue", "tues", "wed", "thu", "thurs", "fri", "sat", "sun", "oz", "lb", "lbs", "kg", "km",
              "hrs", "hr", "mins", "sq", "yr", "yrs", "govt", "intl", "natl", "misc", "esq"}
# Words that usually open a new sentence: after an ambiguous abbreviation or an initial, a
# capitalised word from this list ends the sentence; any other capitalised word does not.
_OPENERS = set("""
the this that these those it its in on at a an they he she we you i there their his her our your my however
but and so if when while as for to also additionally furthermore moreover therefore thus hence according
based overall finally first second third then after before each all some most many no not other what which
who whom how why where please note with by from since because although though both one two three four five
many several another any every such yet still instead meanwhile otherwise here only even unlike like during
under over about among between within without through per its
""".split())

_OPEN_CHARS = "\"“‘'([{«「『（*_`#<"
_CLOSE_CHARS = "\"”’')]}»」』）*_`"
_TERMINATORS = ".!?…"
_CJK_TERMINATORS = "。！？"
_BULLET = re.compile(r"(?:\d{1,3}[.)]|\(\d{1,3}\)|[a-zA-Z][.)](?=\s)|[-*+•‣◦–—])\s+")
_HEADING = re.compile(r"#{1,6}(?=\s|$)\s*")
_FENCE = re.compile(r"\s*(```|~~~)")
_ENUMERATOR_BEFORE = re.compile(r"(?:^|[:;]\s*)\d{1,2}$")


def _word_before(text: str, dot: int, floor: int) -> str:
    """The run of letters, digits and inner dots just before ``text[dot]`` (e.g. ``U.S``, ``e.g``)."""
    i = dot
    while i > floor and (text[i - 1].isalnum() or (text[i - 1] == "." and i - 1 > floor and text[i - 2].isalnum())):
        i -= 1
    return text[i:dot]


def _next_word(text: str, pos: int, end: int) -> str:
    m = re.compile(r"[\w'’]+").match(text, pos, end)
    return m.group(0) if m else ""


def _starts_sentence(ch: str) -> bool:
    return ch.isupper() or ch.isdigit() or ch in _OPEN_CHARS or (ch.isalpha() and not ch.islower())


def _dot_ends_sentence(text: str, dot: int, seg_start: int, next_pos: int, line_end: int) -> bool:
    """Whether a '.' followed by white space and a sentence-like start ends the sentence."""
    word = _word_before(text, dot, seg_start)
    low = word.lower()
    nxt = _next_word(text, next_pos, line_end)
    opener = nxt.lower() in _OPENERS and nxt[:1].isupper()
    if low in _TITLES or low in _NEVER_END:
        return False
    if low in _BEFORE_NUMBER and text[next_pos:next_pos + 1].isdigit():
        return False
    if word.isdigit() and _ENUMERATOR_BEFORE.search(text[seg_start:dot]):
        return False
    initialism = re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", word) is not None  # U.S, a.m, Ph.D
    if low in _AMBIGUOUS or initialism or (len(word) == 1 and word.isupper()):
        return opener or next_pos >= line_end
    return True


# "(Passage 1)", "(Passages 2 and 3)", "(Source: doc 4)": a reference in words after a sentence end.
_SOURCE_NOTE = re.compile(r"\((?:according to |see |from )?(?:passages?|sources?|documents?|docs?|chunks?|refs?|"
                          r"references?|context)\b[^()\n]{0,40}\)", re.IGNORECASE)


def _skip_markers(text: str, pos: int, end: int, markers: dict[int, int]) -> int:
    """Past any citation markers or source notes (with spaces between) at ``pos``; returns the new end."""
    j = pos
    while True:
        k = j
        while k < end and text[k] in " \t":
            k += 1
        if k in markers:
            j = markers[k]
            continue
        note = _SOURCE_NOTE.match(text, k, end)
        if note:
            j = note.end()
            continue
        return j


def _split_line(text: str, start: int, end: int, markers: dict[int, int]) -> list[tuple[int, int]]:
    """Segments (start, end) of the line ``text[start:end]``; ``start`` is the first non-space."""
    segments = []
    seg_start = start
    i = start
    while i < end:
        if i in markers:
            i = markers[i]
            continue
        ch = text[i]
        if ch in _CJK_TERMINATORS or ch in _TERMINATORS:
            cjk = ch in _CJK_TERMINATORS
            j = i
            while j < end and (text[j] in _TERMINATORS or text[j] in _CJK_TERMINATORS):
                j += 1
            while j < end and text[j] in _CLOSE_CHARS:
                j += 1
            k = _skip_markers(text, j, end, markers)
            n = k
            while n < end and text[n].isspace():
                n += 1
            if n >= end or cjk:
                boundary = True
            elif n > j:  # white space or markers after the terminator, then a sentence-like start
                single_dot = ch == "." and (j == i + 1 or text[i + 1] in _CLOSE_CHARS)
                boundary = _starts_sentence(text[n]) and (
                    not single_dot or _dot_ends_sentence(text, i, seg_start, n, end))
            else:  # "3.5", "v1.2", "example.com", "a.m"
                boundary = False
            if boundary:
                segments.append((seg_start, k))
                seg_start = n
                i = n
                continue
            i = j
            continue
        i += 1
    if seg_start < end:
        stop = end
        while stop > seg_start and text[stop - 1].isspace():
            stop -= 1
        if stop > seg_start:
            segments.append((seg_start, stop))
    return segments


def _lines(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n\u2028\u2029\x0b\x0c\x1c\x1d\x1e\x85")
        spans.append((pos, pos + len(body)))
        pos += len(line)
    return spans


# --- claim text -------------------------------------------------------------------------------

_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1|(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?。！？、，])")


def _clean(raw: str) -> str:
    text = _IMAGE_OR_LINK.sub(r"\1", raw)
    text = _EMPHASIS.sub(lambda m: m.group(2) if m.group(2) is not None else m.group(3), text)
    text = re.sub(r"\s+", " ", text).strip()
    return text


# --- rules for sentences with nothing to check ------------------------------------------------

def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


_GREETING = _rx(
    r"(hi|hello|hey|greetings|howdy)( there| everyone| all)?( [\w]+)?",
    r"good (morning|afternoon|evening|day)( [\w]+)?",
    r"dear [\w ]{1,30}",
    r"(sure|certainly|of course|absolutely|okay|ok|great question|good question|thanks for (asking|your question)"
    r"|thank you for (asking|your question))( [\w ]{0,40})?",
    r"(i'?d|i would|i am|i'm) (be )?(happy|glad|delighted) to help( you)?( with (that|this|your question))?",
    r"(xin )?chào( bạn| anh| chị| em| quý khách| mọi người)?( [\w]+)?",
    r"cảm ơn (bạn|anh|chị|quý khách)? ?đã (hỏi|đặt câu hỏi)",
    r"(你好|您好)",
)
_CLOSING = _rx(
    r"(i )?hope (this|that|it|the above|my answer|the information|this information|these|this answer)\b.*",
    r"(please )?(let me know|feel free|don'?t hesitate|do not hesitate)\b.*",
    r"(is there )?anything else\b.*",
    r"if you have (any )?(other |more |further |additional |follow-up )?questions?\b[^,]*,? ?"
    r"(please |just )?(feel free|let me know|don'?t hesitate|do not hesitate|ask|i'?m happy|i am happy|i'?d be).*",
    r"have a (great|nice|good|wonderful) (day|one|weekend)\b.*",
    r"good luck\b.*",
    r"(that'?s it|that is it|enjoy( your (meal|dish|\w+))?|bon app[ée]tit|happy (cooking|baking|gardening)|cheers)",
    r"(thanks|thank you)( (again|so much|for [\w ]{1,40}))?",
    r"hy vọng (thông tin|câu trả lời|điều|những thông tin|nội dung)\b.*",
    r"nếu (bạn|anh|chị|quý khách) (có|cần) (thêm )?(câu hỏi|thắc mắc|thông tin|hỗ trợ)\b.*",
    r"chúc (bạn|anh|chị|quý khách)\b.*",
    r"(xin )?cảm ơn( bạn| anh| chị| quý khách)?( đã [\w ]+)?",
    r"希望.*(帮助|有用).*",
)
_CONTEXT_WORDS = (r"(passages?|context|contexts|documents?|docs|sources?|texts?|excerpts?|articles?|materials?"
                  r"|(provided|given|available) (information|data|content)|information (provided|given))")
_META = _rx(
    # "Unable to answer based on given passages." / "I cannot determine X from the context."
    rf"\b(unable|not able|cannot|can ?not|can'?t|couldn'?t|could not|am not able)\b.*\b(answer|determine|find|"
    rf"provide|say|tell|confirm|identify|locate|give)\b.*\b{_CONTEXT_WORDS}",
    r"^(i'?m sorry,? (but )?)?(i )?(cannot|can'?t|am unable to|am not able to|could not|couldn'?t) "
    r"(answer|determine|find|provide|say)\b[^.]*[.!]?$",
    r"^(i'?m sorry,? (but )?)?(i )?(do not|don'?t) (know|have (enough|sufficient|any) (information|data|details))\b",
    # "The passages do not say." / "The provided context does not mention X."
    rf"\b{_CONTEXT_WORDS}( \d+)?( (provided|given|above|available( to me)?|here))?,? (do|does|did|is|are)( not|n'?t)"
    rf"( \w+ly)? (say|mention|contain|provide|include|specify|state|address|discuss|answer|give|offer|indicate|"
    rf"cover|describe|explain|list|have|mentioned|stated|provided|specified|enough|sufficient|clear|available)\b",
    rf"\b(is|are|was|were)( not|n'?t)( \w+ly)? (mentioned|stated|covered|described|discussed|specified|provided|"
    rf"given|addressed)\b[^.]*\b(in|by) (the |these |any of the )?{_CONTEXT_WORDS}",
    r"^(however,? |but |unfortunately,? |note:? )?(they|it|this passage|the passage) (do|does|did)( not|n'?t)"
    r"( \w+ly)? (provide|give|contain|include|offer|have|mention|say)( any)?( \w+)? (information|details|data|answer"
    r"|mention|instructions|guidance)\b",
    rf"\b(there is|there'?s|there are|i found|i find|i see)( no| not any| not enough| insufficient)\b[^.]*"
    rf"\b(information|mention|data|details?|answer|evidence|reference)\b[^.]*\b{_CONTEXT_WORDS}",
    rf"\b(no|not enough|insufficient) (information|mention|data|details?|answer)\b[^.]*\b(in|from|within) "
    rf"(the )?{_CONTEXT_WORDS}",
    rf"^({_CONTEXT_WORDS}|(the )?(provided|given) {_CONTEXT_WORDS}) (do|does) not\b",
    # Vietnamese: "Tôi không tìm thấy thông tin về ...", "Tài liệu không đề cập ..."
    r"không (tìm thấy|có|thấy) (thông tin|dữ liệu|nội dung|đề cập)",
    r"(tài liệu|ngữ cảnh|đoạn văn|văn bản|nguồn)[^.]*không (đề cập|nói|cung cấp|chứa|có thông tin|nêu)",
    r"không (thể|đủ thông tin để) trả lời",
    # Chinese: 文档中没有 / 无法回答
    r"(没有|未)(提到|提及|找到|相关信息)|无法(回答|确定)",
)
_CONTRAST = re.compile(r"\b(but|however|although|though|while|whereas|nevertheless|yet|instead|nhưng|tuy nhiên)\b"
                       r"|但|不过", re.IGNORECASE)
_LEADING_CONNECTIVE = re.compile(r"^(however|but|unfortunately|also|additionally|note|overall|therefore|so|thus)\b[,:]?\s*",
                                 re.IGNORECASE)
_HEADING_WORDS = 6
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)[^*_]+(\*\*|__)\s*:?\s*$")


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


_MINOR = {"a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "with", "vs", "at", "by", "from", "&"}


def _title_line(text: str) -> bool:
    """A short line in Title Case with no end punctuation, e.g. "Spicy Rice Pilaf Recipe"."""
    words = text.split()
    if not 1 < len(words) <= _HEADING_WORDS or text[-1] in ".!?;,)。！？" or re.search(r"\d", text):
        return False
    return all(w[0].isupper() or w.lower() in _MINOR for w in words) and words[0][0].isupper()


def _rule(text: str, raw: str, is_heading_line: bool, had_markers: bool, whole_line: bool,
          bulleted: bool = False) -> str | None:
    if not re.search(r"\w", text):
        return "empty_after_markers" if had_markers else "no_words"
    bare = text.strip().rstrip(".!?。！？…").strip()
    if is_heading_line:
        return "heading"
    if whole_line and _BOLD_LINE.match(raw) and _words(text) <= _HEADING_WORDS + 2:
        return "heading"
    if whole_line and not bulleted and _title_line(text):
        return "heading"
    if text.endswith((":", "：")):
        return "heading" if whole_line and _words(text) <= _HEADING_WORDS else "lead_in"
    if _GREETING.fullmatch(bare.rstrip(",!").strip()):
        return "greeting"
    if _CLOSING.fullmatch(bare):
        return "closing"
    if _META.search(bare) and not _CONTRAST.search(_LEADING_CONNECTIVE.sub("", bare)):
        return "meta_refusal"
    return None


# --- public functions -------------------------------------------------------------------------

def split_claims(answer: str) -> list[Sentence]:
    """Split ``answer`` into sentences with their citations, spans and check-worthiness.

    >>> [s.text for s in split_claims("Dr. Lee said 3.5 days [d#1]. Hope this helps!")]
    ['Dr. Lee said 3.5 days.', 'Hope this helps!']
    """
    found = _find_markers(answer)
    marker_end = {s: e for s, e, _ in found}
    marker_ids = {s: ids for s, _, ids in found}
    pieces: list[_Piece] = []
    fence_start: int | None = None
    fence_last = 0
    for line_start, line_end in _lines(answer):
        content = line_start
        while content < line_end and answer[content].isspace():
            content += 1
        fence = _FENCE.match(answer, line_start, line_end)
        if fence_start is not None:
            fence_last = line_end
            if fence:
                pieces.append(_Piece(fence_start, line_end, fence_start, rule="code_block"))
                fence_start = None
            continue
        if fence:
            fence_start, fence_last = content, line_end
            continue
        if content >= line_end:
            continue
        body, heading, bulleted = content, False, False
        prefix = _HEADING.match(answer, content, line_end)
        bullet = _BULLET.match(answer, content, line_end)
        if prefix:
            body, heading = prefix.end(), True
        elif bullet and content not in marker_end:
            body, bulleted = bullet.end(), True
        segments = _split_line(answer, body, line_end, marker_end) if body < line_end else [(body, body)]
        segments = _merge_bare_answers(answer, segments)
        whole = len(segments) == 1
        for n, (s, e) in enumerate(segments):
            if n == 0:
                pieces.append(_Piece(content, max(e, body), body, heading, bulleted, whole))
            else:
                pieces.append(_Piece(s, e, s, whole=whole))
    if fence_start is not None:  # an unclosed fence runs to the end
        pieces.append(_Piece(fence_start, fence_last, fence_start, rule="code_block"))

    sentences: list[Sentence] = []
    for piece in pieces:
        start, end, body = piece.start, piece.end, piece.body
        while end > start and answer[end - 1].isspace():
            end -= 1
        inside = sorted(s for s in marker_end if start <= s < end)
        ids = tuple(dict.fromkeys(i for s in inside for i in marker_ids[s]))
        # drop markers together with the white space before them
        parts, pos = [], body
        for s in inside:
            if s < body:
                continue
            parts.append(answer[pos:s].rstrip())
            pos = marker_end[s]
            if pos < end and not answer[pos].isspace() and answer[pos] not in ".,;:!?。！？、，)":
                parts.append(" ")
        parts.append(answer[pos:end])
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", _clean("".join(parts)))
        rest, pos = [], start
        for s in inside:
            rest.append(answer[pos:s])
            pos = marker_end[s]
        rest.append(answer[pos:end])
        only_markers = bool(inside) and not "".join(rest).strip()
        if only_markers and sentences and piece.rule is None:
            last = sentences[-1]
            sentences[-1] = Sentence(last.text, tuple(dict.fromkeys(last.citations + ids)), last.start, end,
                                     last.check, last.rule)
            continue
        rule = piece.rule or _rule(text, answer[body:end], piece.heading, bool(inside), piece.whole, piece.bulleted)
        sentences.append(Sentence(text=text, citations=ids, start=start, end=end, check=rule is None, rule=rule))
    return sentences


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    body: int  # after a list bullet or heading hashes
    heading: bool = False
    bulleted: bool = False
    whole: bool = False  # the only sentence of its line
    rule: str | None = None


_BARE_ANSWER = re.compile(r"(yes|no|yeah|nope|correct|incorrect|true|false|có|không|đúng|sai|是|否|不是)[.!,。！，]?",
                          re.IGNORECASE)


def _merge_bare_answers(text: str, segments: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Join a bare "Yes." / "No." to the sentence after it: alone it states nothing checkable."""
    out: list[tuple[int, int]] = []
    for seg in segments:
        if out and _BARE_ANSWER.fullmatch(text[out[-1][0]:out[-1][1]].strip()):
            out[-1] = (out[-1][0], seg[1])
        else:
            out.append(seg)
    return out


def split_nuggets(expected_answer: str) -> list[str]:
    """The check-worthy sentences of an expected answer, as nugget texts (same splitter)."""
    return [s.text for s in split_claims(expected_answer) if s.check]
