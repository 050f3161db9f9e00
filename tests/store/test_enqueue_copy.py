"""``enqueue_many`` by COPY on PostgreSQL: row for row what the statement writes, ids in input
order, all or nothing, and the same wake-ups (``jobqueue/store/postgres/jobs.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import transaction

import jobqueue
from jobqueue.models import Job
from jobqueue.store.interface import NOTIFY_CHANNEL
from jobqueue.store.postgres import jobs as postgres_jobs
from tests.conftest import database_url, requires_postgres

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres()]

NOOP = "tests.testapp.jobs.noop"
ADD = "tests.testapp.jobs.add"

#: Every column enqueue_many writes, bar the id and the clock's (compared apart).
COLUMNS = (
    "queue",
    "type",
    "payload",
    "priority",
    "tenant_id",
    "state",
    "attempts",
    "max_attempts",
    "timeout_s",
    "leased_by",
    "lease_token",
    "lease_until",
    "dedupe_key",
    "ordering_key",
    "errors",
    "dead_reason",
    "result",
    "suspect",
    "watched",
    "has_children",
    "waiting_for",
    "batch_id",
    "concurrency_key",
    "concurrency_limit",
    "started_at",
    "finished_at",
)


def _batch(run_at: datetime) -> list[dict]:
    """240 jobs (over COPY_MIN_JOBS) with every option a keyless job can have."""
    shapes = [
        {"queue": "a", "job_type": ADD, "payload": {"a": 1, "b": 2}, "priority": 7},
        {"queue": "b", "job_type": NOOP, "run_at": run_at, "tenant_id": "t\t1\\"},
        {"queue": "a", "job_type": NOOP, "max_attempts": 2, "timeout_s": 4.5, "delay": 30},
        {"queue": "c", "job_type": NOOP, "payload": {"s": 'é\n\\"', "n": None, "l": [1, {}]}},
        {"queue": "c", "job_type": NOOP, "concurrency_key": "k", "concurrency_limit": 3},
        {"queue": "a", "job_type": NOOP, "run_at": datetime(2001, 1, 1, tzinfo=UTC)},
    ]
    return [dict(shape) for _ in range(40) for shape in shapes]


def _rows(ids: list[int]) -> list[tuple]:
    found = {
        row["id"]: row
        for row in Job.objects.filter(id__in=ids).values("id", "run_at", "created_at", *COLUMNS)
    }
    return [
        (
            *(found[i][c] for c in COLUMNS),
            # A given run_at as given; else the delay from created_at.
            found[i]["run_at"]
            if found[i]["run_at"].year in (2001, 2031)
            else found[i]["run_at"] - found[i]["created_at"],
        )
        for i in ids
    ]


def test_copy_writes_row_for_row_what_the_statement_writes(monkeypatch):
    run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    with transaction.atomic():
        copied = jobqueue.enqueue_many(_batch(run_at))
    monkeypatch.setattr(postgres_jobs, "COPY_MIN_JOBS", 10**9)
    stated = jobqueue.enqueue_many(_batch(run_at))
    assert copied == sorted(copied) and len(set(copied)) == 240
    assert _rows(copied) == _rows(stated)
    # Delays count from the transaction's now(), which is created_at, as in the statement.
    delayed = Job.objects.get(id=copied[2])
    assert delayed.run_at - delayed.created_at == timedelta(seconds=30)
    assert delayed.state == "scheduled"


def test_a_copied_batch_notifies_once_per_queue_at_commit_and_not_after_rollback():
    conn = psycopg.connect(database_url(), autocommit=True)
    try:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        jobs = [
            {"queue": "a", "job_type": NOOP},
            {"queue": "b", "job_type": NOOP},
            {"queue": "c", "job_type": NOOP, "delay": 7200},  # beyond the hour: nothing
            {"queue": "d", "job_type": NOOP, "delay": 90},
            {"queue": "d", "job_type": NOOP, "delay": 60},  # the earliest of queue d
        ] * 50
        with pytest.raises(ZeroDivisionError):
            with transaction.atomic():
                jobqueue.enqueue_many(jobs)
                1 / 0  # noqa: B018
        assert [n.payload for n in conn.notifies(timeout=0.3)] == []
        assert not Job.objects.exists()
        with transaction.atomic():
            jobqueue.enqueue_many(jobs)
            assert [n.payload for n in conn.notifies(timeout=0.2)] == []
        got = sorted(n.payload for n in conn.notifies(timeout=0.5))
        assert got[:2] == ["a", "b"]
        [delayed] = got[2:]
        queue, due = delayed.split(" ")
        assert queue == "d"
        assert 55.0 < float(due) <= 60.0
        # In autocommit too: the COPY's own transaction commits and notifies.
        jobqueue.enqueue_many([{"queue": "e", "job_type": NOOP}] * 200)
        assert [n.payload for n in conn.notifies(timeout=0.5)] == ["e"]
        assert Job.objects.filter(queue="e", state="ready").count() == 200
    finally:
        conn.close()


def test_a_batch_with_a_dedupe_or_ordering_key_takes_the_statement():
    keyed = [{"queue": "a", "job_type": NOOP, "dedupe_key": "same"}] * 200
    ids = jobqueue.enqueue_many(keyed)
    assert len(set(ids)) == 1  # one job: the first holds the key for all
    ordered = [{"queue": "a", "job_type": NOOP, "ordering_key": "o"}] * 200
    jobqueue.enqueue_many(ordered)
    assert Job.objects.filter(ordering_key="o").count() == 200
