"""jobqueue's own transactions are bounded; a caller's transaction is not touched (case 29).

The limits (``JOBQUEUE["TRANSACTION_LIMITS"]``) are lowered here so that a stalled transaction
is cut off quickly; every wait follows progress seen in ``pg_stat_activity`` / ``pg_locks``.
The process-level scenarios (a frozen worker, an outage) are in test_process_bounded.py.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import jobqueue
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.limits.fairness import ClaimPlan, TenantCaps
from jobqueue.maintenance.pruning import Pruner
from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from jobqueue.settings.conf import build_settings
from jobqueue.settings.transactions import (
    DEFAULT_IDLE_IN_TRANSACTION_SECONDS,
    DEFAULT_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STATEMENT_TIMEOUT_SECONDS,
)
from jobqueue.states import JobState
from jobqueue.store import ReapDecision, bounded, get_store
from jobqueue.worker.loop import Worker
from jobqueue.worker.outage import ReapHold
from tests.conftest import database_url, requires_postgres, wait_for
from tests.factories import make_job

NOOP = "tests.testapp.jobs.noop"
SHORT = {
    "TRANSACTION_LIMITS": {
        "lock_timeout_seconds": 0.3,
        "statement_timeout_seconds": 5,
        "idle_in_transaction_seconds": 0.5,
    }
}


def pg(test):
    """Mark a test that needs PostgreSQL in autocommit (each statement its own transaction)."""
    return requires_postgres()(pytest.mark.django_db(transaction=True)(test))


# -- the setting ---------------------------------------------------------------------------


def test_defaults_are_documented_values():
    limits = build_settings({}).transaction_limits
    assert limits.lock_timeout_seconds == DEFAULT_LOCK_TIMEOUT_SECONDS == 5.0
    assert limits.statement_timeout_seconds == DEFAULT_STATEMENT_TIMEOUT_SECONDS == 10.0
    assert limits.idle_in_transaction_seconds == DEFAULT_IDLE_IN_TRANSACTION_SECONDS == 5.0
    assert limits.as_params() == {
        "lock_timeout": "5000",
        "statement_timeout": "10000",
        "idle_in_transaction_session_timeout": "5000",
    }


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ({"lock_timeout_seconds": 0}, "lock_timeout_seconds"),  # 0 would switch it off
        ({"idle_in_transaction_seconds": 601}, "idle_in_transaction_seconds"),
        ({"statement_timeout_seconds": True}, "statement_timeout_seconds"),
        ({"statement_timeout_seconds": "5"}, "statement_timeout_seconds"),
        ({"lock_timeout": 1}, "unknown keys: lock_timeout"),
        (5, "must be a dict"),
    ],
)
def test_bad_limits_are_refused_naming_the_key(value, names):
    with pytest.raises(JobQueueConfigurationError, match=names):
        build_settings({"TRANSACTION_LIMITS": value})


def test_reaping_waits_one_hold_after_the_database_answers_again():
    now = [100.0]
    hold = ReapHold(2.0, clock=lambda: now[0])
    assert not hold.may_reap()  # at start, as if just recovered
    now[0] = 102.0
    assert hold.may_reap()
    hold.failed()
    now[0] = 200.0
    assert not hold.may_reap()  # still down: nothing is reaped
    hold.ok()
    now[0] = 201.9
    assert not hold.may_reap()
    now[0] = 202.0
    assert hold.may_reap()


# -- a caller's transaction ----------------------------------------------------------------


def _show(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


LIMIT_NAMES = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


@pg
def test_a_callers_transaction_keeps_its_settings():
    """Inside the caller's atomic(), enqueue and the other calls set nothing; in autocommit,
    the limits of jobqueue's statement end with it (the session keeps its values)."""
    session = {name: _show(name) for name in LIMIT_NAMES}
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '7s'")
        before = {name: _show(name) for name in LIMIT_NAMES}
        assert before["statement_timeout"] == "7s"
        job_id = jobqueue.enqueue("caller", NOOP, {"a": 1})
        jobqueue.enqueue_many([{"queue": "caller", "job_type": NOOP, "payload": {}}])
        claimed = get_store().claim(
            ["caller"], "w", 1, 30.0, plan=ClaimPlan((1.0,), (0.0,), caps=TenantCaps(default=2))
        )
        assert [c.id for c in claimed] == [job_id]
        jobqueue.heartbeat(job_id, claimed[0].lease_token)
        jobqueue.ack(job_id, claimed[0].lease_token)
        assert {name: _show(name) for name in LIMIT_NAMES} == before
    jobqueue.enqueue("caller", NOOP, {"a": 2})  # autocommit: its own, bounded, transaction
    assert {name: _show(name) for name in LIMIT_NAMES} == session


