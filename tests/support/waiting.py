"""Waiting in tests for something another process or thread does (an event, not a duration)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll ``condition`` until it is true; ``timeout`` only stops a test that would hang."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)
