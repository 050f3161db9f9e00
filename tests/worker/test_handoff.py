"""The worker's end of the supervisor's relay (``jobqueue/worker/handoff.py``), on a real pipe.

No relay process: the test writes what the relay writes (payload lines, ``+up``, ``+down``) and
reads what the listener did with them, and calls the relay's poller (where nobody can LISTEN) on
the test database. Real processes: tests/process/test_handoff.py.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator

import pytest

import jobqueue
from jobqueue.models import Job
from jobqueue.settings.conf import shared_interval_s
from jobqueue.worker import handoff
from jobqueue.worker.handoff import HandedListener, write_all


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    os.close(read)
    os.close(write)


@pytest.fixture
def heard(pipe) -> Iterator[tuple[HandedListener, queue.SimpleQueue]]:
    """A listener on the pipe serving queue ``a``; every wake and state change in one queue."""
    events: queue.SimpleQueue = queue.SimpleQueue()
    listener = HandedListener(
        pipe[0],
        lambda name: name == "a",
        lambda delay_s: events.put(("wake", delay_s)),
        lambda up: events.put(("up", up)),
    )
    listener.start()
    yield listener, events
    listener.stop()


def next_events(events: queue.SimpleQueue, n: int) -> list[tuple[str, object]]:
    return [events.get(timeout=30) for _ in range(n)]


def test_up_wakes_once_then_payloads_of_its_queues_wake_it(pipe, heard):
    listener, events = heard
    os.write(pipe[1], b"+up\n")
    # Up: said, and a claim for what was enqueued while nobody listened.
    assert next_events(events, 2) == [("up", True), ("wake", 0.0)]
    # Another queue's payload is ignored; a delayed one carries its delay; a line may be split.
    os.write(pipe[1], b"b\na 2.5\na")
    os.write(pipe[1], b"\n+up\n")
    assert next_events(events, 2) == [("wake", 2.5), ("wake", 0.0)]
    os.write(pipe[1], b"+down\n")
    assert next_events(events, 1) == [("up", False)]
    assert not listener.connected.is_set()
    assert events.empty()


def test_a_silent_relay_counts_as_down(pipe, heard):
    listener, events = heard
    os.write(pipe[1], b"+up\n")
    assert next_events(events, 2) == [("up", True), ("wake", 0.0)]
    # No +up since: within STALE_AFTER_S (3.5 s) plus a read's wait it is down.
    assert next_events(events, 1) == [("up", False)]
    assert not listener.connected.is_set()


def test_a_full_pipe_drops_the_line_instead_of_blocking(pipe):
    os.set_blocking(pipe[1], False)
    line = b"a\n" * 4096
    written = 0
    while written < 1 << 20:  # far past any pipe's buffer
        write_all([pipe[1]], line)
        written += len(line)
    # Returned: nothing blocked. The pipe holds at most its buffer.
    assert len(os.read(pipe[0], 1 << 20)) < written


def test_an_idle_worker_sharing_a_relay_polls_that_many_times_less_often():
    assert shared_interval_s(1.0, 1) == 1.0
    waits = [shared_interval_s(1.0, 10) for _ in range(200)]
    assert all(5.0 <= wait <= 15.0 for wait in waits)
    assert len(set(waits)) > 1  # jittered, so the processes spread out
    assert handoff.STALE_AFTER_S > 3 * handoff.SAY_UP_EVERY_S  # three +up may be late


def _lines(read_fd: int) -> bytes:
    try:
        return os.read(read_fd, 65536)
    except BlockingIOError:
        return b""


@pytest.mark.django_db
def test_where_nobody_listens_the_relay_polls_and_wakes_all_when_work_appears_then_one_in_turn():
    pipes = [os.pipe() for _ in range(3)]
    try:
        for read, write in pipes:
            os.set_blocking(read, False)
            os.set_blocking(write, False)
        poller = handoff.Poller("default", [w for _, w in pipes], ["h", "i"], 1.0, "test")
        poller.probe()  # nothing waits: nobody is woken, and the probe worked
        assert poller.connected.is_set()
        assert [_lines(r) for r, _ in pipes] == [b"", b"", b""]
        jobqueue.enqueue("i", "tests.testapp.jobs.noop")
        poller.probe()  # work appeared: every process claims
        assert [_lines(r) for r, _ in pipes] == [b"h\n", b"h\n", b"h\n"]
        # It stays (a job scheduled for later is work too): one process at a time, in turn.
        poller.probe()
        poller.probe()
        assert [_lines(r) for r, _ in pipes] == [b"h\n", b"h\n", b""]
        Job.objects.all().delete()
        poller.probe()
        assert [_lines(r) for r, _ in pipes] == [b"", b"", b""]
    finally:
        for read, write in pipes:
            os.close(read)
            os.close(write)
