"""The worker records outcomes in batches: acks in one statement, failed attempts in another,
each row fenced by its own lease token. In-process workers on the default database (PostgreSQL
or SQLite), run in ``--burst`` mode.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings

import jobqueue
from jobqueue.models import Job
from jobqueue.states import DeadReason, JobState
from jobqueue.worker.loop import Worker

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.jobs.noop"
FAIL = "tests.testapp.jobs.fail"
PERMANENT = "tests.testapp.jobs.fail_permanently"


class Spy:
    """Wrap a store method; remember the size of every call."""

    def __init__(self, method):
        self.method = method
        self.sizes: list[int] = []

    def __call__(self, items, *args, **kwargs):
        self.sizes.append(len(items))
        return self.method(items, *args, **kwargs)


@override_settings(
    JOBQUEUE={"BACKOFF": {"policy": "none", "base_seconds": 600, "cap_seconds": 600}}
)
def test_failures_and_successes_are_recorded_in_batches_with_exact_outcomes():
    ok = [jobqueue.enqueue("b", NOOP) for _ in range(5)]
    retried = [jobqueue.enqueue("b", FAIL, {"message": f"m{i}"}, max_attempts=3) for i in range(4)]
    dead = [jobqueue.enqueue("b", PERMANENT, {"message": "no"}) for _ in range(3)]
    worker = Worker(
        queues=["b"], concurrency=12, burst=True, install_signal_handlers=False, lease_s=30
    )
    # The completer's one place outcomes reach the store: alone (finish_many) or with the next
    # claim in one round trip (finish_then_claim).
    finishes = Spy(worker.completer._write)
    worker.completer._write = finishes  # type: ignore[method-assign]

    assert worker.run() == 0
    connection.close()  # the worker's thread used its own; read fresh

    assert worker.stats == {
        "succeeded": 5,
        "retried": 4,
        "dead": 3,
        "cancelled": 0,
        "lost": 0,
        "released": 0,
    }
    states = dict(Job.objects.values_list("id", "state"))
    assert [states[i] for i in ok] == [JobState.SUCCEEDED] * 5
    assert [states[i] for i in retried] == [JobState.SCHEDULED] * 4
    assert [states[i] for i in dead] == [JobState.DEAD] * 3
    for job in Job.objects.filter(id__in=retried + dead):
        assert job.attempts == 1 and job.lease_token is None
        assert [e["message"] for e in job.errors] in ([[f"m{i}"] for i in range(4)] + [["no"]])
    assert set(Job.objects.filter(id__in=dead).values_list("dead_reason", flat=True)) == {
        DeadReason.PERMANENT_ERROR
    }
    # Every outcome went through a batch statement (none one by one), and outcomes that came
    # in together shared a statement. How many shared one depends on when the 12 handlers end
    # (the machine's load), so only "fewer statements than outcomes" is asserted.
    # Successes and failures share statements: one kind of write for any mix of outcomes.
    assert sum(finishes.sizes) == 12
    assert len(finishes.sizes) < 12, finishes.sizes
