"""Handler threads: reused, never made to wait for a busy one, and never more than the cap.

No database: the pool is driven with plain callables.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from jobqueue.worker.threads import THREADS_PER_SLOT, HandlerThreads, ThreadCapReached
from tests.conftest import wait_for


def test_handler_threads_are_reused_and_a_busy_one_never_blocks_a_new_run():
    release = threading.Event()
    names: list[int] = []
    done = threading.Semaphore(0)

    def run(kind: str) -> str:
        names.append(threading.get_ident())
        if kind == "block":
            release.wait(10)
        return kind

    threads = HandlerThreads(run, lambda _: done.release(), concurrency=2, idle_s=120)
    threads.submit(uuid.uuid4(), "quick")
    assert done.acquire(timeout=60)
    # `done` runs once the thread counts as idle again: the next run reuses it.
    assert threads.room() == 4 and threads.threads == 1
    threads.submit(uuid.uuid4(), "block")  # reuses the idle thread, which now stays busy
    threads.submit(uuid.uuid4(), "quick")  # must not wait for it: a second thread
    assert done.acquire(timeout=60)
    # Three runs on two threads: one was reused, and the blocking run did not hold up the last.
    wait_for(lambda: len(names) == 3, timeout=60)
    assert len(set(names)) == 2
    release.set()
    assert done.acquire(timeout=60)


def test_runaways_are_counted_until_they_return_and_the_cap_is_never_passed():
    """concurrency 2: the cap is 4 threads. Runs marked as overrun count as runaways until they
    return; a run past the cap is refused and starts nothing; a run that returned before it
    was marked is not a runaway."""
    assert THREADS_PER_SLOT == 2
    releases = {name: threading.Event() for name in "abcd"}
    returned: list[str] = []

    def run(name: str) -> str:
        if name in releases:
            releases[name].wait(10)
        return name

    threads = HandlerThreads(run, returned.append, concurrency=2, idle_s=120)
    tokens = {name: uuid.uuid4() for name in "abcde"}
    for name in "abcd":
        threads.submit(tokens[name], name)
    assert (threads.threads, threads.busy, threads.room()) == (4, 4, 0)
    with pytest.raises(ThreadCapReached):
        threads.submit(tokens["e"], "e")
    assert (threads.threads, threads.busy) == (4, 4)  # nothing started
    threads.overran(tokens["a"])
    threads.overran(tokens["b"])
    assert threads.runaways == 2
    releases["a"].set()
    wait_for(lambda: "a" in returned, timeout=60)
    assert (threads.runaways, threads.busy, threads.room()) == (1, 3, 1)
    threads.overran(tokens["a"])  # already returned: not a runaway any more
    assert threads.runaways == 1
    for event in releases.values():
        event.set()
    wait_for(lambda: len(returned) == 4, timeout=60)
    assert (threads.runaways, threads.busy, threads.room()) == (0, 0, 4)


def test_idle_threads_end_after_idle_s():
    threads = HandlerThreads(lambda: None, lambda _: None, concurrency=1, idle_s=0.05)
    threads.submit(uuid.uuid4())
    wait_for(lambda: threads.threads == 0, timeout=60)
    assert threads.room() == 2


def test_a_run_that_raises_ends_its_thread_and_frees_its_share_of_the_cap(monkeypatch):
    raised: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)

    def run() -> None:
        raise RuntimeError("bug in the runner")

    threads = HandlerThreads(run, lambda _: None, concurrency=1, idle_s=120)
    threads.submit(uuid.uuid4())
    wait_for(lambda: raised, timeout=60)
    assert raised[0].exc_type is RuntimeError
    assert (threads.threads, threads.busy, threads.room()) == (0, 0, 2)


def test_runs_submitted_together_to_idle_threads_all_run_at_once():
    """Wake-ups are chained (one sleeper at a time), yet every run of a burst gets a thread of
    its own while the others run: 8 runs that each wait for all 8 to be running complete, on
    the 8 idle threads they were given (no new thread)."""
    n = 8
    done = threading.Semaphore(0)
    warm = threading.Barrier(n, timeout=300)
    burst = threading.Barrier(n, timeout=300)

    def run(barrier: threading.Barrier) -> None:
        barrier.wait()  # raises BrokenBarrierError (no release) if the 8 never run at once

    threads = HandlerThreads(run, lambda _: done.release(), concurrency=n, idle_s=600)
    for _ in range(n):
        threads.submit(uuid.uuid4(), warm)
    for _ in range(n):
        assert done.acquire(timeout=300)
    assert threads.threads == n and threads.room() == 2 * n

    for _ in range(n):
        threads.submit(uuid.uuid4(), burst)
    assert threads.room() == n  # the idle ones are spoken for
    for _ in range(n):
        assert done.acquire(timeout=300)
    assert threads.threads == n and threads.busy == 0 and threads.room() == 2 * n
