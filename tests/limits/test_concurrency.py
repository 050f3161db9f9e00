"""Concurrency limits and tenant weights in the claim (issue 18), on both stores.

``LimitsContract`` runs against PostgreSQL's SQL claim and the ORM store's ranking: each test
writes down what a claim must return. The limit is read from each job's row (fixed at enqueue)
and from the plan's overrides (``JOBQUEUE["CONCURRENCY_LIMITS"]``).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from jobqueue.limits.fairness import ConcurrencyLimits, QueueSelector
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store.postgres import PostgresStore
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import claim_bitmaps, claim_params, make_jobs


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_many_connections_never_pass_the_limit():
    """Eight claimers at once, each on its own connection: the claims take turns."""
    make_jobs(60, JobState.READY, queue="q", concurrency_key="k", concurrency_limit=3)
    make_jobs(60, JobState.READY, queue="q")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def claimer(n: int) -> None:
        try:
            start.wait()
            for _ in range(5):
                PostgresStore().claim(
                    ["q"], f"w{n}", 4, 30.0, plan=QueueSelector(["q"], limits=LIMITS).plan()
                )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    leased = Job.objects.filter(state=JobState.LEASED)
    assert leased.filter(concurrency_key="k").count() == 3
    assert leased.filter(concurrency_key__isnull=True).count() == 60


#: A worker that knows of a limit (its settings or job types declare one).
LIMITS = ConcurrencyLimits(declared=True)


@pytest.mark.slow  # a load: 23,000 rows, then the planner
@requires_postgres()
@pytest.mark.django_db
def test_the_claim_counts_running_per_key_on_the_partial_index():
    for n in range(100):
        make_jobs(20, JobState.READY, queue="q", concurrency_key=f"k{n}", concurrency_limit=2)
        make_jobs(2, JobState.LEASED, queue="q", concurrency_key=f"k{n}", concurrency_limit=2)
    make_jobs(20000, JobState.SUCCEEDED, queue="q", concurrency_key="k1", concurrency_limit=2)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        cursor.execute("EXPLAIN " + sql("claim"), claim_params(["q"], max_jobs=10))
        plan = "\n".join(r[0] for r in cursor.fetchall())
    assert "jobqueue_job_conc_running" in plan, plan
    assert "Seq Scan on jobqueue_job" not in plan, plan
    assert claim_bitmaps(plan) == set(), plan
