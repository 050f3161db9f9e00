"""LISTEN/NOTIFY wake-ups on PostgreSQL: what the trigger and the statements send, and real
workers that claim at once, survive a killed listening connection, and poll when it is off.

Workers here poll every 600 s, so a job that runs within the tests' waits (120 s, generous for
a loaded machine) was claimed because of a notification, not a poll.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection, transaction

import jobqueue
from jobqueue.models import Job, Worker
from jobqueue.store import get_store, notify
from jobqueue.store.interface import NOTIFY_CHANNEL
from jobqueue.store.notify import ReadyListener
from tests.conftest import database_url, requires_postgres, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
pg = requires_postgres()

NOOP = "tests.testapp.jobs.noop"

#: Worker settings: no poll within any wait of these tests, fast everything else.
SLOW_POLL = {"POLL_INTERVAL_SECONDS": 600, "LEASE_SECONDS": 3, "REAPER_INTERVAL_SECONDS": 0.3}


@pytest.fixture
def listener():
    """A second connection LISTENing on the channel; ``.drain()`` returns what arrived."""
    conn = psycopg.connect(database_url(), autocommit=True)
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")

    def drain(wait_s: float = 0.3) -> list[str]:
        return [n.payload for n in conn.notifies(timeout=wait_s)]

    conn.drain = drain  # type: ignore[attr-defined]
    try:
        yield conn
    finally:
        conn.close()


@pg
def test_one_notification_per_queue_and_statement_carrying_only_the_queue(listener):
    with transaction.atomic():
        jobqueue.enqueue_many(
            [
                {"queue": "a", "job_type": NOOP, "payload": {"secret": "x" * 100}},
                {"queue": "b", "job_type": NOOP},
                {"queue": "a", "job_type": NOOP},
                {"queue": "c", "job_type": NOOP, "delay": 7200},  # beyond the hour: nothing
                {"queue": "d", "job_type": NOOP, "delay": 90},
                {"queue": "d", "job_type": NOOP, "delay": 60},  # the earliest of queue d
            ]
        )
        # Nothing before the commit: a worker must not wake for rows it cannot see.
        assert listener.drain(0.2) == []
    got = sorted(listener.drain())
    assert got[:2] == ["a", "b"]
    [delayed] = got[2:]
    queue, due = delayed.split(" ")
    assert queue == "d"
    assert 55.0 < float(due) <= 60.0


@pg
def test_wake_queues_notifies_each_queue_once_as_an_enqueue_does(listener):
    """A worker whose ack freed slots of a full concurrency key wakes the queue's workers."""
    get_store().wake_queues(["k2", "k1", "k2"])
    assert sorted(listener.drain()) == ["k1", "k2"]
    get_store().wake_queues([])
    assert listener.drain() == []


@pg
def test_a_rolled_back_enqueue_notifies_nobody(listener):
    with pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            jobqueue.enqueue("a", NOOP)
            1 / 0  # noqa: B018
    assert listener.drain() == []


@pg
def test_a_transaction_of_many_enqueues_sends_one_notification_per_queue(listener):
    with transaction.atomic():
        for _ in range(5):
            jobqueue.enqueue("a", NOOP)
    assert listener.drain() == ["a"]


@pg
def test_release_retry_and_run_now_notify_as_the_job_becomes_ready(listener):
    store = get_store()
    job_id = jobqueue.enqueue("a", NOOP)
    [claimed] = store.claim(["a"], "w", 1, 30.0)
    listener.drain()
    store.release(job_id, claimed.lease_token)
    assert listener.drain() == ["a"]
    jobqueue.cancel(job_id)
    assert listener.drain() == []
    jobqueue.retry(job_id)
    assert listener.drain() == ["a"]
    later = jobqueue.enqueue("b", NOOP, delay=7200)
    assert listener.drain() == []
    jobqueue.run_now(later)
    assert listener.drain() == ["b"]
    jobqueue.cancel(later)
    assert jobqueue.retry_many([later]).retried == (later,)
    assert listener.drain() == ["b"]


def listener_pids(worker_id: str) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            [f"jobqueue-listener {worker_id}"[:63]],
        )
        return [row[0] for row in cur.fetchall()]


def started_within(job_id: int, timeout: float) -> Job:
    wait_for(lambda: Job.objects.filter(id=job_id, state="succeeded").exists(), timeout=timeout)
    return Job.objects.get(id=job_id)


def settled(worker_id: str) -> None:
    """Wait until the worker has heartbeaten since now (database clock): it has run on past
    what it was doing (its first claim, its wake-up after reconnecting), so it only waits."""
    with connection.cursor() as cur:
        cur.execute("SELECT now()")
        [since] = cur.fetchone()
    wait_for(
        lambda: Worker.objects.filter(worker_id=worker_id, last_seen_at__gt=since).exists(),
        timeout=60,
    )


@pg
def test_a_stopped_listener_ends_at_once_not_when_its_wait_runs_out(monkeypatch):
    # Every worker's exit stopped its listener and waited for the listener's notification wait
    # to run out (half a second of each start and exit). Here that wait would outlast the
    # join's guard: the thread ends within the guard only if stop() wakes the wait.
    monkeypatch.setattr(notify, "STOP_CHECK_S", 3600.0)
    monkeypatch.setattr(notify, "PING_INTERVAL_S", 3600.0)
    woken: list[float] = []
    ready = ReadyListener("default", lambda queue: True, woken.append, "test-stop")
    ready.start()
    try:
        assert ready.connected.wait(300)
        jobqueue.enqueue_many([{"queue": "stop-test", "job_type": NOOP}])
        # The start's wake-up, then the NOTIFY's: the wait still hears notifications.
        wait_for(lambda: woken.count(0.0) >= 2, timeout=300)
    finally:
        ready.stop(timeout=300)
    assert ready._thread is not None and not ready._thread.is_alive()


