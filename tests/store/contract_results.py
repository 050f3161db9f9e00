"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/flows/test_results.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

import jobqueue
from jobqueue.errors import InvalidJobOption, InvalidPayload, JobNotFound, JobQueueError, LeaseLost
from jobqueue.models import Job
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState
from jobqueue.store.finishing import ack_outcome
from jobqueue.worker.context import JobContext
from tests.conftest import wait_for
from tests.factories import make_job

#: These tests commit (the store's own transactions are under test).
TRANSACTIONAL = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)


def reads_take_no_table_locks(alias: str, on: bool = True) -> None:
    """Let this thread's reads on ``alias`` take no table lock, where it is SQLite.

    Django's test database for SQLite lives in memory with a shared cache, where a read takes a
    table lock and two threads that meet fail at once ("database table is locked") instead of
    waiting on the busy timeout as a file database does: a harness artefact, not the queue's.
    Writes still lock; the tests that use this never write from two threads at once.
    """
    if connections[alias].vendor == "sqlite":
        with connections[alias].cursor() as cursor:
            cursor.execute(f"PRAGMA read_uncommitted = {int(on)}")


@contextlib.contextmanager
def reads_without_table_locks(alias: str):
    """:func:`reads_take_no_table_locks` for the ``with`` block, on this thread."""
    reads_take_no_table_locks(alias)
    try:
        yield
    finally:
        reads_take_no_table_locks(alias, on=False)


def context_of(claimed, store, worker_id: str = "w1") -> JobContext:
    """Return the context a worker gives the run of ``claimed`` (its token, the store)."""
    return JobContext(
        job_id=claimed.id,
        job_type=claimed.job_type,
        queue=claimed.queue,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        worker_id=worker_id,
        lease_token=claimed.lease_token,
        recorder=store,
    )


