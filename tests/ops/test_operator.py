"""Operator functions beyond cancel/retry: ``retry_many`` and ``run_now``, on the default database.

These run on PostgreSQL and on SQLite (whichever ``DATABASE_URL`` names); the concurrency tests
need PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

import jobqueue
from jobqueue.errors import JobNotFound
from jobqueue.models import Job
from jobqueue.ops.repairs import BulkRetry
from jobqueue.states import JobState
from jobqueue.store.postgres.db import Executor
from tests.conftest import requires_postgres
from tests.factories import make_job, make_jobs

NOOP = "tests.testapp.jobs.noop"


def row(job_id: int) -> dict[str, Any]:
    return Job.objects.values().get(id=job_id)


@pytest.mark.django_db
def test_retry_many_says_what_happened_to_every_id():
    dead, cancelled = make_job(JobState.DEAD).id, make_job(JobState.CANCELLED).id
    ready, succeeded = make_job(JobState.READY).id, make_job(JobState.SUCCEEDED).id
    held = make_job(JobState.DEAD, queue="q", dedupe_key="invoice:7").id
    live = jobqueue.enqueue("q", NOOP, dedupe_key="invoice:7")
    result = jobqueue.retry_many([succeeded, dead, 10**12, held, ready, cancelled, dead])
    assert result == BulkRetry(
        retried=(dead, cancelled),
        not_retryable={ready: JobState.READY, succeeded: JobState.SUCCEEDED},
        duplicate=(held,),
        holders={held: live},
        missing=(10**12,),
    )
    assert row(dead)["state"] == row(cancelled)["state"] == JobState.READY
    assert row(held)["state"] == JobState.DEAD
    assert row(live)["state"] == JobState.READY
    assert jobqueue.retry_many([]) == BulkRetry()


@pytest.mark.django_db
def test_retry_many_handles_thousands_in_batches_with_one_history_entry_each():
    ids = [job.id for job in make_jobs(2500, JobState.DEAD, max_attempts=2)]
    result = jobqueue.retry_many(ids)
    assert result.retried == tuple(sorted(ids))
    assert Job.objects.filter(state=JobState.READY, attempts=0).count() == 2500
    expected = ["error", "error", "operator_retry"]
    for errors in Job.objects.values_list("errors", flat=True):
        assert [e["kind"] for e in errors] == expected


@requires_postgres()
@pytest.mark.django_db
def test_retry_many_falls_back_to_one_row_at_a_time_when_a_key_is_taken_meanwhile(monkeypatch):
    """A dedupe key enqueued between the statement's check and its update: no error escapes.

    The race itself cannot be timed from a test, so the statement is made to fail the way it
    would (a unique violation) while a live job holds k1; each row then goes through retry().
    """
    first = make_job(JobState.DEAD, queue="q", dedupe_key="k1").id
    second = make_job(JobState.DEAD, queue="q", dedupe_key="k2").id
    jobqueue.enqueue("q", NOOP, dedupe_key="k1")
    real_execute = Executor.execute

    def racing_execute(self, name, params, **kwargs):
        if name == "retry_many":
            raise IntegrityError("duplicate key value violates unique constraint")
        return real_execute(self, name, params, **kwargs)

    monkeypatch.setattr(Executor, "execute", racing_execute)
    result = jobqueue.retry_many([first, second])
    assert result.retried == (second,)
    assert result.duplicate == (first,)
    assert row(first)["state"] == JobState.DEAD


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_bulk_retries_retry_each_job_once():
    from tests.client.test_enqueue import InThread, wait_until_blocked

    ids = [job.id for job in make_jobs(50, JobState.DEAD)]
    with transaction.atomic():
        assert len(jobqueue.retry_many(ids).retried) == 50
        other = InThread(lambda: jobqueue.retry_many(list(reversed(ids))))
        other.started.wait(30)
        wait_until_blocked(other.pid)
    second = other.join()
    assert second.retried == ()
    assert second.not_retryable == dict.fromkeys(sorted(ids), JobState.READY)
    for errors in Job.objects.values_list("errors", flat=True):
        assert [e["kind"] for e in errors].count("operator_retry") == 1


@pytest.mark.django_db
def test_run_now_makes_a_scheduled_job_ready_and_refuses_the_rest():
    scheduled = make_job(JobState.SCHEDULED, attempts=1).id
    assert jobqueue.run_now(scheduled) is True
    r = row(scheduled)
    assert (r["state"], r["attempts"]) == (JobState.READY, 1)
    assert jobqueue.run_now(scheduled) is False
    leased = make_job(JobState.LEASED).id
    snapshot = row(leased)
    assert jobqueue.run_now(leased) is False
    assert row(leased) == snapshot
    with pytest.raises(JobNotFound):
        jobqueue.run_now(10**12)
