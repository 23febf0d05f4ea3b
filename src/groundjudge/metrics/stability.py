"""Paraphrase stability: do paraphrases of one question retrieve the same top-k chunks?"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


def topk_agreement(rankings: Sequence[Sequence[str]], k: int) -> float | None:
    """Mean pairwise Jaccard overlap of the top-k sets; None with fewer than two rankings."""
    if len(rankings) < 2:
        return None
    tops = [set(r[:k]) for r in rankings]
    scores = [len(a & b) / len(a | b) if a | b else 1.0 for a, b in combinations(tops, 2)]
    return sum(scores) / len(scores)
