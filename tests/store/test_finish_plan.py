"""The ack and the heartbeat find their rows by primary key, not by the index of leased jobs.

``finish_many.sql`` and ``heartbeat.sql`` fence each row on ``state = 'leased'``. Written as a
plain equality, the planner could serve that condition from the partial index
``jobqueue_job_running`` (``tenant_id`` WHERE ``state = 'leased'``): it estimates few leased rows
(they are few in its statistics), so a bitmap scan of that index hashed against the outcomes
looks cheaper than one primary-key probe per outcome. But every claim adds an entry to that index
and every ack leaves one dead until a vacuum, and a bitmap scan never marks them dead: in a
20,000-job drain the ack's scan read 3,181 entries and 319 heap pages for 25 outcomes (3.1 ms of
a 3.8 ms statement; docs/performance.md, branch ``drain2``). The fence is written so that no
index on the job's state can serve it (``coalesce(j.state, '')``), leaving the primary key.

The worker's ack, sent with its next claim in one round trip (``store.finish_then_claim``), is a
prepared statement of the connection with a generic plan: parsed and planned once per session
(planning was 0.45-0.7 ms of each ack in a drain), with sequential scans off in its transaction,
since the one plan is made on the tables' sizes at the session's first ack.
"""

from __future__ import annotations

import pytest
from django.db import connection

from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store import bounded, get_store
from jobqueue.store.interface import ClaimRequest
from jobqueue.store.sqltext import sql
from tests.factories import make_jobs

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="finish_many.sql is PostgreSQL's statement"
    ),
]


def _plan(name: str, params: dict) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql(name), params)
        return "\n".join(r[0] for r in cursor.fetchall())


@pytest.fixture
def leased():
    """25 leased jobs among 5,000 finished ones, analyzed: leased rows are rare, as in a
    queue that has run for a while."""
    make_jobs(5000, JobState.SUCCEEDED, queue="fp")
    jobs = make_jobs(25, JobState.LEASED, queue="fp")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    return jobs


@pytest.mark.parametrize("name", ["finish_many", "finish_many~batches"])
def test_the_ack_probes_the_primary_key_per_outcome(leased, name):
    outcomes = [
        RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in leased
    ]
    params = get_store().finishing.finish_params(outcomes, None)

    plan = _plan(name, params)

    assert "jobqueue_job_running" not in plan, plan
    assert "Index Scan using jobqueue_job_pkey on jobqueue_job j" in plan, plan
    assert "Seq Scan on jobqueue_job" not in plan, plan


def test_the_heartbeat_probes_the_primary_key_per_lease(leased):
    params = {
        "ids": [j.id for j in leased],
        "tokens": [j.lease_token for j in leased],
        "lease_s": 30.0,
    }

    plan = _plan("heartbeat", params)

    assert "jobqueue_job_running" not in plan, plan
    assert "Index Scan using jobqueue_job_pkey on jobqueue_job j" in plan, plan
    assert "Seq Scan on jobqueue_job" not in plan, plan


def test_the_fence_still_refuses_a_row_that_is_no_longer_leased(leased):
    store = get_store()
    job = leased[0]
    ok = RunOutcome(job_id=job.id, lease_token=job.lease_token, state="succeeded")

    assert store.finish_many([ok]) == {job.id: JobState.SUCCEEDED}
    # The same token again: the row is no longer leased, so nothing matches.
    assert store.finish_many([ok]) == {}
    assert store.extend_leases([(job.id, job.lease_token)], 30.0) == {}


def _prepared() -> list[tuple[str, int, int]]:
    """Return this connection's prepared statements: (text start, generic plans, custom plans)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT left(statement, 40), generic_plans, custom_plans FROM pg_prepared_statements"
        )
        return cursor.fetchall()


def test_the_ack_sent_with_the_next_claim_is_prepared_and_planned_once():
    connection.close()  # a session of its own: no statement of an earlier test prepared in it
    jobs = make_jobs(12, JobState.READY, queue="fp")
    store = get_store()
    claimed = store.claim(["fp"], "w1", 3, 30)
    assert bounded.pipelines("default")

    for _ in range(3):
        outcomes = [
            RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in claimed
        ]
        with bounded.asynchronous_commit():
            made = store.finish_then_claim(outcomes, ClaimRequest(["fp"], "w1", 3, 30.0))
        assert made.error is None
        assert made.states == {j.id: JobState.SUCCEEDED for j in claimed}
        claimed = made.claimed

    [(_, generic, custom)] = [p for p in _prepared() if p[0].startswith("WITH done AS")]
    assert (generic, custom) == (3, 0)
    # Django's own statements are still sent unprepared.
    assert len(_prepared()) == 1
    assert len(claimed) == 3 and {j.id for j in claimed} <= {j.id for j in jobs}


def test_the_prepared_ack_planned_on_an_empty_table_still_probes_the_primary_key():
    connection.close()  # a new session: its first ack is planned on a table of 2 rows
    store = get_store()
    make_jobs(2, JobState.READY, queue="fp")
    claimed = store.claim(["fp"], "w1", 2, 30)
    outcomes = [
        RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in claimed
    ]
    with bounded.asynchronous_commit():
        store.finish_then_claim(outcomes, ClaimRequest(["fp"], "w1", 3, 30.0))  # planned now
    make_jobs(5000, JobState.SUCCEEDED, queue="fp")
    leased = make_jobs(25, JobState.LEASED, queue="fp")
    params = store.finishing.finish_params(
        [RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in leased],
        None,
    )
    [name] = [p[0] for p in _prepared_names() if p[1].startswith("WITH done AS")]
    text = sql("finish_many~batches")
    order = sorted(params, key=lambda k: text.index(f"%({k})s"))
    with connection.cursor() as cursor:
        # The plan the ack runs: the cached generic one (its transaction forces it).
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute(f"EXPLAIN EXECUTE {name}({', '.join(f'%({k})s' for k in order)})", params)
        plan = "\n".join(r[0] for r in cursor.fetchall())
        cursor.execute("RESET plan_cache_mode")

    assert "Seq Scan on jobqueue_job" not in plan, plan
    assert "Index Scan using jobqueue_job_pkey on jobqueue_job j" in plan, plan


def _prepared_names() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        return cursor.fetchall()
