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
"""

from __future__ import annotations

import pytest
from django.db import connection

from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store import get_store
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
