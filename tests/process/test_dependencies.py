"""Breakers and budgets through real ``runworkers`` processes on PostgreSQL.

* A breaker opened by one worker process's failures holds back jobs in another process, without
  spending their attempts, and a probe closes it once the dependency is back.
* The retry budget delays retries over budget; every job still succeeds with no extra attempt.
* A permanent error of a dependency's job is dead at once and never counts against the breaker.

Waits are ``wait_for`` with generous timeouts; nothing asserts a duration.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from jobqueue.models import DependencyBreaker, Job
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

BREAKER_SETTINGS = {
    **FAST_WORKER_SETTINGS,
    "BREAKER": {
        "failure_threshold": 3,
        "failure_ratio": 0.5,
        "window_seconds": 60,
        "cooldown_seconds": 3,
        "max_cooldown_seconds": 3,
    },
    "RETRY_BUDGET": None,
}


def deferred_entries(job_id: int) -> list[dict]:
    return [e for e in Job.objects.get(id=job_id).errors if e.get("kind") == "deferred"]


def test_a_breaker_opened_in_one_process_holds_jobs_back_in_another(workers, tmp_path):
    path, down = tmp_path / "calls.txt", tmp_path / "down"
    down.touch()
    first = [
        jobs.call_partner.enqueue(path=str(path), down_flag=str(down), max_attempts=50)
        for _ in range(3)
    ]
    a = workers.start("--worker-id", "A", "--concurrency", "3", settings=BREAKER_SETTINGS)
    wait_for(lambda: DependencyBreaker.objects.filter(name="partner", opened_count__gte=1).exists())
    os.killpg(a.pid, signal.SIGKILL)
    a.wait(timeout=60)

    later = [
        jobs.call_partner.enqueue(path=str(path), down_flag=str(down), max_attempts=50)
        for _ in range(4)
    ]
    workers.start("--worker-id", "B", "--concurrency", "4", settings=BREAKER_SETTINGS)
    wait_for(lambda: all(deferred_entries(job_id) for job_id in later))
    down.unlink()
    wait_for(
        lambda: Job.objects.filter(id__in=first + later, state="succeeded").count() == 7,
        timeout=60,
    )

    calls = Counter(int(line[0]) for line in record_lines(path))
    for job_id in later:
        job = Job.objects.get(id=job_id)
        # Only B ever saw these jobs, and it held them back on a breaker A's failures opened.
        assert {e["worker"] for e in deferred_entries(job_id)} == {"B"}
        # Held back = not run and not counted: every attempt is one handler call.
        assert job.attempts == calls[job_id]
    # No handler call of these jobs happened while the breaker was open (a probe sees half_open).
    states = {line[3] for line in record_lines(path) if int(line[0]) in later}
    assert "open" not in states
    assert DependencyBreaker.objects.get(name="partner").state == "closed"


def test_the_retry_budget_delays_retries_but_every_job_succeeds_without_extra_attempts(
    workers, tmp_path
):
    path = tmp_path / "calls.txt"
    settings = {
        **FAST_WORKER_SETTINGS,
        "RETRY_BUDGET": {"ratio": 0.1, "floor_per_second": 1.0, "capacity": 1.0},
    }
    ids = [jobs.fail_first_attempt.enqueue(path=str(path)) for _ in range(6)]
    workers.start("--concurrency", "6", settings=settings)
    wait_for(lambda: Job.objects.filter(id__in=ids, state="succeeded").count() == 6, timeout=60)

    calls = Counter(int(line[0]) for line in record_lines(path))
    assert {job_id: calls[job_id] for job_id in ids} == dict.fromkeys(ids, 2)
    rows = list(Job.objects.filter(id__in=ids))
    assert {row.attempts for row in rows} == {2}
    delayed = [row for row in rows if row.errors[0].get("retry_budget_delay_s")]
    # 6 retries at once against 1 token plus 1 token/s: at most 2 go on their backoff.
    assert len(delayed) >= 4


def test_a_permanent_error_of_a_dependency_job_is_dead_at_once_and_not_a_breaker_failure(
    workers,
):
    ids = [jobs.partner_rejects.enqueue() for _ in range(5)]
    result = workers.run("--burst", settings=BREAKER_SETTINGS)
    assert result.returncode == 0, result.stderr
    rows = list(Job.objects.filter(id__in=ids))
    assert {(row.state, row.dead_reason, row.attempts) for row in rows} == {
        ("dead", "permanent_error", 1)
    }
    breaker = DependencyBreaker.objects.get(name="partner")
    assert (breaker.state, breaker.failures, breaker.successes) == ("closed", 0, 0)