class ResultsContract:
    """Needs ``alias``; the store under test is ``get_store(alias)``."""

    def claim_one(self, store, queue: str, now=None):
        [claimed] = store.claim([queue], "w1", 1, 30.0, now=now)
        return claimed

    @TRANSACTIONAL
    def test_status_and_result_of_a_succeeded_job(self, store):
        job = make_job(using=self.alias, queue="r1", max_attempts=3)
        before = jobqueue.status(job.id, using=self.alias)
        assert (before.state, before.attempts, before.progress, before.finished) == (
            "ready",
            0,
            None,
            False,
        )
        claimed = self.claim_one(store, "r1")
        context_of(claimed, store).progress(3, 10)
        running = jobqueue.status(job.id, using=self.alias)
        assert running.state == "leased"
        assert (running.progress.done, running.progress.total) == (3, 10)
        assert str(running.progress) == "3 of 10 (30%)"
        store.finish_many([ack_outcome(job.id, claimed.lease_token, '{"n": 7}')])
        done = jobqueue.result(job.id, using=self.alias)
        assert (done.state, done.attempts, done.result, done.errors) == (
            "succeeded",
            1,
            {"n": 7},
            (),
        )
        assert jobqueue.wait(job.id, timeout=5, using=self.alias) == done
        assert jobqueue.status(job.id, using=self.alias).finished

    @TRANSACTIONAL
    def test_wait_on_a_dead_job_raises_job_failed_with_its_last_error(self, store):
        job = make_job(using=self.alias, queue="r2", max_attempts=1)
        claimed = self.claim_one(store, "r2")
        error = {"type": "ValueError", "message": "bad row 7", "attempt": 1}
        store.finish_many(
            [
                RunOutcome(
                    job_id=job.id,
                    lease_token=claimed.lease_token,
                    state=JobState.DEAD,
                    error=error,
                    dead_reason=DeadReason.PERMANENT_ERROR,
                )
            ]
        )
        with pytest.raises(jobqueue.JobFailed) as failed:
            jobqueue.wait(job.id, timeout=5, using=self.alias)
        assert isinstance(failed.value, jobqueue.WaitError)
        assert (failed.value.state, failed.value.dead_reason) == ("dead", "permanent_error")
        assert failed.value.last_error["message"] == "bad row 7"
        assert "bad row 7" in str(failed.value)
        result = jobqueue.result(job.id, using=self.alias)
        assert (result.state, result.result, len(result.errors)) == ("dead", None, 1)

    @TRANSACTIONAL
    def test_wait_on_a_cancelled_job_raises_job_cancelled(self, store):
        job = make_job(using=self.alias, queue="r3")
        assert jobqueue.cancel(job.id, using=self.alias)
        with pytest.raises(jobqueue.JobCancelled) as cancelled:
            jobqueue.wait(job.id, timeout=5, using=self.alias)
        assert cancelled.value.state == "cancelled"
        assert cancelled.value.job_id == job.id

    @TRANSACTIONAL
    def test_wait_times_out_on_an_unfinished_job(self, store):
        job = make_job(using=self.alias, queue="r4")
        with pytest.raises(jobqueue.WaitTimeout) as timed_out:
            jobqueue.wait(job.id, timeout=0.3, poll_s=0.1, using=self.alias)
        assert isinstance(timed_out.value, TimeoutError)
        assert (timed_out.value.state, timed_out.value.job_id) == ("ready", job.id)
        assert Job.objects.using(self.alias).get(id=job.id).state == "ready"

    @TRANSACTIONAL
    def test_unknown_id_and_bad_arguments_are_clear_errors(self, store):
        missing = 987_654_321
        for call in (jobqueue.status, jobqueue.result):
            with pytest.raises(JobNotFound, match=str(missing)):
                call(missing, using=self.alias)
        with pytest.raises(JobNotFound):
            jobqueue.wait(missing, timeout=1, using=self.alias)
        with pytest.raises(JobNotFound):
            jobqueue.status("7", using=self.alias)
        job = make_job(using=self.alias, queue="r5")
        for bad in (0, -1, float("nan"), "soon"):
            with pytest.raises(InvalidJobOption, match="timeout"):
                jobqueue.wait(job.id, timeout=bad, using=self.alias)

    @TRANSACTIONAL
    def test_wait_inside_a_transaction_is_refused_and_marks_nothing(self, store):
        job = make_job(using=self.alias, queue="r10")
        with transaction.atomic(using=self.alias):
            with pytest.raises(JobQueueError, match="inside a transaction"):
                jobqueue.wait(job.id, timeout=5, using=self.alias)
        assert not Job.objects.using(self.alias).get(id=job.id).watched

    @TRANSACTIONAL
    def test_wait_returns_when_a_worker_finishes_the_job_meanwhile(self, store):
        job = make_job(using=self.alias, queue="r6")
        got: list = []

        def wait():
            try:
                reads_take_no_table_locks(self.alias)
                got.append(jobqueue.wait(job.id, timeout=60, using=self.alias))
            finally:
                connections.close_all()

        waiter = threading.Thread(target=wait)
        waiter.start()
        try:
            with reads_without_table_locks(self.alias):
                if connections[self.alias].vendor == "postgresql":
                    # Finish only once the waiter has marked the job (on SQLite it only reads).
                    wait_for(
                        lambda: (
                            Job.objects.using(self.alias).filter(id=job.id, watched=True).exists()
                        ),
                        timeout=60,
                    )
                claimed = self.claim_one(store, "r6")
                store.finish_many([ack_outcome(job.id, claimed.lease_token, "42")])
        finally:
            waiter.join(90)
        assert [r.result for r in got] == [42]

    @TRANSACTIONAL
    def test_checkpoint_is_read_back_by_the_next_attempt(self, store):
        job = make_job(using=self.alias, queue="r7")
        first = context_of(self.claim_one(store, "r7"), store)
        assert first.checkpoint_state is None
        first.checkpoint({"next": 12, "cursor": "k-0012"})
        assert first.checkpoint_state == {"next": 12, "cursor": "k-0012"}
        # The lease runs out (a crash): the reaper takes it back, another claim runs it.
        later = timezone.now() + timedelta(minutes=5)
        store.reap(now=later)
        Job.objects.using(self.alias).filter(id=job.id).update(run_at=later)
        second = context_of(self.claim_one(store, "r7", now=later + timedelta(hours=2)), store)
        assert second.attempt == 2
        assert second.checkpoint_state == {"next": 12, "cursor": "k-0012"}
        assert jobqueue.status(job.id, using=self.alias).has_checkpoint

    @TRANSACTIONAL
    def test_a_job_released_at_shutdown_resumes_from_its_checkpoint(self, store):
        job = make_job(using=self.alias, queue="r11")
        first = context_of(self.claim_one(store, "r11"), store)
        first.checkpoint({"next": 3})
        store.release(job.id, first.lease_token)
        second = context_of(self.claim_one(store, "r11"), store)
        assert (second.attempt, second.checkpoint_state) == (1, {"next": 3})

    @TRANSACTIONAL
    def test_a_zombies_late_checkpoint_and_progress_are_refused_and_write_nothing(self, store):
        job = make_job(using=self.alias, queue="r8")
        zombie = context_of(self.claim_one(store, "r8"), store, worker_id="zombie")
        zombie.checkpoint({"next": 5})
        later = timezone.now() + timedelta(minutes=5)
        store.reap(now=later)
        Job.objects.using(self.alias).filter(id=job.id).update(run_at=later)
        owner = context_of(
            self.claim_one(store, "r8", now=later + timedelta(hours=2)), store, "owner"
        )
        assert owner.lease_token != zombie.lease_token
        owner.checkpoint({"next": 9})
        owner.progress(9, 20)
        with pytest.raises(LeaseLost, match=r"checkpoint of job \d+ refused: this run lost"):
            zombie.checkpoint({"next": 6})
        assert zombie.should_stop and zombie.lease_lost
        with pytest.raises(LeaseLost):
            zombie.progress(6, 20)
        row = Job.objects.using(self.alias).get(id=job.id)
        assert (row.checkpoint, row.progress_done, row.progress_total) == ({"next": 9}, 9, 20)

    @TRANSACTIONAL
    def test_bad_progress_and_checkpoints_write_nothing(self, store, settings):
        settings.JOBQUEUE = {"CHECKPOINT_MAX_BYTES": 64}
        job = make_job(using=self.alias, queue="r9")
        context = context_of(self.claim_one(store, "r9"), store)
        for done, total in ((-1, None), (5, 3), (1.5, None), (True, None), (1, "9"), (None, 4)):
            with pytest.raises(InvalidJobOption, match="progress"):
                context.progress(done, total)
        with pytest.raises(InvalidPayload, match="CHECKPOINT_MAX_BYTES"):
            context.checkpoint({"blob": "x" * 100})
        with pytest.raises(InvalidPayload, match=r"checkpoint\['when'\]"):
            context.checkpoint({"when": object()})
        row = Job.objects.using(self.alias).get(id=job.id)
        assert (row.checkpoint, row.progress_done) == (None, None)
        by_hand = JobContext(
            job_id=job.id, job_type="t", queue="q", attempt=1, max_attempts=1, worker_id="w"
        )
        with pytest.raises(JobQueueError, match="not made by a worker"):
            by_hand.checkpoint({"a": 1})
