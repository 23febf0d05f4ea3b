"""Which terms of a claim the passages never mention: an exact check that needs no model.

A faithful answer to a question about some passages reuses their words: names, numbers, the
nouns and verbs of what it reports. A term the passages never use (after folding case, plural
and possessive endings, and matching long words on their first five letters so that "deducted"
finds "deduction") is something the answer brought in from elsewhere. Counting those terms is
crude, since a paraphrase brings in new words too, but it is exact, free and explains itself;
on real RAG answers with human labels it separates faithful from unfaithful answers far better
than a small judge model's yes/no probability (figures in ``benchmarks/judge_agreement.py``).

The ``claim_check`` rubric family combines the two when a rubric declares ``grounding``: a
claim's support is the model's P(yes) times ``term_factor`` per unfound term.

Two rules say what a term is and when two spellings are one term. ``legacy`` (the default,
every rubric published before ``claim_check`` v6): English function and frame words typed in
here, and the five-letter prefix above. ``snowball`` (``grounding.terms: snowball``): the case's
language, declared or detected, decides the function words (a maintained stop-word list) and
the stem two spellings share (a Snowball stemmer); see :mod:`groundjudge.judge.languages`.
Both keep numbers exact and read Chinese, Japanese and Korean character by character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from groundjudge.judge import languages as lang

# Function words of English: they carry no fact of their own, so a claim may use them freely.
STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each either etc few for from further had hadn't has hasn't have haven't having
he her here hers herself him himself his how however i if in into is isn't it it's its itself
just let's may me might more most must mustn't my myself neither no nor not now of off on once
only or other others otherwise our ours ourselves out over own per rather same shall she should
shouldn't so some such than that that's the their theirs them themselves then there there's
these they this those though through thus to too under until up upon us very via was wasn't we
were weren't what when where whether which while who whom whose why will with within without
won't would wouldn't yet you your yours yourself yourselves
""".split())

# Words an answer uses to talk about its sources or to link its sentences, and generic words
# of any explanation: they state no fact that a passage would have to contain.
FRAME_WORDS = frozenset("""
according additionally also another answer answers based certain clearly context contexts
crucial different does e.g eg essentially especially example examples finally first firstly
following furthermore generally given hence i.e ie important importantly include included
includes including indeed information instance like likely main mainly make makes making mention
mentioned mentions moreover namely need needs note noted one ones overall particular particularly
passage passages provide provided provides providing question questions regarding said say says
second secondly several specific specifically state stated states suggest suggests summary sure
therefore thing things third typically use used uses using usually various way ways well whereas
""".split())

_SKIP = STOP_WORDS | FRAME_WORDS
_PREFIX = 5  # long words match on this many leading letters
_WORD = re.compile(r"\d+(?:[.,]\d+)*(?![^\W_])|[^\W_]+(?:'[^\W_]+)?", re.UNICODE)  # numbers; words (P45 too)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def terms(text: str) -> list[str]:
    """The content terms of ``text`` in order, in lower case; numbers without thousands
    separators; CJK characters one by one.

    >>> terms("The IRS's Form 1,040 lists deductions.")
    ["irs's", 'form', '1040', 'lists', 'deductions']
    """
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    if text.isascii() or _CJK.search(text) is None:  # no word needs the per-character split
        return [word.replace(",", "").rstrip(".") if word[0].isdigit() else word for word in _WORD.findall(text)
                if word not in _SKIP and (len(word) > 1 or word.isdigit())]
    out: list[str] = []
    for word in _WORD.findall(text):
        if _CJK.search(word):
            out.extend(ch for ch in word if _CJK.match(ch))
            continue
        if word in _SKIP or (len(word) == 1 and not word.isdigit()):
            continue
        out.append(word.replace(",", "").rstrip(".") if word[:1].isdigit() else word)
    return out


