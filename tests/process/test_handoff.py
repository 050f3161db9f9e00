"""One listening connection per supervisor (``jobqueue/worker/handoff.py``), real processes.

``runworkers --processes 3`` on PostgreSQL: one relay process LISTENs for the three workers and
hands them each notification through a pipe. The poll interval is set far beyond the test's
waits (10 minutes, times three while the relay is up), so a job that runs was claimed on a
wake-up the relay handed on, not on a poll.
"""

from __future__ import annotations

import os
import re
import signal

import pytest
from django.db import connection

import jobqueue
from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import requires_postgres, wait_for

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

ADD = "tests.testapp.jobs.add"
NO_POLL = {"POLL_INTERVAL_SECONDS": 600.0}


def listening_backends() -> dict[str, int]:
    """Return how many backends of this database each kind of listener holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name LIKE 'jobqueue-%%'"
        )
        names = [name for (name,) in cursor.fetchall()]
    return {
        "relay": sum(name.startswith("jobqueue-relay") for name in names),
        "own": sum(name.startswith("jobqueue-listener") for name in names),
    }


def all_listening(count: int) -> bool:
    return WorkerRow.objects.filter(listener_up=True).count() == count


def done(job_id: int) -> bool:
    return Job.objects.filter(id=job_id, state="succeeded").exists()


def test_one_relay_listens_for_all_the_processes_and_wakes_them(workers):
    proc = workers.start("--queues", "h", "--processes", "3", settings=NO_POLL)
    wait_for(lambda: all_listening(3), timeout=120)
    assert listening_backends() == {"relay": 1, "own": 0}
    ids = [jobqueue.enqueue("h", ADD, {"a": n, "b": 1}) for n in range(5)]
    wait_for(lambda: all(done(job_id) for job_id in ids), timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0


def test_a_killed_relay_is_restarted_and_the_processes_poll_meanwhile(workers):
    proc = workers.start("--queues", "h", "--processes", "2", settings=NO_POLL)
    wait_for(lambda: all_listening(2), timeout=120)
    log = workers.wait_for_log(proc, "started the relay process")
    [relay_pid] = re.findall(r"started the relay process (\d+)", log)
    os.kill(int(relay_pid), signal.SIGKILL)
    workers.wait_for_log(proc, "restarting it")
    # The workers hear the relay's silence and say so on their rows, then poll every second:
    # a job enqueued now runs (no notification may reach anyone while there is no relay).
    wait_for(lambda: WorkerRow.objects.filter(listener_up=False).count() == 2, timeout=60)
    during = jobqueue.enqueue("h", ADD, {"a": 1, "b": 1})
    wait_for(lambda: done(during), timeout=60)
    # A new relay: listening again, and its wake-ups run jobs.
    wait_for(lambda: all_listening(2), timeout=60)
    assert listening_backends() == {"relay": 1, "own": 0}
    after = jobqueue.enqueue("h", ADD, {"a": 2, "b": 1})
    wait_for(lambda: done(after), timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0


def test_where_nobody_may_listen_the_relay_polls_for_the_host(workers):
    # LISTEN_NOTIFY off (as behind a transaction pooler with no LISTEN_DATABASE): no process
    # listens; the relay polls for all of them, and says up while its polls work.
    proc = workers.start("--queues", "h", "--processes", "3", settings={"LISTEN_NOTIFY": False})
    wait_for(lambda: all_listening(3), timeout=120)
    assert listening_backends() == {"relay": 0, "own": 0}
    ids = [jobqueue.enqueue("h", ADD, {"a": n, "b": 1}) for n in range(5)]
    wait_for(lambda: all(done(job_id) for job_id in ids), timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0
