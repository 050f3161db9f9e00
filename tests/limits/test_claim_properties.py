"""The two-level claim's promises over random mixes, with claims racing on real connections.

Each case draws (from a seeded generator, printed on failure) a mix of tenants with and without
caps and weights, jobs with and without concurrency keys of random limits, ordering keys, a
paused type, a rate-limited type; some cases have more tenants than one claim reads (the lane
window, LANE_WINDOW); then four threads claim, ack, fail (nack with an immediate retry) and
"die" (their leases pushed past expiry and reaped) at random until every job has finished.
Checked after every claim, by the database's own counts: no tenant over its cap, no key over its
limit, no paused type leased, ordering keys one at a time; at the end: every job succeeded
exactly once (one successful run per job, from the runs the threads recorded), ordering keys in
enqueue order, and the limited type claimed no more often than its bucket allows (its burst
plus its rate times the span of the claims, by the database clock).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

import jobqueue
from jobqueue.limits.fairness import ConcurrencyLimits, QueueSelector, TenantCaps
from jobqueue.models import Job, Lane
from jobqueue.settings.rates import parse_rate_limits
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.interface import ExpiredLease, ReapDecision
from jobqueue.store.postgres.jobs import LANE_WINDOW
from tests.conftest import requires_postgres
from tests.factories import ack, make_job, nack

pytestmark = [requires_postgres(), pytest.mark.django_db(transaction=True)]

NOOP = "tests.testapp.jobs.noop"
PAUSED = "tests.testapp.jobs.add"
LIMITED = "tests.testapp.jobs.call_partner"
#: The limited type's bucket: 8 tokens a second, at most 2 at once (a quarter of the 120 jobs,
#: and their retries, take it several seconds: unlimited, they would all be claimed in one or two).
RATE, BURST = 8.0, 2


def _violations(caps: dict[str, int], limits: dict[str, int]) -> list[str]:
    """Return what the leased rows break right now (empty: nothing)."""
    leased = list(
        Job.objects.filter(state=JobState.LEASED).values_list(
            "tenant_id", "concurrency_key", "ordering_key", "type"
        )
    )
    out = []
    for tenant, n in Counter(t for t, _, _, _ in leased).items():
        if tenant in caps and n > caps[tenant]:
            out.append(f"tenant {tenant} has {n} leased, cap {caps[tenant]}")
    for key, n in Counter(k for _, k, _, _ in leased if k).items():
        if n > limits[key]:
            out.append(f"key {key} has {n} leased, limit {limits[key]}")
    for key, n in Counter(o for _, _, o, _ in leased if o).items():
        if n > 1:
            out.append(f"ordering key {key} has {n} leased")
    if any(t == PAUSED for _, _, _, t in leased):
        out.append("a job of the paused type is leased")
    return out


def retry_at_once(lease: ExpiredLease) -> ReapDecision:
    """The reaper's decision in these runs: retry now (the backoff is not what is tested)."""
    return ReapDecision(id=lease.id, lease_token=lease.lease_token, dead=False, delay_s=0.0)


