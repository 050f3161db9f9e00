"""Which text of ``finish_many.sql`` the PostgreSQL store sends (issue 15, branch ``sql``).

The batch bookkeeping (counts, callbacks) is left out only when this process claimed every job
of the outcomes and none had a batch (``store/postgres/finishing.py``, ``finish_statement``);
every other outcome gets the full text, and batches count and fire as before.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

import jobqueue
from jobqueue.models import Batch, Job
from jobqueue.models.metrics import Rollup
from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store import bounded, get_store
from jobqueue.store.interface import ClaimRequest
from jobqueue.store.postgres import finishing as pipeline

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="finish_many.sql is PostgreSQL's statement"
    ),
]

NOOP = "tests.testapp.jobs.noop"
REPORT = "tests.testapp.jobs.batch_report"


def _acks(claimed):
    return [RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in claimed]


def _finish(store, outcomes):
    """Run ``store.finish_many(outcomes)``; return its states and the outcome statement sent."""
    with CaptureQueriesContext(connection) as sent:
        states = store.finish_many(outcomes)
    (text,) = [q["sql"] for q in sent.captured_queries if "UPDATE jobqueue_job" in q["sql"]]
    return states, text


def test_outcomes_of_jobs_claimed_here_without_a_batch_leave_the_batch_part_out():
    ids = [jobqueue.enqueue("ft", NOOP) for _ in range(3)]
    store = get_store()
    claimed = store.claim(["ft"], "w1", 3, 30)

    states, text = _finish(store, _acks(claimed))

    assert "jobqueue_batch" not in text
    assert states == {i: JobState.SUCCEEDED for i in ids}
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"succeeded"}
    # The rollup still counts them.
    assert Rollup.objects.filter(queue="ft").aggregate(n=Sum("succeeded"))["n"] == 3


def test_a_batch_member_claimed_beside_plain_jobs_is_counted_and_fires_its_callback():
    plain = jobqueue.enqueue("ft", NOOP)
    with jobqueue.batch(on_complete=REPORT, queue="ftcb") as b:
        member = b.enqueue("ft", NOOP)
    store = get_store()
    claimed = store.claim(["ft"], "w1", 2, 30)
    assert {j.id for j in claimed} == {plain, member}

    states, text = _finish(store, _acks(claimed))

    assert "jobqueue_batch" in text
    assert states == {plain: JobState.SUCCEEDED, member: JobState.SUCCEEDED}
    batch = Batch.objects.get(id=b.id)
    assert (batch.pending, batch.succeeded, batch.completions) == (0, 1, 1)
    assert Job.objects.filter(type=REPORT, queue="ftcb").count() == 1


def test_outcomes_of_leases_claimed_elsewhere_get_the_full_text_and_count():
    with jobqueue.batch(on_complete=REPORT, queue="ftcb") as b:
        member = b.enqueue("ft", NOOP)
    plain = jobqueue.enqueue("ft", NOOP)
    claimed = get_store().claim(["ft"], "w1", 2, 30)
    pipeline._UNBATCHED.clear()  # another process recording them (a reaper, jobqueue.ack)

    states, text = _finish(get_store(), _acks(claimed))

    assert "jobqueue_batch" in text
    assert states == {plain: JobState.SUCCEEDED, member: JobState.SUCCEEDED}
    assert Batch.objects.get(id=b.id).completions == 1
    assert Job.objects.filter(type=REPORT, queue="ftcb").count() == 1


def test_the_pipelined_ack_of_plain_jobs_leaves_the_batch_part_out(monkeypatch):
    if not bounded.pipelines("default"):
        pytest.skip("this connection sends the outcomes and the claim in two calls")
    ids = [jobqueue.enqueue("ft", NOOP) for _ in range(4)]
    store = get_store()
    first = store.claim(["ft"], "w1", 2, 30)
    sent: list[str] = []
    each = bounded.execute_each

    def recording(alias, statements, **options):
        sent.extend(text for text, _ in statements)
        return each(alias, statements, **options)

    monkeypatch.setattr(bounded, "execute_each", recording)

    made = store.finish_then_claim(_acks(first), ClaimRequest(["ft"], "w1", 2, 30.0))

    assert made.error is None
    assert made.states == {j.id: JobState.SUCCEEDED for j in first}
    assert [j.id for j in made.claimed] == ids[2:]
    assert len(sent) == 2 and "jobqueue_batch" not in sent[0]


def test_the_ids_remembered_per_alias_are_bounded_and_only_ever_missing(monkeypatch):
    """Past UNBATCHED_MAX the set starts over: the next outcomes get the full text (correct,
    only slower); ids leave at their outcome's statement."""

    class Row:
        def __init__(self, job_id, batch_id=None):
            self.id, self.batch_id = job_id, batch_id

    monkeypatch.setattr(pipeline, "_UNBATCHED", {})
    monkeypatch.setattr(pipeline, "UNBATCHED_MAX", 3)
    pipeline.note_claimed("x", [Row(1), Row(2), Row(3, batch_id=7)])
    assert pipeline.finish_statement("x", [1, 2]) == "finish_many~batches"
    assert pipeline.finish_statement("x", [1]) == "finish_many"  # gone with its outcome
    assert pipeline.finish_statement("x", [3]) == "finish_many"  # a batch member
    assert pipeline.finish_statement("y", [4]) == "finish_many"  # nothing claimed on "y"
    pipeline.note_claimed("x", [Row(i) for i in range(10, 14)])
    pipeline.note_claimed("x", [Row(20)])  # over the bound: started over
    assert pipeline.finish_statement("x", [10]) == "finish_many"
    assert pipeline.finish_statement("x", [20]) == "finish_many~batches"
