"""String checks on the answer: must_contain, forbidden, gold claim substrings, constraints."""

from __future__ import annotations

from groundjudge.contracts import GoldenCase
from groundjudge.metrics.text import normalize

MIN_CLAIM_CHARS = 5  # shorter gold substrings match by accident too often to mean anything


def containment_metrics(case: GoldenCase, answer: str | None) -> dict[str, float | None]:
    claims = [c for c in case.gold_claim_substrings if len(c.strip()) >= MIN_CLAIM_CHARS]
    if not (case.must_contain or case.forbidden or claims):
        return {"must_contain": None, "forbidden_absent": None, "gold_claim_hit": None}
    text = normalize(answer or "")  # once for every phrase; each phrase is found in it as ``text.contains`` does
    return {
        "must_contain": float(all(normalize(s) in text for s in case.must_contain)) if case.must_contain else None,
        "forbidden_absent": (
            float(not any(normalize(s) in text for s in case.forbidden)) if case.forbidden else None
        ),
        "gold_claim_hit": float(any(normalize(c) in text for c in claims)) if claims else None,
    }


def constraint_metrics(case: GoldenCase, answer: str | None, echoed: list[str] | None = None) -> dict[str, float | None]:
    """Constraint integrity (SCU): every locked constraint is restated by a shipped answer.

    Order does not matter. ``echoed`` is the system's own structured echo of its constraints
    when the trace has one (WFGY's ``constraints_echo``); it must then hold every constraint too.
    None when the case locks no constraint.
    """
    if not case.constraints:
        return {"constraint_integrity": None}
    text = normalize(answer or "")
    wanted = [normalize(c) for c in case.constraints]
    restated = all(c in text for c in wanted)
    if echoed is not None and restated:
        echo_text = normalize("\n".join(echoed))
        restated = all(c in echo_text for c in wanted)
    return {"constraint_integrity": float(restated)}
