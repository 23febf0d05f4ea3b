"""What the judge sees of one case under one config: the judge stage's input record.

The select stage builds these (``select.judge_item``) and every later part of the judge reads
them: render, cache key, both protocols, batches. It is a plain record that imports nothing of
groundjudge, which is why the select stage, upstream of the judge, may import it (the one such
import ``tests/test_architecture.py`` allows).

A frozen msgspec struct: a nightly run holds one per judged pair, and a struct is built in a
fraction of a frozen dataclass's time, holds no per-object dict and is not tracked by the
garbage collector (it holds text and tuples of text: no cycles). A copy with a field changed
is ``msgspec.structs.replace(item, ...)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

__all__ = ["JudgeItem"]


class JudgeItem(msgspec.Struct, frozen=True, gc=False):
    """Everything the judge sees for one case under one config (and everything its cache key needs)."""

    case_id: str
    config_id: str
    question: str
    contexts: Sequence[tuple[str, str]]  # (chunk id, text), in prompt order
    answer: str
    citations: Sequence[str]
    expected_answer: str | None
