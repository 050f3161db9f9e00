"""An enqueue-only concurrency limit is never passed, even by two first claims (issue 18).

A worker process whose settings and job types declare no limit learns of one from the first
keyed job it claims; that first claim did not take turns, so a claim beside it could read the
same free slots. The store checks such a claim before its jobs run and gives back what passes
the limit (``PostgresJobs._within_limits``; docs/decisions.md, "Enqueue-only concurrency
limits are exact"). SQLite serializes writers from the start of a claim (IMMEDIATE), so it has
no such gap: the generic store's contract tests cover it.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store.interface import ClaimedJob
from jobqueue.store.postgres import PostgresStore
from jobqueue.store.postgres import jobs as postgres_jobs
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import make_jobs

#: Hang guard for the second claimer (it follows progress; the machine may be loaded).
GUARD_S = 300.0


def _waiting_for_a_turn() -> int:
    """Return how many sessions on this database wait for a lock: the claim's turn
    (claim_turn.sql), or a lane row the first claim moved and has not committed (claim.sql's
    ``lanes_served``; its snapshot was taken before, so it still misses the first's leases)."""
    with connection.cursor() as cursor:
        # pg_locks, not pg_stat_activity: the latter is read once per transaction, and this
        # runs inside the first claim's. Only sessions this one blocks count (not other tests').
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted"
            " AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return cursor.fetchone()[0]


def _first_claims_side_by_side(first_max: int, second_max: int) -> tuple[list, list]:
    """Run two first claims of processes that know no limit, the second inside the first.

    The first claim's transaction stays open while the second claim reads: the second's
    snapshot misses the first's leases, as two processes' first claims at the same moment.

    Returns:
        ``(first, second)``: each claim's jobs.
    """
    second: list[ClaimedJob] = []
    errors: list[BaseException] = []

    def claim_beside() -> None:
        try:
            second.extend(PostgresStore().claim(["q"], "w2", second_max, 30.0))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        first = PostgresStore().claim(["q"], "w1", first_max, 30.0)
        # The second claimer stands for another process: it has claimed no keyed job yet.
        postgres_jobs._KEYED_SEEN.discard("default")
        thread = threading.Thread(target=claim_beside)
        thread.start()
        deadline = time.monotonic() + GUARD_S
        while thread.is_alive() and not _waiting_for_a_turn():
            assert time.monotonic() < deadline, "the second claim neither ended nor waited"
            time.sleep(0.01)
    thread.join(GUARD_S)
    assert not thread.is_alive() and errors == []
    return first, second


def _leased(key: str) -> list[int]:
    rows = Job.objects.filter(state=JobState.LEASED, concurrency_key=key)
    return sorted(rows.values_list("id", flat=True))


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_two_first_claims_that_know_no_limit_never_pass_an_enqueue_only_limit():
    past = timezone.now() - timedelta(hours=1)
    make_jobs(6, JobState.READY, queue="q", run_at=past, concurrency_key="a", concurrency_limit=2)
    first, second = _first_claims_side_by_side(4, 4)
    assert len(first) == 2
    assert second == []
    assert _leased("a") == sorted(j.id for j in first)
    # Given back unspent, as if never claimed: ready, no attempt, no lease, no error entry.
    back = Job.objects.filter(state=JobState.READY)
    assert back.count() == 4
    assert {
        (a, t, tuple(e)) for a, t, e in back.values_list("attempts", "lease_token", "errors")
    } == {(0, None, ())}


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_the_later_claim_gives_back_only_its_excess_and_keeps_unlimited_jobs():
    past = timezone.now() - timedelta(hours=1)
    limited = {"queue": "q", "concurrency_key": "a", "concurrency_limit": 2}
    # Served in this order: keyed[0], both free jobs, keyed[1], keyed[2], keyed[3].
    keyed = make_jobs(1, JobState.READY, run_at=past - timedelta(minutes=2), **limited)
    keyed += make_jobs(3, JobState.READY, run_at=past, **limited)
    free = make_jobs(2, JobState.READY, queue="q", run_at=past - timedelta(minutes=1))
    first, second = _first_claims_side_by_side(1, 4)
    assert [j.id for j in first] == [keyed[0].id]
    # The second read no leases (room 2): it took both free jobs, keyed[1] and keyed[2]; with
    # the first's lease committed, "a" had 3 leased, so its last served job of "a" went back.
    assert sorted(j.id for j in second) == sorted([free[0].id, free[1].id, keyed[1].id])
    assert _leased("a") == [keyed[0].id, keyed[1].id]
    assert Job.objects.get(id=keyed[2].id).state == JobState.READY


@requires_postgres()
@pytest.mark.django_db(transaction=True)
@override_settings(JOBQUEUE={"TRANSACTION_LIMITS": {"lock_timeout_seconds": 0.2}})
def test_a_first_claim_whose_check_fails_gives_its_jobs_back_unspent():
    past = timezone.now() - timedelta(hours=1)
    make_jobs(3, JobState.READY, queue="q", run_at=past, concurrency_key="a", concurrency_limit=2)
    make_jobs(1, JobState.READY, queue="q", run_at=past)
    db = connection.settings_dict
    # Another session holds the claim turn (a claim frozen in its transaction): the check of
    # this first keyed claim waits past its lock timeout and fails.
    with psycopg.connect(
        dbname=db["NAME"], host=db["HOST"], port=db["PORT"] or None, user=db["USER"]
    ) as holder:
        holder.execute(sql("claim_turn"))
        with pytest.raises(DatabaseError):
            PostgresStore().claim(["q"], "w1", 4, 30.0)
        holder.rollback()
    # Nothing ran, nothing was spent: every job is ready again with no attempt.
    assert set(Job.objects.values_list("state", "attempts", "lease_token")) == {
        (JobState.READY, 0, None)
    }
