"""Recording outcomes and claiming the next jobs together (``store.finish_then_claim``).

The worker sends the claim for the slots a write frees with that write: on PostgreSQL in one
round trip, each in its own transaction (``bounded.execute_each``); elsewhere in two calls.
Outcomes written first and fenced by their lease tokens; the claim only after they committed;
a failed claim leaves them recorded. Run on PostgreSQL and on SQLite (the default database).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.db import DatabaseError, connection, transaction

import jobqueue
from jobqueue.models import Job
from jobqueue.retries import RunOutcome
from jobqueue.settings.rates import RateLimits, parse_rate_limits
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.bounded import pipelines
from jobqueue.store.interface import ClaimRequest
from jobqueue.store.plan import ClaimPlan
from jobqueue.worker.loop import Worker

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.jobs.noop"
postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-round-trip path is PostgreSQL's"
)


def _acks(claimed):
    return [RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in claimed]


def test_outcomes_are_recorded_then_the_next_jobs_claimed_each_with_its_attempt():
    ids = [jobqueue.enqueue("ftc", NOOP) for _ in range(8)]
    store = get_store()
    first = store.claim(["ftc"], "w1", 3, 30)

    made = store.finish_then_claim(_acks(first), ClaimRequest(["ftc"], "w1", 4, 30.0))

    assert made.error is None
    assert made.states == {j.id: JobState.SUCCEEDED for j in first}
    assert [j.id for j in made.claimed] == ids[3:7]
    rows = {j.id: j for j in Job.objects.filter(id__in=ids)}
    assert [rows[i].state for i in ids] == [JobState.SUCCEEDED] * 3 + [JobState.LEASED] * 4 + [
        JobState.READY
    ]
    assert all(rows[j.id].attempts == 1 for j in made.claimed)
    assert {rows[j.id].lease_token for j in made.claimed} == {j.lease_token for j in made.claimed}


def test_stale_lease_tokens_record_nothing_and_the_claim_still_runs():
    jobqueue.enqueue("ftc", NOOP)
    later = jobqueue.enqueue("ftc", NOOP)
    store = get_store()
    first = store.claim(["ftc"], "w1", 1, 30)
    store.finish_many(_acks(first))

    made = store.finish_then_claim(_acks(first), ClaimRequest(["ftc"], "w1", 5, 30.0))

    assert made.states == {}  # fenced: the lease those tokens held is gone
    assert [j.id for j in made.claimed] == [later]
    assert made.error is None


@postgres_only
def test_a_failed_claim_leaves_the_outcomes_recorded_and_the_connection_usable():
    ids = [jobqueue.enqueue("ftc", NOOP) for _ in range(3)]
    store = get_store()
    first = store.claim(["ftc"], "w1", 2, 30)

    # A negative LIMIT: the claim statement fails on the server, after the write committed.
    made = store.finish_then_claim(_acks(first), ClaimRequest(["ftc"], "w1", -1, 30.0))

    assert made.states == {j.id: JobState.SUCCEEDED for j in first}
    assert made.claimed is None
    assert isinstance(made.error, DatabaseError)
    assert Job.objects.get(id=ids[2]).state == JobState.READY
    with connection.cursor() as cursor:  # not left in a failed transaction, no limit leaked
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("0",)


@postgres_only
def test_a_failed_write_makes_no_claim():
    jobqueue.enqueue("ftc", NOOP)
    waiting = jobqueue.enqueue("ftc", NOOP)
    store = get_store()
    (job,) = store.claim(["ftc"], "w1", 1, 30)
    # A result that is not JSON: the write fails on the server (its cast to jsonb).
    bad = RunOutcome(
        job_id=job.id, lease_token=job.lease_token, state="succeeded", result_json="{not json"
    )

    made = store.finish_then_claim([bad], ClaimRequest(["ftc"], "w1", 5, 30.0))

    assert made.states is None and made.claimed is None
    assert isinstance(made.error, DatabaseError)
    assert Job.objects.get(id=waiting).state == JobState.READY
    assert Job.objects.get(id=job.id).state == JobState.LEASED


@postgres_only
def test_one_round_trip_only_on_a_direct_connection_in_autocommit():
    assert pipelines("default")
    with transaction.atomic():
        assert not pipelines("default")  # a caller's transaction is never split


def test_a_worker_drains_with_its_claims_sent_with_its_writes():
    ids = [jobqueue.enqueue("ftc", NOOP) for _ in range(40)]
    worker = Worker(queues=["ftc"], concurrency=4, burst=True, install_signal_handlers=False)
    made = []
    finish_then_claim = worker.store.finish_then_claim

    def spy(outcomes, request):
        result = finish_then_claim(outcomes, request)
        made.append(result)
        return result

    worker.store.finish_then_claim = spy  # type: ignore[method-assign]

    assert worker.run() == 0
    connection.close()

    assert worker.stats["succeeded"] == 40 and worker.stats["lost"] == 0
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {
        JobState.SUCCEEDED
    }
    assert set(Job.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}
    # Some claims went with a write, and took jobs there.
    assert any(m.claimed for m in made), made


def test_with_rate_limits_a_short_first_claim_is_followed_by_the_buckets_and_a_second():
    # The first claim rides the write (one round trip on PostgreSQL); a bucket missing then
    # holds its jobs back, so the places it left empty are filled by a second claim after the
    # buckets are made (claim_again), as a claim made on its own does.
    limited = "tests.testapp.jobs.add"
    plan = replace(
        ClaimPlan.even(1),
        rates=parse_rate_limits({"type": {limited: {"rate": "1/min", "burst": 2}}}),
    )
    first = jobqueue.enqueue("ftc", NOOP)
    held = [jobqueue.enqueue("ftc", limited, {"a": 1, "b": 2}) for _ in range(3)]
    others = [jobqueue.enqueue("ftc", NOOP) for _ in range(2)]
    store = get_store()
    [claimed] = store.claim(["ftc"], "w1", 1, 30, plan=replace(plan, rates=RateLimits()))
    assert claimed.id == first

    made = store.finish_then_claim(_acks([claimed]), ClaimRequest(["ftc"], "w1", 10, 30.0, plan))

    assert made.error is None
    assert made.states == {first: JobState.SUCCEEDED}
    got = {j.id for j in made.claimed}
    assert set(others) <= got
    assert len(got & set(held)) == 2  # the bucket's burst, never more
    assert Job.objects.filter(id__in=held, state=JobState.READY).count() == 1
