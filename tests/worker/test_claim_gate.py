"""An idle worker asks the store whether there is work before it claims again (claiming.py).

After a claim that came back short, and until a wake-up or a timer comes, the worker's next
claim (its poll, the claim that would ride a lone ack) is made only if ``store.has_work`` says
one of its queues holds a ready or scheduled job. These pin that the gate never keeps a worker
from a job a claim would take: a job that came without a wake-up is still found by the poll.
"""

from __future__ import annotations

import threading

import pytest

from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.worker.loop import Worker
from tests.conftest import requires_postgres, wait_for
from tests.factories import make_job

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)

ADD = "tests.testapp.jobs.add"

both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])


def worker(using: str, **options) -> Worker:
    return Worker(
        queues=["gate"], using=using, install_signal_handlers=False, listen_notify=False, **options
    )


def ready_job(using: str) -> int:
    return make_job(
        JobState.READY, using=using, queue="gate", type=ADD, payload={"a": 1, "b": 2}
    ).id


@both_stores
def test_after_a_short_claim_the_next_is_made_only_when_the_store_has_work(using):
    w = worker(using, concurrency=4)
    ready_job(using)
    assert w.run_once() == 1  # claimed 1 of 4: a short claim
    assert w._claimer.riding() is False
    assert w._claimer.needed() is False  # nothing ready or scheduled in "gate"
    make_job(JobState.READY, using=using, queue="elsewhere", type=ADD, payload={"a": 1, "b": 2})
    assert w._claimer.needed() is False  # another queue's job is not this worker's
    ready_job(using)  # enqueued without waking this worker (it does not listen)
    assert w._claimer.riding() is False
    assert w._claimer.needed() is True


@both_stores
def test_a_wake_up_or_a_due_timer_lets_the_claim_go_without_asking(using):
    w = worker(using, concurrency=4)
    assert w.run_once() == 0  # an empty queue: a short claim
    assert w._claimer.riding() is False
    w._wakeups.wake(0.0)  # a notification for one of its queues
    assert w._claimer.riding() is True
    assert w._claimer.needed() is True
    assert w.run_once() == 0  # the claim answers it
    assert w._claimer.riding() is False
    w._wakeups.add_timer(0.0)  # a retry of its own, or a limiter's refill, falling due now
    assert w._claimer.riding() is True


@both_stores
def test_a_full_claim_is_followed_by_another_without_asking(using):
    w = worker(using, concurrency=2)
    for _ in range(3):
        ready_job(using)
    assert w.run_once() == 2  # claimed 2 of 2: there may be more
    assert w._claimer.riding() is True
    assert w.run_once() == 1


@requires_postgres()
def test_an_idle_worker_finds_a_job_that_came_without_a_wake_up_at_its_poll():
    # PostgreSQL only: the test's SQLite database is in memory, shared with the worker's
    # threads, and a read of it while the worker writes meets "table is locked".
    using = "default"
    w = worker(using, poll_interval_s=0.05)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: w._claimer.riding() is False, timeout=30)  # idle, its claim short
        job_id = ready_job(using)
        wait_for(
            lambda: Job.objects.using(using).get(id=job_id).state == JobState.SUCCEEDED,
            timeout=30,
        )
    finally:
        w.stop(force=True)
        thread.join(timeout=30)
    assert not thread.is_alive()


@both_stores
def test_a_burst_worker_exits_once_its_queues_hold_no_work(using):
    job_id = ready_job(using)
    w = worker(using, burst=True, concurrency=4)
    assert w.run() == 0
    assert Job.objects.using(using).get(id=job_id).state == JobState.SUCCEEDED


@requires_postgres()
def test_a_second_claims_jobs_go_back_while_a_suspect_job_runs_alone():
    # With rate limits a short claim is followed by a second one, whose jobs come while the
    # first claim's already run (Store.claim's ``taken``). A suspect job taken by the first must
    # still run alone: what the second brings goes back, its attempt not counted.
    using = "default"
    suspect = make_job(
        JobState.READY, using=using, queue="gate", type=ADD, payload={"a": 1, "b": 2}, suspect=True
    ).id
    limited = [
        make_job(
            JobState.READY,
            using=using,
            queue="gate",
            type="tests.testapp.tasks.rate_limited",
            payload={"n": i},
            priority=-1,
        ).id
        for i in range(2)
    ]
    w = worker(using, concurrency=4)
    w._claimer.claim(4)
    assert set(w._runs) == {suspect}
    rows = Job.objects.using(using).filter(id__in=limited)
    assert sorted((row.state, row.attempts) for row in rows) == [(JobState.READY, 0)] * 2
    w.stop(force=True)
