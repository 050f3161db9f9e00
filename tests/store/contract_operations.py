"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

The operations the other parts reach only through the client or the worker, called here by
name on the store: finish-then-claim, retry budget and cron entry deletes, the metrics'
gauges and prune counts, jobs after parents, progress and checkpoints, worker rows, batches.
``test_interface_coverage.py`` checks that the suite calls every operation of the interface.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections

from jobqueue.errors import InvalidJobOption, JobNotFound, LeaseLost
from jobqueue.models import Batch, CronEntry, CronFire, Job, JobParent, RetryBudget, Worker
from jobqueue.states import JobState
from jobqueue.store.finishing import ack_outcome
from jobqueue.store.interface import ClaimRequest, NewJob
from tests.store.contract_dependencies import at

NOOP = "tests.testapp.jobs.noop"


def plain(queue: str = "q") -> NewJob:
    return NewJob(queue=queue, type=NOOP, payload_json="{}")


class OperationsContract:
    """Needs ``alias``, the ``store`` and ``budget`` fixtures and ``make``, ``row``, ``now``,
    ``cron_entry`` and ``fire`` of ``StoreContract``."""

    alias: str

    # -- finishing ---------------------------------------------------------------------------

    def test_finish_then_claim_records_the_outcomes_then_claims(self, store):
        first, second = (store.enqueue_or_get(plain("ftc"))[0] for _ in range(2))
        [held] = store.claim(["ftc"], "w1", 1, 30.0)
        assert held.id == first
        request = ClaimRequest(["ftc"], "w1", 5, 30.0)
        done = store.finish_then_claim([ack_outcome(held.id, held.lease_token, "7")], request)
        assert done.error is None
        assert done.states == {first: JobState.SUCCEEDED}
        assert [job.id for job in done.claimed or []] == [second]
        assert self.row(first)["state"] == JobState.SUCCEEDED
        assert self.row(first)["result"] == 7
        assert self.row(second)["state"] == JobState.LEASED

    # -- operator ------------------------------------------------------------------------------

    def test_cancel_many_cancels_the_waiting_asks_the_running_and_leaves_the_rest(self, store):
        ready, leased, done = (
            self.make().id,
            self.make(JobState.LEASED).id,
            self.make(JobState.SUCCEEDED).id,
        )
        acted = store.cancel_many([ready, leased, done, 10**12], by="ops")
        assert acted == {ready: JobState.CANCELLED, leased: JobState.LEASED}
        assert self.row(ready)["state"] == JobState.CANCELLED
        running = Job.objects.using(self.alias).get(id=leased)
        assert (running.state, running.cancel_requested_at is not None) == (JobState.LEASED, True)
        assert self.row(done)["state"] == JobState.SUCCEEDED
        # Asked once already: a second call leaves it alone.
        assert store.cancel_many([leased]) == {}

    # -- flows ---------------------------------------------------------------------------------

    def test_release_stranded_releases_a_follower_whose_key_job_ended_unseen(self, store):
        """The state an unlocked ordering-key enqueue can leave (issue 33): a waiting follower
        linked to its key's job, which ended without counting the link off."""
        parent = self.make(JobState.SUCCEEDED, ordering_key="k")
        follower = self.make(JobState.WAITING, ordering_key="k", waiting_for=1)
        behind = self.make(JobState.WAITING, ordering_key="k", waiting_for=1)
        JobParent.objects.using(self.alias).create(
            parent_id=parent.id, child_id=follower.id, run_on_parent_failure=True
        )
        JobParent.objects.using(self.alias).create(
            parent_id=follower.id, child_id=behind.id, run_on_parent_failure=True
        )
        assert store.release_stranded() == 1
        assert self.row(follower.id)["state"] == JobState.READY
        assert self.row(behind.id)["state"] == JobState.WAITING  # its key's job is live now
        assert store.release_stranded() == 0

    # -- limits --------------------------------------------------------------------------------

    def test_delete_retry_budgets_deletes_the_buckets_of_the_queues_named(self, store, budget):
        store.take_retry_tokens({"q": 1, "r": 1}, budget, now=at(0))
        assert store.delete_retry_budgets(["q", "never-retried"]) == 1
        rows = RetryBudget.objects.using(self.alias)
        assert list(rows.values_list("queue", flat=True)) == ["r"]

    # -- cron ----------------------------------------------------------------------------------

    def test_delete_cron_entries_deletes_them_with_their_fires_and_names_them(self, store):
        a = self.cron_entry(name="a")
        self.cron_entry(name="b")
        store.fire_cron(self.fire(a, at(0)))
        assert store.delete_cron_entries([a.id]) == ["a"]
        entries = CronEntry.objects.using(self.alias)
        assert list(entries.values_list("name", flat=True)) == ["b"]
        assert not CronFire.objects.using(self.alias).filter(entry_id=a.id).exists()
        assert store.delete_cron_entries([a.id]) == []

    # -- metrics -------------------------------------------------------------------------------

    def test_gauges_count_ready_scheduled_dead_and_waiting_jobs_per_queue(self, store):
        parent = self.make(queue="g")
        self.make(queue="g")
        self.make(JobState.SCHEDULED, queue="g", run_at=self.now() + timedelta(hours=1))
        self.make(JobState.DEAD, queue="g")
        store.enqueue_after(plain("g"), [parent.id])
        [gauge] = store.queue_gauges()
        assert (gauge.queue, gauge.ready, gauge.scheduled) == ("g", 2, 1)
        assert gauge.oldest_due is not None and not gauge.truncated
        assert store.dead_gauges() == {"g": 1}
        assert store.waiting_gauges() == {"g": 1}
        # Capped: exact up to the cap, the cap past it.
        [capped] = store.queue_gauges(cap=1)
        assert capped.ready == 1

    def test_prunable_by_state_counts_jobs_finished_longer_ago_than_kept(self, store):
        now = self.now()
        self.make(JobState.SUCCEEDED, finished_at=now - timedelta(days=2))
        self.make(JobState.SUCCEEDED, finished_at=now - timedelta(minutes=1))
        self.make(JobState.DEAD, finished_at=now - timedelta(minutes=1))
        counted = store.prunable_by_state({"succeeded": 86_400, "dead": 86_400}, None)
        assert counted.get("succeeded") == 1
        assert counted.get("dead", 0) == 0
        estimate = store.estimate_prunable("succeeded", 86_400)
        if connections[self.alias].vendor == "postgresql":
            assert isinstance(estimate, int) and estimate >= 0
        else:
            assert estimate is None

    # -- flows ---------------------------------------------------------------------------------

    def test_enqueue_after_waits_for_the_parents_and_refuses_a_missing_one(self, store):
        parent = self.make()
        child, created_at = store.enqueue_after(plain(), [parent.id])
        assert self.row(child)["state"] == JobState.WAITING
        assert self.row(child)["created_at"] == created_at
        with pytest.raises(InvalidJobOption) as refused:
            store.enqueue_after(plain(), [parent.id + 1000])
        assert refused.value.option == "after"
        assert Job.objects.using(self.alias).count() == 2

    def test_progress_and_checkpoints_are_written_under_the_lease(self, store):
        job = self.make(JobState.LEASED)
        store.record_progress(job.id, job.lease_token, 3, 10)
        row = self.row(job.id)
        assert (row["progress_done"], row["progress_total"]) == (3, 10)
        with pytest.raises(LeaseLost):
            store.record_progress(job.id, uuid.uuid4(), 4, 10)
        assert self.row(job.id)["progress_done"] == 3
        assert store.read_checkpoint(job.id) is None
        store.save_checkpoint(job.id, job.lease_token, '{"page": 5}')
        assert store.read_checkpoint(job.id) == {"page": 5}
        with pytest.raises(LeaseLost):
            store.save_checkpoint(job.id, uuid.uuid4(), '{"page": 6}')
        assert store.read_checkpoint(job.id) == {"page": 5}
        with pytest.raises(JobNotFound):
            store.read_checkpoint(job.id + 1000)

    def test_watch_returns_the_state_or_none_for_no_job(self, store):
        job = self.make(JobState.LEASED)
        assert store.watch(job.id) == JobState.LEASED
        assert store.watch(job.id + 1000) is None

    def test_batch_rows_count_their_members_and_an_empty_one_completes(self, store):
        batch_id = store.create_batch('{"k": 1}', "[]")
        batch = Batch.objects.using(self.alias).get(id=batch_id)
        assert (batch.payload, batch.callbacks, batch.total) == ({"k": 1}, [], 0)
        a, b = (store.enqueue_or_get(plain())[0] for _ in range(2))
        assert store.add_batch_members(batch_id, [a, b]) == 2
        assert store.add_batch_members(batch_id, [a]) == 0  # already a member
        assert store.add_batch_members(batch_id, []) == 0
        batch.refresh_from_db(using=self.alias)
        assert (batch.total, batch.pending) == (2, 2)
        assert self.row(a)["batch_id"] == batch_id
        store.close_empty_batch(batch_id, None, None)  # not empty: nothing
        batch.refresh_from_db(using=self.alias)
        assert (batch.completions, batch.completed_at) == (0, None)
        empty = store.create_batch("{}", "[]")
        store.close_empty_batch(empty, None, None)
        closed = Batch.objects.using(self.alias).get(id=empty)
        assert closed.completions == 1 and closed.completed_at is not None

    # -- workers -------------------------------------------------------------------------------

    def test_wake_queues_writes_nothing(self, store):
        """It only wakes listeners (PostgreSQL: ``test_notify.py``); no row changes."""
        job_id = self.make(queue="k").id
        before = Job.objects.using(self.alias).values("id", "state", "run_at").get(id=job_id)
        assert store.wake_queues(["k", "other"]) is None
        assert Job.objects.using(self.alias).values("id", "state", "run_at").get() == before

    def workers(self) -> dict[str, dict[str, Any]]:
        return {w["worker_id"]: w for w in Worker.objects.using(self.alias).values()}

    def test_worker_rows_are_registered_touched_pruned_and_deregistered(self, store):
        store.register_worker("w1", ["q", "r"], 4, 5.0)
        store.register_worker("w2", ["q"], 1, 5.0)
        w1 = self.workers()["w1"]
        assert (w1["queues"], w1["concurrency"], w1["heartbeat_interval_s"]) == (["q", "r"], 4, 5.0)
        store.touch_worker("w1", running_jobs=2, status="draining")
        store.set_listener_up("w1", True)
        w1 = self.workers()["w1"]
        assert (w1["running_jobs"], w1["status"], w1["listener_up"]) == (2, "draining", True)
        store.set_listener_up("w1", None)
        assert self.workers()["w1"]["listener_up"] is None
        silent = self.workers()["w2"]["last_seen_at"] - timedelta(hours=1)
        Worker.objects.using(self.alias).filter(worker_id="w2").update(last_seen_at=silent)
        assert store.prune_workers(600) == 1
        assert set(self.workers()) == {"w1"}
        store.deregister_worker("w1")
        assert self.workers() == {}
