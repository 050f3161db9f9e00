"""Asynchronous commit (``ASYNCHRONOUS_COMMIT``): which of a worker's transactions get it.

What each transaction ran under is read from inside it: a statement trigger on the jobs table
writes ``current_setting('synchronous_commit')`` (transaction-local, as the worker sets it) and
the operation (INSERT or UPDATE) to a log table, in the same transaction. PostgreSQL only: the
ORM store on SQLite has no such setting.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import override_settings

import jobqueue
from jobqueue.store import bounded, get_store
from jobqueue.store.finishing import ack_outcome
from jobqueue.store.interface import ClaimRequest
from jobqueue.worker.loop import Worker
from tests.conftest import requires_postgres

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres()]

ADD = "tests.testapp.jobs.add"
REPORT = "tests.testapp.jobs.batch_report"


@pytest.fixture
def commit_log() -> Iterator[None]:
    """Log each INSERT or UPDATE statement on the jobs table with its synchronous_commit."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE jq_commit_log (id serial, op text, setting text)")
        cursor.execute(
            "CREATE FUNCTION jq_log_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO jq_commit_log (op, setting) "
            "VALUES (TG_OP, current_setting('synchronous_commit')); RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER jq_log_commit AFTER INSERT OR UPDATE ON jobqueue_job "
            "FOR EACH STATEMENT EXECUTE FUNCTION jq_log_commit()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER jq_log_commit ON jobqueue_job")
            cursor.execute("DROP FUNCTION jq_log_commit()")
            cursor.execute("DROP TABLE jq_commit_log")


def logged() -> list[tuple[str, str]]:
    """Return and forget the (operation, synchronous_commit) pairs logged so far, in order."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM jq_commit_log RETURNING id, op, setting")
        return [(op, setting) for _, op, setting in sorted(cursor.fetchall())]


def worker() -> Worker:
    return Worker(queues=["ac"], install_signal_handlers=False, listen_notify=False)


def test_the_workers_claim_and_ack_commit_asynchronously(commit_log):
    jobqueue.enqueue("ac", ADD, {"a": 1, "b": 2})
    assert logged() == [("INSERT", "on")]  # the enqueue: the caller's, never asynchronous
    assert worker().run_once() == 1
    seen = logged()  # the claim, the ack (and a heartbeat of the pass's maintenance)
    assert len(seen) >= 2 and set(seen) == {("UPDATE", "off")}


@override_settings(JOBQUEUE={"ASYNCHRONOUS_COMMIT": False})
def test_the_setting_turns_it_off(commit_log):
    jobqueue.enqueue("ac", ADD, {"a": 1, "b": 2})
    logged()
    assert worker().run_once() == 1
    seen = logged()
    assert len(seen) >= 2 and set(seen) == {("UPDATE", "on")}


def test_the_heartbeat_commits_asynchronously(commit_log):
    jobqueue.enqueue("ac", ADD, {"a": 1, "b": 2})
    store = get_store("default")
    [job] = store.claim(["ac"], "w1", 1, 30.0)
    w = worker()
    logged()
    with bounded.asynchronous_commit():
        kept = store.extend_leases([(job.id, job.lease_token)], 30.0)
    assert list(kept) == [job.id]
    assert logged() == [("UPDATE", "off")]
    # Outside the scope (an operator's or the reaper's transaction) the session's setting holds.
    store.extend_leases([(job.id, job.lease_token)], 30.0)
    assert logged() == [("UPDATE", "on")]
    # The worker's own heartbeat service runs in the scope (no lease held: no UPDATE of jobs).
    w.heartbeat.run_once()
    assert logged() == []


def test_an_ack_that_may_complete_a_batch_commits_synchronously(commit_log):
    with jobqueue.batch(on_success=REPORT, queue="ac-callbacks") as b:
        b.enqueue("ac", ADD, {"a": 1, "b": 2})
    logged()
    assert worker().run_once() == 1
    # The claim is asynchronous; the ack completed the batch and enqueued its callback in the
    # same transaction: synchronous (the callback's INSERT is logged inside it).
    seen = logged()
    assert seen[0] == ("UPDATE", "off")
    insert = seen.index(("INSERT", "on"))
    assert seen[insert - 1] == ("UPDATE", "on")  # the ack, in the callback's transaction
    assert ("INSERT", "off") not in seen


def test_the_ack_and_claim_in_one_round_trip_keep_a_batch_ack_synchronous(commit_log):
    """``finish_then_claim`` (the loop's path): the finish as above, the claim asynchronous."""
    store = get_store("default")
    with jobqueue.batch(on_success=REPORT, queue="ac-callbacks") as b:
        member_id = b.enqueue("ac", ADD, {"a": 1, "b": 2}, priority=10)
    jobqueue.enqueue("ac", ADD, {"a": 3, "b": 4})
    with bounded.asynchronous_commit():
        member = store.claim(["ac"], "w1", 1, 30.0)
    assert [job.id for job in member] == [member_id]
    logged()
    request = ClaimRequest(["ac"], "w1", 5, 30.0)
    with bounded.asynchronous_commit():
        done = store.finish_then_claim(
            [ack_outcome(job.id, job.lease_token, "null") for job in member], request
        )
    assert done.error is None and done.states is not None
    assert len(done.claimed or []) == 1  # the plain job
    updates = [setting for op, setting in logged() if op == "UPDATE"]
    # The batch's ack (and the callback it enqueued): synchronous; the claim after it: not.
    assert updates[0] == "on" and updates[-1] == "off"
