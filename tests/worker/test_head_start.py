"""A short claim's jobs begin on their handler threads before the claim loop goes on.

A woken handler thread must take the GIL from the loop that gave it the job; the loop went on
with its own Python (the rate limiters' wait, its next sleep), so the job began only at the
loop's next blocking call: a second wake-up on its way (docs/performance.md, "Pickup, hop by
hop, on a private cluster"). After a short claim the loop now waits, bounded, until its jobs
have begun (``HandlerThreads.wait_begun``, ``claiming.HEAD_START_S``).
"""

from __future__ import annotations

import threading
import uuid

import pytest

from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.worker import claiming
from jobqueue.worker.loop import Worker
from jobqueue.worker.threads import HandlerThreads
from tests.factories import make_job

ADD = "tests.testapp.jobs.add"


def test_wait_begun_is_true_once_every_run_submitted_has_been_taken_up():
    release = threading.Event()
    done = threading.Semaphore(0)
    threads = HandlerThreads(lambda: release.wait(60), lambda _: done.release(), concurrency=2)
    assert threads.wait_begun(0)  # nothing submitted: nothing to wait for
    threads.submit(uuid.uuid4())  # a new thread
    threads.submit(uuid.uuid4())  # another
    assert threads.wait_begun(60)
    assert threads.busy == 2  # begun, still running
    release.set()
    for _ in range(2):
        assert done.acquire(timeout=60)
    release.clear()
    threads.submit(uuid.uuid4())  # an idle thread, woken through the work queue
    assert threads.wait_begun(60)
    release.set()
    assert done.acquire(timeout=60)


@pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)
@pytest.mark.parametrize("using", ["default", "sqlite"])
def test_a_short_claim_returns_once_its_jobs_have_begun(using, monkeypatch):
    # The loop waits at most HEAD_START_S (5 ms) for its jobs to begin: a latency trade. Here it
    # may wait a minute, so that the test checks the wait, not how soon a loaded machine wakes a
    # thread (at 5 ms it failed once, in a CI run beside a second one).
    monkeypatch.setattr(claiming, "HEAD_START_S", 60.0)
    w = Worker(
        queues=["head"],
        using=using,
        install_signal_handlers=False,
        listen_notify=False,
        concurrency=4,
    )

    def ready_job() -> int:
        return make_job(
            JobState.READY, using=using, queue="head", type=ADD, payload={"a": 1, "b": 2}
        ).id

    ready_job()
    assert w.run_once() == 1  # its handler thread is idle now, as a trickle finds it
    second = ready_job()
    claimed = w._claimer.claim(4)  # 1 of 4: short
    assert [job.id for job in claimed] == [second]
    assert w._starter.threads.wait_begun(0)  # taken up before the claim returned
    assert w.run_once() == 1
    assert Job.objects.using(using).get(id=second).state == JobState.SUCCEEDED
