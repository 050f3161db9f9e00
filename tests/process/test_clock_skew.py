"""A worker whose host clock is 60 s off the database's (issue 32 item 4): liveness, delays and
health stay right, because every time decision is the database clock's.

Before: the worker wrote its row's ``last_seen_at`` with its own clock, so ``health`` reported
"no live worker" while a worker 60 s behind served, and a SIGKILLed worker 60 s ahead stayed
"alive" for a minute. The worker runs under ``tests/skewed_clock.py`` (time-machine); this
process, ``health`` and ``status`` keep the true time.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest
from django.db import connection

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import FAST_WORKER_SETTINGS, ROOT, requires_postgres, subprocess_env, wait_for

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

SKEW_S = 60.0


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "django", "jobqueue", *args],
        env=subprocess_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def state(job_id: int) -> str:
    return Job.objects.values_list("state", flat=True).get(id=job_id)


def seen_by_database(worker_id: str) -> float:
    """Return how many seconds ago, by the database clock, the worker's row was refreshed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM statement_timestamp() - last_seen_at)::float8 "
            "FROM jobqueue_worker WHERE worker_id = %s",
            [worker_id],
        )
        row = cursor.fetchone()
    return row[0] if row else float("inf")


@pytest.mark.parametrize("skew_s", [-SKEW_S, SKEW_S], ids=["behind", "ahead"])
def test_a_worker_whose_clock_is_a_minute_off_is_judged_on_the_database_clock(
    workers, monkeypatch, skew_s
):
    monkeypatch.setenv("JOBQUEUE_TEST_CLOCK_SKEW_S", str(skew_s))
    worker = workers.start(
        "--queues",
        "skew",
        "--worker-id",
        "skewed",
        settings=FAST_WORKER_SETTINGS,
        module="tests.skewed_clock",
    )
    # It serves: a job enqueued now runs.
    first = jobqueue.enqueue("skew", "tests.testapp.jobs.noop", {})
    wait_for(lambda: state(first) == "succeeded", timeout=60)
    # Its row's time is the database's: a heartbeat a moment ago, not a minute off either way.
    wait_for(lambda: abs(seen_by_database("skewed")) < 5.0, timeout=30)

    health = cli("health", "--host", socket.gethostname())
    assert health.returncode == 0, health.stdout + health.stderr
    assert "1 alive on" in health.stdout, health.stdout
    status = json.loads(cli("status", "--json").stdout)
    assert status["workers_alive"] == 1, status

    # A delay is the database's: due 3 s after the enqueue, started no earlier, and run.
    delayed = jobqueue.enqueue("skew", "tests.testapp.jobs.noop", {}, delay=3)
    wait_for(lambda: state(delayed) == "succeeded", timeout=60)
    job = Job.objects.get(id=delayed)
    assert job.started_at >= job.run_at, (job.started_at, job.run_at)

    # Killed: silent within three heartbeats by the database clock (1.5 s here), not a minute
    # later. The guard is below the skew, so a row written with the host's clock fails it.
    worker.send_signal(signal.SIGKILL)
    assert workers.exit_code(worker) == -signal.SIGKILL

    def dead_says_health() -> bool:
        result = cli("health", "--host", socket.gethostname())
        return result.returncode == 1 and "no live worker" in result.stdout

    wait_for(dead_says_health, timeout=SKEW_S / 2)
    assert Worker.objects.filter(worker_id="skewed").exists()  # silent, not pruned
