import gc

import pytest

from groundjudge.collector import collector_paused, freeze_after_pauses


@pytest.fixture
def collecting():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_back_on_after(collecting):
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_on_after_an_error(collecting):
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_caller_that_turned_it_off_keeps_it_off(collecting):
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_nested_pauses_restore_once(collecting):
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_as_a_decorator_each_call_pauses(collecting):
    seen = []

    @collector_paused()
    def work(x):
        seen.append(gc.isenabled())
        return x * 2

    assert work(2) == 4 and work(3) == 6
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_cycle_made_while_paused_is_freed_after(collecting):
    import weakref

    class Node:
        pass

    with collector_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        probe = weakref.ref(a)
        del a, b
        assert probe() is not None  # only the collector frees a cycle
    gc.collect()
    assert probe() is None


def test_selection_runs_with_the_collector_paused(collecting, mini, monkeypatch):
    """Selection, which makes a decision per pair, pauses it, and it is back on after."""
    from groundjudge import select
    from groundjudge.load.dataset import load_dataset
    from groundjudge.metrics import evaluate

    seen = {}
    failures = select.deterministic_failures

    def spy_failures(*args, **kwargs):
        seen.setdefault("select", set()).add(gc.isenabled())
        return failures(*args, **kwargs)

    monkeypatch.setattr(select, "deterministic_failures", spy_failures)
    dataset = load_dataset(mini / "golden.jsonl", [mini / "traces.jsonl"], mini / "corpus.jsonl")
    run = evaluate.evaluate_dataset(dataset)
    select.select_cases(dataset, run)
    assert gc.isenabled()
    assert seen == {"select": {False}}


def test_plain_pauses_freeze_nothing(collecting):
    before = gc.get_freeze_count()
    with collector_paused():
        kept = [{"n": i} for i in range(1000)]
    assert gc.get_freeze_count() == before and len(kept) == 1000


def test_with_freeze_after_pauses_what_lives_is_left_out_of_collections(collecting):
    """What the pause made and still lives is frozen; what was dropped is freed all the same."""
    import weakref

    class Row:
        pass

    freeze_after_pauses()
    try:
        before = gc.get_freeze_count()
        with collector_paused():
            kept = [Row() for _ in range(1000)]
            dropped = Row()
            probe = weakref.ref(dropped)
            del dropped  # no cycle: reference counting frees it at once
        assert gc.get_freeze_count() >= before + 1000
        assert probe() is None and len(kept) == 1000
        assert gc.isenabled()
    finally:
        freeze_after_pauses(False)
        gc.unfreeze()


def test_free_heap_pages_go_back_to_the_system():
    """On glibc (this project's CI and nightly machines), freed blocks stuck between live ones
    are handed back: the process's resident memory drops once they are released."""
    import ctypes.util

    from groundjudge.collector import release_free_pages

    if ctypes.util.find_library("c") is None or "glibc" not in " ".join(__import__("platform").libc_ver()):
        pytest.skip("not glibc")

    def resident_kb() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

    # 60 MB of 2 KB blocks (above pymalloc's limit: the C heap), nine in ten then freed, so
    # the heap cannot shrink from its top but holds whole free pages between the survivors
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(30_000)]
    keep = blocks[9::10]
    del blocks
    before = resident_kb()
    assert release_free_pages() is True
    assert resident_kb() < before - 10_000
    assert len(keep) == 3_000
