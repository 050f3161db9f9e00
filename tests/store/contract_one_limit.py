"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_keys.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobqueue.limits.fairness import QueueSelector
from jobqueue.models import Job, JobParent
from jobqueue.states import DeadReason
from jobqueue.store.interface import NewJob
from jobqueue.store.plan import ConcurrencyLimits, TenantCaps
from tests.factories import ack, nack

NOOP = "tests.testapp.jobs.noop"


def new_job(**fields) -> NewJob:
    return NewJob(queue="q", type=NOOP, payload_json="{}", **fields)


#: The three surfaces of "key X, at most one leased": how a job gets the key, and the selector.
SURFACES = {
    "ordering key": (
        {"ordering_key": "X"},
        QueueSelector(["q"]),
    ),
    "tenant cap": (
        {"tenant_id": "X"},
        QueueSelector(["q"], caps=TenantCaps(overrides={"X": 1})),
    ),
    "concurrency key": (
        {"concurrency_key": "X", "concurrency_limit": 1},
        QueueSelector(["q"], limits=ConcurrencyLimits(declared=True)),
    ),
}


class OneLimitContract:
    def one_limit_enqueue(self, store, **fields) -> int:
        return store.enqueue_stamped(new_job(**fields))[0]

    def one_limit_claim(self, store, selector=None, now=None, lease_s: float = 30.0):
        selector = selector or QueueSelector(["q"])
        claimed = store.claim(["q"], "w1", 10, lease_s, now=now, plan=selector.plan())
        selector.claimed(claimed)
        return claimed

    def states(self, ids: list[int]) -> list[str]:
        rows = dict(Job.objects.using(self.alias).filter(id__in=ids).values_list("id", "state"))
        return [rows[i] for i in ids]

    @pytest.mark.parametrize("surface", sorted(SURFACES))
    def test_one_scenario_over_the_three_surfaces(self, store, surface):
        fields, selector = SURFACES[surface]
        keyed = [self.one_limit_enqueue(store, **fields) for _ in range(3)]
        free = self.one_limit_enqueue(store)
        # One of X's jobs at a time, never holding back the job that has no key.
        first = self.one_limit_claim(store, selector)
        assert sorted(j.id for j in first) == sorted([keyed[0], free])
        assert self.one_limit_claim(store, selector) == []
        for job in first:
            ack(store, job.id, job.lease_token)
        [second] = self.one_limit_claim(store, selector)
        assert second.id == keyed[1]
        ack(store, second.id, second.lease_token)
        [third] = self.one_limit_claim(store, selector)
        assert third.id == keyed[2]

    def test_followers_wait_off_the_claims_path_and_are_released_in_order(self, store):
        k = [self.one_limit_enqueue(store, ordering_key="k") for _ in range(3)]
        other = self.one_limit_enqueue(store, ordering_key="other")
        assert self.states([*k, other]) == ["ready", "waiting", "waiting", "ready"]
        edges = JobParent.objects.using(self.alias).filter(child_id__in=k)
        assert sorted(edges.values_list("parent_id", "child_id")) == [(k[0], k[1]), (k[1], k[2])]
        first = self.one_limit_claim(store)
        assert sorted(j.id for j in first) == sorted([k[0], other])
        for job in first:
            ack(store, job.id, job.lease_token)
        assert self.states(k) == ["succeeded", "ready", "waiting"]
        [job] = self.one_limit_claim(store)
        assert job.id == k[1]

    def test_a_retry_holds_the_key_and_a_death_releases_it(self, store):
        k = [self.one_limit_enqueue(store, ordering_key="k") for _ in range(3)]
        [job] = self.one_limit_claim(store)
        later = timezone.now() + timedelta(minutes=5)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=later)
        assert self.states(k) == ["scheduled", "waiting", "waiting"]
        assert self.one_limit_claim(store) == []
        [job] = self.one_limit_claim(store, now=later + timedelta(seconds=1))
        assert job.id == k[0]
        nack(
            store, job.id, job.lease_token, {"message": "x"}, dead_reason=DeadReason.PERMANENT_ERROR
        )
        assert self.states(k) == ["dead", "ready", "waiting"]
        assert [j.id for j in self.one_limit_claim(store)] == [k[1]]

    def test_an_expired_lease_keeps_the_key_until_the_job_is_dead(self, store):
        k = [self.one_limit_enqueue(store, ordering_key="k", max_attempts=2) for _ in range(2)]
        [job] = self.one_limit_claim(store, lease_s=1.0)
        later = timezone.now() + timedelta(seconds=30)
        # The worker died: the reaper expires its lease; one attempt is left, so it retries.
        assert store.reap(now=later) == (1, 0)
        assert self.states(k) == ["scheduled", "waiting"]
        [job] = self.one_limit_claim(store, now=later + timedelta(minutes=10), lease_s=1.0)
        assert job.id == k[0]
        assert store.reap(now=later + timedelta(minutes=20)) == (0, 1)
        assert self.states(k) == ["dead", "ready"]

    def test_a_cancel_releases_the_next_job_and_order_still_holds(self, store):
        k = [self.one_limit_enqueue(store, ordering_key="k") for _ in range(3)]
        [head] = self.one_limit_claim(store)
        # Cancelling the waiting middle job releases the last one, which still waits (in the
        # claim) behind the leased head.
        store.cancel_or_request(k[1])
        assert self.states(k) == ["leased", "cancelled", "ready"]
        assert self.one_limit_claim(store) == []
        ack(store, head.id, head.lease_token)
        assert [j.id for j in self.one_limit_claim(store)] == [k[2]]

    def test_an_operator_retry_of_an_earlier_job_waits_for_the_leased_one_under_its_limit(
        self, store
    ):
        k = [self.one_limit_enqueue(store, ordering_key="k") for _ in range(2)]
        [first] = self.one_limit_claim(store)
        nack(
            store,
            first.id,
            first.lease_token,
            {"message": "x"},
            dead_reason=DeadReason.PERMANENT_ERROR,
        )
        [second] = self.one_limit_claim(store)
        assert second.id == k[1]
        assert store.retry(k[0])
        assert self.one_limit_claim(store) == []
        ack(store, second.id, second.lease_token)
        assert [j.id for j in self.one_limit_claim(store)] == [k[0]]

    def test_a_job_enqueued_after_the_key_drained_is_ready(self, store):
        [a] = [self.one_limit_enqueue(store, ordering_key="k")]
        [job] = self.one_limit_claim(store)
        ack(store, job.id, job.lease_token)
        b = self.one_limit_enqueue(store, ordering_key="k")
        assert self.states([a, b]) == ["succeeded", "ready"]

    def test_a_keyed_enqueue_commits_or_rolls_back_with_the_callers_transaction(self, store):
        class Rollback(Exception):
            pass

        a = self.one_limit_enqueue(store, ordering_key="k")
        with pytest.raises(Rollback):
            with transaction.atomic(using=self.alias):
                self.one_limit_enqueue(store, ordering_key="k")
                raise Rollback
        jobs = Job.objects.using(self.alias)
        assert list(jobs.values_list("id", "state", "has_children")) == [(a, "ready", False)]
        assert not JobParent.objects.using(self.alias).exists()

    def test_a_dedupe_key_keeps_the_job_on_the_claims_path(self, store):
        # A waiting job would not hold its dedupe key (only live ones do): such a job is
        # enqueued ready, and the claim holds it behind its key's earlier job.
        a = self.one_limit_enqueue(store, ordering_key="k")
        b = self.one_limit_enqueue(store, ordering_key="k", dedupe_key="d")
        assert self.states([a, b]) == ["ready", "ready"]
        assert [j.id for j in self.one_limit_claim(store)] == [a]
