"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_rates.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobqueue.models import Job, RateBucket
from jobqueue.settings.rates import RateLimits, parse_rate_limits
from jobqueue.states import JobState
from jobqueue.store.plan import ClaimPlan
from tests.conftest import wait_for
from tests.factories import make_job

NOOP = "tests.testapp.jobs.noop"


OTHER = "tests.testapp.jobs.add"


PARTNER = "tests.testapp.jobs.call_partner"


PARTNER_TOO = "tests.testapp.jobs.partner_rejects"


def plan_of(
    setting: dict[str, Any], dependencies: dict[str, str | None] | None = None
) -> ClaimPlan:
    rates = parse_rate_limits(setting).with_dependencies(dependencies or {})
    return replace(ClaimPlan.even(1), rates=rates)


class RateContract:
    """Needs ``alias``; the store under test is ``get_store(alias)``."""

    def rate_make(
        self, n: int, job_type: str = NOOP, tenant: str = "", priority: int = 0
    ) -> list[int]:
        return [
            make_job(
                JobState.READY,
                using=self.alias,
                queue="q",
                type=job_type,
                tenant_id=tenant,
                priority=priority,
                run_at=timezone.now() - timedelta(seconds=10),
            ).id
            for _ in range(n)
        ]

    def rate_claim(self, store: Any, plan: ClaimPlan, at, max_jobs: int = 100) -> list[int]:
        return [j.id for j in store.claim(["q"], "w1", max_jobs, 30.0, now=at, plan=plan)]

    def prime(self, store: Any, plan: ClaimPlan, at) -> None:
        # The declared buckets appear (full) at the first claim that may draw on them.
        store.claim(["elsewhere"], "w1", 1, 30.0, now=at, plan=plan)

    def test_a_bucket_admits_its_burst_then_one_job_per_token_and_never_more(self, store):
        plan = plan_of({"type": {NOOP: {"rate": "2/s", "burst": 3}}})
        ids = self.rate_make(10)
        t0 = timezone.now()
        self.prime(store, plan, t0)
        assert len(self.rate_claim(store, plan, t0)) == 3
        assert self.rate_claim(store, plan, t0) == []
        assert self.rate_claim(store, plan, t0 + timedelta(seconds=0.4)) == []
        assert len(self.rate_claim(store, plan, t0 + timedelta(seconds=0.5))) == 1
        assert len(self.rate_claim(store, plan, t0 + timedelta(seconds=1.5))) == 2
        # A long quiet spell fills the bucket to its burst, not beyond.
        assert len(self.rate_claim(store, plan, t0 + timedelta(seconds=60))) == 3
        jobs = Job.objects.using(self.alias).filter(id__in=ids)
        held = jobs.filter(state=JobState.READY)
        assert held.count() == 1
        # Held back, not claimed and handed back: no attempt spent.
        assert [j.attempts for j in held] == [0]

    def test_jobs_no_drained_limiter_names_keep_flowing_past_held_ones(self, store):
        plan = plan_of({"type": {NOOP: {"rate": "1/min", "burst": 1}}})
        self.rate_make(50, NOOP, priority=10)  # first in claim order, all but one held back
        others = self.rate_make(5, OTHER)
        t0 = timezone.now()
        self.prime(store, plan, t0)
        first = self.rate_claim(store, plan, t0, max_jobs=4)
        assert len(first) == 4 and len(set(first) & set(others)) == 3
        assert set(self.rate_claim(store, plan, t0, max_jobs=4)) == set(others) - set(first)

    def test_taken_gets_each_claims_jobs_before_the_next_claim_runs(self, store):
        # A worker starts the first claim's jobs while the buckets are checked and the second
        # claim runs (worker/claiming.py): each call sees only the claims made so far.
        plan = plan_of({"type": {NOOP: {"rate": "1/min", "burst": 1}}})
        self.rate_make(3, NOOP, priority=10)
        self.rate_make(2, OTHER)
        calls: list[tuple[list[int], int]] = []

        def taken(jobs: list[Any]) -> None:
            leased = Job.objects.using(self.alias).filter(state=JobState.LEASED).count()
            calls.append(([j.id for j in jobs], leased))

        got = store.claim(["q"], "w1", 10, 30.0, now=timezone.now(), plan=plan, taken=taken)
        assert len(got) == 3  # one job of the limited type (its burst), the two others
        assert [i for ids, _ in calls for i in ids] == [j.id for j in got]
        assert all(ids for ids, _ in calls)
        so_far = 0
        for ids, leased in calls:
            so_far += len(ids)
            assert leased == so_far

    def test_a_dependency_limit_binds_every_type_of_the_dependency_together(self, store):
        deps = {PARTNER: "partner", PARTNER_TOO: "partner"}
        plan = plan_of({"dependency": {"partner": {"rate": "1/s", "burst": 2}}}, deps)
        self.rate_make(3, PARTNER)
        self.rate_make(3, PARTNER_TOO)
        free = self.rate_make(2, NOOP)
        t0 = timezone.now()
        self.prime(store, plan, t0)
        got = self.rate_claim(store, plan, t0)
        assert len(got) == 4 and set(free) <= set(got)
        assert self.rate_claim(store, plan, t0 + timedelta(seconds=1)) != []

    def test_each_tenant_has_its_own_bucket_and_overrides_apply(self, store):
        setting = {"tenant": {"default": {"rate": "1/min", "burst": 1}, "overrides": {"big": None}}}
        plan = plan_of(setting)
        a, b, big = (
            self.rate_make(3, tenant="a"),
            self.rate_make(3, tenant="b"),
            self.rate_make(3, tenant="big"),
        )
        mine = self.rate_make(2, tenant="")
        t0 = timezone.now()
        got: set[int] = set()
        # A tenant's bucket appears at the first claim that sees its jobs.
        for _ in range(3):
            got |= set(self.rate_claim(store, plan, t0))
        assert len(got & set(a)) == 1 and len(got & set(b)) == 1
        assert set(big) | set(mine) <= got
        assert RateBucket.objects.using(self.alias).filter(key="tenant:a").exists()
        assert not RateBucket.objects.using(self.alias).filter(key="tenant:big").exists()

    def test_the_wait_and_the_rows_show_a_drained_bucket(self, store):
        plan = plan_of({"type": {NOOP: {"rate": "1/min", "burst": 1}}})
        self.rate_make(4)
        assert store.rate_limit_wait(plan.rates) is None
        self.prime(store, plan, None)
        assert len(self.rate_claim(store, plan, None)) == 1
        wait = store.rate_limit_wait(plan.rates)
        assert wait is not None and 0 < wait <= 60
        [row] = store.rate_limit_rows(plan.rates)
        assert (row.key, row.text, row.burst, row.held) == (f"type:{NOOP}", "1/min", 1, 3)
        assert 0 <= row.tokens < 1
        assert store.rate_limit_rows(plan.rates, cap=2)[0].held == 2

    # transaction=True: the database's now() must move on between statements (a test's own
    # transaction would hold it at its start, and no bucket would ever refill).
    @pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)
    def test_a_bucket_drained_at_the_claim_counts_after_it_refilled(self, store):
        """A worker descheduled past 1/rate between its claim and the wait's read still sees
        the bucket that claim drained (wait 0: claim again), so --burst does not exit with jobs
        held back (found by a run beside a CPU hog: 2 of 6 jobs done at exit)."""
        plan = plan_of({"type": {NOOP: {"rate": "20/s", "burst": 1}}})
        self.rate_make(3)
        self.prime(store, plan, None)
        began = time.monotonic()
        # Claims of one: a short claim runs a second one (claim_again), and on a loaded machine
        # more than 1/20 s can pass between the two, refilling a token: one call took two jobs.
        assert len(self.rate_claim(store, plan, None, max_jobs=1)) == 1
        # Progress, not a sleep: until the bucket has refilled (1/20 s after the claim).
        wait_for(lambda: store.rate_limit_wait(plan.rates) is None, timeout=300, interval=0.01)
        assert store.rate_limit_wait(plan.rates, since_s=time.monotonic() - began) == 0.0
        # The other two jobs, a token each; then a claim after the refill finds none and
        # leaves no bucket drained: a --burst worker exits.
        for _ in range(2):
            assert len(self.rate_claim(store, plan, None, max_jobs=1)) == 1
            wait_for(lambda: store.rate_limit_wait(plan.rates) is None, timeout=300, interval=0.01)
        began = time.monotonic()
        assert self.rate_claim(store, plan, None) == []
        assert store.rate_limit_wait(plan.rates, since_s=time.monotonic() - began) is None

    def test_no_limits_reads_no_buckets(self, store):
        self.rate_make(3)
        assert len(self.rate_claim(store, ClaimPlan.even(1), None)) == 3
        assert not RateBucket.objects.using(self.alias).exists()
        assert store.rate_limit_wait(RateLimits()) is None
        assert store.rate_limit_rows(RateLimits()) == []
