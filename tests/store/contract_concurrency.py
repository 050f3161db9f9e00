"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_concurrency.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobqueue.limits.fairness import ConcurrencyLimits, QueueSelector, TenantCaps
from jobqueue.models import Job
from jobqueue.states import JobState
from tests.factories import ack, make_job, make_jobs


class LimitsContract:
    def limits_past(self, seconds: float = 0) -> datetime:
        return timezone.now() - timedelta(hours=1) + timedelta(seconds=seconds)

    def limits_make_many(self, count: int, queue: str = "q", **fields: Any) -> list[int]:
        rows = make_jobs(count, JobState.READY, using=self.alias, queue=queue, **fields)
        return [j.id for j in rows]

    def limits_claim(self, store, selector: QueueSelector, max_jobs: int):
        claimed = store.claim(list(selector.queues), "w1", max_jobs, 30.0, plan=selector.plan())
        selector.claimed(claimed)
        return claimed

    def keyed(self, key: str = "acct:1", limit: int = 2) -> dict[str, Any]:
        return {"concurrency_key": key, "concurrency_limit": limit}

    def test_a_key_at_its_limit_is_never_claimed_until_a_slot_frees(self, store):
        ids = self.limits_make_many(5, run_at=self.limits_past(), **self.keyed(limit=2))
        selector = QueueSelector(["q"])
        first = self.limits_claim(store, selector, 10)
        assert sorted(j.id for j in first) == ids[:2]
        assert self.limits_claim(store, selector, 10) == []
        ack(store, first[0].id, first[0].lease_token)
        assert [j.id for j in self.limits_claim(store, selector, 10)] == [ids[2]]
        assert self.limits_claim(store, selector, 10) == []

    def test_keys_are_limited_apart_and_across_queues_and_tenants(self, store):
        a = self.limits_make_many(
            3, queue="q", tenant_id="t1", run_at=self.limits_past(), **self.keyed("a", 1)
        )
        a += self.limits_make_many(
            3, queue="r", tenant_id="t2", run_at=self.limits_past(1), **self.keyed("a", 1)
        )
        b = self.limits_make_many(3, queue="r", run_at=self.limits_past(2), **self.keyed("b", 2))
        claimed = self.limits_claim(store, QueueSelector(["q", "r"]), 20)
        keys = Counter(Job.objects.using(self.alias).get(id=j.id).concurrency_key for j in claimed)
        assert keys == {"a": 1, "b": 2}
        assert {j.id for j in claimed} <= set(a) | set(b)

    def test_leased_jobs_of_any_worker_count_against_the_limit(self, store):
        make_job(JobState.LEASED, using=self.alias, queue="other", **self.keyed(limit=2))
        ids = self.limits_make_many(3, run_at=self.limits_past(), **self.keyed(limit=2))
        assert [j.id for j in self.limits_claim(store, QueueSelector(["q"]), 10)] == ids[:1]

    def test_the_settings_limit_overrides_the_one_stored_on_queued_jobs(self, store):
        ids = self.limits_make_many(4, run_at=self.limits_past(), **self.keyed(limit=4))
        selector = QueueSelector(["q"], limits=ConcurrencyLimits(overrides={"acct:1": 1}))
        assert [j.id for j in self.limits_claim(store, selector, 10)] == ids[:1]

    def test_a_held_limit_never_blocks_the_jobs_behind_it(self, store):
        # The key is at its limit, with 1,000 of its jobs ahead of 10 unlimited ones in the
        # same queue and tenant: the very next claim takes the 10.
        make_jobs(2, JobState.LEASED, using=self.alias, queue="q", **self.keyed(limit=2))
        self.limits_make_many(1000, run_at=self.limits_past(), **self.keyed(limit=2))
        free = self.limits_make_many(10, run_at=self.limits_past(60))
        assert sorted(j.id for j in self.limits_claim(store, QueueSelector(["q"]), 10)) == free

    def test_a_key_with_room_takes_its_room_then_the_next_claim_reads_past_it(self, store):
        make_job(JobState.LEASED, using=self.alias, queue="q", **self.keyed(limit=2))
        held = self.limits_make_many(1000, run_at=self.limits_past(), **self.keyed(limit=2))
        free = self.limits_make_many(10, run_at=self.limits_past(60))
        selector = QueueSelector(["q"])
        # The key's room (one) goes to its first job; the unlimited ones are all in the next
        # two claims (the SQL claim may leave the first claim short: it read the key's jobs
        # first, and the next claim reads past them).
        claimed = [j.id for j in self.limits_claim(store, selector, 10)]
        claimed += [j.id for j in self.limits_claim(store, selector, 10)]
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
        ids = self.limits_make_many(2, run_at=self.limits_past(), **self.keyed(limit=1))
        selector = QueueSelector(["q"])
        assert self.limits_claim(store, selector, 10) == []
        assert store.reap() == (1, 0)
        claimed = self.limits_claim(store, selector, 10)
        assert len(claimed) == 1 and claimed[0].id in {dead.id, *ids}

    def test_weighted_tenants_complete_in_proportion_over_a_drain(self, store):
        # Two saturated tenants of weight 3 and 1 sharing 8 slots: each round the oldest
        # running job completes and one claim refills the slot.
        self.limits_make_many(400, tenant_id="big", run_at=self.limits_past())
        self.limits_make_many(400, tenant_id="small", run_at=self.limits_past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"big": 3.0}))
        running = list(self.limits_claim(store, selector, 8))
        done: Counter[str] = Counter()
        for _ in range(200):
            oldest = running.pop(0)
            ack(store, oldest.id, oldest.lease_token)
            done[oldest.tenant_id] += 1
            running += self.limits_claim(store, selector, 1)
        assert 3 * 0.85 <= done["big"] / done["small"] <= 3 * 1.15, done

    def test_a_small_tenant_still_starts_at_once_beside_a_weighted_backfill(self, store):
        self.limits_make_many(500, tenant_id="backfill", run_at=self.limits_past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"backfill": 5.0}))
        assert len(self.limits_claim(store, selector, 8)) == 8
        reset = self.limits_make_many(1, tenant_id="small", run_at=self.limits_past(3000))
        assert [j.id for j in self.limits_claim(store, selector, 1)] == reset
