"""Split one pure, ordered computation over both halves of a list: the parent does the first
half while one forked worker does the second, and the results come back in the original order.

Nightly runs score and look up hundreds of thousands of (case, config) pairs, one after the
other, in Python; a second core halves that. The worker is a fork: it shares the loaded inputs
without copying or pickling them, and sends only its results back (pickled, through a pipe).

The work must be deterministic and free of side effects that the parent needs (a worker's
counters, caches and prints stay in the worker): ``fn(items)`` returns one result per item, in
order, and the split is only ever a faster way to get ``fn(items)``. Below ``MIN_ITEMS``, where
fork is not available, with ``GROUNDJUDGE_WORKERS=1``, or while other threads run (a fork copies
only the calling thread, and a lock another thread holds would stay held in the worker), the
parent does it all. If the worker fails, the parent does its half too: the result is the same,
and an error in ``fn`` is then raised where it can be reported.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_ITEMS = 4_000  # below this a fork and the pickling of the results cost more than they save


def workers_allowed() -> bool:
    """Whether ``split_map`` may fork: ``os.fork`` exists, no other thread runs, and the
    environment does not ask for one process (``GROUNDJUDGE_WORKERS=1``)."""
    return (hasattr(os, "fork") and os.environ.get("GROUNDJUDGE_WORKERS", "") != "1"
            and threading.active_count() == 1)


def worth_splitting(n: int) -> bool:
    """Whether ``split_map`` would use a worker for ``n`` items."""
    return n >= max(2, MIN_ITEMS) and workers_allowed()


def split_map(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], *,
              before_fork: Callable[[], Any] | None = None, in_worker: Callable[[], Any] | None = None,
              ) -> list[R]:
    """``fn(items)``, with the second half computed in a forked worker when that pays.

    ``before_fork`` runs in the parent just before the fork (close what a child must not share,
    such as a database connection); ``in_worker`` runs first thing in the worker (open its own).
    """
    if not worth_splitting(len(items)):
        return fn(items)
    half = len(items) // 2
    first, second = items[:half], items[half:]
    if before_fork is not None:
        before_fork()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: compute, send, and leave without running the parent's exit code
        code = 1
        try:
            os.close(read_end)
            if in_worker is not None:
                in_worker()
            with open(write_end, "wb", buffering=1 << 20) as out:
                pickle.dump(fn(second), out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        except BaseException:  # noqa: BLE001, S110 - the parent computes this half itself and reports any error
            pass
        finally:
            os._exit(code)
    os.close(write_end)
    pipe = open(read_end, "rb", buffering=1 << 20)  # noqa: SIM115 - closed below, before the wait
    try:
        mine = fn(first)
        theirs = _receive(pipe)
    finally:
        pipe.close()  # before the wait: a worker still sending then stops, rather than block
        _, status = os.waitpid(pid, 0)
    if theirs is None or os.waitstatus_to_exitcode(status) != 0 or len(theirs) != len(second):
        theirs = fn(second)
    mine.extend(theirs)
    return mine


def _receive(pipe: Any) -> list[Any] | None:
    """The worker's results, or None when it sent none (it failed before or while sending)."""
    try:
        return pickle.load(pipe)
    except Exception:  # noqa: BLE001 - a truncated or empty stream: the worker failed
        return None


class Background:
    """``fn()`` in a forked worker while the parent goes on; ``result()`` waits for it.

    For a pure ``fn`` whose result is small to send back (the worker shares the parent's data
    as it was at the fork). When no worker may be used (``enabled`` false, or see
    ``workers_allowed``) ``result()`` calls ``fn()`` in the parent; so it does when the worker
    failed, which gives the same result or raises ``fn``'s error here. ``discard(result)``
    undoes what a result left behind (temporary files, say) when the parent gives up on it:
    ``cancel()``, called where the parent fails before it needs the result.
    """

    def __init__(self, fn: Callable[[], R], *, enabled: bool = True,
                 discard: Callable[[R], Any] | None = None) -> None:
        self.fn, self.discard = fn, discard
        self._pid: int | None = None
        self._pipe: Any = None
        if not (enabled and workers_allowed()):
            return
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read_end)
                with open(write_end, "wb") as out:
                    pickle.dump([fn()], out, protocol=pickle.HIGHEST_PROTOCOL)
                code = 0
            except BaseException:  # noqa: BLE001, S110 - the parent does it again, and reports any error
                pass
            finally:
                os._exit(code)
        os.close(write_end)
        self._pid, self._pipe = pid, open(read_end, "rb")  # noqa: SIM115 - closed by _collect

    @property
    def forked(self) -> bool:
        return self._pid is not None

    def _collect(self) -> tuple[bool, Any]:
        """(the worker succeeded, its result); the worker is reaped either way."""
        pid, pipe = self._pid, self._pipe
        self._pid = self._pipe = None
        if pid is None:
            return False, None
        try:
            sent = _receive(pipe)
        finally:
            pipe.close()
            _, status = os.waitpid(pid, 0)
        ok = os.waitstatus_to_exitcode(status) == 0 and sent is not None
        return ok, sent[0] if ok else None

    def result(self) -> R:
        ok, value = self._collect()
        return value if ok else self.fn()

    def cancel(self) -> None:
        ok, value = self._collect()
        if ok and self.discard is not None:
            self.discard(value)
