"""Render a judge request: shared instructions first, then the case's data as untrusted text.

Question, contexts, answer, expected answer and ids are data. Before they enter the template,
anything that looks like our delimiters is defused, so no data can close its block and start
a new one; instructions inside the data stay inside their block.
"""

from __future__ import annotations

import re

from groundjudge.judge.item import JudgeItem
from groundjudge.judge.rubric import Rubric

__all__ = ["JudgeItem", "neutralize", "render_messages"]

# The markers a rubric uses to fence data; any run of 3+ angle brackets in data is broken up.
_ANGLES = re.compile(r"<{3,}|>{3,}")
_MARKER_WORDS = re.compile(r"(?i)\b(DATA)(>)|(<)(DATA)\b")


def neutralize(text: str) -> str:
    """Defuse delimiter look-alikes: ``<<<`` / ``>>>`` and ``DATA>`` / ``<DATA`` lose their shape."""
    text = _ANGLES.sub(lambda m: " ".join(m.group(0)), text)
    return _MARKER_WORDS.sub(lambda m: " ".join(g for g in m.groups() if g), text)


def _one_line(text: str) -> str:
    """Ids are rendered on a line of the prompt's own (outside a data block): keep them on it."""
    return " ".join(text.splitlines())


def render_messages(rubric: Rubric, item: JudgeItem) -> list[dict[str, str]]:
    user = rubric.render_user(
        question=neutralize(item.question),
        contexts=[{"id": _one_line(neutralize(cid)), "text": neutralize(text)} for cid, text in item.contexts],
        answer=neutralize(item.answer),
        expected_answer=neutralize(item.expected_answer) if item.expected_answer else "(none)",
        citations=[_one_line(neutralize(c)) for c in item.citations],
    )
    return [{"role": "system", "content": rubric.system_prompt}, {"role": "user", "content": user}]