@pytest.mark.parametrize("seed", [11, 23, 37, 41, 53, 67, 79, 97])
def test_no_limit_is_ever_passed_and_every_job_runs_once(seed):
    rng = random.Random(seed)
    # Half the cases have more tenants than a claim reads: the window must still serve them all.
    many = seed % 2 == 1
    tenants = [
        f"t{n}"
        for n in range(
            rng.randint(LANE_WINDOW + 8, LANE_WINDOW + 40) if many else rng.randint(2, 6)
        )
    ]
    caps = {t: rng.randint(1, 3) for t in tenants if rng.random() < 0.6}
    weights = {t: float(rng.choice([1, 2, 3])) for t in tenants}
    limits = {f"k{n}": rng.randint(1, 2) for n in range(3)}
    jobs: list[int] = []
    ordered: dict[str, list[int]] = defaultdict(list)
    for n in range(120):
        fields = {"tenant_id": rng.choice(tenants), "queue": rng.choice(["a", "b"])}
        roll = rng.random()
        if roll < 0.3:
            key = rng.choice(list(limits))
            fields |= {"concurrency_key": key, "concurrency_limit": limits[key]}
        elif roll < 0.4:
            fields["ordering_key"] = rng.choice(["o1", "o2"])
        # (A paused job with an ordering key would rightly hold its key's later jobs forever.)
        paused = rng.random() < 0.05 and "ordering_key" not in fields
        limited = not paused and rng.random() < 0.25
        fields["type"] = PAUSED if paused else LIMITED if limited else NOOP
        job = make_job(
            JobState.READY,
            run_at=timezone.now() - timedelta(minutes=5, seconds=-n),
            max_attempts=100,  # failures and deaths are drawn at random: never run out
            **fields,
        )
        jobs.append(job.id)
        if "ordering_key" in fields:
            ordered[fields["ordering_key"]].append(job.id)
    jobqueue.pause_type(PAUSED, by="test")

    rates = parse_rate_limits({"type": {LIMITED: {"rate": f"{RATE:g}/s", "burst": BURST}}})
    limited_claims: list[float] = []  # each claim of a limited job: its time (database clock)
    successes: Counter[int] = Counter()
    started: dict[str, list[int]] = defaultdict(list)
    problems: list[str] = []
    lock = threading.Lock()
    store = get_store()

    def worker(wid: str, wseed: int) -> None:
        local = random.Random(wseed)
        selector = QueueSelector(
            ["a", "b"],
            caps=TenantCaps(overrides=caps, weights=weights),
            limits=ConcurrencyLimits(),
            rates=rates,
        )
        try:
            for _ in range(5000):
                claimed = store.claim(
                    ["a", "b"], wid, local.randint(1, 5), 30.0, plan=selector.plan()
                )
                if not claimed:
                    time.sleep(0.01)  # the limited type's bucket refills: as a worker's poll
                selector.claimed(claimed)
                found = _violations(caps, limits)
                with lock:
                    problems.extend(found)
                    limited_claims.extend(
                        (j.lease_until - timedelta(seconds=30.0)).timestamp()
                        for j in claimed
                        if j.job_type == LIMITED
                    )
                    for job in claimed:
                        for key, ids in ordered.items():
                            if job.id in ids:
                                started[key].append(job.id)
                for job in claimed:
                    fate = local.random()
                    if fate < 0.75:
                        if ack(store, job.id, job.lease_token) == JobState.SUCCEEDED:
                            with lock:
                                successes[job.id] += 1
                    elif fate < 0.9:
                        nack(
                            store,
                            job.id,
                            job.lease_token,
                            {"message": "x"},
                            dead_reason=None,
                            retry_at=timezone.now() - timedelta(seconds=1),
                        )
                    else:  # the worker "dies": its lease runs out and the reaper takes it
                        Job.objects.filter(id=job.id, lease_token=job.lease_token).update(
                            lease_until=timezone.now() - timedelta(seconds=1)
                        )
                        store.reap(decide=retry_at_once)
                if (
                    not Job.objects.filter(
                        state__in=[JobState.READY, JobState.SCHEDULED, JobState.LEASED]
                    )
                    .exclude(type=PAUSED)
                    .exists()
                ):
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            with lock:
                problems.append(f"{wid} raised {exc!r}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(f"w{n}", seed * 10 + n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not any(thread.is_alive() for thread in threads), f"seed {seed}: a claimer hung"
    assert problems == [], f"seed {seed}: {problems[:5]}"
    paused = set(Job.objects.filter(type=PAUSED).values_list("id", flat=True))
    runnable = [j for j in jobs if j not in paused]
    assert Job.objects.filter(id__in=runnable, state=JobState.SUCCEEDED).count() == len(runnable), (
        f"seed {seed}: not every job succeeded"
    )
    assert all(successes[j] == 1 for j in runnable), f"seed {seed}: a job succeeded twice"
    assert set(Job.objects.filter(id__in=paused).values_list("state", flat=True)) <= {
        JobState.READY
    }
    for key, ids in ordered.items():
        runnable_ids = [j for j in ids if j not in paused]
        firsts = list(dict.fromkeys(j for j in started[key] if j in runnable_ids))
        assert firsts == runnable_ids, f"seed {seed}: ordering key {key} out of order"
    assert Lane.objects.exists()  # several tenants were served: the lanes hold their times
    if limited_claims:
        span = max(limited_claims) - min(limited_claims)
        assert len(limited_claims) <= BURST + RATE * span + 1, (
            f"seed {seed}: {len(limited_claims)} claims of the limited type in {span:.3f} s"
        )


@pytest.mark.django_db
def test_a_lane_set_far_behind_keeps_at_most_1000_jobs_of_credit():
    """A lane's virtual time set far behind (a bad restore, a hand edit) buys it at most 1,000
    jobs before the others are served again: the claim raises it to 1,000 behind the front."""
    for tenant in ("A", "B"):
        for n in range(10):
            make_job(JobState.READY, queue="q", tenant_id=tenant,
                     run_at=timezone.now() - timedelta(minutes=1, seconds=-n))  # fmt: skip
    store = get_store()
    selector = QueueSelector(["q"])
    store.claim(["q"], "w1", 2, 30.0, plan=selector.plan())  # one each: both lanes have rows
    Lane.objects.filter(tenant_id="A").update(vtime=-1e12)
    Lane.objects.filter(tenant_id="B").update(vtime=1e6)
    [job] = store.claim(["q"], "w1", 1, 30.0, plan=selector.plan())
    assert job.tenant_id == "A"
    assert Lane.objects.get(tenant_id="A").vtime == 1e6 - 1000 + 1
