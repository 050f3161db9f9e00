"""Store contract for the per-minute rollup (mixed into StoreContract: both stores).

``finish_many`` adds every recorded run to its (minute, queue, type) row in the writer's shard:
outcome counts by the recorded state, the reaper's lease expirations, and the pickup/run
histograms (cumulative ``le`` counts, count, sum); a lease no longer held adds nothing; readers
sum the shards exactly. ``sample_depth`` writes each queue's claimable count and lag once a
minute; ``prune_rollups`` deletes rows of old minutes.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from jobqueue.models import Rollup
from jobqueue.models.metrics import BUCKETS, ROLLUP_SHARDS, bucket_columns
from jobqueue.ops.rates import WINDOW_MINUTES
from jobqueue.ops.rates import families as rate_families
from jobqueue.ops.rollup import window_totals
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

T = datetime(2030, 1, 2, 12, 0, 30, tzinfo=UTC)
MINUTE = datetime(2030, 1, 2, 12, 0, tzinfo=UTC)
A = "tests.testapp.jobs.noop"
B = "tests.testapp.jobs.fail"


def cumulative(histogram: str, seconds: list[float]) -> dict[str, int]:
    """Return the ``le`` columns ``seconds`` fill (what the rollup must hold)."""
    return {
        name: sum(1 for s in seconds if s <= le)
        for name, le in zip(bucket_columns(histogram), BUCKETS, strict=True)
    }


class RollupContract:
    """Needs the host contract's ``make``, ``alias`` and ``store`` fixture."""

    def rollup(self, queue: str, job_type: str, minute: datetime = MINUTE) -> dict[str, Any]:
        return (
            Rollup.objects.using(self.alias)
            .values()
            .get(  # type: ignore[attr-defined]
                minute=minute, queue=queue, type=job_type
            )
        )

    def test_finish_many_adds_each_recorded_run_to_its_minute_row(self, store):
        fast = [self.make(type=A, run_at=T - timedelta(seconds=0.2)).id for _ in range(4)]
        slow = [self.make(type=B, run_at=T - timedelta(seconds=20)).id for _ in range(2)]
        held = {j.id: j.lease_token for j in store.claim(["q"], "w1", 10, 30.0, now=T)}
        assert set(held) == {*fast, *slow}
        done = T + timedelta(seconds=3)

        def outcome(job_id: int, state: str, **kw: Any) -> RunOutcome:
            return RunOutcome(job_id=job_id, lease_token=held[job_id], state=state, **kw)

        error = {"kind": "error", "attempt": 1, "type": "ValueError", "message": "m"}
        first = [
            outcome(fast[0], JobState.SUCCEEDED),
            outcome(fast[1], JobState.SUCCEEDED),
            outcome(fast[2], JobState.SCHEDULED, error=error, delay_s=5.0),
            outcome(slow[0], JobState.DEAD, error=error, dead_reason=DeadReason.PERMANENT_ERROR),
            outcome(slow[1], JobState.SUCCEEDED),
        ]
        assert len(store.finish_many(first, now=done)) == 5
        # A second batch in the same minute adds to the row; a stale lease adds nothing.
        again = [outcome(fast[3], JobState.SUCCEEDED), outcome(fast[0], JobState.SUCCEEDED)]
        assert list(store.finish_many(again, now=done)) == [fast[3]]

        a = self.rollup("q", A)
        assert (a["succeeded"], a["retried"], a["dead"], a["cancelled"]) == (3, 1, 0, 0)
        assert (a["pickup_count"], a["run_count"]) == (4, 4)
        assert a["pickup_sum_s"] == pytest.approx(0.8)
        assert a["run_sum_s"] == pytest.approx(12.0)
        assert {k: a[k] for k in bucket_columns("pickup")} == cumulative("pickup", [0.2] * 4)
        assert {k: a[k] for k in bucket_columns("run")} == cumulative("run", [3.0] * 4)
        b = self.rollup("q", B)
        assert (b["succeeded"], b["retried"], b["dead"], b["cancelled"]) == (1, 0, 1, 0)
        assert b["pickup_sum_s"] == pytest.approx(40.0)
        assert {k: b[k] for k in bucket_columns("pickup")} == cumulative("pickup", [20.0] * 2)
        assert (b["ready"], b["lag_s"]) == (None, None)
        assert Rollup.objects.using(self.alias).count() == 2

    def test_a_cancel_requested_while_running_counts_as_cancelled(self, store):
        job_id = self.make(type=A, run_at=T - timedelta(seconds=1)).id
        [claimed] = store.claim(["q"], "w1", 1, 30.0, now=T)
        assert store.cancel_or_request(job_id) == JobState.LEASED
        ok = RunOutcome(job_id=job_id, lease_token=claimed.lease_token, state=JobState.SUCCEEDED)
        assert store.finish_many([ok], now=T + timedelta(seconds=1)) == {job_id: JobState.CANCELLED}
        row = self.rollup("q", A)
        assert (row["succeeded"], row["cancelled"], row["run_count"]) == (0, 1, 1)

    def test_two_shards_of_one_minute_sum_exactly(self, store):
        ids = [self.make(type=A, run_at=T - timedelta(seconds=1)).id for _ in range(3)]
        held = {j.id: j.lease_token for j in store.claim(["q"], "w1", 10, 30.0, now=T)}
        done = T + timedelta(seconds=2)

        def ok(job_id: int) -> RunOutcome:
            return RunOutcome(job_id=job_id, lease_token=held[job_id], state=JobState.SUCCEEDED)

        assert len(store.finish_many([ok(ids[0])], now=done)) == 1
        mine = self.rollup("q", A)["shard"]
        assert 0 <= mine < ROLLUP_SHARDS
        # Another process's slot of the same minute, queue and type (written as its batch would).
        other = (mine + 1) % ROLLUP_SHARDS
        Rollup.objects.using(self.alias).create(
            minute=MINUTE, queue="q", type=A, shard=other, succeeded=5, dead=2, expired=2,
            pickup_count=7, pickup_sum_s=7.0, run_count=7, run_sum_s=1.0,
        )  # fmt: skip
        assert len(store.finish_many([ok(ids[1]), ok(ids[2])], now=done)) == 2

        rows = Rollup.objects.using(self.alias).filter(minute=MINUTE, queue="q", type=A)
        assert sorted(rows.values_list("shard", "succeeded")) == sorted([(mine, 3), (other, 5)])
        [total] = window_totals(MINUTE, MINUTE + timedelta(minutes=1), self.alias)
        assert (total["succeeded"], total["dead"], total["expired"]) == (8, 2, 2)
        assert (total["pickup_count"], total["run_count"]) == (10, 10)
        assert total["pickup_sum_s"] == pytest.approx(10.0)
        assert total["pickup_le_05"] == 3  # 1.0 s bucket: this process's three runs

    def test_the_reapers_expired_leases_count_per_minute_and_in_the_metric(self, store):
        for _ in range(2):
            self.make(type=A, run_at=T - timedelta(seconds=1))
        acked = self.make(queue="q2", type=A, run_at=T - timedelta(seconds=1)).id
        store.claim(["q"], "w1", 10, 5.0, now=T)
        [kept] = store.claim(["q2"], "w1", 10, 5.0, now=T)
        ok = RunOutcome(job_id=acked, lease_token=kept.lease_token, state=JobState.SUCCEEDED)
        assert store.finish_many([ok], now=T + timedelta(seconds=1)) == {acked: "succeeded"}
        # The leases ran out at T + 5 s; the reaper returns both to the queue at T + 10 s.
        assert store.reap(now=T + timedelta(seconds=10)) == (2, 0)
        row = self.rollup("q", A)
        assert (row["expired"], row["retried"], row["succeeded"]) == (2, 2, 0)
        assert self.rollup("q2", A)["expired"] == 0
        later = MINUTE + timedelta(minutes=WINDOW_MINUTES - 1, seconds=10)
        [samples] = [
            f.samples for f in rate_families(later, self.alias)
            if f.name == "jobqueue_lease_expirations_total"
        ]  # fmt: skip
        assert samples == [({"queue": "q"}, 2.0), ({"queue": "q2"}, 0.0)]

    def test_sample_depth_once_a_minute_per_queue_and_in_total(self, store):
        self.make(queue="q1", run_at=T - timedelta(seconds=60))
        self.make(queue="q1", run_at=T - timedelta(seconds=10))
        self.make(queue="q2", run_at=T - timedelta(seconds=5))
        self.make(JobState.SCHEDULED, queue="q2", run_at=T + timedelta(seconds=100))
        self.make(JobState.LEASED, queue="q3")

        assert store.sample_depth(now=T) == 3
        samples = {
            (r.queue, r.ready, r.lag_s)
            for r in Rollup.objects.using(self.alias).filter(minute=MINUTE, type="")
        }
        assert samples == {("q1", 2, 60.0), ("q2", 1, 5.0), ("", 3, 60.0)}
        self.make(queue="q2", run_at=T - timedelta(seconds=1))
        # Sampled already this minute: nothing is counted or written again.
        assert store.sample_depth(now=T + timedelta(seconds=20)) == 0
        assert self.rollup("q2", "")["ready"] == 1
        assert store.sample_depth(now=T + timedelta(seconds=60)) == 3
        assert self.rollup("q2", "", MINUTE + timedelta(minutes=1))["ready"] == 2

    def test_prune_rollups_deletes_only_old_minutes(self, store):
        for hours in (3, 2.5, 1, 0):
            store.sample_depth(now=T - timedelta(hours=hours))
        assert Rollup.objects.using(self.alias).count() == 4
        assert store.prune_rollups(2 * 3600.0, now=T) == 2
        left = Rollup.objects.using(self.alias).order_by("minute").values_list("minute", flat=True)
        assert list(left) == [MINUTE - timedelta(hours=1), MINUTE]
        assert store.prune_rollups(2 * 3600.0, limit=1, now=T) == 0
