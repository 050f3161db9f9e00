"""FIELD-CASES 26: a worker whose listening connection is killed says so, polls every second
while it is down, listens again on every channel, and says that too; same process throughout.

A real ``runworkers`` process, ``POLL_INTERVAL_SECONDS=30`` and lease 3 s. The listening backend
is terminated with ``pg_terminate_backend`` while the database refuses new connections
(``ALLOW_CONNECTIONS false``, FIELD-CASES 26's variant): the listener cannot come back until
the test lets it, so "down" lasts as long as the test needs, and the worker's open connections
(claim loop, heartbeat) carry on.

Bounds, lenient for a loaded 2-core machine (the case's own in brackets): a job starts within
10 s of its enqueue (1 s), both with the listener up (a NOTIFY wake-up) and while it is down
(the fast poll: 2 s); listener_up reads 0 within 20 s of the kill (5 s) and 1 within 60 s of
connections being allowed again (10 s). Each job is enqueued right after the one before
finished, when the worker has just claimed, so its next 30 s poll is still more than 10 s away:
only a wake-up (or, while down, the fast poll) starts a job within 10 s.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connection

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import database_url, requires_postgres, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.jobs.noop"
SETTINGS = {"POLL_INTERVAL_SECONDS": 30, "LEASE_SECONDS": 3, "REAPER_INTERVAL_SECONDS": 0.5}
#: A job starts within this long of its enqueue (FIELD-CASES 26: 1 s up, 2 s down).
START_BOUND = timedelta(seconds=10)


def listening_backends(worker_id: str) -> list[int]:
    """Return the pids of the worker's LISTEN backends (their last query is ``LISTEN ...``)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND query LIKE 'LISTEN%%'",
            [f"jobqueue-listener {worker_id}"[:63]],
        )
        return [row[0] for row in cur.fetchall()]


def listener_up(worker_id: str) -> bool | None:
    return Worker.objects.filter(worker_id=worker_id).values_list("listener_up", flat=True).get()


def run_one() -> Job:
    """Enqueue a job, wait until it has run, and assert it started within START_BOUND."""
    job_id = jobqueue.enqueue("fc26", NOOP)
    wait_for(lambda: Job.objects.filter(id=job_id, state="succeeded").exists(), timeout=120)
    job = Job.objects.get(id=job_id)
    assert job.attempts == 1
    assert job.started_at - job.created_at <= START_BOUND, (job.created_at, job.started_at)
    return job


def allow_connections(allow: bool) -> None:
    """Let new connections to the test database in, or refuse them (open ones carry on)."""
    name = connection.settings_dict["NAME"]
    # From another database: PostgreSQL refuses this on a connection to the database itself.
    with psycopg.connect(database_url().rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
        c.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {str(allow).lower()}')


@requires_postgres()
@pytest.mark.slow
def test_field_case_26_listener_lost_fast_poll_then_listens_again(workers):
    worker_id = f"fc26-{uuid.uuid4().hex[:6]}"
    proc = workers.start(
        "--queues",
        "fc26",
        "--concurrency",
        "4",
        "--worker-id",
        worker_id,
        "--no-scheduler",
        settings=SETTINGS,
    )
    wait_for(lambda: listening_backends(worker_id), timeout=60)
    wait_for(lambda: listener_up(worker_id) is True, timeout=60)
    pid = Worker.objects.get(worker_id=worker_id).pid
    assert pid == proc.pid

    run_one()  # J1: a NOTIFY wake-up
    [backend] = listening_backends(worker_id)
    allow_connections(False)
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", [backend])  # K
        workers.wait_for_log(proc, "listener: connection lost", timeout=30)
        wait_for(lambda: listener_up(worker_id) is False, timeout=20)
        for _ in range(3):  # J2..J4: while it is down, the fast poll starts them
            run_one()
        assert listening_backends(worker_id) == []  # still down: only the fast poll ran them
        assert listener_up(worker_id) is False
    finally:
        allow_connections(True)
    wait_for(lambda: listener_up(worker_id) is True, timeout=60)
    assert listening_backends(worker_id)  # LISTENing again (its renewed backend)
    run_one()  # the wake-up after re-subscribing has been claimed by the time this one ran
    for _ in range(3):  # J12..: woken by NOTIFY (the fast poll has ended: 30 s polls again)
        run_one()
    assert proc.poll() is None
    assert Worker.objects.get(worker_id=worker_id).pid == proc.pid  # same process throughout
    assert "listening again after" in workers.log(proc)
