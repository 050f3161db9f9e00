"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/flows/test_batches.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

import pytest
from django.db import transaction

import jobqueue
from jobqueue.errors import BatchNotFound, InvalidJobOption, InvalidPayload, PermanentError
from jobqueue.models import Batch, Job
from jobqueue.states import JobState
from tests.testapp import jobs

#: These tests commit (the store's own transactions are under test).
TRANSACTIONAL = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)


REPORT = "tests.testapp.jobs.batch_report"


def members(n: int, queue: str = "bq", **payload) -> list[dict]:
    return [
        {"queue": queue, "job_type": jobs.batch_member, "payload": {"index": i, **payload}}
        for i in range(n)
    ]


class BatchesContract:
    """Needs ``alias``: the database the batches and their members live in."""

    def finish_all(self, queue: str = "bq", fail: set[int] = frozenset()) -> None:
        """Claim every ready job of ``queue`` and ack it (or fail it for good, by index)."""
        for claimed in jobqueue.claim(queue, "w1", 100, using=self.alias):
            if claimed.payload.get("index") in fail:
                error = PermanentError("no")
                assert (
                    jobqueue.nack(claimed.id, claimed.lease_token, error, using=self.alias)
                    == "dead"
                )
            else:
                jobqueue.ack(claimed.id, claimed.lease_token, 1, using=self.alias)

    def callbacks(self, batch_id: int) -> list[Job]:
        return list(
            Job.objects.using(self.alias)
            .filter(type=REPORT, payload__batch__id=batch_id)
            .order_by("id")
        )

    @TRANSACTIONAL
    def test_last_member_enqueues_the_callbacks_once_with_the_counts(self):
        with jobqueue.batch(
            on_success=REPORT, on_complete=jobs.batch_report, payload={"day": 3}, using=self.alias
        ) as b:
            ids = b.enqueue_many(members(3))
            ids.append(b.enqueue("bq", jobs.batch_member, {"index": 3}))
        assert b.members == 4
        assert set(
            Job.objects.using(self.alias).filter(batch_id=b.id).values_list("id", flat=True)
        ) == set(ids)
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.total, status.pending, status.done) == (4, 4, False)

        self.finish_all()

        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.pending, status.succeeded, status.completions, status.done) == (
            0,
            4,
            1,
            True,
        )
        fired = self.callbacks(b.id)
        assert [j.id for j in fired] == sorted([status.success_job_id, status.complete_job_id])
        expected = {
            "id": b.id,
            "total": 4,
            "succeeded": 4,
            "dead": 0,
            "cancelled": 0,
            "completion": 1,
        }
        for job in fired:
            assert job.payload == {"batch": expected, "payload": {"day": 3}}
            assert (job.state, job.queue, job.batch_id) == (JobState.READY, "default", None)
        # The callback runs as any job, handed the counts and the payload.
        [claimed, _] = jobqueue.claim("default", "w1", 2, using=self.alias)
        assert claimed.payload["batch"]["succeeded"] == 4

    @TRANSACTIONAL
    def test_a_dead_member_fires_on_complete_only(self):
        with jobqueue.batch(on_success=REPORT, on_complete=REPORT, using=self.alias) as b:
            b.enqueue_many(members(3))
        self.finish_all(fail={1})
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.succeeded, status.dead, status.pending) == (2, 1, 0)
        assert status.success_job_id is None
        [fired] = self.callbacks(b.id)
        assert fired.id == status.complete_job_id
        assert fired.payload["batch"]["dead"] == 1

    @TRANSACTIONAL
    def test_a_rolled_back_block_leaves_no_batch_and_no_member(self):
        before = Job.objects.using(self.alias).count()
        with pytest.raises(RuntimeError):
            with jobqueue.batch(on_complete=REPORT, using=self.alias) as b:
                b.enqueue_many(members(3))
                raise RuntimeError("caller failed")
        assert not Batch.objects.using(self.alias).filter(id=b.id).exists()
        assert Job.objects.using(self.alias).count() == before

    @TRANSACTIONAL
    def test_the_callers_rollback_takes_the_batch_with_it(self):
        before = Job.objects.using(self.alias).count()
        with pytest.raises(RuntimeError):
            with transaction.atomic(using=self.alias):
                with jobqueue.batch(on_complete=REPORT, using=self.alias) as b:
                    b.enqueue_many(members(2))
                raise RuntimeError("after the block, before the caller's commit")
        assert not Batch.objects.using(self.alias).filter(id=b.id).exists()
        assert Job.objects.using(self.alias).count() == before

    @TRANSACTIONAL
    def test_an_empty_batch_completes_at_the_end_of_its_block(self):
        with jobqueue.batch(on_complete=REPORT, payload={"x": 1}, using=self.alias) as b:
            pass
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.total, status.completions, status.done) == (0, 1, True)
        [fired] = self.callbacks(b.id)
        assert fired.id == status.complete_job_id
        assert fired.payload["batch"]["total"] == 0 and fired.payload["payload"] == {"x": 1}

    @TRANSACTIONAL
    def test_an_empty_batch_without_callbacks_is_accepted_and_done_at_once(self):
        # Decided (docs/decisions.md): accepted, as an empty batch with callbacks is, so a caller
        # batching a possibly-empty result needs no special case; it is done at once.
        with jobqueue.batch(using=self.alias) as b:
            pass
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.total, status.pending, status.completions, status.done) == (0, 0, 1, True)
        assert (status.success_job_id, status.complete_job_id) == (None, None)

    @TRANSACTIONAL
    def test_a_batch_callback_enqueued_on_its_own_is_refused_naming_the_missing_batch(self):
        with pytest.raises(InvalidPayload) as refused:
            jobqueue.enqueue("bq", REPORT, {"day": 3}, using=self.alias)
        message = str(refused.value)
        assert "has no 'batch'" in message and "batch callback" in message
        assert "jobqueue.batch(on_success=..., on_complete=...)" in message

    @TRANSACTIONAL
    def test_cancelling_a_ready_member_counts_it_and_can_complete_the_batch(self):
        with jobqueue.batch(on_success=REPORT, on_complete=REPORT, using=self.alias) as b:
            first, last = b.enqueue_many(members(2))
        [claimed] = [c for c in jobqueue.claim("bq", "w1", 1, using=self.alias)]
        jobqueue.ack(claimed.id, claimed.lease_token, 1, using=self.alias)
        other = last if claimed.id == first else first
        assert jobqueue.cancel(other, using=self.alias)
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.succeeded, status.cancelled, status.pending, status.completions) == (
            1,
            1,
            0,
            1,
        )
        assert [j.id for j in self.callbacks(b.id)] == [status.complete_job_id]

    @TRANSACTIONAL
    def test_a_retried_member_reopens_the_batch_and_its_next_completion_fires_again(self):
        with jobqueue.batch(on_success=REPORT, on_complete=REPORT, using=self.alias) as b:
            b.enqueue_many(members(2))
        self.finish_all(fail={0})
        first = jobqueue.batch_status(b.id, using=self.alias)
        assert (first.completions, first.dead, first.success_job_id) == (1, 1, None)
        [dead] = Job.objects.using(self.alias).filter(batch_id=b.id, state="dead")

        assert jobqueue.retry(dead.id, using=self.alias)
        reopened = jobqueue.batch_status(b.id, using=self.alias)
        assert (reopened.pending, reopened.dead, reopened.done) == (1, 0, False)
        assert reopened.completed_at is None
        assert len(self.callbacks(b.id)) == 1, "reopening fires nothing"

        self.finish_all()
        second = jobqueue.batch_status(b.id, using=self.alias)
        assert (second.completions, second.succeeded, second.pending) == (2, 2, 0)
        fired = self.callbacks(b.id)
        assert len(fired) == 3  # complete at the first completion; success + complete at the second
        assert {j.payload["batch"]["completion"] for j in fired} == {1, 2}
        assert second.complete_job_id != first.complete_job_id

    @TRANSACTIONAL
    def test_bad_input_is_refused_naming_it_and_writes_nothing(self):
        batches = Batch.objects.using(self.alias).count()
        jobs_before = Job.objects.using(self.alias).count()
        with pytest.raises(InvalidJobOption, match="payload"):
            jobqueue.batch(on_complete=REPORT, payload=[1], using=self.alias)
        with pytest.raises(InvalidPayload):
            jobqueue.batch(on_complete=REPORT, payload={"x": object()}, using=self.alias)
        # The callback must take batch= and payload=.
        with pytest.raises(InvalidPayload, match=r"does not fit .*batch_member"):
            jobqueue.batch(on_complete=jobs.batch_member, using=self.alias)
        with pytest.raises(InvalidJobOption, match=r"on_success\.queue"):
            jobqueue.batch(on_success=REPORT, queue="bad queue!", using=self.alias)
        with pytest.raises(InvalidJobOption, match=r"jobs\[1\]\.dedupe_key"):
            with jobqueue.batch(on_complete=REPORT, using=self.alias) as b:
                b.enqueue_many([members(1)[0], {**members(1)[0], "dedupe_key": "k"}])
        with pytest.raises(InvalidJobOption, match="dedupe_key"):
            with jobqueue.batch(on_complete=REPORT, using=self.alias) as b:
                b.enqueue("bq", jobs.batch_member, {}, dedupe_key="k")
        with pytest.raises(InvalidJobOption, match="closed"):
            b.enqueue("bq", jobs.batch_member, {})
        assert Batch.objects.using(self.alias).count() == batches
        assert Job.objects.using(self.alias).count() == jobs_before
        with pytest.raises(BatchNotFound):
            jobqueue.batch_status(10**12, using=self.alias)

    @TRANSACTIONAL
    def test_jobs_without_a_batch_touch_no_batch(self):
        with jobqueue.batch(on_complete=REPORT, using=self.alias) as b:
            b.enqueue("bq", jobs.batch_member, {"index": 0})
        jobqueue.enqueue("bq", jobs.batch_member, {"index": 1}, using=self.alias)
        for claimed in jobqueue.claim("bq", "w1", 10, using=self.alias):
            if claimed.payload["index"] == 1:
                jobqueue.ack(claimed.id, claimed.lease_token, 1, using=self.alias)
        status = jobqueue.batch_status(b.id, using=self.alias)
        assert (status.pending, status.succeeded, status.completions) == (1, 0, 0)
