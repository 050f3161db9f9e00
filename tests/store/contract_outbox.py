"""Store contract for the transactional outbox (mixed into StoreContract: both stores).

``put_outbox`` writes a job with the id ``reserve_job_id`` drew; ``take_outbox`` returns the
rows for one target, oldest first; ``insert_relayed`` inserts each job under its id once (a
second relay of the same rows, or a held dedupe key, inserts nothing); ``delete_outbox`` and
``outbox_gauges`` count what waits. One alias is both the outbox and the queue here.
"""

from __future__ import annotations

from datetime import timedelta

from jobqueue.models import Job, OutboxEntry
from jobqueue.store import NewJob

NOOP = "tests.testapp.jobs.noop"


class OutboxContract:
    alias: str

    def test_reserved_ids_are_new_and_distinct(self, store):
        first, second = store.reserve_job_id(), store.reserve_job_id()
        assert first != second
        assert not Job.objects.using(self.alias).filter(id__in=[first, second]).exists()

    def test_a_relayed_job_is_inserted_once_under_its_reserved_id(self, store):
        job = NewJob(queue="q", type=NOOP, payload_json='{"a": 1}', priority=3, delay_s=600.0)
        job_id = store.reserve_job_id()
        created_at = store.put_outbox(store.alias, job_id, job)
        rows = store.take_outbox(store.alias, 10)
        assert [(r.job_id, r.created_at) for r in rows] == [(job_id, created_at)]
        assert store.take_outbox("elsewhere", 10) == []

        assert store.insert_relayed(rows) == 1
        assert store.insert_relayed(rows) == 0
        saved = Job.objects.using(self.alias).get(id=job_id)
        assert (saved.payload, saved.priority, saved.state) == ({"a": 1}, 3, "scheduled")
        assert abs(saved.run_at - (created_at + timedelta(seconds=600))) < timedelta(seconds=1)

        assert store.delete_outbox([r.id for r in rows]) == 1
        assert not OutboxEntry.objects.using(self.alias).exists()

    def test_a_relayed_job_whose_dedupe_key_is_held_is_not_inserted(self, store):
        held = store.enqueue_or_get(
            NewJob(queue="q", type=NOOP, payload_json="{}", dedupe_key="k")
        )[0]
        job_id = store.reserve_job_id()
        store.put_outbox(
            store.alias, job_id, NewJob(queue="q", type=NOOP, payload_json="{}", dedupe_key="k")
        )
        assert store.insert_relayed(store.take_outbox(store.alias, 10)) == 0
        assert list(Job.objects.using(self.alias).values_list("id", flat=True)) == [held]

    def test_outbox_gauges_cap_the_count_and_age_the_oldest(self, store):
        for _ in range(3):
            store.put_outbox(
                "there", store.reserve_job_id(), NewJob(queue="q", type=NOOP, payload_json="{}")
            )
        other, there = store.outbox_gauges(["there", "other"][::-1], cap=2)
        assert (other.target, other.waiting, other.oldest_age_s) == ("other", 0, None)
        assert (there.target, there.waiting) == ("there", 2)
        assert there.oldest_age_s is not None and there.oldest_age_s >= 0

    def test_a_batch_of_reserved_ids_is_written_in_one_call_and_relayed_once(self, store):
        ids = store.reserve_job_ids(3)
        assert ids == sorted(ids) and len(set(ids)) == 3
        assert not Job.objects.using(self.alias).filter(id__in=ids).exists()
        jobs = [
            NewJob(queue="q", type=NOOP, payload_json=f'{{"n": {n}}}', delay_s=600.0 * (n == 0))
            for n in range(3)
        ]
        created_at = store.put_outbox_many(store.alias, list(zip(ids, jobs, strict=True)))
        rows = store.take_outbox(store.alias, 10)
        assert [(r.job_id, r.created_at) for r in rows] == [(i, created_at) for i in ids]
        assert store.insert_relayed(rows) == 3
        assert store.insert_relayed(rows) == 0
        saved = {j.id: j for j in Job.objects.using(self.alias).filter(id__in=ids)}
        assert [saved[i].payload for i in ids] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert [saved[i].state for i in ids] == ["scheduled", "ready", "ready"]
        late = saved[ids[0]].run_at - created_at
        assert abs(late - timedelta(seconds=600)) < timedelta(seconds=1)
