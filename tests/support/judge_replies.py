"""Judge replies and items for the judge tests and the throughput benchmark.

``verdict_for_request`` is a ScriptedOpenAIServer script: it reads the context ids that the
rubric rendered into the request's first user message and answers a valid verdict built from
them, the way a well-behaved judge model would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from groundjudge.judge.render import JudgeItem

# The real (not neutralised) delimiter that opens a context chunk in the default rubric.
_CONTEXT_OPEN = re.compile(r"^<<<DATA id=(.*)$", re.MULTILINE)


def context_ids_in_request(body: dict[str, Any]) -> list[str]:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return _CONTEXT_OPEN.findall(user)


def question_in_request(body: dict[str, Any]) -> str:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return user.split("<<<DATA\n", 1)[1].split("\nDATA>>>", 1)[0]


def verdict_dict(context_ids: list[str], *, correctness: int = 3) -> dict[str, Any]:
    """A valid verdict: one supported claim per the first context chunk, one unsupported claim."""
    if not context_ids:
        return {"claims": [{"claim": "something", "cited": [], "verdict": "unsupported", "support": []}],
                "correctness": 0, "reason": "no context"}
    first = context_ids[0]
    return {
        "claims": [
            {"claim": "the main fact", "cited": [first], "verdict": "supported", "support": [first]},
            {"claim": "an extra detail", "cited": [], "verdict": "unsupported", "support": []},
        ],
        "correctness": correctness,
        "reason": "the main fact is in the context",
    }


def verdict_for_request(body: dict[str, Any], index: int = 0) -> str:
    return json.dumps(verdict_dict(context_ids_in_request(body)))


def make_item(n: int, *, config_id: str = "cfg", contexts: int = 2, answer: str | None = None,
              expected_answer: str | None = "the expected answer") -> JudgeItem:
    ids = [f"doc{n}#{k}" for k in range(1, contexts + 1)]
    return JudgeItem(
        case_id=f"case{n:03d}", config_id=config_id, question=f"What is fact number {n}?",
        contexts=tuple((cid, f"Chunk {cid} states fact number {n}.") for cid in ids),
        answer=answer if answer is not None else f"Fact number {n} is stated [{ids[0]}].",
        citations=(ids[0],), expected_answer=expected_answer,
    )


class RecordedSleep:
    """An async no-op ``sleep`` for :class:`JudgeClient` that records the waits asked for."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def claim_statement(body: dict[str, Any]) -> str:
    """The statement a claim_check question asks about (the last data block of its prompt)."""
    return re.findall(r"<<<DATA\n(.*?)\nDATA>>>", body["messages"][-1]["content"], re.DOTALL)[-1]


def claim_answer_p(body: dict[str, Any]) -> float:
    """A well-behaved claim_check judge's P(yes): fixed by a hash of the statement asked about,
    so some claims have low support; the same live, in a batch, in any order."""
    import hashlib

    return (0.9, 0.8, 0.3, 0.1)[hashlib.sha256(claim_statement(body).encode()).digest()[0] % 4]


def claim_answer(body: dict[str, Any], index: int = 0) -> Any:
    """A ScriptedOpenAIServer script: one-token claim_check answers with token probabilities."""
    import math

    from tests.support.openai_server import Reply

    p = claim_answer_p(body)
    return Reply("Yes" if p >= 0.5 else "No", top_logprobs=((("Yes", math.log(p)), ("No", math.log(1 - p))),))
