"""String checks on the answer: must_contain, forbidden, gold claim substrings, constraints."""

from __future__ import annotations

from groundjudge.contracts import GoldenCase
from groundjudge.metrics.text import contains

MIN_CLAIM_CHARS = 5  # shorter gold substrings match by accident too often to mean anything


def containment_metrics(case: GoldenCase, answer: str | None) -> dict[str, float | None]:
    text = answer or ""
    claims = [c for c in case.gold_claim_substrings if len(c.strip()) >= MIN_CLAIM_CHARS]
    return {
        "must_contain": float(all(contains(text, s) for s in case.must_contain)) if case.must_contain else None,
        "forbidden_absent": (
            float(not any(contains(text, s) for s in case.forbidden)) if case.forbidden else None
        ),
        "gold_claim_hit": float(any(contains(text, c) for c in claims)) if claims else None,
    }


def constraint_metrics(case: GoldenCase, answer: str | None, echoed: list[str] | None = None) -> dict[str, float | None]:
    """Constraint integrity (SCU): every locked constraint is restated by a shipped answer.

    Order does not matter. ``echoed`` is the system's own structured echo of its constraints
    when the trace has one (WFGY's ``constraints_echo``); it must then hold every constraint too.
    None when the case locks no constraint.
    """
    if not case.constraints:
        return {"constraint_integrity": None}
    text = answer or ""
    restated = all(contains(text, c) for c in case.constraints)
    if echoed is not None:
        echo_text = "\n".join(echoed)
        restated = restated and all(contains(echo_text, c) for c in case.constraints)
    return {"constraint_integrity": float(restated)}
