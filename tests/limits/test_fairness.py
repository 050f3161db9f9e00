"""Fairness in the claim: queue weights, strict order, priority, tenant caps, ordering keys.

Selection tests run small and deterministic: the claim's plan (weights, start tags, caps) is
built by :class:`jobqueue.limits.fairness.QueueSelector` exactly as a worker builds it, and each
test
writes down the exact jobs a claim must return. ``FairnessContract`` runs against both stores
(PostgreSQL's SQL claim and the ORM store's Python ranking must agree).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from jobqueue.limits.fairness import ClaimPlan, QueueSelector, TenantCaps
from jobqueue.models import Job
from jobqueue.settings.queues import parse_queue_spec
from jobqueue.states import JobState
from jobqueue.store import bounded
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import claim_bitmaps, claim_params, make_jobs

NOOP = "tests.testapp.jobs.noop"


# -- the --queues syntax ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "names", "weights"),
    [
        ("default", ("default",), (1,)),
        ("critical:6,default:3,bulk:1", ("critical", "default", "bulk"), (6, 3, 1)),
        ("a, b:2", ("a", "b"), (1, 2)),
        ("v2:1:4", ("v2:1",), (4,)),
        ("tenant:acme", ("tenant:acme",), (1,)),
        (["a:2", "b"], ("a", "b"), (2, 1)),
    ],
)
def test_queue_spec_parses_names_and_weights(spec, names, weights):
    assert parse_queue_spec(spec) == (names, weights)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("critical:0", "queue weight must be a whole number from 1 to 1000, got 'critical:0'"),
        ("critical:-1", "queue weight must be a whole number from 1 to 1000, got 'critical:-1'"),
        ("critical:1.5", "queue weight must be a whole number from 1 to 1000, got 'critical:1.5'"),
        ("bulk:1001", "queue weight must be a whole number from 1 to 1000, got 'bulk:1001'"),
        ("a,,b", "expected comma-separated queues"),
        ("", "expected comma-separated queues"),
        ("a:2,a:3", "queue named twice in 'a:2,a:3': a"),
        ("bad queue:2", "queue name must match [A-Za-z0-9_.:-]{1,100}, got 'bad queue'"),
        ("critical:,bulk", "queue weight missing after ':' in 'critical:'"),
    ],
)
def test_queue_spec_refuses_bad_weights_by_name(spec, message):
    with pytest.raises(ValueError) as info:
        parse_queue_spec(spec)
    assert message in str(info.value)


def test_selector_without_claims_gives_equal_start_tags():
    selector = QueueSelector(["a", "b"], [6, 3])
    plan = selector.plan()
    assert (plan.weights, plan.start, plan.strict) == ((6.0, 3.0), (0.0, 0.0), False)


def test_a_one_off_claim_plans_as_a_fresh_worker_of_the_same_queues():
    # jobqueue.claim takes ClaimPlan.even instead of keeping a QueueSelector it would use once.
    caps = TenantCaps(default=2, overrides={"vip": None})
    assert ClaimPlan.even(3, caps) == QueueSelector(["a", "b", "c"], caps=caps).plan()
    assert ClaimPlan.even(1) == QueueSelector(["a"]).plan()


# -- the claim, on both stores ---------------------------------------------------------------


# -- the claim's plan (PostgreSQL) -----------------------------------------------------------


def explain_claim(params: dict[str, Any], statement: str = "claim~rates") -> str:
    """EXPLAIN the claim as sent without rate limits (``claim~rates``), or ``statement``."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        cursor.execute("EXPLAIN " + sql(statement), params)
        return "\n".join(r[0] for r in cursor.fetchall())


@pytest.mark.slow  # a load: 26,000 rows, then the planner
@requires_postgres()
@pytest.mark.django_db
def test_claim_with_many_tenants_and_keys_reads_indexes_only():
    for n in range(40):
        make_jobs(100, JobState.READY, queue="q", tenant_id=f"t{n}")
    make_jobs(2000, JobState.READY, queue="q", ordering_key="k")
    make_jobs(20000, JobState.SUCCEEDED, queue="q", tenant_id="t1")
    make_jobs(50, JobState.LEASED, queue="q", tenant_id="t2")
    plan = explain_claim(claim_params(["q", "other"], max_jobs=10, default_cap=5))
    # The loose scan over tenants and each tenant's head: the claim index.
    assert "Index Only Scan using jobqueue_job_claim" in plan or (
        "Index Scan using jobqueue_job_claim" in plan
    ), plan
    assert "jobqueue_job_running" in plan, plan
    assert "jobqueue_job_ordering" in plan, plan
    assert "Seq Scan on jobqueue_job" not in plan, plan
    assert claim_bitmaps(plan) == set(), plan


@pytest.mark.slow  # a load: 25,000 rows, then two claims
@requires_postgres()
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("tenants", [1, 100])
def test_the_claim_runs_without_jit_and_reads_the_claim_index(tenants):
    """PostgreSQL JIT-compiles a statement whose estimated cost passes ``jit_above_cost``
    (default 100,000): seconds per claim. The claim's lane allotments are LIMITs the planner
    cannot read (it estimates a tenth of the rows; bench/fairness.py once found 630,000 on 5,000
    ready rows), so jobqueue's own transactions run with JIT off (limit_transaction.sql): the
    claim, run as the store runs it, shows no JIT, and still reads only the indexes."""
    for n in range(tenants):
        make_jobs(20000 // tenants, JobState.READY, queue="q", tenant_id=f"t{n}")
    make_jobs(5000, JobState.READY, queue="q", ordering_key="k", tenant_id="t0")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    for statement in ("claim~rates", "claim"):
        params = claim_params(["q"], max_jobs=16, default_cap=4)
        with bounded.execute("default", "EXPLAIN (ANALYZE) " + sql(statement), params) as cursor:
            plan = "\n".join(r[0] for r in cursor.fetchall())
        assert "JIT:" not in plan, plan
        assert claim_bitmaps(plan) == set(), plan
        assert "jobqueue_job_claim" in plan, plan
    # Caps of 4: one tenant gets 4 and then none; 100 tenants fill both claims of 16.
    assert Job.objects.filter(state=JobState.LEASED).count() == {1: 4, 100: 32}[tenants]
