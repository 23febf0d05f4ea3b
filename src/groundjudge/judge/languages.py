"""Which language a text is in, and what the term check needs of that language: its function
words (a maintained stop-word list, ``stopwordsiso``) and how its words inflect (a Snowball
stemmer, ``snowballstemmer``). Language identification is ``py3langid``, whose model ships in
the package: nothing is downloaded at run time.

All three are pinned to exact versions in the package's requirements: a new stop list or
stemmer changes which terms count as unfound, and so verdicts.
"""

from __future__ import annotations

import threading
import unicodedata
from functools import cache, lru_cache

import snowballstemmer
import stopwordsiso

# ISO 639-1 code -> Snowball algorithm (the languages snowballstemmer ships).
SNOWBALL = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "eo": "esperanto", "es": "spanish", "et": "estonian", "eu": "basque",
    "fa": "persian", "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian",
    "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian", "ne": "nepali",
    "nl": "dutch", "no": "norwegian", "nb": "norwegian", "pl": "polish", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sr": "serbian", "st": "sesotho", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
}

# Words answers use to frame their sources and link their sentences ("according to the
# passages", "additionally", "for instance"): no stop-word list has them, since in other text
# they can be content, but in an answer about passages they state no fact a passage must hold.
# English only, compared by stem, so "mentioned" and "mentions" go with "mention". Kept small:
# every word here is one a faithful answer uses about its sources, never a fact.
ENGLISH_FRAME = frozenset("""
according additionally answer based context crucial essentially example finally firstly
importantly include instance main mention note passage provide question specific stated suggest
summary typically
""".split())

# Number words that stopwordsiso's English list holds: numbers must match exactly, and "5
# million" is not "5 billion", so these stay terms.
ENGLISH_MAGNITUDES = frozenset({"hundred", "thousand", "million", "billion", "trillion"})

FALLBACK = "en"  # when neither a declaration nor the detector names a language
MIN_CONFIDENCE = 0.5  # below this the detector's guess is not used


def normalize(text: str) -> str:
    """The form every comparison uses: NFKC, case-folded, one apostrophe."""
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")


@cache
def stop_words(language: str) -> frozenset[str]:
    """The language's function words (empty when stopwordsiso has no list for it); for
    English, with the frame words' stems' words kept out by :func:`is_frame` instead."""
    if not stopwordsiso.has_lang(language):
        return frozenset()
    words = frozenset(normalize(w) for w in stopwordsiso.stopwords(language))
    return words - ENGLISH_MAGNITUDES if language == "en" else words


_local = threading.local()  # a Snowball stemmer keeps state between calls: one per thread


def _stemmer(language: str) -> snowballstemmer.stemmer | None:
    algorithm = SNOWBALL.get(language)
    if algorithm is None:
        return None
    cache: dict[str, snowballstemmer.stemmer] = _local.__dict__.setdefault("stemmers", {})
    if algorithm not in cache:
        cache[algorithm] = snowballstemmer.stemmer(algorithm)
    return cache[algorithm]


def has_stemmer(language: str) -> bool:
    return language in SNOWBALL


@lru_cache(maxsize=1 << 17)  # a run stems the same few thousand words over and over
def stem(language: str, word: str) -> str:
    """The word's Snowball stem in ``language``; the word itself where Snowball has no
    stemmer for it (Vietnamese, Chinese, Japanese, Korean, Thai...: languages whose words do
    not inflect, or that the term check reads character by character)."""
    stemmer = _stemmer(language)
    if stemmer is None:
        return word
    return str(stemmer.stemWord(word))  # English's stemmer also drops a possessive "'s"


@cache
def _frame_stems() -> frozenset[str]:
    return frozenset(stem("en", w) for w in ENGLISH_FRAME)


def is_frame(language: str, word: str) -> bool:
    """Whether ``word`` only frames the answer's sources (English; see ``ENGLISH_FRAME``)."""
    return language == "en" and stem("en", word) in _frame_stems()


_identifier_lock = threading.Lock()


@lru_cache(maxsize=1)
def _identifier() -> object:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    # Only languages the term check has something for: a guess among the others would fall
    # back anyway, and fewer classes make short texts' guesses steadier.
    known = set(identifier.labels)
    wanted = sorted(code for code in known if code in SNOWBALL or stopwordsiso.has_lang(code))
    identifier.set_languages(wanted)
    return identifier


@lru_cache(maxsize=1 << 14)
def detect(text: str) -> str | None:
    """The text's language (ISO 639-1), or None when it has too few letters or the detector
    is unsure (probability below ``MIN_CONFIDENCE``)."""
    # letters outside ASCII count double: a Chinese or Vietnamese sentence says more per letter
    if sum(1 if ch.isascii() else 2 for ch in text if ch.isalpha()) < 12:
        return None
    with _identifier_lock:  # the identifier is shared; its arrays are read only, but be plain
        language, confidence = _identifier().classify(text)  # type: ignore[attr-defined]
    return str(language) if confidence >= MIN_CONFIDENCE else None
