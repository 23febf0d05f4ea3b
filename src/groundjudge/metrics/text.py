"""Text normalisation shared by the containment and behaviour checks."""

from __future__ import annotations

import unicodedata


def normalize(text: str) -> str:
    """NFKC, case-folded, white space collapsed: the form string checks compare in."""
    # str.split() splits on exactly the characters a regex \s matches (str.isspace), without
    # the regex engine's per-match work of re.sub(r"\s+", " ", ...).strip()
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def strip_accents(text: str) -> str:
    """Drop diacritics (Vietnamese đ becomes d) so unaccented text matches accented phrases."""
    if text.isascii():  # nothing to drop: the common case, and far cheaper than decomposing
        return text
    decomposed = unicodedata.normalize("NFD", text.replace("đ", "d").replace("Đ", "D"))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def contains(haystack: str, needle: str) -> bool:
    return normalize(needle) in normalize(haystack)
