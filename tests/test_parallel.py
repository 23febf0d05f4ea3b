"""split_map: the same list as fn(items), in order, whether a worker did half of it or not."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import pytest

from groundjudge import parallel
from groundjudge.parallel import split_map, worth_splitting


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small lists are split too; the list records each fork's child pid."""
    monkeypatch.setattr(parallel, "MIN_ITEMS", 2)
    monkeypatch.delenv("GROUNDJUDGE_WORKERS", raising=False)
    made: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return made


def square_with_pid(chunk: Sequence[int]) -> list[tuple[int, int]]:
    return [(n * n, os.getpid()) for n in chunk]


def test_the_second_half_is_done_by_a_worker_and_comes_back_in_order(forks: list[int]) -> None:
    out = split_map(square_with_pid, list(range(11)))
    assert [v for v, _ in out] == [n * n for n in range(11)]
    assert len(forks) == 1
    assert {pid for _, pid in out[:5]} == {os.getpid()}  # the parent's half: 11 // 2 items
    assert {pid for _, pid in out[5:]} == {forks[0]}


def test_one_process_below_the_threshold_with_workers_1_or_with_other_threads(
        forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    assert not worth_splitting(1)
    assert [pid for _, pid in split_map(square_with_pid, [3])] == [os.getpid()]
    monkeypatch.setenv("GROUNDJUDGE_WORKERS", "1")
    assert {pid for _, pid in split_map(square_with_pid, list(range(10)))} == {os.getpid()}
    monkeypatch.delenv("GROUNDJUDGE_WORKERS")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not worth_splitting(10)
        assert {pid for _, pid in split_map(square_with_pid, list(range(10)))} == {os.getpid()}
    finally:
        stop.set()
        other.join()
    assert forks == []
    heartbeat = threading.Thread(target=stop.wait, name="groundjudge-progress", daemon=True)
    stop.clear()
    heartbeat.start()
    try:
        assert worth_splitting(10)  # the progress heartbeat only waits and prints
    finally:
        stop.set()
        heartbeat.join()


def test_a_failed_worker_leaves_its_half_to_the_parent(forks: list[int]) -> None:
    parent = os.getpid()

    def fails_in_worker(chunk: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("worker broke")
        return [n + 1 for n in chunk]

    def dies_in_worker(chunk: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            os._exit(7)
        return [n + 1 for n in chunk]

    assert split_map(fails_in_worker, list(range(9))) == list(range(1, 10))
    assert split_map(dies_in_worker, list(range(9))) == list(range(1, 10))
    assert len(forks) == 2


def test_an_error_in_fn_is_raised_in_the_parent(forks: list[int]) -> None:
    def broken(chunk: Sequence[int]) -> list[int]:
        return [10 // (n - 7) for n in chunk]  # n == 7 is in the worker's half

    with pytest.raises(ZeroDivisionError):
        split_map(broken, list(range(10)))
    with pytest.raises(ZeroDivisionError):  # and when it is in the parent's half, the worker is reaped
        split_map(broken, list(range(7, 17)))
    for pid in forks:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_hooks_run_before_the_fork_and_in_the_worker(forks: list[int]) -> None:
    seen: list[str] = []
    flag = {"worker": False}

    def mark(chunk: Sequence[int]) -> list[bool]:
        return [flag["worker"] for _ in chunk]

    out = split_map(mark, list(range(6)), before_fork=lambda: seen.append("before"),
                    in_worker=lambda: flag.update(worker=True))
    assert out == [False] * 3 + [True] * 3
    assert seen == ["before"]


def test_results_come_in_many_messages_in_order(forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker sends its half a chunk at a time; the parent reads them between its own
    chunks and puts every result in its place."""
    monkeypatch.setattr(parallel, "CHUNK", 7)
    calls: list[tuple[int, int]] = []

    def tagged(chunk: Sequence[int]) -> list[tuple[int, int]]:
        calls.append((os.getpid(), len(chunk)))
        return [(n, os.getpid()) for n in chunk]

    out = split_map(tagged, list(range(101)))
    assert [n for n, _ in out] == list(range(101))
    assert {pid for _, pid in out[50:]} == {forks[0]}
    assert calls == [(os.getpid(), 7)] * 7 + [(os.getpid(), 1)]  # the parent's 50, in chunks of 7


def test_a_worker_per_round_each_doing_the_second_half_of_its_round(
        forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ROUND_WORK the items go in rounds: each round's second half is done by a worker of
    its own (forked after the previous one finished sending), and the order is kept."""
    monkeypatch.setattr(parallel, "ROUND_WORK", 10)
    out = split_map(square_with_pid, list(range(40)))
    assert [v for v, _ in out] == [n * n for n in range(40)]
    assert len(forks) == 4
    me = os.getpid()
    for r, worker in enumerate(forks):
        assert [pid for _, pid in out[10 * r:10 * r + 10]] == [me] * 5 + [worker] * 5
    for pid in forks:  # every worker was reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    # ``work`` counts the rounds when the items stand for more (or less) than one unit each
    forks.clear()
    assert [v for v, _ in split_map(square_with_pid, list(range(40)), work=20)] == [n * n for n in range(40)]
    assert len(forks) == 2


def test_a_failed_worker_in_one_round_leaves_only_that_half_to_the_parent(
        forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "ROUND_WORK", 10)
    parent = os.getpid()

    def dies_on_25(chunk: Sequence[int]) -> list[tuple[int, int]]:
        if os.getpid() != parent and 25 in chunk:
            os._exit(3)
        return [(n + 1, os.getpid()) for n in chunk]

    out = split_map(dies_on_25, list(range(40)))
    assert [v for v, _ in out] == list(range(1, 41))
    assert [pid for _, pid in out[25:30]] == [parent] * 5  # round 3's worker died: its half done here
    assert [pid for _, pid in out[35:40]] == [forks[3]] * 5
