"""The claim loop's bell (jobqueue/worker/wakeups.py) holds at most one pending ring.

Issue 15 ("memory flat"): handler threads ring the bell after each outcome, and a worker that
always has a backlog claims again without ever waiting on the bell, so each ring stayed queued:
one entry per job, and the worker's RSS grew by ~13 bytes a job (bench/soak.py --feed: +12%
from 10,000 to 500,000 jobs, with the bell's queue at one entry per job done).
"""

from __future__ import annotations

import threading

from jobqueue.worker.wakeups import WakeUps


def test_rings_without_a_wait_leave_one_pending_ring():
    wakeups = WakeUps()
    for _ in range(10_000):
        wakeups.ring()
    # One ring is pending, not 10,000: memory stays flat however long the loop is busy.
    assert wakeups._bell.qsize() == 1
    assert wakeups.wait(0.0) is True
    assert wakeups.wait(0.01) is False


def test_a_ring_after_a_wait_wakes_the_next_wait():
    wakeups = WakeUps()
    wakeups.ring()
    assert wakeups.wait(0.0) is True
    wakeups.ring()
    assert wakeups.wait(0.0) is True
    assert wakeups.wait(0.01) is False


def test_rings_from_many_threads_wake_a_waiting_loop_and_stay_bounded():
    wakeups = WakeUps()
    rung = threading.Barrier(9)

    def ring_many() -> None:
        rung.wait(timeout=300)
        for _ in range(5_000):
            wakeups.ring()

    threads = [threading.Thread(target=ring_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    rung.wait(timeout=300)
    # A hang guard, not a duration: the rings above wake it at once.
    assert wakeups.wait(300) is True
    for thread in threads:
        thread.join(timeout=300)
    # Threads racing past the check may each put one: at most one per thread, never per ring.
    assert wakeups._bell.qsize() <= 8
