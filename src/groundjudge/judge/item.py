"""What the judge sees of one case under one config: the judge stage's input record.

The select stage builds these (``select.judge_item``) and every later part of the judge reads
them: render, cache key, both protocols, batches. It is a plain record that imports nothing of
groundjudge, which is why the select stage, upstream of the judge, may import it (the one such
import ``tests/test_architecture.py`` allows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["JudgeItem"]


@dataclass(frozen=True)
class JudgeItem:
    """Everything the judge sees for one case under one config (and everything its cache key needs)."""

    case_id: str
    config_id: str
    question: str
    contexts: Sequence[tuple[str, str]]  # (chunk id, text), in prompt order
    answer: str
    citations: Sequence[str]
    expected_answer: str | None
