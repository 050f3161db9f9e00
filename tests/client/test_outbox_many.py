"""enqueue_many through the transactional outbox (issue 16 part 3, for batches).

The caller's transaction is on ``default``; the queue ``emails`` lives on ``outbox_queue``
(``QUEUE_DATABASES``), the queue ``local`` on ``default``. Jobs for ``emails`` go to default's
outbox in the caller's transaction; jobs for ``local`` join it directly.
"""

from __future__ import annotations

import pytest
from django.db import connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.maintenance.relay import relay_batch
from jobqueue.models import Job, OutboxEntry
from tests.conftest import requires_postgres

pytestmark = [
    requires_postgres(),
    pytest.mark.django_db(databases=["default", "outbox_queue"], transaction=True),
]

QUEUE_DB = "outbox_queue"
TYPE = "tests.testapp.jobs.record"
ROUTED = {"QUEUE_DATABASES": {"emails": QUEUE_DB}}


def queue_jobs():
    return Job.objects.using(QUEUE_DB)


def outbox_rows():
    return OutboxEntry.objects.using("default")


def relay_all() -> int:
    relayed = 0
    while count := relay_batch("default", QUEUE_DB)[0]:
        relayed += count
    return relayed


def specs(queue: str, n: int, **options: object) -> list[dict[str, object]]:
    return [
        {"queue": queue, "job_type": TYPE, "payload": {"path": "/dev/null", "n": i}, **options}
        for i in range(n)
    ]


def test_a_rolled_back_batch_leaves_no_job_anywhere():
    with override_settings(JOBQUEUE=ROUTED):
        with pytest.raises(RuntimeError), transaction.atomic():
            jobqueue.enqueue_many(specs("emails", 5) + specs("local", 2))
            assert outbox_rows().count() == 5
            raise RuntimeError("the order fails")
    assert outbox_rows().count() == 0
    assert relay_all() == 0
    assert queue_jobs().count() == 0
    assert Job.objects.using("default").count() == 0


def test_a_committed_batch_is_relayed_exactly_once_under_the_ids_returned():
    with override_settings(JOBQUEUE=ROUTED), transaction.atomic():
        ids = jobqueue.enqueue_many(specs("emails", 300, delay=3600))
    assert len(set(ids)) == 300
    assert not queue_jobs().exists()
    assert relay_all() == 300
    # A second relay of the same ids (a relay killed before its delete) inserts nothing.
    assert relay_all() == 0
    jobs = {job.id: job for job in queue_jobs()}
    assert sorted(jobs) == sorted(ids)
    assert [jobs[i].payload["n"] for i in ids] == list(range(300))
    assert {job.state for job in jobs.values()} == {"scheduled"}
    assert outbox_rows().count() == 0


def test_a_mixed_batch_splits_by_destination_in_one_outbox_statement():
    """Jobs for the caller's own database go straight in; the others to the outbox, at once."""
    batch = [
        spec for pair in zip(specs("emails", 4), specs("local", 4), strict=True) for spec in pair
    ]
    with override_settings(JOBQUEUE=ROUTED), transaction.atomic():
        with CaptureQueriesContext(connections["default"]) as caller_queries:
            ids = jobqueue.enqueue_many(batch)
        outbox_inserts = [q for q in caller_queries if q["sql"].lstrip().startswith("WITH put AS")]
        assert len(outbox_inserts) == 1
        local_ids = ids[1::2]
        assert sorted(Job.objects.using("default").values_list("id", flat=True)) == sorted(
            local_ids
        )
    assert sorted(outbox_rows().values_list("job_id", flat=True)) == sorted(ids[0::2])
    assert relay_all() == 4
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(ids[0::2])
    assert [j.queue for j in queue_jobs()] == ["emails"] * 4


def test_dedupe_keys_in_a_batch_through_the_outbox_behave_as_documented():
    """Shared keys in one call: one job, whose id each gets; a held key: the relay skips it."""
    held = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB, dedupe_key="h")
    batch = [
        {"queue": "emails", "job_type": TYPE, "payload": {"path": "/dev/null"}, "dedupe_key": k}
        for k in ("a", "b", "a", "h", None)
    ]
    with override_settings(JOBQUEUE=ROUTED), transaction.atomic():
        ids = jobqueue.enqueue_many(batch)
    assert ids[0] == ids[2] and len({ids[0], ids[1], ids[3], ids[4]}) == 4
    assert outbox_rows().count() == 4
    assert relay_all() == 4
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(
        [held, ids[0], ids[1], ids[4]]
    )
    assert not queue_jobs().filter(id=ids[3]).exists()
    assert queue_jobs().get(dedupe_key="h").id == held


def test_a_job_with_parents_is_refused_before_anything_is_written():
    parent = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
    child = {"queue": "emails", "job_type": TYPE, "payload": {"path": "/dev/null"}}
    batch = [*specs("emails", 2), {**child, "after": [parent]}]
    with override_settings(JOBQUEUE=ROUTED), transaction.atomic():
        with pytest.raises(InvalidJobOption, match="outbox") as caught:
            jobqueue.enqueue_many(batch)
        assert caught.value.option == "jobs[2].after"
        assert outbox_rows().count() == 0
    assert list(queue_jobs().values_list("id", flat=True)) == [parent]


def test_outside_an_atomic_block_a_batch_goes_straight_to_the_queue_database():
    with override_settings(JOBQUEUE=ROUTED):
        ids = jobqueue.enqueue_many(specs("emails", 3))
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(ids)
    assert outbox_rows().count() == 0
