"""Supervisor restarts (issue 32 item 1): a child that served is replaced at once, however often
it is killed; only a child that dies before it serves is restarted after a growing backoff.

Before: a child that lived under 30 s counted as a quick death and its slot's delay doubled
(0.5, 1, 2, 4, 8, 16, 30 s), so a fleet whose children were killed every few seconds sat with
no children at all. Real supervisor, real SIGKILLs; progress is measured by the jobs each child
runs (``tests.testapp.models.Run``), the guard per cycle only bounds a hang.
"""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection

from jobqueue.metrics import compute
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.factories import insert_ready_jobs
from tests.testapp.models import Run

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

#: SIGKILLs of a serving child. Before the fix the 6th restart waited 16 s, the 7th 30 s.
KILLS = 8
#: Longest a slot may take to come back and run jobs after a kill, seconds: a guard against a
#: hang, well above the milliseconds a fork takes and well below the old 16 s and 30 s delays.
CYCLE_GUARD_S = 12.0


def runs_by(pid: int) -> int:
    return Run.objects.filter(pid=pid).count()


def serving_pid(known: set[int]) -> int | None:
    """Return the pid of a child not seen before that has run at least 3 jobs, if any."""
    for pid in Run.objects.exclude(pid__in=known).values_list("pid", flat=True).distinct():
        if runs_by(pid) >= 3:
            return pid
    return None


def test_a_child_killed_after_it_served_is_replaced_at_once_every_time(workers):
    with connection.cursor() as cursor:
        insert_ready_jobs(
            cursor, "restarts", "tests.testapp.jobs.recorded_work", 20_000, '{"sleep_s": 0.02}'
        )
    sup = workers.start(
        "--queues",
        "restarts",
        "--processes",
        "1",
        "--concurrency",
        "2",
        settings=FAST_WORKER_SETTINGS,
    )
    killed: set[int] = set()
    for _ in range(KILLS):
        # The slot's current child has served: it ran jobs (measured, not waited out).
        pid = wait_for(lambda: serving_pid(killed), timeout=CYCLE_GUARD_S)
        os.kill(pid, signal.SIGKILL)
        killed.add(pid)
    # The last replacement serves too.
    wait_for(lambda: serving_pid(killed), timeout=CYCLE_GUARD_S)
    log = workers.log(sup)
    assert sup.poll() is None, log
    assert log.count("it had served: replacing it now") == KILLS, log
    assert "restarting in" not in log, log
    assert f"deaths by cause: SIGKILL: {KILLS}" in log, log
    # The hand-back process counted each where the metrics read it, before the slot restarted.
    metrics = compute()
    assert f'jobqueue_worker_process_deaths_total{{cause="SIGKILL"}} {KILLS}' in metrics, metrics
