"""Pausing Python's cyclic garbage collector over a bounded stretch of work that makes millions
of objects and no reference cycles: loading a nightly set, scoring and selecting its pairs,
finding its cached verdicts, writing its reports.

While objects are being made, the collector runs every ``threshold0`` allocations and, every
so many runs, walks everything young that is still alive. On a nightly run (100,000 cases x 2)
those walks freed almost nothing and took a noticeable share of the run, most of it in the
report stage and the cached judge pass (``benchmarks/nightly_gc.py``). Paused, objects are still freed by reference counting as usual; only a cycle made
meanwhile waits until the collector runs again.

A pause alone defers the walk: what was made meanwhile is still young, and the collector's
next runs walk all of it at once. A process that keeps its results to the end (``groundjudge
run``) calls :func:`freeze_after_pauses`: each pause then ends with ``gc.freeze()``, which
leaves everything alive at that moment out of later collections (still freed by reference
counting; a cycle among them would never be), then hands the heap's free pages back to the
operating system (:func:`release_free_pages`). Library callers get plain pauses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

_freeze = False


def freeze_after_pauses(on: bool = True) -> None:
    """Whether each pause ends with ``gc.freeze()`` (for a process that keeps what it makes)."""
    global _freeze
    _freeze = on


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block; the collector is on again after it if
    it was on before (a caller that turned it off keeps it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _freeze:
            gc.freeze()
            release_free_pages()
        if was:
            gc.enable()


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc: no such call, nothing to do
        return None


def release_free_pages() -> bool:
    """Hand the C heap's free pages back to the operating system (glibc's ``malloc_trim``);
    False where there is no such call. Freed memory otherwise stays counted against the
    process: loading a nightly set frees each trace file's lines, in holes between the records
    that live on, and the C library keeps those pages until asked. Cheap next to a stage."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
