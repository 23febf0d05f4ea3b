"""Split one pure, ordered computation over both halves of a list: the parent does the first
half while one forked worker does the second, and the results come back in the original order.

Nightly runs score and look up hundreds of thousands of (case, config) pairs, one after the
other, in Python; a second core does half of that. The worker is a fork: it shares the loaded
inputs without pickling them (but every page it touches, it copies: reading an object writes its
reference count) and sends only its results back, pickled, a chunk at a time, through a pipe.

The work must be deterministic and free of side effects that the parent needs (a worker's
counters, caches and prints stay in the worker): ``fn(items)`` returns one result per item, in
order, and the split is only ever a faster way to get ``fn(items)``. The parent does it all
below ``MIN_ITEMS``, where fork is not available, with ``GROUNDJUDGE_WORKERS=1``, and while other
threads run (a fork copies only the calling thread, and a lock another thread holds would stay
held in the worker; the plain progress heartbeat is the one exception). If the worker fails, the
parent does its half too: the result is the same, and an error in ``fn`` is then raised where it
can be reported.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_ITEMS = 4_000  # below this the whole stage takes about a second or less: not worth a fork (not measured)


# Threads that may run during a fork: they only wait and print, and a worker never waits on
# anything of theirs nor prints (the plain progress heartbeat of a run outside a terminal).
HARMLESS_THREADS = frozenset({"groundjudge-progress"})


def workers_allowed() -> bool:
    """Whether ``split_map`` may fork: ``os.fork`` exists, no other thread runs (but the ones in
    ``HARMLESS_THREADS``), and the environment does not ask for one process (``GROUNDJUDGE_WORKERS=1``)."""
    if not hasattr(os, "fork") or os.environ.get("GROUNDJUDGE_WORKERS", "") == "1":
        return False
    main = threading.main_thread()
    return all(t is main or (t.daemon and t.name in HARMLESS_THREADS) for t in threading.enumerate())


def worth_splitting(work: int) -> bool:
    """Whether ``split_map`` would use a worker for ``work`` units of work (items, or pairs)."""
    return work >= max(2, MIN_ITEMS) and workers_allowed()


def split_map(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], *,
              before_fork: Callable[[], Any] | None = None, in_worker: Callable[[], Any] | None = None,
              work: int | None = None) -> list[R]:
    """``fn(items)``, with the second half computed in a forked worker when that pays.

    Both sides work through their half ``CHUNK`` items at a time; the worker sends each chunk's
    results as soon as it has them, and the parent reads what has arrived between its own
    chunks. So the worker never holds more than a chunk of results: the memory the split adds
    is only the pages the worker copies as it reads the shared inputs.

    ``before_fork`` runs in the parent just before the fork (close what a child must not share,
    such as a database connection); ``in_worker`` runs first thing in the worker. ``work``: how
    much work the items stand for, when that is not their number (a few large items).
    """
    if len(items) < 2 or not worth_splitting(len(items) if work is None else work):
        return fn(items)
    half = len(items) // 2
    first, second = items[:half], items[half:]
    if before_fork is not None:
        before_fork()
    read_end, write_end = os.pipe()
    with contextlib.suppress(ImportError, AttributeError, OSError):  # Linux: room for a message, so neither side waits long
        import fcntl

        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[attr-defined]
    pid = os.fork()
    if pid == 0:  # the worker: compute, send, and leave without running the parent's exit code
        code = 1
        try:
            os.close(read_end)
            if in_worker is not None:
                in_worker()
            with open(write_end, "wb") as out:
                for start in range(0, len(second), CHUNK):
                    frame = pickle.dumps(fn(second[start:start + CHUNK]), protocol=pickle.HIGHEST_PROTOCOL)
                    out.write(len(frame).to_bytes(8, "little"))
                    out.write(frame)
                    out.flush()
                    del frame
            code = 0
        except BaseException:  # noqa: BLE001, S110 - the parent computes this half itself and reports any error
            pass
        finally:
            os._exit(code)
    os.close(write_end)
    inbox = _Inbox(read_end)
    try:
        mine: list[R] = []
        for start in range(0, len(first), CHUNK):
            mine.extend(fn(first[start:start + CHUNK]))
            inbox.take_ready()
        theirs = inbox.take_all()
    finally:
        inbox.close()  # before the wait: a worker still sending then stops, rather than block
        _, status = os.waitpid(pid, 0)
    if theirs is None or os.waitstatus_to_exitcode(status) != 0 or len(theirs) != len(second):
        theirs = fn(second)
    mine.extend(theirs)
    return mine


CHUNK = 1_000  # items per message from the worker


class _Inbox:
    """The worker's messages (8-byte length, then a pickled list), read without waiting while
    the parent still has work of its own, then to the end."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.results, self.broken = fd, bytearray(), [], False

    def _read(self, wait: bool) -> bool:
        """Read what is there (with ``wait``, at least one piece); False at the end of the stream."""
        if not wait and not select.select([self.fd], [], [], 0)[0]:
            return True
        piece = os.read(self.fd, 1 << 20)
        if not piece:
            return False
        self.buffer += piece
        self._unpack()
        return True

    def _unpack(self) -> None:
        while len(self.buffer) >= 8:
            size = int.from_bytes(self.buffer[:8], "little")
            if len(self.buffer) < 8 + size:
                return
            with memoryview(self.buffer) as view:
                try:
                    self.results.extend(pickle.loads(view[8:8 + size]))
                except Exception:  # noqa: BLE001 - a broken message: the worker failed
                    self.broken = True
            del self.buffer[:8 + size]

    def take_ready(self) -> None:
        while self._read(wait=False) and select.select([self.fd], [], [], 0)[0]:
            pass

    def take_all(self) -> list[Any] | None:
        """Every result the worker sent; None when its stream was cut or broken."""
        while self._read(wait=True):
            pass
        return None if self.broken or self.buffer else self.results

    def close(self) -> None:
        os.close(self.fd)
