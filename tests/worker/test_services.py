"""Where a worker's given services run (jobqueue/maintenance/services.py: start_services).

A frequent service joins the maintenance runner; the rare ones (the pruner, the depth sampler)
share one thread of their own whose runner closes its connection between rounds, so a worker
process connects for them once per round of the most frequent, not once each.
"""

from __future__ import annotations

import threading

from jobqueue.maintenance.services import RELEASE_IDLE_S, ServiceRunner, start_services


class Counting:
    """A service that counts its rounds and the thread each ran on."""

    def __init__(self, name: str, interval_s: float) -> None:
        self.name = name
        self.interval_s = interval_s
        self.threads: list[str] = []
        self.ran = threading.Event()

    def run_once(self) -> None:
        self.threads.append(threading.current_thread().name)
        self.ran.set()


def test_rare_services_share_one_thread_and_frequent_ones_join_maintenance():
    stopping = threading.Event()
    maintenance = ServiceRunner(
        [Counting("heartbeat", 1.0)], name="maintenance", using="sqlite", stop=stopping
    )
    frequent = Counting("scheduler", 1.0)
    pruner = Counting("pruner", 60.0)
    sampler = Counting("depth sampler", 30.0)
    assert pruner.interval_s >= RELEASE_IDLE_S and sampler.interval_s >= RELEASE_IDLE_S

    threads = start_services(
        [frequent, pruner, sampler], maintenance, using="sqlite", stopping=stopping
    )
    try:
        assert len(threads) == 1
        assert threads[0].name == "jobqueue-pruner and depth sampler"
        # Both rare services run at once when their runner starts, on that one thread.
        assert pruner.ran.wait(30) and sampler.ran.wait(30)
        assert pruner.threads == sampler.threads == ["jobqueue-pruner and depth sampler"]
        # The frequent one is the maintenance runner's now, not a thread's of its own.
        assert [s.name for s in maintenance.services] == ["heartbeat", "scheduler"]
        assert frequent.threads == []
    finally:
        stopping.set()
        for thread in threads:
            thread.join(30)
    assert not any(thread.is_alive() for thread in threads)


def test_no_rare_service_starts_no_thread():
    stopping = threading.Event()
    maintenance = ServiceRunner(
        [Counting("heartbeat", 1.0)], name="maintenance", using="sqlite", stop=stopping
    )
    assert (
        start_services([Counting("scheduler", 1.0)], maintenance, using="sqlite", stopping=stopping)
        == []
    )
