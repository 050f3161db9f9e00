"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_fairness.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobqueue.limits.fairness import QueueSelector, TenantCaps
from jobqueue.models import Job
from jobqueue.states import DeadReason, JobState
from jobqueue.store.postgres.jobs import LANE_WINDOW
from tests.factories import ack, job_kwargs, make_job, make_jobs, nack

PERMANENT = DeadReason.PERMANENT_ERROR


class FairnessContract:
    def fair_make(self, queue: str = "q", **fields: Any) -> int:
        return make_job(JobState.READY, using=self.alias, queue=queue, **fields).id

    def fair_make_many(self, count: int, queue: str = "q", **fields: Any) -> list[int]:
        return [
            j.id for j in make_jobs(count, JobState.READY, using=self.alias, queue=queue, **fields)
        ]

    def fair_claim(
        self, store, selector: QueueSelector, max_jobs: int, now: datetime | None = None
    ):
        claimed = store.claim(
            list(selector.queues), "w1", max_jobs, 30.0, now=now, plan=selector.plan()
        )
        selector.claimed(claimed)
        return claimed

    def fair_ack(self, store, job) -> None:
        ack(store, job.id, job.lease_token, "null")

    def fair_past(self, seconds: float = 0) -> datetime:
        return timezone.now() - timedelta(hours=1) + timedelta(seconds=seconds)

    def test_weights_6_3_1_one_job_per_claim_serve_in_proportion(self, store):
        for queue in ("critical", "default", "bulk"):
            self.fair_make_many(30, queue=queue, run_at=self.fair_past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        served = [self.fair_claim(store, selector, 1)[0].queue for _ in range(20)]
        # Weighted fair tags: critical 1/6, 2/6, ...; default 1/3, 2/3, ...; bulk 1, 2.
        # Equal tags go to the queue listed first.
        assert served[:10] == [
            "critical", "critical", "default", "critical", "critical",
            "default", "critical", "critical", "default", "bulk",
        ]  # fmt: skip
        assert Counter(served) == {"critical": 12, "default": 6, "bulk": 2}

    def test_weights_hold_within_one_big_claim(self, store):
        for queue in ("critical", "default", "bulk"):
            self.fair_make_many(30, queue=queue, run_at=self.fair_past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        assert Counter(j.queue for j in self.fair_claim(store, selector, 20)) == {
            "critical": 12,
            "default": 6,
            "bulk": 2,
        }

    def test_a_queue_without_work_yields_its_share(self, store):
        self.fair_make_many(20, queue="default", run_at=self.fair_past())
        self.fair_make_many(20, queue="bulk", run_at=self.fair_past())
        selector = QueueSelector(["critical", "default", "bulk"], [6, 3, 1])
        served = Counter(self.fair_claim(store, selector, 1)[0].queue for _ in range(8))
        assert served == {"default": 6, "bulk": 2}

    def test_an_idle_queue_banks_no_credit(self, store):
        self.fair_make_many(40, queue="a", run_at=self.fair_past())
        selector = QueueSelector(["a", "b"], [1, 1])
        for _ in range(10):
            self.fair_claim(store, selector, 1)
        # b was idle for 10 claims; now it has work. Equal weights: it alternates with a, it
        # does not get the next 10 claims in a row.
        self.fair_make_many(20, queue="b", run_at=self.fair_past())
        served = [self.fair_claim(store, selector, 1)[0].queue for _ in range(6)]
        assert Counter(served) == {"a": 3, "b": 3}

    def test_strict_serves_the_first_queue_until_it_is_empty(self, store):
        a = self.fair_make_many(3, queue="a", run_at=self.fair_past(5))
        b = self.fair_make_many(3, queue="b", run_at=self.fair_past(0))
        selector = QueueSelector(["a", "b"], strict=True)
        assert [j.id for j in self.fair_claim(store, selector, 4)] == [*a, b[0]]
        assert [j.id for j in self.fair_claim(store, selector, 4)] == b[1:]

    def test_plain_queue_list_alternates_between_queues(self, store):
        a = [self.fair_make(queue="a", run_at=self.fair_past(i)) for i in range(3)]
        b = [self.fair_make(queue="b", run_at=self.fair_past(10 + i)) for i in range(3)]
        claimed = store.claim(["a", "b"], "w1", 4, 30.0)
        assert [j.id for j in claimed] == [a[0], b[0], a[1], b[1]]

    def test_higher_priority_first_then_earlier_run_at(self, store):
        low = [self.fair_make(priority=0, run_at=self.fair_past(i)) for i in range(5)]
        high_late = self.fair_make(priority=10, run_at=self.fair_past(30))
        high_early = self.fair_make(priority=10, run_at=self.fair_past(20))
        selector = QueueSelector(["q"])
        assert [j.id for j in self.fair_claim(store, selector, 3)] == [
            high_early,
            high_late,
            low[0],
        ]

    def test_a_retried_job_keeps_its_priority(self, store):
        self.fair_make_many(10, priority=0, run_at=self.fair_past())
        high = self.fair_make(priority=10, run_at=self.fair_past(1))
        selector = QueueSelector(["q"])
        [job] = self.fair_claim(store, selector, 1)
        assert job.id == high
        retry_at = timezone.now() - timedelta(seconds=1)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=retry_at)
        assert [j.id for j in self.fair_claim(store, selector, 1)] == [high]

    def test_tenants_take_turns_when_none_is_running(self, store):
        a = [self.fair_make(tenant_id="A", run_at=self.fair_past(i)) for i in range(10)]
        b = [self.fair_make(tenant_id="B", run_at=self.fair_past(100 + i)) for i in range(2)]
        claimed = self.fair_claim(store, QueueSelector(["q"]), 5)
        assert [j.id for j in claimed] == [a[0], b[0], a[1], b[1], a[2]]

    def test_a_new_tenant_enters_at_the_front_and_then_they_alternate(self, store):
        a = [self.fair_make(tenant_id="A", run_at=self.fair_past(i)) for i in range(10)]
        selector = QueueSelector(["q"])
        assert [j.id for j in self.fair_claim(store, selector, 3)] == a[:3]
        b = [self.fair_make(tenant_id="B", run_at=self.fair_past(100 + i)) for i in range(5)]
        # A was served 3 (virtual time 3). B is new: it enters one job behind the queue's
        # virtual now (2), so its first job (tag 3) goes first, then they alternate (ties to
        # the lower tenant id). B banks nothing more for the time it was not there.
        claimed = self.fair_claim(store, selector, 5)
        assert [j.id for j in claimed] == [b[0], a[3], b[1], a[4], b[2]]

    def test_weights_3_to_1_hold_one_job_per_claim(self, store):
        self.fair_make_many(60, tenant_id="big", run_at=self.fair_past())
        self.fair_make_many(60, tenant_id="small", run_at=self.fair_past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"big": 3}))
        served = Counter(self.fair_claim(store, selector, 1)[0].tenant_id for _ in range(40))
        # Each claim takes one job and none finishes: only the lanes' virtual time can keep
        # the proportion (a count of running jobs could not tell the claims apart).
        assert served == {"big": 30, "small": 10}

    def test_weights_3_to_1_hold_across_claim_sizes(self, store):
        self.fair_make_many(80, tenant_id="big", run_at=self.fair_past())
        self.fair_make_many(80, tenant_id="small", run_at=self.fair_past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"big": 3}))
        served: Counter[str] = Counter()
        for size in (1, 3, 5, 10, 1, 7, 2, 11):
            claimed = self.fair_claim(store, selector, size)
            served.update(j.tenant_id for j in claimed)
            for job in claimed:
                self.fair_ack(store, job)
        assert sum(served.values()) == 40
        assert served == {"big": 30, "small": 10}

    def test_a_heavy_tenant_among_many_takes_its_places_of_one_claim(self, store):
        # Twelve new tenants, one of weight 5: its tags are 0.2, 0.4, 0.6, 0.8, every other
        # lane's first is 1, so a claim of 4 is all its own, though more lanes than the claim's
        # places (8) stand at the front. Then the others, one each.
        for tenant in ["heavy", *(f"t{n:02d}" for n in range(11))]:
            self.fair_make_many(6, tenant_id=tenant, run_at=self.fair_past())
        selector = QueueSelector(["q"], caps=TenantCaps(weights={"heavy": 5}))
        assert [j.tenant_id for j in self.fair_claim(store, selector, 4)] == ["heavy"] * 4
        assert Counter(j.tenant_id for j in self.fair_claim(store, selector, 4))["heavy"] <= 1

    def test_a_lane_back_from_idle_banks_no_credit(self, store):
        self.fair_make_many(30, tenant_id="A", run_at=self.fair_past())
        self.fair_make(tenant_id="B", run_at=self.fair_past())
        selector = QueueSelector(["q"])
        start = self.fair_past(600)
        for n in range(12):  # B's one job goes early; then A alone for a minute
            self.fair_claim(store, selector, 1, now=start + timedelta(seconds=6 * n))
        self.fair_make_many(10, tenant_id="B", run_at=self.fair_past(5))
        back = start + timedelta(seconds=70)
        served = [
            j.tenant_id
            for n in range(6)
            for j in self.fair_claim(store, selector, 1, now=back + timedelta(seconds=n))
        ]
        # B was last served a minute before A: it is back one job behind A's virtual time, not
        # 10 jobs behind it: served first, then it alternates with A (not 10 in a row).
        assert served == ["B", "A", "B", "A", "B", "A"]

    def test_a_held_lane_takes_no_place_from_the_others(self, store):
        # Every job of tenant A waits on a concurrency key at its limit: the claim fills from B.
        self.fair_make_many(
            10, tenant_id="A", concurrency_key="k", concurrency_limit=1, run_at=self.fair_past()
        )
        [held] = store.claim(["q"], "w1", 1, 30.0)
        assert held.tenant_id == "A"
        self.fair_make_many(10, tenant_id="B", run_at=self.fair_past(1))
        selector = QueueSelector(["q"])
        tenants = [[j.tenant_id for j in self.fair_claim(store, selector, 4)] for _ in range(4)]
        assert tenants == [["B"] * 4, ["B"] * 4, ["B"] * 2, []]

    def test_every_lane_is_served_when_there_are_more_than_a_claim_reads(self, store):
        # More lanes than one claim reads (LANE_WINDOW): each claim reads on from where the last
        # one stopped, so claims of 10 stay full and together serve every lane once.
        lanes = 2 * LANE_WINDOW + 88
        make_jobs_of = [
            Job(
                **job_kwargs(
                    JobState.READY, queue="q", tenant_id=f"t{n:04d}", run_at=self.fair_past()
                )
            )
            for n in range(lanes)
        ]
        Job.objects.using(self.alias).bulk_create(make_jobs_of)
        selector = QueueSelector(["q"])
        claims = [self.fair_claim(store, selector, 10) for _ in range(lanes // 10)]
        assert [len(c) for c in claims] == [10] * (lanes // 10)
        served = [j.tenant_id for c in claims for j in c]
        assert len(set(served)) == len(served) == lanes // 10 * 10

    def test_lanes_behind_a_window_of_capped_tenants_are_served_by_the_next_claim(self, store):
        # The first LANE_WINDOW + 44 tenants are each at their cap (one leased job) with one more
        # waiting; ten tenants after them have work. The first claim may read only capped lanes
        # and take nothing: it must still move on, so the second serves the ten (a window that
        # stayed where it was would keep them waiting for ever).
        jobs = []
        for n in range(LANE_WINDOW + 44):
            for state in (JobState.LEASED, JobState.READY):
                jobs.append(Job(**job_kwargs(state, queue="q", tenant_id=f"a{n:04d}")))
        jobs += [Job(**job_kwargs(JobState.READY, queue="q", tenant_id=f"b{n}")) for n in range(10)]
        Job.objects.using(self.alias).bulk_create(jobs)
        selector = QueueSelector(["q"], caps=TenantCaps(default=1))
        served = [j.tenant_id for _ in range(2) for j in self.fair_claim(store, selector, 4)]
        assert len(served) >= 4
        assert {t[0] for t in served} == {"b"}

    def test_a_tenant_never_passes_its_cap_and_others_fill_the_slots(self, store):
        self.fair_make_many(20, tenant_id="A", run_at=self.fair_past())
        b = self.fair_make(tenant_id="B", run_at=self.fair_past(50))
        selector = QueueSelector(["q"], caps=TenantCaps(default=3))
        claimed = self.fair_claim(store, selector, 8)
        assert Counter(j.tenant_id for j in claimed) == {"A": 3, "B": 1}
        assert b in {j.id for j in claimed}
        assert self.fair_claim(store, selector, 8) == []
        # One of A's jobs finishes: exactly one more of A's may run.
        self.fair_ack(store, next(j for j in claimed if j.tenant_id == "A"))
        assert [j.tenant_id for j in self.fair_claim(store, selector, 8)] == ["A"]

    def test_a_lone_tenant_uses_every_slot_up_to_its_cap(self, store):
        self.fair_make_many(20, tenant_id="A", run_at=self.fair_past())
        selector = QueueSelector(["q"], caps=TenantCaps(default=3))
        assert len(self.fair_claim(store, selector, 4)) == 3
        uncapped = QueueSelector(["q"])
        assert len(self.fair_claim(store, uncapped, 4)) == 4

    def test_overrides_and_jobs_without_a_tenant(self, store):
        self.fair_make_many(10, tenant_id="big", run_at=self.fair_past())
        self.fair_make_many(10, tenant_id="small", run_at=self.fair_past())
        self.fair_make_many(10, tenant_id="", run_at=self.fair_past())
        caps = TenantCaps(default=2, overrides={"big": 5})
        claimed = self.fair_claim(store, QueueSelector(["q"], caps=caps), 30)
        # The default cap is for tenants; the site's own jobs (tenant "") are not capped by it.
        assert Counter(j.tenant_id for j in claimed) == {"big": 5, "small": 2, "": 10}
        self.fair_make_many(5, queue="r", tenant_id="", run_at=self.fair_past())
        capped_site = TenantCaps(default=2, overrides={"": 11})
        assert len(self.fair_claim(store, QueueSelector(["r"], caps=capped_site), 30)) == 1

    def test_an_override_of_none_exempts_a_tenant_from_the_default_cap(self, store):
        self.fair_make_many(6, tenant_id="vip", run_at=self.fair_past())
        self.fair_make_many(6, tenant_id="other", run_at=self.fair_past())
        caps = TenantCaps(default=2, overrides={"vip": None})
        claimed = self.fair_claim(store, QueueSelector(["q"], caps=caps), 20)
        assert Counter(j.tenant_id for j in claimed) == {"vip": 6, "other": 2}
        only_vip = TenantCaps(overrides={"vip": None})
        assert not only_vip.enabled

    def test_the_cap_counts_leases_in_every_queue(self, store):
        self.fair_make_many(5, queue="a", tenant_id="A", run_at=self.fair_past())
        self.fair_make_many(5, queue="b", tenant_id="A", run_at=self.fair_past())
        caps = TenantCaps(default=3)
        claimed = self.fair_claim(store, QueueSelector(["a", "b"], caps=caps), 10)
        assert len(claimed) == 3
        assert self.fair_claim(store, QueueSelector(["b"], caps=caps), 10) == []

    def test_jobs_of_one_key_run_one_at_a_time_in_enqueue_order(self, store):
        k = [self.fair_make(ordering_key="acct:1", run_at=self.fair_past(10 - i)) for i in range(3)]
        other = self.fair_make(ordering_key="acct:2", run_at=self.fair_past(20))
        free = self.fair_make(run_at=self.fair_past(30))
        selector = QueueSelector(["q"])
        # run_at order would be k[2], k[1], k[0]; the key's order is enqueue (id) order.
        first = self.fair_claim(store, selector, 10)
        assert sorted(j.id for j in first) == sorted([k[0], other, free])
        assert self.fair_claim(store, selector, 10) == []
        self.fair_ack(store, next(j for j in first if j.id == k[0]))
        [second] = self.fair_claim(store, selector, 10)
        assert second.id == k[1]

    def test_a_retrying_job_holds_its_key_and_a_dead_one_releases_it(self, store):
        k = [self.fair_make(ordering_key="k", run_at=self.fair_past(i)) for i in range(3)]
        selector = QueueSelector(["q"])
        [job] = self.fair_claim(store, selector, 10)
        assert job.id == k[0]
        later = timezone.now() + timedelta(minutes=5)
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=None, retry_at=later)
        # k[0] waits (scheduled) for its retry; k[1] and k[2] wait behind it.
        assert self.fair_claim(store, selector, 10) == []
        [job] = self.fair_claim(store, selector, 10, now=later + timedelta(seconds=1))
        assert job.id == k[0]
        nack(store, job.id, job.lease_token, {"message": "x"}, dead_reason=PERMANENT)
        assert Job.objects.using(self.alias).get(id=k[0]).state == JobState.DEAD
        [job] = self.fair_claim(store, selector, 10)
        assert job.id == k[1]

    def test_a_cancelled_job_releases_its_key(self, store):
        k = [self.fair_make(ordering_key="k", run_at=self.fair_past(i)) for i in range(2)]
        store.cancel_or_request(k[0])
        assert [j.id for j in self.fair_claim(store, QueueSelector(["q"]), 10)] == [k[1]]

    def test_an_operator_retry_of_an_earlier_job_waits_for_the_leased_one(self, store):
        k = [self.fair_make(ordering_key="k", run_at=self.fair_past(i)) for i in range(2)]
        selector = QueueSelector(["q"])
        [first] = self.fair_claim(store, selector, 10)
        nack(store, first.id, first.lease_token, {"message": "x"}, dead_reason=PERMANENT)
        [second] = self.fair_claim(store, selector, 10)
        assert second.id == k[1]
        assert store.retry(k[0])
        # k[0] is ready again with a smaller id, but k[1] runs: one job of a key at a time.
        assert self.fair_claim(store, selector, 10) == []
        self.fair_ack(store, second)
        assert [j.id for j in self.fair_claim(store, selector, 10)] == [k[0]]
