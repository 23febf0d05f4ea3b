"""The answer as claims for the labelling page.

A plain sentence split for now: ``split_answer`` is the one place to swap in the real
deterministic splitter (``groundjudge.judge.claims.split_claims``) when it lands.
"""

from __future__ import annotations

import re
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+(?=\S)|\n{1,}")
_MARKER = re.compile(r"[ \t]*\[([^\[\]\n]{1,200})\]")


def split_answer(answer: str, chunk_ids: list[str]) -> list[dict[str, Any]]:
    """Sentences of ``answer``, each with the citation markers ``[id]`` (ids known to the context)
    it carries, and its text with those markers removed. Empty pieces are dropped."""
    known = set(chunk_ids)
    claims = []
    for piece in _SENTENCE_END.split(answer or ""):
        piece = piece.strip()
        if not piece:
            continue
        cited = []
        for match in _MARKER.finditer(piece):
            for cid in (part.strip() for part in match.group(1).split(",")):
                if cid in known and cid not in cited:
                    cited.append(cid)
        text = _MARKER.sub(lambda m: "" if all(p.strip() in known for p in m.group(1).split(",")) else m.group(0),
                           piece)
        text = re.sub(r"\s+([.,;:!?])", r"\1", text).strip()
        if text:
            claims.append({"text": text, "citations": cited})
    return claims
