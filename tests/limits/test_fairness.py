"""Fairness in the claim: queue weights, strict order, priority, tenant caps, ordering keys.

Selection tests run small and deterministic: the claim's plan (weights, start tags, caps) is
built by :class:`jobqueue.limits.fairness.QueueSelector` exactly as a worker builds it, and each
test
writes down the exact jobs a claim must return. ``FairnessContract`` runs against both stores
(PostgreSQL's SQL claim and the ORM store's Python ranking must agree).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from django.utils.module_loading import import_string

from jobqueue.limits.fairness import ClaimPlan, QueueSelector, TenantCaps, parse_queue_spec
from jobqueue.models import Job
from jobqueue.states import DeadReason, JobState
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import ack, claim_params, make_job, make_jobs, nack

NOOP = "tests.testapp.jobs.noop"
PERMANENT = DeadReason.PERMANENT_ERROR


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


class FairnessContract:
    alias: str
    store_class: str

    @pytest.fixture
    def store(self):
        return import_string(self.store_class)(self.alias)

    def make(self, queue: str = "q", **fields: Any) -> int:
        return make_job(JobState.READY, using=self.alias, queue=queue, **fields).id

    def make_many(self, count: int, queue: str = "q", **fields: Any) -> list[int]:
        return [
            j.id for j in make_jobs(count, JobState.READY, using=self.alias, queue=queue, **fields)
        ]

    def claim(self, store, selector: QueueSelector, max_jobs: int, now: datetime | None = None):
        claimed = store.claim(
            list(selector.queues), "w1", max_jobs, 30.0, now=now, plan=selector.plan()
        )
        selector.claimed(claimed)
        return claimed

    def ack(self, store, job) -> None:
        ack(store, job.id, job.lease_token, "null")

    def past(self, seconds: float = 0) -> datetime:
        return timezone.now() - timedelta(hours=1) + timedelta(seconds=seconds)

    # -- weights -----------------------------------------------------------------------------

    def test_weights_6_3_1_one_job_per_claim_serve_in_proportion(self, store):
        for queue in ("critical", "default", "bulk"):
            self.make_many(30, queue=queue, run_at=self.past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        served = [self.claim(store, selector, 1)[0].queue for _ in range(20)]
        # Weighted fair tags: critical 1/6, 2/6, ...; default 1/3, 2/3, ...; bulk 1, 2.
        # Equal tags go to the queue listed first.
        assert served[:10] == [
            "critical", "critical", "default", "critical", "critical",
            "default", "critical", "critical", "default", "bulk",
        ]  # fmt: skip
        assert Counter(served) == {"critical": 12, "default": 6, "bulk": 2}

    def test_weights_hold_within_one_big_claim(self, store):
        for queue in ("critical", "default", "bulk"):
            self.make_many(30, queue=queue, run_at=self.past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        assert Counter(j.queue for j in self.claim(store, selector, 20)) == {
            "critical": 12,
            "default": 6,
            "bulk": 2,
        }

    def test_a_queue_without_work_yields_its_share(self, store):
        self.make_many(20, queue="default", run_at=self.past())
        self.make_many(20, queue="bulk", run_at=self.past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        served = Counter(self.claim(store, selector, 1)[0].queue for _ in range(8))
        assert served == {"default": 6, "bulk": 2}

    def test_an_idle_queue_banks_no_credit(self, store):
        self.make_many(40, queue="a", run_at=self.past())
        selector = QueueSelector(["a", "b"], [1, 1])
        for _ in range(10):
            self.claim(store, selector, 1)
        # b was idle for 10 claims; now it has work. Equal weights: it alternates with a, it
        # does not get the next 10 claims in a row.
        self.make_many(20, queue="b", run_at=self.past())
        served = [self.claim(store, selector, 1)[0].queue for _ in range(6)]
        assert Counter(served) == {"a": 3, "b": 3}

    def test_strict_serves_the_first_queue_until_it_is_empty(self, store):
        a = self.make_many(3, queue="a", run_at=self.past(5))
        b = self.make_many(3, queue="b", run_at=self.past(0))
        selector = QueueSelector(["a", "b"], strict=True)
        assert [j.id for j in self.claim(store, selector, 4)] == [*a, b[0]]
        assert [j.id for j in self.claim(store, selector, 4)] == b[1:]

    def test_plain_queue_list_alternates_between_queues(self, store):
        a = [self.make(queue="a", run_at=self.past(i)) for i in range(3)]
        b = [self.make(queue="b", run_at=self.past(10 + i)) for i in range(3)]
        claimed = store.claim(["a", "b"], "w1", 4, 30.0)
        assert [j.id for j in claimed] == [a[0], b[0], a[1], b[1]]

    # -- priority ----------------------------------------------------------------------------

    def test_higher_priority_first_then_earlier_run_at(self, store):
        low = [self.make(priority=0, run_at=self.past(i)) for i in range(5)]
        high_late = self.make(priority=10, run_at=self.past(30))
        high_early = self.make(priority=10, run_at=self.past(20))
        selector = QueueSelector(["q"])
        assert [j.id for j in self.claim(store, selector, 3)] == [high_early, high_late, low[0]]

    def test_a_retried_job_keeps_its_priority(self, store):
        self.make_many(10, priority=0, run_at=self.past())
        high = self.make(priority=10, run_at=self.past(1))
        selector = QueueSelector(["q"])
        [job] = self.claim(store, selector, 1)
        assert job.id == high
        retry_at = timezone.now() - timedelta(seconds=1)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=retry_at)
        assert [j.id for j in self.claim(store, selector, 1)] == [high]

    # -- tenants -----------------------------------------------------------------------------

    def test_tenants_take_turns_when_none_is_running(self, store):
        a = [self.make(tenant_id="A", run_at=self.past(i)) for i in range(10)]
        b = [self.make(tenant_id="B", run_at=self.past(100 + i)) for i in range(2)]
        claimed = self.claim(store, QueueSelector(["q"]), 5)
        assert [j.id for j in claimed] == [a[0], b[0], a[1], b[1], a[2]]

    def test_the_tenant_with_fewest_running_goes_first(self, store):
        a = [self.make(tenant_id="A", run_at=self.past(i)) for i in range(10)]
        selector = QueueSelector(["q"])
        assert [j.id for j in self.claim(store, selector, 3)] == a[:3]
        b = [self.make(tenant_id="B", run_at=self.past(100 + i)) for i in range(5)]
        # A holds 3 leases: B gets the next 3 claims, then they alternate.
        claimed = self.claim(store, selector, 5)
        assert [j.id for j in claimed] == [b[0], b[1], b[2], a[3], b[3]]

    def test_a_tenant_never_passes_its_cap_and_others_fill_the_slots(self, store):
        self.make_many(20, tenant_id="A", run_at=self.past())
        b = self.make(tenant_id="B", run_at=self.past(50))
        selector = QueueSelector(["q"], caps=TenantCaps(default=3))
        claimed = self.claim(store, selector, 8)
        assert Counter(j.tenant_id for j in claimed) == {"A": 3, "B": 1}
        assert b in {j.id for j in claimed}
        assert self.claim(store, selector, 8) == []
        # One of A's jobs finishes: exactly one more of A's may run.
        self.ack(store, next(j for j in claimed if j.tenant_id == "A"))
        assert [j.tenant_id for j in self.claim(store, selector, 8)] == ["A"]

    def test_a_lone_tenant_uses_every_slot_up_to_its_cap(self, store):
        self.make_many(20, tenant_id="A", run_at=self.past())
        selector = QueueSelector(["q"], caps=TenantCaps(default=3))
        assert len(self.claim(store, selector, 4)) == 3
        uncapped = QueueSelector(["q"])
        assert len(self.claim(store, uncapped, 4)) == 4

    def test_overrides_and_jobs_without_a_tenant(self, store):
        self.make_many(10, tenant_id="big", run_at=self.past())
        self.make_many(10, tenant_id="small", run_at=self.past())
        self.make_many(10, tenant_id="", run_at=self.past())
        caps = TenantCaps(default=2, overrides={"big": 5})
        claimed = self.claim(store, QueueSelector(["q"], caps=caps), 30)
        # The default cap is for tenants; the site's own jobs (tenant "") are not capped by it.
        assert Counter(j.tenant_id for j in claimed) == {"big": 5, "small": 2, "": 10}
        self.make_many(5, queue="r", tenant_id="", run_at=self.past())
        capped_site = TenantCaps(default=2, overrides={"": 11})
        assert len(self.claim(store, QueueSelector(["r"], caps=capped_site), 30)) == 1

    def test_an_override_of_none_exempts_a_tenant_from_the_default_cap(self, store):
        self.make_many(6, tenant_id="vip", run_at=self.past())
        self.make_many(6, tenant_id="other", run_at=self.past())
        caps = TenantCaps(default=2, overrides={"vip": None})
        claimed = self.claim(store, QueueSelector(["q"], caps=caps), 20)
        assert Counter(j.tenant_id for j in claimed) == {"vip": 6, "other": 2}
        only_vip = TenantCaps(overrides={"vip": None})
        assert not only_vip.enabled

    def test_the_cap_counts_leases_in_every_queue(self, store):
        self.make_many(5, queue="a", tenant_id="A", run_at=self.past())
        self.make_many(5, queue="b", tenant_id="A", run_at=self.past())
        caps = TenantCaps(default=3)
        claimed = self.claim(store, QueueSelector(["a", "b"], caps=caps), 10)
        assert len(claimed) == 3
        assert self.claim(store, QueueSelector(["b"], caps=caps), 10) == []

    # -- ordering keys -----------------------------------------------------------------------

    def test_jobs_of_one_key_run_one_at_a_time_in_enqueue_order(self, store):
        k = [self.make(ordering_key="acct:1", run_at=self.past(10 - i)) for i in range(3)]
        other = self.make(ordering_key="acct:2", run_at=self.past(20))
        free = self.make(run_at=self.past(30))
        selector = QueueSelector(["q"])
        # run_at order would be k[2], k[1], k[0]; the key's order is enqueue (id) order.
        first = self.claim(store, selector, 10)
        assert sorted(j.id for j in first) == sorted([k[0], other, free])
        assert self.claim(store, selector, 10) == []
        self.ack(store, next(j for j in first if j.id == k[0]))
        [second] = self.claim(store, selector, 10)
        assert second.id == k[1]

    def test_a_retrying_job_holds_its_key_and_a_dead_one_releases_it(self, store):
        k = [self.make(ordering_key="k", run_at=self.past(i)) for i in range(3)]
        selector = QueueSelector(["q"])
        [job] = self.claim(store, selector, 10)
        assert job.id == k[0]
        later = timezone.now() + timedelta(minutes=5)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=later)
        # k[0] waits (scheduled) for its retry; k[1] and k[2] wait behind it.
        assert self.claim(store, selector, 10) == []
        [job] = self.claim(store, selector, 10, now=later + timedelta(seconds=1))
        assert job.id == k[0]
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=PERMANENT)
        assert Job.objects.using(self.alias).get(id=k[0]).state == JobState.DEAD
        [job] = self.claim(store, selector, 10)
        assert job.id == k[1]

    def test_a_cancelled_job_releases_its_key(self, store):
        k = [self.make(ordering_key="k", run_at=self.past(i)) for i in range(2)]
        store.cancel_or_request(k[0])
        assert [j.id for j in self.claim(store, QueueSelector(["q"]), 10)] == [k[1]]

    def test_an_operator_retry_of_an_earlier_job_waits_for_the_leased_one(self, store):
        k = [self.make(ordering_key="k", run_at=self.past(i)) for i in range(2)]
        selector = QueueSelector(["q"])
        [first] = self.claim(store, selector, 10)
        nack(store, first.id, first.lease_token, {"message": "x"}, dead_reason=PERMANENT)
        [second] = self.claim(store, selector, 10)
        assert second.id == k[1]
        assert store.retry(k[0])
        # k[0] is ready again with a smaller id, but k[1] runs: one job of a key at a time.
        assert self.claim(store, selector, 10) == []
        self.ack(store, second)
        assert [j.id for j in self.claim(store, selector, 10)] == [k[0]]


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresFairness(FairnessContract):
    alias = "default"
    store_class = "jobqueue.store.postgres.PostgresStore"


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericFairness(FairnessContract):
    alias = "sqlite"
    store_class = "jobqueue.store.sqlite.GenericStore"


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
    assert "Bitmap Heap Scan on jobqueue_job" not in plan, plan


@pytest.mark.slow  # a load: 25,000 rows, then the planner
@requires_postgres()
@pytest.mark.django_db
@pytest.mark.parametrize("tenants", [1, 100])
def test_claim_is_estimated_below_the_jit_threshold(tenants):
    """PostgreSQL JIT-compiles a statement whose estimated cost passes ``jit_above_cost``
    (default 100,000): seconds per claim. A claim LIMIT the planner cannot read made the estimate
    630,000 on 5,000 ready rows (bench/fairness.py found it); the claim must stay far below."""
    for n in range(tenants):
        make_jobs(20000 // tenants, JobState.READY, queue="q", tenant_id=f"t{n}")
    make_jobs(5000, JobState.READY, queue="q", ordering_key="k", tenant_id="t0")
    params = claim_params(["q"], max_jobs=16, default_cap=4)
    plan = explain_claim(params)
    cost = float(plan.splitlines()[0].split("..")[1].split()[0])
    assert cost < 20000, plan.splitlines()[0]
    # With rate limits declared the claim carries the token buckets' CTEs (sent only then):
    # estimated 21,600 and 33,800 here, still at most half the JIT threshold.
    plan = explain_claim(params, "claim")
    cost = float(plan.splitlines()[0].split("..")[1].split()[0])
    assert cost < 50000, plan.splitlines()[0]