@lru_cache(maxsize=1 << 16)  # a run asks for the same few thousand words millions of times
def _key(term: str) -> str:
    """What two spellings of one term share: the number itself, or the word without a plural
    or possessive ending, cut to its first five letters."""
    if term[:1].isdigit():
        return term
    for ending, keep in (("'s", ""), ("ies", "y"), ("es", ""), ("s", "")):
        if term.endswith(ending) and len(term) - len(ending) >= 3:
            term = term[: -len(ending)] + keep
            break
    return term[:_PREFIX]


@dataclass(frozen=True)
class Languages:
    """The languages the ``snowball`` rule reads one case in. The claims are the answer's, so
    the answer's language chooses the stemmer, and the passages are indexed with that same
    stemmer: a word the answer took from a passage in another language (a name, a term of
    art) is stemmed alike on both sides and found. Function words are dropped in both
    languages, since an answer in one language quoting passages in another may carry the
    passages' function words with what it quotes."""

    answer: str  # ISO 639-1
    passages: str

    @classmethod
    def of_case(cls, answer: str, passages: Iterable[str], declared: str | None = None) -> Languages:
        """``declared`` (the rubric's ``grounding.language``) names the answer's language;
        otherwise the detector does. Where it cannot tell (a short answer, a language it is
        unsure of), the passages' language stands in, and English where neither is known."""
        shown = "\n".join(passages)[:4000]  # enough to tell a language; detection costs per byte
        in_passages = lang.detect(shown)
        in_answer = declared or lang.detect(answer) or in_passages or lang.FALLBACK
        return cls(answer=in_answer, passages=in_passages or in_answer)

    def skip(self, word: str) -> bool:
        """Whether ``word`` (normalized) is no term: a function word of either language, an
        English frame word, a single letter."""
        if len(word) == 1 and not word.isdigit():
            return True
        bare = word.removesuffix("'s")
        return self._stop(word) or self._stop(bare) or lang.is_frame(self.answer, word)

    def _stop(self, word: str) -> bool:
        return word in lang.stop_words(self.answer) or word in lang.stop_words(self.passages)

    def terms(self, text: str) -> list[str]:
        """The content terms of ``text`` in order, normalized; numbers without thousands
        separators; CJK characters one by one, every one of them (the stop lists' single
        characters include content such as 月, month, and a function character such as 的 is
        in almost every passage anyway)."""
        out: list[str] = []
        for word in _WORD.findall(lang.normalize(text)):
            if _CJK.search(word):
                out.extend(ch for ch in word if _CJK.match(ch))
            elif word[:1].isdigit():
                out.append(word.replace(",", "").rstrip("."))
            elif not self.skip(word):
                out.append(word)
        return out

    def key(self, term: str) -> str:
        """What two spellings of one term share: the number or character itself, else the
        word's stem in the answer's language."""
        if term[:1].isdigit() or len(term) == 1:
            return term
        return lang.stem(self.answer, term)


@dataclass(frozen=True)
class TermIndex:
    """The terms some passages use, for asking which terms of a claim they never mention.
    ``languages``: None for the ``legacy`` rule, the case's languages for ``snowball``."""

    keys: frozenset[str]
    languages: Languages | None = None

    @classmethod
    def of(cls, texts: Iterable[str], languages: Languages | None = None) -> TermIndex:
        if languages is None:
            return cls(frozenset(_key(t) for text in texts for t in terms(text)))
        return cls(frozenset(languages.key(t) for text in texts for t in languages.terms(text)), languages)

    def unfound(self, claim: str) -> list[str]:
        """The claim's terms the passages never mention, each once, in the claim's order.

        >>> TermIndex.of(["Deductions are filed on Schedule C."]).unfound("The deduction is filed on Form 1040.")
        ['form', '1040']
        """
        seen: dict[str, None] = {}
        if self.languages is None:
            for term in terms(claim):
                if _key(term) not in self.keys:
                    seen.setdefault(term)
            return list(seen)
        for term in self.languages.terms(claim):
            if self.languages.key(term) not in self.keys:
                seen.setdefault(term)
        return list(seen)
