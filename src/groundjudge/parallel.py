"""Split one pure, ordered computation between this process and a forked worker, a round at a
time: in each round the parent does the first half of the round's items while a worker does the
second, and the results come back in the original order.

Nightly runs score and look up hundreds of thousands of (case, config) pairs, one after the
other, in Python; a second core does half of that. The worker is a fork: it shares the loaded
inputs without pickling them, and sends only its results back, pickled, a chunk at a time,
through a pipe. But after a fork every page the two processes share is copied by whichever
writes it first, and reading an object writes its reference count: one worker for the whole
stage doubled every page that either process read, most of a nightly run's inputs. A worker per round (``ROUND_WORK`` units of work) copies only the pages read during its
round, and gives them back when it exits.

The work must be deterministic and free of side effects that the parent needs (a worker's
counters, caches and prints stay in the worker): ``fn(items)`` returns one result per item, in
order, and the split is only ever a faster way to get ``fn(items)``. The parent does it all
below ``MIN_ITEMS``, where fork is not available, with ``GROUNDJUDGE_WORKERS=1``, and while other
threads run (a fork copies only the calling thread, and a lock another thread holds would stay
held in the worker; the plain progress heartbeat is the one exception). If a worker fails, the
parent does its half of the round too: the result is the same, and an error in ``fn`` is then
raised where it can be reported.
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
ROUND_WORK = 20_000  # units of work per worker: a nightly run's 200,000 pairs in ten rounds


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
    """``fn(items)``, with half of each round's items computed in a forked worker when that pays.

    The items are cut into rounds of about ``ROUND_WORK`` units of work; a round's worker has
    sent its last result and is on its way out before the next one is forked, and the pages
    it made the two processes copy are freed as it exits (workers are reaped at the end). Within a round both sides work through their half ``CHUNK`` items at a time;
    the worker sends each chunk's results as soon as it has them, and the parent reads what
    has arrived between its own chunks.

    ``before_fork`` runs in the parent just before each fork (close what a child must not
    share, such as a database connection); ``in_worker`` runs first thing in each worker.
    ``work``: how much work the items stand for, when that is not their number (a few large
    items).
    """
    total = len(items) if work is None else work
    if len(items) < 2 or not worth_splitting(total):
        return fn(items)
    rounds = min(len(items) // 2, max(1, round(total / ROUND_WORK)))
    size = -(-len(items) // rounds)
    out: list[R] = []
    workers: list[int] = []
    try:
        for start in range(0, len(items), size):
            out.extend(_one_round(fn, items[start:start + size], before_fork, in_worker, workers))
    finally:
        for pid in workers:  # reaped at the end: a worker's exit (unmapping its copy) takes a while
            os.waitpid(pid, 0)
    return out


def _one_round(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], before_fork: Callable[[], Any] | None,
               in_worker: Callable[[], Any] | None, workers: list[int]) -> list[R]:
    """One round: the first half here, the second in a new worker (its pid put in ``workers``,
    to be reaped by the caller). The worker's results count only when all of them came, whole."""
    if len(items) < 2:
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
    workers.append(pid)
    os.close(write_end)
    inbox = _Inbox(read_end)
    try:
        mine: list[R] = []
        for start in range(0, len(first), CHUNK):
            mine.extend(fn(first[start:start + CHUNK]))
            inbox.take_ready()
        theirs = inbox.take_all()
    finally:
        inbox.close()  # a worker still sending then stops, rather than block
    if theirs is None or len(theirs) != len(second):
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
