"""Concurrency limits and tenant weights in the claim (issue 18), on both stores.

``LimitsContract`` runs against PostgreSQL's SQL claim and the ORM store's ranking: each test
writes down what a claim must return. The limit is read from each job's row (fixed at enqueue)
and from the plan's overrides (``JOBQUEUE["CONCURRENCY_LIMITS"]``).
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone
from django.utils.module_loading import import_string

from jobqueue.limits.fairness import ConcurrencyLimits, QueueSelector, TenantCaps
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store.postgres import PostgresStore
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import ack, claim_params, make_job, make_jobs


class LimitsContract:
    alias: str
    store_class: str

    @pytest.fixture
    def store(self):
        return import_string(self.store_class)(self.alias)

    def past(self, seconds: float = 0) -> datetime:
        return timezone.now() - timedelta(hours=1) + timedelta(seconds=seconds)

    def make_many(self, count: int, queue: str = "q", **fields: Any) -> list[int]:
        rows = make_jobs(count, JobState.READY, using=self.alias, queue=queue, **fields)
        return [j.id for j in rows]

    def claim(self, store, selector: QueueSelector, max_jobs: int):
        claimed = store.claim(list(selector.queues), "w1", max_jobs, 30.0, plan=selector.plan())
        selector.claimed(claimed)
        return claimed

    def keyed(self, key: str = "acct:1", limit: int = 2) -> dict[str, Any]:
        return {"concurrency_key": key, "concurrency_limit": limit}

    # -- the limit ---------------------------------------------------------------------------

    def test_a_key_at_its_limit_is_never_claimed_until_a_slot_frees(self, store):
        ids = self.make_many(5, run_at=self.past(), **self.keyed(limit=2))
        selector = QueueSelector(["q"])
        first = self.claim(store, selector, 10)
        assert sorted(j.id for j in first) == ids[:2]
        assert self.claim(store, selector, 10) == []
        ack(store, first[0].id, first[0].lease_token)
        assert [j.id for j in self.claim(store, selector, 10)] == [ids[2]]
        assert self.claim(store, selector, 10) == []

    def test_keys_are_limited_apart_and_across_queues_and_tenants(self, store):
        a = self.make_many(3, queue="q", tenant_id="t1", run_at=self.past(), **self.keyed("a", 1))
        a += self.make_many(3, queue="r", tenant_id="t2", run_at=self.past(1), **self.keyed("a", 1))
        b = self.make_many(3, queue="r", run_at=self.past(2), **self.keyed("b", 2))
        claimed = self.claim(store, QueueSelector(["q", "r"]), 20)
        keys = Counter(Job.objects.using(self.alias).get(id=j.id).concurrency_key for j in claimed)
        assert keys == {"a": 1, "b": 2}
        assert {j.id for j in claimed} <= set(a) | set(b)

    def test_leased_jobs_of_any_worker_count_against_the_limit(self, store):
        make_job(JobState.LEASED, using=self.alias, queue="other", **self.keyed(limit=2))
        ids = self.make_many(3, run_at=self.past(), **self.keyed(limit=2))
        assert [j.id for j in self.claim(store, QueueSelector(["q"]), 10)] == ids[:1]

    def test_the_settings_limit_overrides_the_one_stored_on_queued_jobs(self, store):
        ids = self.make_many(4, run_at=self.past(), **self.keyed(limit=4))
        selector = QueueSelector(["q"], limits=ConcurrencyLimits(overrides={"acct:1": 1}))
        assert [j.id for j in self.claim(store, selector, 10)] == ids[:1]

    def test_a_held_limit_never_blocks_the_jobs_behind_it(self, store):
        # The key is at its limit, with 1,000 of its jobs ahead of 10 unlimited ones in the
        # same queue and tenant: the very next claim takes the 10.
        make_jobs(2, JobState.LEASED, using=self.alias, queue="q", **self.keyed(limit=2))
        self.make_many(1000, run_at=self.past(), **self.keyed(limit=2))
        free = self.make_many(10, run_at=self.past(60))
        assert sorted(j.id for j in self.claim(store, QueueSelector(["q"]), 10)) == free

    def test_a_key_with_room_takes_its_room_then_the_next_claim_reads_past_it(self, store):
        make_job(JobState.LEASED, using=self.alias, queue="q", **self.keyed(limit=2))
        held = self.make_many(1000, run_at=self.past(), **self.keyed(limit=2))
        free = self.make_many(10, run_at=self.past(60))
        selector = QueueSelector(["q"])
        # The key's room (one) goes to its first job; the unlimited ones are all in the next
        # two claims (the SQL claim may leave the first claim short: it read the key's jobs
        # first, and the next claim reads past them).
        claimed = [j.id for j in self.claim(store, selector, 10)]
        claimed += [j.id for j in self.claim(store, selector, 10)]
        assert sorted(claimed) == [held[0], *free]

    def test_an_expired_lease_gives_its_slot_back_once_reaped(self, store):
        # A killed worker's leases count until they expire and the reaper takes them back.
        dead = make_job(
            JobState.LEASED,
            using=self.alias,
            queue="q",
            lease_until=timezone.now() - timedelta(seconds=5),
            **self.keyed(limit=1),
        )
        ids = self.make_many(2, run_at=self.past(), **self.keyed(limit=1))
        selector = QueueSelector(["q"])
        assert self.claim(store, selector, 10) == []
        assert store.reap() == (1, 0)
        claimed = self.claim(store, selector, 10)
        assert len(claimed) == 1 and claimed[0].id in {dead.id, *ids}

    # -- tenant weights ----------------------------------------------------------------------

    def test_weighted_tenants_complete_in_proportion_over_a_drain(self, store):
        # Two saturated tenants of weight 3 and 1 sharing 8 slots: each round the oldest
        # running job completes and one claim refills the slot.
        self.make_many(400, tenant_id="big", run_at=self.past())
        self.make_many(400, tenant_id="small", run_at=self.past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"big": 3.0}))
        running = list(self.claim(store, selector, 8))
        done: Counter[str] = Counter()
        for _ in range(200):
            oldest = running.pop(0)
            ack(store, oldest.id, oldest.lease_token)
            done[oldest.tenant_id] += 1
            running += self.claim(store, selector, 1)
        assert 3 * 0.85 <= done["big"] / done["small"] <= 3 * 1.15, done

    def test_a_small_tenant_still_starts_at_once_beside_a_weighted_backfill(self, store):
        self.make_many(500, tenant_id="backfill", run_at=self.past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"backfill": 5.0}))
        assert len(self.claim(store, selector, 8)) == 8
        reset = self.make_many(1, tenant_id="small", run_at=self.past(3000))
        assert [j.id for j in self.claim(store, selector, 1)] == reset


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresLimits(LimitsContract):
    alias = "default"
    store_class = "jobqueue.store.postgres.PostgresStore"


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericLimits(LimitsContract):
    alias = "sqlite"
    store_class = "jobqueue.store.sqlite.GenericStore"


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
    assert "Bitmap Heap Scan on jobqueue_job" not in plan, plan