# -- jobqueue's own transactions -----------------------------------------------------------


@pg
def test_in_autocommit_claim_heartbeat_and_ack_stay_one_round_trip_each(
    django_assert_num_queries, no_declared_limits
):
    """The limits travel in the statement's own query string: no extra round trip.

    (The connection's first claim also looks its function up once: store/postgres/routines.py.)
    """
    job_id = jobqueue.enqueue("trips", NOOP)
    jobqueue.claim("elsewhere", "w1", 1)
    with django_assert_num_queries(1):
        [claimed] = jobqueue.claim("trips", "w1", 1)
    with django_assert_num_queries(1):
        jobqueue.heartbeat(job_id, claimed.lease_token)
    with django_assert_num_queries(1):
        jobqueue.ack(job_id, claimed.lease_token)
    assert Job.objects.get(id=job_id).state == JobState.SUCCEEDED


def _blocker(sql: str, params: list, release: threading.Event) -> threading.Thread:
    """Hold a lock from another connection until ``release`` (or 20 s) in a thread."""
    ready = threading.Event()

    def hold() -> None:
        with psycopg.connect(database_url()) as conn:
            conn.execute(sql, params)
            ready.set()
            release.wait(20)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert ready.wait(20)
    return thread


@pg
def test_own_statements_give_up_at_the_lock_timeout():
    """A heartbeat in autocommit and the capped claim's turn wait at most the lock timeout
    (before: until the blocker let go, here 20 s, and then they succeeded)."""
    job = make_job(JobState.LEASED, queue="locked")
    token = job.lease_token
    release = threading.Event()
    store = get_store()
    try:
        _blocker("SELECT 1 FROM jobqueue_job WHERE id = %s FOR UPDATE", [job.id], release)
        with override_settings(JOBQUEUE=SHORT):
            with pytest.raises(DatabaseError) as excinfo:
                store.extend_leases([(job.id, token)], 30.0)
            assert bounded.timed_out(excinfo.value) == "lock timeout"
            assert release.is_set() is False  # it gave up; the blocker still holds the row
        release.set()
        release = threading.Event()
        _blocker("SELECT pg_advisory_xact_lock(7002341135661924609)", [], release)
        plan = ClaimPlan((1.0,), (0.0,), caps=TenantCaps(default=2))
        with override_settings(JOBQUEUE=SHORT):
            with pytest.raises(DatabaseError) as excinfo:
                store.claim(["locked"], "w", 1, 30.0, plan=plan)
            assert bounded.timed_out(excinfo.value) == "lock timeout"
    finally:
        release.set()


def _alive(backend: int) -> bool:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend]).fetchone()
    return row is not None


def _stall_until_cut_off(seen: dict):
    """A hook that stalls inside jobqueue's transaction until the server ends its session."""

    def stall(alias: str) -> None:
        backend = connections[alias].connection.info.backend_pid
        seen["backend"] = backend
        with psycopg.connect(database_url(), autocommit=True) as conn:
            seen["locks"] = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = %s", [backend]
            ).fetchone()[0]
        wait_for(lambda: not _alive(backend), timeout=30)  # before the fix: never

    return stall


@pytest.fixture
def hooks():
    yield bounded.HOOKS
    bounded.HOOKS.clear()


def _decide(lease) -> ReapDecision:
    return ReapDecision(id=lease.id, lease_token=lease.lease_token, dead=False, delay_s=0.0)


