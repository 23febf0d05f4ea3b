"""The answer as claims for the labelling page: the same deterministic split the claim_check
judge uses (``groundjudge.judge.claims.split_claims``), so people label the claims the judge
checks. Sentences with nothing to check are left out; citations keep only ids the context has.
"""

from __future__ import annotations

from typing import Any

from groundjudge.judge.claims import split_claims


def split_answer(answer: str, chunk_ids: list[str]) -> list[dict[str, Any]]:
    """Check-worthy sentences of ``answer``: their text (markers removed) and the context chunk
    ids they cite, in order."""
    known = set(chunk_ids)
    return [{"text": s.text, "citations": [c for c in s.citations if c in known]}
            for s in split_claims(answer or "") if s.check]
