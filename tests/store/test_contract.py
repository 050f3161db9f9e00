"""The store contract, written once: every store (PostgreSQL, generic ORM) must pass it.

``StoreContract`` holds the tests; ``TestPostgresStore`` and ``TestGenericStore`` bind it to a
database alias and a store class. Time is injected through the stores' ``now=`` arguments where a
scenario needs the clock to move; "now" below is the store's own clock (``now()`` of the test's
transaction on PostgreSQL, this process's clock on the generic store).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobqueue.errors import DuplicateJob, JobNotFound, LeaseLost
from jobqueue.models import CronEntry, CronFire, Job, LeaderLease
from jobqueue.states import DeadReason, JobState
from jobqueue.store import NewJob
from jobqueue.store.interface import Advance, Fire
from tests.conftest import requires_postgres
from tests.factories import ack, make_job, nack
from tests.store.contract_admin_reads import AdminReadsContract
from tests.store.contract_batches import BatchesContract
from tests.store.contract_concurrency import LimitsContract
from tests.store.contract_concurrency_gauges import GaugeContract
from tests.store.contract_cron_entries import CronEntryContract
from tests.store.contract_deaths import DeathContract, decide_retry_in
from tests.store.contract_dependencies import DependencyContract
from tests.store.contract_fairness import FairnessContract
from tests.store.contract_finish import FinishContract
from tests.store.contract_one_limit import OneLimitContract
from tests.store.contract_operations import OperationsContract
from tests.store.contract_outbox import OutboxContract
from tests.store.contract_parents import ParentsContract
from tests.store.contract_pauses import PauseContract
from tests.store.contract_rates import RateContract
from tests.store.contract_results import ResultsContract
from tests.store.contract_rollup import RollupContract

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = dt_timezone.utc

NOOP = "tests.testapp.jobs.noop"


def new_job(**overrides: Any) -> NewJob:
    fields: dict[str, Any] = {"queue": "q", "type": NOOP, "payload_json": "{}"}
    fields.update(overrides)
    return NewJob(**fields)


#: The reaper's own rule (``charge_expired``: ``retries.decide``) with a fixed backoff, seconds.
reap_decision = decide_retry_in


def enqueue(store: Any, job: NewJob) -> int:
    """Insert ``job`` and return its id, or the id of the live job holding its dedupe key."""
    return store.enqueue_or_get(job)[0]


class StoreContract(
    AdminReadsContract,
    DependencyContract,
    DeathContract,
    FinishContract,
    CronEntryContract,
    RollupContract,
    OutboxContract,
    OneLimitContract,
    PauseContract,
    GaugeContract,
    FairnessContract,
    LimitsContract,
    RateContract,
    ParentsContract,
    ResultsContract,
    BatchesContract,
    OperationsContract,
):
    """Contract tests; a subclass sets ``alias`` and ``store_class`` (a dotted path).

    The breaker, deferral and budget tests come from ``DependencyContract``; a dead worker
    process's hand-back from ``DeathContract``; recording outcomes (``finish_many``) from
    ``FinishContract``; the writes of cron entries from ``CronEntryContract``.
    """

    alias: str
    store_class: str

    @pytest.fixture
    def store(self):
        return import_string(self.store_class)(self.alias)

    # -- helpers -----------------------------------------------------------------------------

    def now(self) -> datetime:
        """Return the store's clock: the database's now() on PostgreSQL, else this process's."""
        conn = connections[self.alias]
        if conn.vendor == "postgresql":
            with conn.cursor() as cursor:
                cursor.execute("SELECT now()")
                return cursor.fetchone()[0]
        return timezone.now()

    def row(self, job_id: int) -> dict[str, Any]:
        return Job.objects.using(self.alias).values().get(id=job_id)

    def count(self) -> int:
        return Job.objects.using(self.alias).count()

    def make(self, state: str = JobState.READY, **overrides: Any) -> Job:
        return make_job(state, using=self.alias, queue=overrides.pop("queue", "q"), **overrides)

    # -- enqueue, claim, ack -----------------------------------------------------------------

    def test_enqueue_claim_ack_succeeds_with_result(self, store):
        before = self.now()
        job_id = enqueue(
            store,
            new_job(
                payload_json='{"a":[1,2],"s":"x"}',
                priority=3,
                tenant_id="t1",
                max_attempts=4,
                timeout_s=12.5,
            ),
        )
        row = self.row(job_id)
        assert row["state"] == JobState.READY
        assert row["attempts"] == 0
        assert row["payload"] == {"a": [1, 2], "s": "x"}
        assert (row["priority"], row["tenant_id"], row["max_attempts"], row["timeout_s"]) == (
            3,
            "t1",
            4,
            12.5,
        )
        assert row["run_at"] >= before

        [claimed] = store.claim(["q"], "w1", 10, 30.0)
        after = self.now()
        assert claimed.id == job_id
        assert claimed.job_type == NOOP
        assert claimed.payload == {"a": [1, 2], "s": "x"}
        assert claimed.attempt == 1
        assert (claimed.max_attempts, claimed.timeout_s) == (4, 12.5)
        assert (claimed.queue, claimed.priority, claimed.tenant_id) == ("q", 3, "t1")
        assert isinstance(claimed.lease_token, uuid.UUID)
        lease = timedelta(seconds=30)
        assert before + lease <= claimed.lease_until <= after + lease
        row = self.row(job_id)
        assert row["state"] == JobState.LEASED
        assert row["lease_token"] == claimed.lease_token
        assert row["lease_until"] == claimed.lease_until
        assert row["leased_by"] == "w1"
        assert row["attempts"] == 1
        assert row["started_at"] is not None

        ack(store, job_id, claimed.lease_token, json.dumps({"total": 3}))
        row = self.row(job_id)
        assert row["state"] == JobState.SUCCEEDED
        assert row["result"] == {"total": 3}
        assert row["finished_at"] is not None
        assert row["lease_token"] is None
        assert row["lease_until"] is None
        assert row["attempts"] == 1
        assert row["errors"] == []
        # A finished job is never claimed again.
        assert store.claim(["q"], "w1", 10, 30.0, now=after + timedelta(days=1)) == []

    def test_claim_increments_attempts_and_mints_a_fresh_token_each_time(self, store):
        job_id = self.make().id
        [first] = store.claim(["q"], "w1", 1, 30.0)
        assert first.attempt == 1
        state = nack(store, job_id, first.lease_token, {"message": "x"}, dead_reason=None)
        assert state == "scheduled"
        [second] = store.claim(["q"], "w2", 1, 30.0, now=self.now() + timedelta(seconds=1))
        assert second.id == job_id
        assert second.attempt == 2
        assert second.lease_token != first.lease_token
        row = self.row(job_id)
        assert (row["attempts"], row["lease_token"], row["leased_by"]) == (
            2,
            second.lease_token,
            "w2",
        )

    def test_claim_order_is_priority_desc_then_run_at_then_id(self, store):
        base = self.now() - timedelta(hours=1)
        a = self.make(priority=0, run_at=base + timedelta(seconds=10)).id
        b = self.make(priority=5, run_at=base + timedelta(seconds=50)).id
        c = self.make(priority=0, run_at=base).id
        d = self.make(priority=0, run_at=base + timedelta(seconds=10)).id  # ties a: id decides
        e = self.make(priority=-5, run_at=base - timedelta(hours=1)).id
        claimed = store.claim(["q"], "w1", 2, 30.0)
        assert [j.id for j in claimed] == [b, c]
        claimed = store.claim(["q"], "w1", 10, 30.0)
        assert [j.id for j in claimed] == [a, d, e]

    def test_claim_returns_a_batch_in_claim_order(self, store):
        base = self.now() - timedelta(hours=1)
        late = self.make(priority=0, run_at=base + timedelta(seconds=30)).id
        high = self.make(priority=9, run_at=base + timedelta(seconds=60)).id
        early = self.make(priority=0, run_at=base).id
        low = self.make(priority=-1, run_at=base - timedelta(hours=1)).id
        claimed = store.claim(["q"], "w1", 10, 30.0)
        assert [j.id for j in claimed] == [high, early, late, low]

    def test_claim_honours_max_jobs_and_queues(self, store):
        base = self.now() - timedelta(hours=1)
        a1 = self.make(queue="a", run_at=base).id
        b1 = self.make(queue="b", run_at=base + timedelta(seconds=1)).id
        a2 = self.make(queue="a", run_at=base + timedelta(seconds=2)).id
        c1 = self.make(queue="c", run_at=base + timedelta(seconds=3)).id
        b2 = self.make(queue="b", run_at=base + timedelta(seconds=4)).id
        a3 = self.make(queue="a", run_at=base + timedelta(seconds=5)).id
        assert [j.id for j in store.claim(["a", "b"], "w1", 4, 30.0)] == [a1, b1, a2, b2]
        assert [j.id for j in store.claim(["a", "b"], "w1", 4, 30.0)] == [a3]
        assert store.claim(["a", "b"], "w1", 4, 30.0) == []
        assert self.row(c1)["state"] == JobState.READY
        assert [j.id for j in store.claim(["c"], "w1", 4, 30.0)] == [c1]

    def test_has_work_is_whether_a_queue_holds_a_ready_or_scheduled_job(self, store):
        assert store.has_work(["q", "other"]) is False
        later = enqueue(store, new_job(queue="later", delay_s=300.0))
        assert self.row(later)["state"] == JobState.SCHEDULED
        assert store.has_work(["later"]) is True  # not due yet: still work to come
        assert store.has_work(["q"]) is False  # another queue's job is not this one's
        job_id = enqueue(store, new_job(queue="q"))
        assert store.has_work(["other", "q"]) is True
        [claimed] = store.claim(["q"], "w1", 10, 30.0)
        assert claimed.id == job_id
        assert store.has_work(["q"]) is False  # a leased job is no claim's to take
        ack(store, claimed.id, claimed.lease_token)
        assert store.has_work(["q"]) is False

    def test_future_run_at_is_not_claimable_until_due(self, store):
        run_at = self.now() + timedelta(minutes=5)
        job_id = enqueue(store, new_job(run_at=run_at))
        row = self.row(job_id)
        assert row["state"] == JobState.SCHEDULED
        assert row["run_at"] == run_at
        assert store.claim(["q"], "w1", 1, 30.0) == []
        assert store.claim(["q"], "w1", 1, 30.0, now=run_at - timedelta(microseconds=1)) == []
        [claimed] = store.claim(["q"], "w1", 1, 30.0, now=run_at)
        assert claimed.id == job_id
        assert claimed.lease_until == run_at + timedelta(seconds=30)

    def test_delay_sets_run_at_from_the_store_clock(self, store):
        before = self.now()
        job_id = enqueue(store, new_job(delay_s=90.0))
        after = self.now()
        row = self.row(job_id)
        assert row["state"] == JobState.SCHEDULED
        assert before + timedelta(seconds=90) <= row["run_at"] <= after + timedelta(seconds=90)

    def test_past_run_at_is_ready_and_claimable_at_once(self, store):
        job_id = enqueue(store, new_job(run_at=self.now() - timedelta(days=3)))
        assert self.row(job_id)["state"] == JobState.READY
        assert [j.id for j in store.claim(["q"], "w1", 1, 30.0)] == [job_id]

    # -- nack ------------------------------------------------------------------------------

    def test_nack_schedules_a_retry_after_the_delay_with_one_error_entry(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        entry = {"kind": "error", "attempt": 1, "type": "ValueError", "message": "nope"}
        before = self.now()
        state = nack(store, job_id, claimed.lease_token, entry, dead_reason=None, delay_s=5.0)
        after = self.now()
        assert state == JobState.SCHEDULED
        row = self.row(job_id)
        assert row["state"] == JobState.SCHEDULED
        assert before + timedelta(seconds=5) <= row["run_at"] <= after + timedelta(seconds=5)
        assert len(row["errors"]) == 1
        stored = row["errors"][0]
        assert {k: stored[k] for k in entry} == entry
        assert isinstance(stored["at"], str)
        assert row["attempts"] == 1
        assert (row["lease_token"], row["lease_until"], row["finished_at"]) == (None, None, None)
        assert row["dead_reason"] == ""

    def test_nack_with_retry_at_is_exact(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        retry_at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
        assert (
            nack(
                store,
                job_id,
                claimed.lease_token,
                {"message": "later"},
                dead_reason=None,
                retry_at=retry_at,
            )
            == JobState.SCHEDULED
        )
        assert self.row(job_id)["run_at"] == retry_at

    def test_nack_with_dead_reason_dead_letters(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        state = nack(
            store,
            job_id,
            claimed.lease_token,
            {"message": "never"},
            dead_reason=DeadReason.PERMANENT_ERROR,
        )
        assert state == JobState.DEAD
        row = self.row(job_id)
        assert row["state"] == JobState.DEAD
        assert row["dead_reason"] == DeadReason.PERMANENT_ERROR
        assert row["finished_at"] is not None
        assert [e["message"] for e in row["errors"]] == ["never"]
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert store.claim(["q"], "w1", 1, 30.0, now=self.now() + timedelta(days=1)) == []

    def test_extend_leases_returns_only_held_leases_and_extends_them(self, store):
        j1, j2, j3 = (self.make().id for _ in range(3))
        claimed = {j.id: j for j in store.claim(["q"], "w1", 3, 30.0)}
        ack(store, j2, claimed[j2].lease_token, "null")
        before = self.now()
        kept = store.extend_leases(
            [(j1, claimed[j1].lease_token), (j2, claimed[j2].lease_token), (j3, uuid.uuid4())],
            120.0,
        )
        after = self.now()
        assert set(kept) == {j1}
        until = kept[j1].lease_until
        assert kept[j1].cancel_requested is False
        assert before + timedelta(seconds=120) <= until <= after + timedelta(seconds=120)
        assert until > claimed[j1].lease_until
        assert self.row(j1)["lease_until"] == until
        assert self.row(j3)["lease_until"] == claimed[j3].lease_until
        assert self.row(j2)["state"] == JobState.SUCCEEDED
        assert store.extend_leases([], 120.0) == {}

    # -- fencing -----------------------------------------------------------------------------

    def test_stale_token_is_fenced_out_after_reap_and_reclaim(self, store):
        job_id = self.make().id
        [first] = store.claim(["q"], "w1", 1, 1.0)
        later = self.now() + timedelta(minutes=1)
        assert store.reap(reap_decision(0.0), now=later) == (1, 0)
        row = self.row(job_id)
        assert row["state"] == JobState.SCHEDULED
        assert row["run_at"] == later
        [second] = store.claim(["q"], "w2", 1, 30.0, now=later)
        assert second.id == job_id and second.attempt == 2
        snapshot = self.row(job_id)

        assert store.extend_leases([(job_id, first.lease_token)], 30.0) == {}
        with pytest.raises(LeaseLost) as excinfo:
            ack(store, job_id, first.lease_token, '"zombie"')
        assert excinfo.value.job_id == job_id
        with pytest.raises(LeaseLost):
            nack(store, job_id, first.lease_token, {"message": "zombie"}, dead_reason=None)
        with pytest.raises(LeaseLost):
            nack(
                store,
                job_id,
                first.lease_token,
                {"message": "zombie"},
                dead_reason=DeadReason.PERMANENT_ERROR,
            )
        with pytest.raises(LeaseLost):
            store.release(job_id, first.lease_token)
        with pytest.raises(LeaseLost):
            store.lease_info(job_id, first.lease_token)
        assert self.row(job_id) == snapshot

        ack(store, job_id, second.lease_token, '"w2"')
        row = self.row(job_id)
        assert (row["state"], row["attempts"], row["result"]) == (JobState.SUCCEEDED, 2, "w2")

    def test_stale_token_is_fenced_out_after_reap_before_any_reclaim(self, store):
        job_id = self.make().id
        [first] = store.claim(["q"], "w1", 1, 1.0)
        assert store.reap(reap_decision(60.0), now=self.now() + timedelta(minutes=1)) == (1, 0)
        snapshot = self.row(job_id)
        with pytest.raises(LeaseLost):
            ack(store, job_id, first.lease_token, "null")
        with pytest.raises(LeaseLost):
            nack(store, job_id, first.lease_token, {"message": "zombie"}, dead_reason=None)
        assert self.row(job_id) == snapshot

    def test_token_of_another_job_is_fenced_out(self, store):
        j1, j2 = self.make().id, self.make().id
        claimed = {j.id: j for j in store.claim(["q"], "w1", 2, 30.0)}
        with pytest.raises(LeaseLost):
            ack(store, j1, claimed[j2].lease_token, "null")
        assert self.row(j1)["state"] == JobState.LEASED

    def test_late_ack_succeeds_when_nobody_took_the_job(self, store):
        now = self.now()
        job_id = self.make(run_at=now - timedelta(hours=2)).id
        [claimed] = store.claim(["q"], "w1", 1, 30.0, now=now - timedelta(hours=1))
        assert claimed.lease_until < now
        assert [lease.id for lease in store.expired_leases(10)] == [job_id]
        ack(store, job_id, claimed.lease_token, '{"late": true}')
        row = self.row(job_id)
        assert (row["state"], row["attempts"], row["result"]) == (
            JobState.SUCCEEDED,
            1,
            {"late": True},
        )
        assert row["errors"] == []
        assert store.reap(reap_decision(), now=now + timedelta(hours=1)) == (0, 0)

    # -- reaper ------------------------------------------------------------------------------

    def test_reap_retries_with_attempts_left_and_dead_letters_when_spent(self, store):
        spent = self.make(max_attempts=1).id
        left = self.make(max_attempts=2).id
        live = self.make().id
        claimed = {j.id: j for j in store.claim(["q"], "w1", 2, 1.0)}
        assert set(claimed) == {spent, left}
        [live_claim] = store.claim(["q"], "w1", 1, 3600.0)
        later = self.now() + timedelta(minutes=1)
        assert store.reap(reap_decision(7.0), now=later) == (1, 1)

        row = self.row(spent)
        assert row["state"] == JobState.DEAD
        assert row["dead_reason"] == DeadReason.ATTEMPTS_EXHAUSTED
        assert row["finished_at"] is not None
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert row["attempts"] == 1
        [entry] = row["errors"]
        assert entry["kind"] == "lease_expired"
        assert entry["attempt"] == 1
        assert entry["worker"] == "w1"

        row = self.row(left)
        assert row["state"] == JobState.SCHEDULED
        assert row["run_at"] == later + timedelta(seconds=7)
        assert row["finished_at"] is None
        assert [e["kind"] for e in row["errors"]] == ["lease_expired"]

        # A lease that has not run out is not touched.
        row = self.row(live)
        assert (row["state"], row["lease_token"]) == (JobState.LEASED, live_claim.lease_token)
        assert store.reap(reap_decision(), now=later) == (0, 0)

    # -- release -----------------------------------------------------------------------------

    def test_release_returns_the_job_without_spending_the_attempt(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        store.release(job_id, claimed.lease_token)
        row = self.row(job_id)
        assert row["state"] == JobState.READY
        assert row["attempts"] == 0
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert [e["kind"] for e in row["errors"]] == ["released"]
        with pytest.raises(LeaseLost):
            ack(store, job_id, claimed.lease_token, "null")
        [again] = store.claim(["q"], "w2", 1, 30.0, now=self.now() + timedelta(seconds=1))
        assert again.attempt == 1

    # -- cancel ------------------------------------------------------------------------------

    @pytest.mark.parametrize("state", [JobState.READY, JobState.SCHEDULED, JobState.DEAD])
    def test_cancel_moves_a_cancellable_job_to_cancelled(self, store, state):
        job = self.make(state)
        assert store.cancel_or_request(job.id, "alice") == JobState.CANCELLED
        row = self.row(job.id)
        assert row["state"] == JobState.CANCELLED
        assert row["finished_at"] is not None
        entry = row["errors"][-1]  # who cancelled it, from which state
        assert (entry["kind"], entry["by"], entry["previous_state"], entry["message"]) == (
            "operator_cancel",
            "alice",
            state,
            "cancelled by operator",
        )
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert store.claim(["q"], "w1", 1, 30.0, now=self.now() + timedelta(days=1)) == []

    @pytest.mark.parametrize("outcome", ["ack", "nack_retry", "nack_dead", "release", "reap"])
    def test_cancel_of_a_leased_job_is_a_request_that_ends_it_cancelled(self, store, outcome):
        """DESIGN: leased --cancel--> cancel requested; whatever the run's outcome, it ends
        cancelled and is never claimed again. The heartbeat keeps the lease and reports it."""
        self.make()
        [job] = store.claim(["q"], "w1", 1, 30.0)
        assert store.cancel_or_request(job.id) == JobState.LEASED  # requested
        assert store.cancel_or_request(job.id) is None  # already requested: a no-op
        row = self.row(job.id)
        assert (row["state"], row["lease_token"]) == (JobState.LEASED, job.lease_token)
        assert row["cancel_requested_at"] is not None and row["finished_at"] is None
        kept = store.extend_leases([(job.id, job.lease_token)], 30.0)
        assert kept[job.id].cancel_requested is True
        if outcome == "ack":
            assert ack(store, job.id, job.lease_token, '"done"') == JobState.CANCELLED
        elif outcome == "nack_retry":
            state = nack(store, job.id, job.lease_token, {"kind": "error"}, dead_reason=None)
            assert state == JobState.CANCELLED
        elif outcome == "nack_dead":
            state = nack(
                store, job.id, job.lease_token, {"kind": "error"}, dead_reason="permanent_error"
            )
            assert state == JobState.CANCELLED
        elif outcome == "release":
            assert store.release(job.id, job.lease_token) == JobState.CANCELLED
        else:
            assert store.reap(reap_decision(), now=self.now() + timedelta(seconds=60)) == (0, 0)
        row = self.row(job.id)
        assert (row["state"], row["attempts"], row["dead_reason"]) == (
            JobState.CANCELLED,
            0 if outcome == "release" else 1,
            "",
        )
        assert row["finished_at"] is not None and row["lease_token"] is None
        if outcome == "ack":
            assert row["result"] == "done"
            assert row["errors"][-1]["kind"] == "cancelled"
        with pytest.raises(LeaseLost):
            ack(store, job.id, job.lease_token, "null")
        assert store.claim(["q"], "w1", 1, 30.0, now=self.now() + timedelta(days=1)) == []
        assert store.retry(job.id) is True
        assert self.row(job.id)["cancel_requested_at"] is None

    def test_cancel_or_request_says_what_happened(self, store):
        self.make()
        [running] = store.claim(["q"], "w1", 1, 30.0)
        waiting = self.make().id
        assert store.cancel_or_request(waiting) == JobState.CANCELLED
        assert store.cancel_or_request(waiting) is None
        assert store.cancel_or_request(running.id, "carol") == JobState.LEASED  # requested
        assert store.cancel_or_request(running.id) is None
        # One entry for the one request (who, from which state); the no-ops wrote none.
        assert [
            (e["kind"], e["by"], e["previous_state"], e["message"])
            for e in self.row(running.id)["errors"]
        ] == [("operator_cancel", "carol", "leased", "cancel requested by operator")]
        assert [e["kind"] for e in self.row(waiting)["errors"]] == ["operator_cancel"]
        with pytest.raises(JobNotFound):
            store.cancel_or_request(987654321)

    def test_cancel_of_a_cancelled_job_is_a_no_op(self, store):
        job_id = self.make(JobState.DEAD).id
        assert store.cancel_or_request(job_id) == JobState.CANCELLED
        snapshot = self.row(job_id)
        assert store.cancel_or_request(job_id) is None
        assert self.row(job_id) == snapshot

    def test_cancel_of_a_succeeded_job_is_refused(self, store):
        job_id = self.make(JobState.SUCCEEDED).id
        snapshot = self.row(job_id)
        assert store.cancel_or_request(job_id) is None
        assert self.row(job_id) == snapshot

    def test_cancel_of_an_unknown_job_raises(self, store):
        with pytest.raises(JobNotFound) as excinfo:
            store.cancel_or_request(987654321)
        assert excinfo.value.job_id == 987654321

    # -- operator retry ----------------------------------------------------------------------

    @pytest.mark.parametrize("state", [JobState.DEAD, JobState.CANCELLED])
    def test_retry_sends_a_dead_or_cancelled_job_back_to_ready(self, store, state):
        job = self.make(state, max_attempts=3)
        old_errors = self.row(job.id)["errors"]
        before = self.now()
        assert store.retry(job.id, "alice") is True
        after = self.now()
        row = self.row(job.id)
        assert row["state"] == JobState.READY
        assert row["attempts"] == 0
        assert row["finished_at"] is None
        assert row["dead_reason"] == ""
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert before <= row["run_at"] <= after
        assert row["errors"][: len(old_errors)] == old_errors
        assert len(row["errors"]) == len(old_errors) + 1
        entry = row["errors"][-1]
        assert entry["kind"] == "operator_retry"
        assert entry["previous_state"] == state
        assert entry["message"] == "retried by operator"
        assert entry["by"] == "alice"
        [claimed] = store.claim(["q"], "w1", 1, 30.0, now=after + timedelta(seconds=1))
        assert (claimed.id, claimed.attempt) == (job.id, 1)

    @pytest.mark.parametrize(
        "state", [JobState.SUCCEEDED, JobState.READY, JobState.SCHEDULED, JobState.LEASED]
    )
    def test_retry_of_a_job_that_is_not_dead_or_cancelled_is_refused(self, store, state):
        job_id = self.make(state).id
        snapshot = self.row(job_id)
        assert store.retry(job_id) is False
        assert self.row(job_id) == snapshot

    def test_retry_of_an_unknown_job_raises(self, store):
        with pytest.raises(JobNotFound):
            store.retry(987654321)

    def test_retry_refused_while_a_live_job_holds_the_dedupe_key(self, store):
        dead = self.make(JobState.DEAD, dedupe_key="order:42").id
        live = enqueue(store, new_job(dedupe_key="order:42"))
        assert live != dead
        snapshot = self.row(dead)
        with pytest.raises(DuplicateJob) as excinfo:
            store.retry(dead)
        assert (excinfo.value.queue, excinfo.value.dedupe_key) == ("q", "order:42")
        assert self.row(dead) == snapshot
        assert self.row(live)["state"] == JobState.READY
        # The caller's transaction is still usable.
        assert self.count() == 2

    # -- bulk operator retry -----------------------------------------------------------------

    def test_retry_many_retries_each_dead_or_cancelled_job_as_retry_does(self, store):
        dead = self.make(JobState.DEAD, max_attempts=3)
        cancelled = self.make(JobState.CANCELLED)
        others = {s: self.make(s).id for s in (JobState.READY, JobState.LEASED, JobState.SUCCEEDED)}
        snapshots = {job_id: self.row(job_id) for job_id in others.values()}
        old_errors = self.row(dead.id)["errors"]
        before = self.now()
        retried = store.retry_many([cancelled.id, dead.id, *others.values(), 987654321], "bob")
        after = self.now()
        assert retried == {dead.id, cancelled.id}
        for job_id, previous in ((dead.id, JobState.DEAD), (cancelled.id, JobState.CANCELLED)):
            row = self.row(job_id)
            assert row["state"] == JobState.READY
            assert (row["attempts"], row["finished_at"], row["dead_reason"]) == (0, None, "")
            assert (row["lease_token"], row["lease_until"], row["result"]) == (None, None, None)
            assert before <= row["run_at"] <= after
            entry = row["errors"][-1]
            assert (entry["kind"], entry["previous_state"], entry["message"], entry["by"]) == (
                "operator_retry",
                previous,
                "retried by operator",
                "bob",
            )
        assert self.row(dead.id)["errors"][:-1] == old_errors
        for job_id, snapshot in snapshots.items():
            assert self.row(job_id) == snapshot
        # A second call finds nothing left to retry.
        assert store.retry_many([dead.id, cancelled.id]) == set()
        assert store.retry_many([]) == set()

    def test_retry_many_leaves_a_job_whose_dedupe_key_a_live_job_holds(self, store):
        held = self.make(JobState.DEAD, dedupe_key="order:1").id
        free = self.make(JobState.DEAD, dedupe_key="order:2").id
        plain = self.make(JobState.DEAD).id
        live = enqueue(store, new_job(dedupe_key="order:1"))
        snapshot = self.row(held)
        assert store.retry_many([held, free, plain]) == {free, plain}
        assert self.row(held) == snapshot
        assert self.row(live)["state"] == JobState.READY
        assert self.row(free)["state"] == JobState.READY
        # The same key on another queue is another key.
        elsewhere = self.make(JobState.DEAD, queue="other", dedupe_key="order:1").id
        assert store.retry_many([elsewhere]) == {elsewhere}

    def test_retry_many_retries_one_of_several_jobs_sharing_a_dedupe_key(self, store):
        first = self.make(JobState.DEAD, dedupe_key="k").id
        second = self.make(JobState.CANCELLED, dedupe_key="k").id
        assert store.retry_many([second, first]) == {first}
        assert self.row(first)["state"] == JobState.READY
        assert self.row(second)["state"] == JobState.CANCELLED

    # -- run now -----------------------------------------------------------------------------

    def test_run_now_makes_a_scheduled_job_ready_and_keeps_its_attempts(self, store):
        job = self.make(JobState.SCHEDULED, attempts=2, errors=[{"kind": "error", "attempt": 2}])
        before = self.now()
        assert store.run_now(job.id, "alice") is True
        after = self.now()
        row = self.row(job.id)
        assert row["state"] == JobState.READY
        assert before <= row["run_at"] <= after
        assert row["attempts"] == 2
        # The history is kept and says who made it ready.
        kept, entry = row["errors"]
        assert kept == {"kind": "error", "attempt": 2}
        assert (entry["kind"], entry["by"], entry["previous_state"]) == (
            "operator_run_now",
            "alice",
            "scheduled",
        )
        [claimed] = store.claim(["q"], "w1", 1, 30.0, now=after + timedelta(seconds=1))
        assert (claimed.id, claimed.attempt) == (job.id, 3)

    @pytest.mark.parametrize(
        "state",
        [JobState.READY, JobState.LEASED, JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED],
    )
    def test_run_now_of_a_job_that_is_not_scheduled_is_refused(self, store, state):
        job_id = self.make(state).id
        snapshot = self.row(job_id)
        assert store.run_now(job_id) is False
        assert self.row(job_id) == snapshot

    def test_run_now_of_an_unknown_job_raises(self, store):
        with pytest.raises(JobNotFound):
            store.run_now(987654321)

    # -- prune -------------------------------------------------------------------------------

    def make_finished(self, state: str, age: timedelta, **overrides: Any) -> int:
        return self.make(state, finished_at=self.now() - age, **overrides).id

    def test_prune_deletes_the_given_finished_states_past_the_age_only(self, store):
        day = timedelta(days=1)
        old_ok = self.make_finished(JobState.SUCCEEDED, 8 * day)
        old_cancelled = self.make_finished(JobState.CANCELLED, 8 * day)
        young_ok = self.make_finished(JobState.SUCCEEDED, 6 * day)
        old_dead = self.make_finished(JobState.DEAD, 8 * day)
        live = [self.make(s).id for s in (JobState.READY, JobState.SCHEDULED, JobState.LEASED)]
        week = 7 * 86400.0
        assert store.count_prunable([JobState.SUCCEEDED, JobState.CANCELLED], week) == 2
        assert store.prune([JobState.SUCCEEDED, JobState.CANCELLED], week, 100) == 2
        remaining = set(Job.objects.using(self.alias).values_list("id", flat=True))
        assert remaining == {young_ok, old_dead, *live}
        assert old_ok not in remaining and old_cancelled not in remaining
        assert store.prune([JobState.SUCCEEDED, JobState.CANCELLED], week, 100) == 0
        # Time is the store's clock, injectable: two days on, the young job is old too.
        later = self.now() + 2 * day
        assert store.prune([JobState.SUCCEEDED], week, 100, now=later) == 1
        assert store.prune([JobState.DEAD], 30 * 86400.0, 100) == 0
        assert store.prune([JobState.DEAD], week, 100) == 1

    def test_prune_never_deletes_live_jobs_whatever_states_it_is_given(self, store):
        for state in (JobState.READY, JobState.SCHEDULED, JobState.LEASED):
            self.make(state, finished_at=self.now() - timedelta(days=30))
        live_states = [JobState.READY, JobState.SCHEDULED, JobState.LEASED]
        assert store.count_prunable(live_states, 0.0) == 0
        assert store.prune(live_states, 0.0, 100) == 0
        assert self.count() == 3

    def test_prune_deletes_at_most_limit_rows_per_call(self, store):
        for _ in range(5):
            self.make_finished(JobState.SUCCEEDED, timedelta(hours=2))
        assert store.count_prunable([JobState.SUCCEEDED], 3600.0) == 5
        assert store.prune([JobState.SUCCEEDED], 3600.0, 2) == 2
        assert store.prune([JobState.SUCCEEDED], 3600.0, 2) == 2
        assert store.prune([JobState.SUCCEEDED], 3600.0, 2) == 1
        assert store.prune([JobState.SUCCEEDED], 3600.0, 2) == 0
        assert self.count() == 0

    # -- dedupe ------------------------------------------------------------------------------

    def test_dedupe_returns_the_live_job_and_writes_nothing(self, store):
        first = enqueue(store, new_job(dedupe_key="k", payload_json='{"v":1}'))
        assert enqueue(store, new_job(dedupe_key="k", payload_json='{"v":2}')) == first
        assert self.count() == 1
        assert self.row(first)["payload"] == {"v": 1}
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        assert enqueue(store, new_job(dedupe_key="k")) == first  # leased is live too
        assert self.count() == 1
        nack(store, first, claimed.lease_token, {"message": "x"}, dead_reason=None, delay_s=60)
        assert enqueue(store, new_job(dedupe_key="k")) == first  # scheduled is live too
        assert self.count() == 1

    def test_dedupe_key_is_free_again_once_the_job_finished(self, store):
        first = enqueue(store, new_job(dedupe_key="k"))
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        ack(store, first, claimed.lease_token, "null")
        second = enqueue(store, new_job(dedupe_key="k"))
        assert second != first
        assert self.count() == 2
        assert self.row(second)["state"] == JobState.READY
        assert enqueue(store, new_job(dedupe_key="k")) == second

    def test_dedupe_key_is_per_queue(self, store):
        on_q = enqueue(store, new_job(dedupe_key="k"))
        on_other = enqueue(store, new_job(queue="other", dedupe_key="k"))
        assert on_other != on_q
        assert self.count() == 2
        assert enqueue(store, new_job(queue="other", dedupe_key="k")) == on_other

    def test_enqueue_or_get_says_whether_a_row_was_inserted(self, store):
        first, created = store.enqueue_or_get(new_job(dedupe_key="k"))
        assert created is True
        assert store.enqueue_or_get(new_job(dedupe_key="k")) == (first, False)
        other, created = store.enqueue_or_get(new_job())
        assert created is True and other != first
        assert self.count() == 2

    def test_enqueue_without_dedupe_key_always_inserts(self, store):
        ids = {enqueue(store, new_job()) for _ in range(3)}
        assert len(ids) == 3
        assert self.count() == 3

    def test_enqueue_many_inserts_in_input_order_with_every_field(self, store):
        before = self.now()
        run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
        results = store.enqueue_many(
            [
                new_job(payload_json='{"n":0}', priority=5, tenant_id="t", max_attempts=3),
                new_job(queue="other", payload_json='{"n":1}', run_at=run_at, timeout_s=2.5),
                new_job(payload_json='{"n":2}', delay_s=60.0),
            ]
        )
        after = self.now()
        assert [created for _, created in results] == [True, True, True]
        ids = [job_id for job_id, _ in results]
        assert len(set(ids)) == 3
        rows = [self.row(job_id) for job_id in ids]
        assert [r["payload"] for r in rows] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert [r["state"] for r in rows] == [
            JobState.READY,
            JobState.SCHEDULED,
            JobState.SCHEDULED,
        ]
        assert (rows[0]["priority"], rows[0]["tenant_id"], rows[0]["max_attempts"]) == (5, "t", 3)
        assert before <= rows[0]["run_at"] <= after
        assert (rows[1]["queue"], rows[1]["run_at"], rows[1]["timeout_s"]) == ("other", run_at, 2.5)
        minute = timedelta(seconds=60)
        assert before + minute <= rows[2]["run_at"] <= after + minute
        assert all(r["attempts"] == 0 and r["errors"] == [] for r in rows)
        assert store.enqueue_many([]) == []

    def test_enqueue_many_honours_dedupe_keys_live_and_within_the_batch(self, store):
        live = enqueue(store, new_job(dedupe_key="held", payload_json='{"v":"live"}'))
        results = store.enqueue_many(
            [
                new_job(dedupe_key="a", payload_json='{"v":1}'),
                new_job(dedupe_key="held", payload_json='{"v":2}'),
                new_job(payload_json='{"v":3}'),
                new_job(dedupe_key="a", payload_json='{"v":4}'),
                new_job(queue="other", dedupe_key="a", payload_json='{"v":5}'),
            ]
        )
        a, held, plain, a_again, other_a = results
        assert held == (live, False)
        assert a[1] is True and a_again == (a[0], False)
        assert plain[1] is True and other_a[1] is True
        assert len({a[0], plain[0], other_a[0], live}) == 4
        assert self.count() == 4
        assert self.row(a[0])["payload"] == {"v": 1}
        assert self.row(live)["payload"] == {"v": "live"}

    @pytest.mark.parametrize("chunk_bytes", [1, 400])
    def test_enqueue_many_in_small_chunks_keeps_ids_in_input_order_and_the_dedupe_rules(
        self, store, chunk_bytes
    ):
        # One job per statement (1 byte) or a few: the same answer as one statement.
        live = enqueue(store, new_job(dedupe_key="held"))
        jobs = [
            new_job(dedupe_key="z", payload_json='{"v":0}'),
            new_job(payload_json='{"v":1}', ordering_key="o"),
            new_job(dedupe_key="held", payload_json='{"v":2}'),
            new_job(dedupe_key="a", payload_json='{"v":3}', ordering_key="o"),
            new_job(dedupe_key="z", payload_json='{"v":4}'),
        ]
        results = store.enqueue_many(jobs, chunk_bytes=chunk_bytes)
        z, plain, held, a, z_again = results
        assert held == (live, False) and z_again == (z[0], False)
        created = [z[0], plain[0], a[0]]
        assert created == sorted(created)  # ids follow input order, whatever the chunks
        assert [self.row(i)["payload"]["v"] for i in created] == [0, 1, 3]
        assert self.count() == 4

    def test_enqueue_many_joins_the_callers_transaction(self, store):
        class Rollback(Exception):
            pass

        with pytest.raises(Rollback):
            with transaction.atomic(using=self.alias):
                store.enqueue_many([new_job(), new_job(dedupe_key="k")])
                raise Rollback
        assert self.count() == 0

    def test_enqueue_joins_the_callers_transaction(self, store):
        class Rollback(Exception):
            pass

        with pytest.raises(Rollback):
            with transaction.atomic(using=self.alias):
                enqueue(store, new_job())
                raise Rollback
        assert self.count() == 0

    # -- cron: leader lease ------------------------------------------------------------------

    def test_db_now_is_the_store_clock(self, store):
        assert abs((store.db_now() - self.now()).total_seconds()) < 5

    def test_elect_leader_takes_a_free_lease_then_renews_it_keeping_the_token(self, store):
        t0 = datetime(2030, 1, 1, tzinfo=UTC)
        first = store.elect_leader("scheduler", "A", None, 5.0, now=t0)
        assert (first.holder, first.token, first.now) == ("A", 1, t0)
        assert first.expires_at == t0 + timedelta(seconds=5)
        renewed = store.elect_leader("scheduler", "A", 1, 5.0, now=t0 + timedelta(seconds=3))
        assert (renewed.token, renewed.expires_at) == (1, t0 + timedelta(seconds=8))
        # Its holder renews even a lapsed lease nobody took, and keeps the token.
        late = store.elect_leader("scheduler", "A", 1, 5.0, now=t0 + timedelta(seconds=60))
        assert late.token == 1
        row = LeaderLease.objects.using(self.alias).get(name="scheduler")
        assert (row.holder, row.fencing_token, row.acquired_at) == ("A", 1, t0)

    def test_elect_leader_refuses_a_held_lease_and_takes_a_lapsed_one_with_a_new_token(self, store):
        t0 = datetime(2030, 1, 1, tzinfo=UTC)
        store.elect_leader("scheduler", "A", None, 5.0, now=t0)
        assert store.elect_leader("scheduler", "B", None, 5.0, now=t0) is None
        assert (
            store.elect_leader("scheduler", "B", None, 5.0, now=t0 + timedelta(seconds=4.9)) is None
        )
        # A forged token does not help another holder either.
        assert store.elect_leader("scheduler", "B", 1, 5.0, now=t0 + timedelta(seconds=1)) is None
        taken = store.elect_leader("scheduler", "B", None, 5.0, now=t0 + timedelta(seconds=5))
        assert (taken.holder, taken.token) == ("B", 2)
        # A, back from a pause, cannot renew with its old token; it is a candidate again.
        assert store.elect_leader("scheduler", "A", 1, 5.0, now=t0 + timedelta(seconds=6)) is None
        row = LeaderLease.objects.using(self.alias).get(name="scheduler")
        assert (row.holder, row.fencing_token) == ("B", 2)
        # Other lease names are independent.
        assert store.elect_leader("pruner", "A", None, 5.0, now=t0).token == 1

    def test_resign_leader_lets_the_next_candidate_take_over_at_once(self, store):
        lead = store.elect_leader("scheduler", "A", None, 300.0)
        assert store.resign_leader("scheduler", "B", lead.token) is False
        assert store.resign_leader("scheduler", "A", lead.token + 1) is False
        assert store.resign_leader("scheduler", "A", lead.token) is True
        taken = store.elect_leader(
            "scheduler", "B", None, 300.0, now=self.now() + timedelta(seconds=1)
        )
        assert (taken.holder, taken.token) == ("B", lead.token + 1)

    # -- cron: fires -------------------------------------------------------------------------

    def cron_entry(self, **overrides: Any) -> CronEntry:
        fields: dict[str, Any] = {
            "name": "tick",
            "cron_expr": "* * * * *",
            "queue": "q",
            "job_type": NOOP,
            "next_fire_at": datetime(2030, 1, 1, 12, 0, tzinfo=UTC),
        }
        fields.update(overrides)
        return CronEntry.objects.using(self.alias).create(**fields)

    def fire(self, entry: CronEntry, fire_time: datetime, **overrides: Any) -> Fire:
        job = new_job(payload_json=json.dumps({"fire_time": fire_time.isoformat()}), priority=4)
        fields: dict[str, Any] = {"entry_id": entry.id, "fire_time": fire_time, "job": job}
        fields.update(overrides)
        return Fire(**fields)

    def test_fire_cron_records_the_fire_and_inserts_the_same_job_enqueue_would(self, store):
        entry = self.cron_entry()
        t = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        lead = store.elect_leader("scheduler", "A", None, 300.0)
        fired = store.fire_cron(self.fire(entry, t, fired_by="A", leader=lead))
        assert fired.leading is True
        record = CronFire.objects.using(self.alias).get()
        assert (record.entry_id, record.fire_time, record.job_id) == (entry.id, t, fired.job_id)
        assert (record.fired_by, record.manual) == ("A", False)
        enqueued = enqueue(store, self.fire(entry, t).job)
        differing = {"id", "created_at", "run_at"}
        fired_row = {k: v for k, v in self.row(fired.job_id).items() if k not in differing}
        enqueued_row = {k: v for k, v in self.row(enqueued).items() if k not in differing}
        assert fired_row == enqueued_row
        assert fired_row["state"] == JobState.READY
        assert fired_row["payload"] == {"fire_time": "2030-01-01T12:00:00+00:00"}
        assert fired_row["priority"] == 4
        [claimed, _] = store.claim(["q"], "w", 2, 30.0)
        assert claimed.id == fired.job_id

    def test_fire_cron_for_a_fire_time_that_already_fired_writes_nothing(self, store):
        entry = self.cron_entry()
        t = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        first = store.fire_cron(self.fire(entry, t))
        again = store.fire_cron(self.fire(entry, t))
        assert (again.leading, again.job_id) == (True, None)
        assert self.count() == 1
        # Nor once the job has finished and been deleted (pruned): the record outlives it.
        Job.objects.using(self.alias).filter(id=first.job_id).delete()
        assert store.fire_cron(self.fire(entry, t)).job_id is None
        assert self.count() == 0
        assert CronFire.objects.using(self.alias).count() == 1
        # Another fire time of the entry, and the same time of another entry, do fire.
        assert store.fire_cron(self.fire(entry, t + timedelta(minutes=1))).job_id is not None
        other = self.cron_entry(name="other")
        assert store.fire_cron(self.fire(other, t)).job_id is not None
        assert self.count() == 2

    def test_fire_cron_with_a_stale_leader_token_writes_nothing(self, store):
        entry = self.cron_entry()
        t0 = datetime(2030, 1, 1, tzinfo=UTC)
        stale = store.elect_leader("scheduler", "A", None, 5.0, now=t0)
        store.elect_leader("scheduler", "B", None, 5.0, now=t0 + timedelta(seconds=10))
        fired = store.fire_cron(self.fire(entry, t0, leader=stale))
        assert (fired.leading, fired.job_id) == (False, None)
        assert self.count() == 0
        assert CronFire.objects.using(self.alias).count() == 0

    def test_fire_cron_commits_and_rolls_back_with_the_callers_transaction(self, store):
        class Rollback(Exception):
            pass

        entry = self.cron_entry()
        t = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        with pytest.raises(Rollback):
            with transaction.atomic(using=self.alias):
                assert store.fire_cron(self.fire(entry, t)).job_id is not None
                raise Rollback
        assert self.count() == 0
        assert CronFire.objects.using(self.alias).count() == 0
        # Nothing of the rolled-back fire remains, so the fire time can still fire.
        assert store.fire_cron(self.fire(entry, t)).job_id is not None

    def test_fire_cron_ahead_of_its_time_is_scheduled_for_the_fire_time(self, store):
        entry = self.cron_entry()
        ahead = self.now() + timedelta(hours=1)
        fire = self.fire(entry, ahead)
        fire = Fire(
            **{
                **{f: getattr(fire, f) for f in ("entry_id", "fire_time", "fired_by")},
                "job": new_job(run_at=ahead),
                "manual": True,
            }
        )
        job_id = store.fire_cron(fire).job_id
        row = self.row(job_id)
        assert (row["state"], row["run_at"]) == (JobState.SCHEDULED, ahead)
        assert store.claim(["q"], "w", 1, 30.0) == []
        assert CronFire.objects.using(self.alias).get().manual is True

    # -- cron: due entries and advancing -----------------------------------------------------

    def test_due_cron_entries_are_the_enabled_due_or_unset_ones_soonest_first(self, store):
        t = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        later = self.cron_entry(name="later", next_fire_at=t + timedelta(seconds=30))
        due = self.cron_entry(name="due", next_fire_at=t, payload={"a": 1}, priority=-3)
        unset = self.cron_entry(name="unset", next_fire_at=None, timezone="Europe/Berlin")
        self.cron_entry(name="off", next_fire_at=t - timedelta(days=1), enabled=False)
        self.cron_entry(name="future", next_fire_at=t + timedelta(seconds=31))
        entries = store.due_cron_entries(t + timedelta(seconds=30))
        assert [e.name for e in entries] == ["unset", "due", "later"]
        got = entries[1]
        assert (got.id, got.cron_expr, got.queue, got.job_type) == (due.id, "* * * * *", "q", NOOP)
        assert (got.payload, got.priority, got.missed, got.missed_cap) == ({"a": 1}, -3, "once", 10)
        assert (got.next_fire_at, got.last_fired_at) == (t, None)
        assert entries[0].timezone == "Europe/Berlin" and entries[0].id == unset.id
        assert entries[2].id == later.id
        assert [e.name for e in store.due_cron_entries(t + timedelta(seconds=30), limit=1)] == [
            "unset"
        ]

    def advance(self, entry: CronEntry, **overrides: Any) -> Advance:
        fields: dict[str, Any] = {
            "entry_id": entry.id,
            "expected": entry.next_fire_at,
            "cron_expr": entry.cron_expr,
            "timezone": entry.timezone,
        }
        fields.update(overrides)
        if "next_fire_at" not in fields:
            fields["next_fire_at"] = entry.next_fire_at + timedelta(minutes=1)
        return Advance(**fields)

    def test_advance_cron_is_a_compare_and_set_on_the_planned_state(self, store):
        entry = self.cron_entry()
        t = entry.next_fire_at
        assert store.advance_cron(self.advance(entry, last_fired_at=t, skipped=2)) is True
        entry.refresh_from_db(using=self.alias)
        assert (entry.next_fire_at, entry.last_fired_at, entry.skipped_fires) == (
            t + timedelta(minutes=1),
            t,
            2,
        )
        # Planned from the old next_fire_at (another scheduler moved it): refused.
        assert store.advance_cron(self.advance(entry, expected=t)) is False
        # An older fire time never moves last_fired_at back.
        assert store.advance_cron(
            self.advance(entry, last_fired_at=t - timedelta(minutes=5), skipped=1)
        )
        entry.refresh_from_db(using=self.alias)
        assert (entry.last_fired_at, entry.skipped_fires) == (t, 3)
        # Edited (expression or zone) or disabled since it was read: refused.
        assert store.advance_cron(self.advance(entry, cron_expr="*/5 * * * *")) is False
        assert store.advance_cron(self.advance(entry, timezone="Europe/Berlin")) is False
        CronEntry.objects.using(self.alias).filter(id=entry.id).update(enabled=False)
        assert store.advance_cron(self.advance(entry)) is False

    def test_advance_cron_from_unset_and_fenced_by_the_leader_lease(self, store):
        entry = self.cron_entry(next_fire_at=None)
        t = datetime(2030, 1, 1, tzinfo=UTC)
        assert store.advance_cron(self.advance(entry, expected=None, next_fire_at=t)) is True
        entry.refresh_from_db(using=self.alias)
        stale = store.elect_leader("scheduler", "A", None, 5.0, now=t)
        store.elect_leader("scheduler", "B", None, 5.0, now=t + timedelta(seconds=10))
        assert store.advance_cron(self.advance(entry, leader=stale)) is False
        current = store.elect_leader("scheduler", "B", 2, 5.0, now=t + timedelta(seconds=11))
        assert store.advance_cron(self.advance(entry, leader=current)) is True

    def test_prune_cron_fires_deletes_old_records_but_each_entrys_latest(self, store):
        a, b = self.cron_entry(name="a"), self.cron_entry(name="b")
        t = datetime(2030, 1, 1, tzinfo=UTC)
        for minutes in (0, 1, 2, 60):
            store.fire_cron(self.fire(a, t + timedelta(minutes=minutes)))
        store.fire_cron(self.fire(b, t))
        assert store.prune_cron_fires(t + timedelta(minutes=30)) == 3
        left = sorted(CronFire.objects.using(self.alias).values_list("entry__name", "fire_time"))
        assert left == [("a", t + timedelta(minutes=60)), ("b", t)]
        assert store.prune_cron_fires(t + timedelta(days=1)) == 0
        # Pruning records never touches jobs.
        assert self.count() == 5


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresStore(StoreContract):
    alias = "default"
    store_class = "jobqueue.store.postgres.PostgresStore"

    def test_the_claim_reads_the_pauses_within_its_one_statement(
        self, store, django_assert_num_queries, no_declared_limits
    ):
        self.pause_make("mail")
        store.pause("queue", "mail", "alice")
        with django_assert_num_queries(1):
            assert self.claim_all(store, ["mail"]) == set()


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericStore(StoreContract):
    alias = "sqlite"
    store_class = "jobqueue.store.sqlite.GenericStore"