@pg
def test_a_stalled_reaper_is_cut_off_and_its_next_run_succeeds(hooks):
    past = timezone.now() - timedelta(minutes=5)
    job = make_job(JobState.LEASED, queue="reap", lease_until=past, lease_token=uuid.uuid4())
    seen: dict = {}
    hooks["reaper"] = _stall_until_cut_off(seen)
    store = get_store()
    with override_settings(JOBQUEUE=SHORT):
        with pytest.raises(DatabaseError):
            store.reap(_decide)
        assert seen["locks"] > 0  # it held the expired row's lock while it stalled
        connections["default"].close()  # what the worker's loop does after a database error
        # Its locks went with its session: the row is free, and untouched.
        with psycopg.connect(database_url()) as conn:
            conn.execute("SELECT 1 FROM jobqueue_job WHERE id = %s FOR UPDATE NOWAIT", [job.id])
        assert Job.objects.get(id=job.id).state == JobState.LEASED
        hooks.clear()
        assert store.reap(_decide) == (1, 0)
    assert Job.objects.get(id=job.id).state == JobState.SCHEDULED


@pg
def test_a_stalled_pruner_is_cut_off_and_its_next_run_succeeds(hooks):
    old = timezone.now() - timedelta(days=1)
    job = make_job(JobState.SUCCEEDED, queue="prune", finished_at=old)
    seen: dict = {}
    hooks["pruner"] = _stall_until_cut_off(seen)
    pruner = Pruner(retention={"succeeded": 60.0})
    with override_settings(JOBQUEUE=SHORT):
        with pytest.raises(DatabaseError):
            pruner.run_once()
        assert seen["locks"] > 0
        connections["default"].close()
        assert Job.objects.filter(id=job.id).exists()  # its delete rolled back with it
        hooks.clear()
        assert pruner.run_once() == {"succeeded": 1}
    assert not Job.objects.filter(id=job.id).exists()


# -- handlers' connections -----------------------------------------------------------------


@pg
def test_a_leaky_handlers_transaction_ends_with_its_job(tmp_path):
    """Fault (a) of case 29: the handler leaves a transaction open on its thread's connection.
    The job is acked (jobqueue's statements never ran on that connection, or the ack would
    have been rolled back with it) and the handler's session is gone after the job."""
    path = tmp_path / "leaky.txt"
    job_id = jobqueue.enqueue("leaky", "tests.testapp.jobs.leaky", {"path": str(path)})
    worker = Worker(
        queues=["leaky"],
        concurrency=1,
        burst=True,
        install_signal_handlers=False,
        listen_notify=False,
    )
    assert worker.run() == 0
    leaked = int(path.read_text().split()[1])
    wait_for(lambda: not _alive(leaked), timeout=30)
    assert Job.objects.get(id=job_id).state == JobState.SUCCEEDED


@pg
@pytest.mark.django_db(transaction=True)
def test_a_reap_that_finds_nothing_is_one_round_trip_and_one_that_finds_a_lease_still_locks_it():
    # An idle fleet reaps about once a second per host and finds nothing: the transaction that
    # locks and charges (BEGIN, the limits, the statement, COMMIT) is opened only on a find.
    store = get_store()
    with CaptureQueriesContext(connections["default"]) as seen:
        assert store.reap(_decide) == (0, 0)
    assert len(seen.captured_queries) == 1, [q["sql"][:60] for q in seen.captured_queries]
    past = timezone.now() - timedelta(minutes=5)
    job = make_job(JobState.LEASED, queue="reap", lease_until=past, lease_token=uuid.uuid4())
    assert store.reap(_decide) == (1, 0)
    assert Job.objects.get(id=job.id).state == JobState.SCHEDULED


@pg
@pytest.mark.django_db(transaction=True)
def test_a_workers_heartbeat_row_write_is_one_round_trip():
    # Every worker process writes its row at each heartbeat, idle or not.
    store = get_store()
    store.register_worker("w-touch", ["q"], 1, 10.0)
    with CaptureQueriesContext(connections["default"]) as seen:
        store.touch_worker("w-touch", running_jobs=3, status="draining")
    assert len(seen.captured_queries) == 1, [q["sql"][:60] for q in seen.captured_queries]
    row = WorkerRow.objects.get(worker_id="w-touch")
    assert (row.running_jobs, row.status) == (3, "draining")