@pg
def test_a_listener_whose_descriptors_are_numbered_past_1024_still_hears(monkeypatch):
    # select() raises "filedescriptor out of range" for a descriptor >= 1024, which a worker
    # whose handlers keep many files open reaches: the listener thread died, the worker polled.
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("RLIMIT_NOFILE's hard limit is under 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    monkeypatch.setattr(notify, "STOP_CHECK_S", 3600.0)
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    woken: list[float] = []
    ready = ReadyListener("default", lambda queue: True, woken.append, "test-fds")
    try:
        ready.start()
        assert ready.connected.wait(300)
        jobqueue.enqueue_many([{"queue": "fds-test", "job_type": NOOP}])
        wait_for(lambda: woken.count(0.0) >= 2, timeout=300)
    finally:
        ready.stop(timeout=300)
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert ready._thread is not None and not ready._thread.is_alive()


@pg
@pytest.mark.slow
def test_an_idle_worker_claims_at_once_and_listens_again_after_its_connection_is_killed(
    workers,
):
    worker_id = f"notify-{uuid.uuid4().hex[:6]}"
    proc = workers.start("--queues", "wake", "--worker-id", worker_id, settings=SLOW_POLL)
    wait_for(lambda: listener_pids(worker_id), timeout=60)
    settled(worker_id)  # past the worker's first (empty) claim: from here on it only waits

    first = jobqueue.enqueue("wake", NOOP)
    job = started_within(first, timeout=120)
    assert (job.state, job.attempts) == ("succeeded", 1)
    # Other queues' notifications do not concern this worker, and change nothing.
    other = jobqueue.enqueue("elsewhere", NOOP)

    [old_pid] = listener_pids(worker_id)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(%s)", [old_pid])
    wait_for(lambda: listener_pids(worker_id) not in ([], [old_pid]), timeout=60)
    settled(worker_id)  # its wake-up after reconnecting has claimed (nothing) by now

    second = jobqueue.enqueue("wake", NOOP)
    job = started_within(second, timeout=120)
    assert (job.state, job.attempts) == ("succeeded", 1)
    assert Job.objects.get(id=other).state == "ready"
    assert proc.poll() is None
    log = workers.log(proc)
    assert "listener: connection lost" in log
    assert "listener: listening again after 1 failure(s)" in log


@pg
@pytest.mark.slow
def test_an_idle_worker_claims_a_delayed_job_when_it_falls_due_not_at_its_next_poll(workers):
    worker_id = f"delay-{uuid.uuid4().hex[:6]}"
    workers.start("--queues", "later", "--worker-id", worker_id, settings=SLOW_POLL)
    wait_for(lambda: listener_pids(worker_id), timeout=60)
    settled(worker_id)
    job_id = jobqueue.enqueue("later", NOOP, delay=2)
    job = started_within(job_id, timeout=120)  # a poll would come 600 s later
    assert (job.state, job.attempts) == ("succeeded", 1)
    # Not early (the claim compares run_at with the database clock).
    assert job.started_at >= job.run_at


@pg
@pytest.mark.slow
def test_with_listen_notify_off_the_worker_polls_and_opens_no_listening_connection(workers):
    worker_id = f"poll-{uuid.uuid4().hex[:6]}"
    settings = {**SLOW_POLL, "POLL_INTERVAL_SECONDS": 0.2, "LISTEN_NOTIFY": False}
    workers.start("--queues", "polled", "--worker-id", worker_id, settings=settings)
    wait_for(lambda: _registered(worker_id), timeout=60)
    job_id = jobqueue.enqueue("polled", NOOP, {})
    job = started_within(job_id, timeout=120)
    assert (job.state, job.attempts) == ("succeeded", 1)
    assert listener_pids(worker_id) == []


def _registered(worker_id: str) -> bool:
    from jobqueue.models import Worker

    return Worker.objects.filter(worker_id=worker_id).exists()


@pg
def test_notifications_never_carry_a_payload_however_large(listener):
    # NOTIFY payloads are limited to 8,000 bytes; a payload in them would fail this enqueue.
    jobqueue.enqueue("a", NOOP, {"blob": "y" * 20_000})
    assert listener.drain() == ["a"]


@pytest.mark.django_db(databases=["default", "sqlite"])
def test_a_worker_on_another_database_never_listens():
    from jobqueue.worker.loop import Worker

    assert Worker(queues=["q"], using="sqlite").listen_notify is False
    assert Worker(queues=["q"], using="sqlite", listen_notify=True).listen_notify is False


@pg
def test_the_jobs_table_is_tuned_for_churn():
    """Migration 0006_notify: room for new row versions on each page, and vacuum/analyze after
    1-2 % of the table changed instead of the default 20 % (FIELD-CASES 19)."""
    with connection.cursor() as cur:
        cur.execute("SELECT reloptions FROM pg_class WHERE relname = 'jobqueue_job'")
        [options] = cur.fetchone()
    assert sorted(options) == [
        "autovacuum_analyze_scale_factor=0.02",
        "autovacuum_analyze_threshold=1000",
        "autovacuum_vacuum_insert_scale_factor=0.02",
        "autovacuum_vacuum_scale_factor=0.01",
        "autovacuum_vacuum_threshold=1000",
        "fillfactor=80",
    ]
