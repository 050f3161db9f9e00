"""Ordering keys, tenant caps and concurrency keys as one rule: a key, at most N leased (issue 18).

An ordering key is the limit of one in enqueue order; a tenant cap the limit keyed by tenant; a
concurrency key the limit keyed by any string. ``test_one_scenario_over_the_three_surfaces`` runs
the same story on each, on both stores. The rest is the ordering key's own part (issue 15): a job
enqueued while its key has a job waits off the claim's path (state ``waiting``, linked to the key's
last job as to a parent) and is released when that one ends, so the claim never reads it; order
holds through retries, cancels, deaths (expired leases) and an operator's retry.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobqueue.limits.fairness import QueueSelector
from jobqueue.models import Job, JobParent
from jobqueue.states import DeadReason
from jobqueue.store.interface import NewJob
from jobqueue.store.plan import ConcurrencyLimits, Limit, TenantCaps, ordering_limit
from tests.conftest import requires_postgres
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


def test_the_three_limits_are_one_shape():
    caps = TenantCaps(default=3, overrides={"vip": None, "X": 1})
    limits = ConcurrencyLimits(overrides={"acct:1": 2})
    assert caps.limit("X") == Limit("tenant", "X", 1)
    assert caps.limit("other") == Limit("tenant", "other", 3)
    assert caps.limit("vip").most is None and caps.limit("").most is None
    assert limits.limit("acct:1", 5) == Limit("concurrency", "acct:1", 2)  # the setting wins
    assert limits.limit("acct:2", 5) == Limit("concurrency", "acct:2", 5)
    assert ordering_limit("X") == Limit("ordering", "X", 1, ordered=True)
    # Keys of different kinds are different keys.
    assert len({caps.limit("X"), limits.limit("X", 1), ordering_limit("X")}) == 3


class OneLimitContract:
    alias: str
    store_class: str

    @pytest.fixture
    def store(self):
        return import_string(self.store_class)(self.alias)

    def enqueue(self, store, **fields) -> int:
        return store.enqueue_stamped(new_job(**fields))[0]

    def claim(self, store, selector=None, now=None, lease_s: float = 30.0):
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
        keyed = [self.enqueue(store, **fields) for _ in range(3)]
        free = self.enqueue(store)
        # One of X's jobs at a time, never holding back the job that has no key.
        first = self.claim(store, selector)
        assert sorted(j.id for j in first) == sorted([keyed[0], free])
        assert self.claim(store, selector) == []
        for job in first:
            ack(store, job.id, job.lease_token)
        [second] = self.claim(store, selector)
        assert second.id == keyed[1]
        ack(store, second.id, second.lease_token)
        [third] = self.claim(store, selector)
        assert third.id == keyed[2]

    def test_followers_wait_off_the_claims_path_and_are_released_in_order(self, store):
        k = [self.enqueue(store, ordering_key="k") for _ in range(3)]
        other = self.enqueue(store, ordering_key="other")
        assert self.states([*k, other]) == ["ready", "waiting", "waiting", "ready"]
        edges = JobParent.objects.using(self.alias).filter(child_id__in=k)
        assert sorted(edges.values_list("parent_id", "child_id")) == [(k[0], k[1]), (k[1], k[2])]
        first = self.claim(store)
        assert sorted(j.id for j in first) == sorted([k[0], other])
        for job in first:
            ack(store, job.id, job.lease_token)
        assert self.states(k) == ["succeeded", "ready", "waiting"]
        [job] = self.claim(store)
        assert job.id == k[1]

    def test_a_retry_holds_the_key_and_a_death_releases_it(self, store):
        k = [self.enqueue(store, ordering_key="k") for _ in range(3)]
        [job] = self.claim(store)
        later = timezone.now() + timedelta(minutes=5)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=later)
        assert self.states(k) == ["scheduled", "waiting", "waiting"]
        assert self.claim(store) == []
        [job] = self.claim(store, now=later + timedelta(seconds=1))
        assert job.id == k[0]
        nack(
            store, job.id, job.lease_token, {"message": "x"}, dead_reason=DeadReason.PERMANENT_ERROR
        )
        assert self.states(k) == ["dead", "ready", "waiting"]
        assert [j.id for j in self.claim(store)] == [k[1]]

    def test_an_expired_lease_keeps_the_key_until_the_job_is_dead(self, store):
        k = [self.enqueue(store, ordering_key="k", max_attempts=2) for _ in range(2)]
        [job] = self.claim(store, lease_s=1.0)
        later = timezone.now() + timedelta(seconds=30)
        # The worker died: the reaper expires its lease; one attempt is left, so it retries.
        assert store.reap(now=later) == (1, 0)
        assert self.states(k) == ["scheduled", "waiting"]
        [job] = self.claim(store, now=later + timedelta(minutes=10), lease_s=1.0)
        assert job.id == k[0]
        assert store.reap(now=later + timedelta(minutes=20)) == (0, 1)
        assert self.states(k) == ["dead", "ready"]

    def test_a_cancel_releases_the_next_job_and_order_still_holds(self, store):
        k = [self.enqueue(store, ordering_key="k") for _ in range(3)]
        [head] = self.claim(store)
        # Cancelling the waiting middle job releases the last one, which still waits (in the
        # claim) behind the leased head.
        store.cancel_or_request(k[1])
        assert self.states(k) == ["leased", "cancelled", "ready"]
        assert self.claim(store) == []
        ack(store, head.id, head.lease_token)
        assert [j.id for j in self.claim(store)] == [k[2]]

    def test_an_operator_retry_of_an_earlier_job_waits_for_the_leased_one(self, store):
        k = [self.enqueue(store, ordering_key="k") for _ in range(2)]
        [first] = self.claim(store)
        nack(
            store,
            first.id,
            first.lease_token,
            {"message": "x"},
            dead_reason=DeadReason.PERMANENT_ERROR,
        )
        [second] = self.claim(store)
        assert second.id == k[1]
        assert store.retry(k[0])
        assert self.claim(store) == []
        ack(store, second.id, second.lease_token)
        assert [j.id for j in self.claim(store)] == [k[0]]

    def test_a_job_enqueued_after_the_key_drained_is_ready(self, store):
        [a] = [self.enqueue(store, ordering_key="k")]
        [job] = self.claim(store)
        ack(store, job.id, job.lease_token)
        b = self.enqueue(store, ordering_key="k")
        assert self.states([a, b]) == ["succeeded", "ready"]

    def test_a_keyed_enqueue_commits_or_rolls_back_with_the_callers_transaction(self, store):
        class Rollback(Exception):
            pass

        a = self.enqueue(store, ordering_key="k")
        with pytest.raises(Rollback):
            with transaction.atomic(using=self.alias):
                self.enqueue(store, ordering_key="k")
                raise Rollback
        jobs = Job.objects.using(self.alias)
        assert list(jobs.values_list("id", "state", "has_children")) == [(a, "ready", False)]
        assert not JobParent.objects.using(self.alias).exists()

    def test_a_dedupe_key_keeps_the_job_on_the_claims_path(self, store):
        # A waiting job would not hold its dedupe key (only live ones do): such a job is
        # enqueued ready, and the claim holds it behind its key's earlier job.
        a = self.enqueue(store, ordering_key="k")
        b = self.enqueue(store, ordering_key="k", dedupe_key="d")
        assert self.states([a, b]) == ["ready", "ready"]
        assert [j.id for j in self.claim(store)] == [a]


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresOneLimit(OneLimitContract):
    alias = "default"
    store_class = "jobqueue.store.postgres.PostgresStore"


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericOneLimit(OneLimitContract):
    alias = "sqlite"
    store_class = "jobqueue.store.sqlite.GenericStore"
