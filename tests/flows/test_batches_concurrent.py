"""Batches (issue 19): the last members of a batch finish at the same instant on different
connections, and the callback is still enqueued exactly once (PostgreSQL).

Each trial: a 20-member batch, all claimed, then 4 threads (4 connections, as 4 workers) record
the outcomes: a few one by one, then, released together by a barrier, the rest in one
``finish_many`` each, so the last outcomes race. Some members end dead. Whoever's statement
brings ``pending`` to zero enqueues the callbacks; the batch row's lock orders the racers, so
exactly one statement sees zero. 50 trials take 10-50 s on a loaded 2-core machine; the
real-process trials with SIGKILL are in test_process_batches.py.
"""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connections

import jobqueue
from jobqueue.errors import PermanentError
from jobqueue.models import Job
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState
from jobqueue.store import get_store
from jobqueue.store.finishing import ack_outcome
from tests.conftest import requires_postgres
from tests.testapp import jobs

pytestmark = [requires_postgres(), pytest.mark.django_db(transaction=True)]

REPORT = "tests.testapp.jobs.batch_report"
TRIALS = 50
MEMBERS = 20
THREADS = 4


def outcome(claimed, dead: bool) -> RunOutcome:
    if not dead:
        return ack_outcome(claimed.id, claimed.lease_token, "1")
    return RunOutcome(
        job_id=claimed.id,
        lease_token=claimed.lease_token,
        state=JobState.DEAD,
        error={"kind": "error", "type": "PermanentError", "message": str(PermanentError("no"))},
        dead_reason=DeadReason.PERMANENT_ERROR,
    )


def record(share: list, barrier: threading.Barrier, dead: set[int], errors: list) -> None:
    """One 'worker': the first outcomes one by one, then the rest in one statement at the gun."""
    try:
        store = get_store("default")
        alone, together = share[:2], share[2:]
        for claimed in alone:
            store.finish_many([outcome(claimed, claimed.id in dead)])
        barrier.wait(timeout=60)
        store.finish_many([outcome(c, c.id in dead) for c in together])
    except BaseException as exc:  # noqa: BLE001 - reported to the test thread
        errors.append(exc)
        barrier.abort()
    finally:
        connections.close_all()


def test_racing_last_outcomes_enqueue_the_callback_exactly_once():
    rng = random.Random(19)
    for trial in range(TRIALS):
        queue = f"race{trial}"
        with jobqueue.batch(on_success=REPORT, on_complete=REPORT) as b:
            b.enqueue_many(
                {"queue": queue, "job_type": jobs.batch_member, "payload": {"index": i}}
                for i in range(MEMBERS)
            )
        claimed = jobqueue.claim(queue, "w", MEMBERS)
        assert len(claimed) == MEMBERS
        rng.shuffle(claimed)
        dead = {c.id for c in claimed if rng.random() < 0.05}
        barrier = threading.Barrier(THREADS)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=record, args=(claimed[i::THREADS], barrier, dead, errors))
            for i in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors

        status = jobqueue.batch_status(b.id)
        fired = Job.objects.filter(type=REPORT, payload__batch__id=b.id)
        kinds = sorted(
            ("success" if job.id == status.success_job_id else "complete") for job in fired
        )
        expected = ["complete"] if dead else ["complete", "success"]
        assert kinds == expected, f"trial {trial}: {kinds}"
        assert (status.pending, status.completions) == (0, 1), f"trial {trial}"
        assert (status.succeeded, status.dead) == (MEMBERS - len(dead), len(dead))


def finish_mix(share: list, barrier: threading.Barrier, errors: list) -> None:
    """One 'worker' recording outcomes of members of several batches in each statement."""
    try:
        store = get_store("default")
        barrier.wait(timeout=60)
        for start in range(0, len(share), 4):
            store.finish_many([outcome(c, False) for c in share[start : start + 4]])
    except BaseException as exc:  # noqa: BLE001 - reported to the test thread
        errors.append(exc)
        barrier.abort()
    finally:
        connections.close_all()


def test_statements_finishing_members_of_several_batches_do_not_deadlock():
    """Members of three batches with interleaved ids, finished four at a time by four
    connections in shuffled orders: each statement locks its batch rows in id order, so none
    waits on another in a cycle (a deadlock would abort one: an error here)."""
    rng = random.Random(7)
    for trial in range(20):
        queue = f"mix{trial}"
        with (
            jobqueue.batch(on_complete=REPORT) as a,
            jobqueue.batch(on_complete=REPORT) as b,
            jobqueue.batch(on_complete=REPORT) as c,
        ):
            for i in range(8):
                for open_batch in (c, a, b) if i % 2 else (b, c, a):
                    open_batch.enqueue(queue, jobs.batch_member, {"index": i})
        claimed = jobqueue.claim(queue, "w", 24)
        rng.shuffle(claimed)
        barrier = threading.Barrier(THREADS)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=finish_mix, args=(claimed[i::THREADS], barrier, errors))
            for i in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        for batch in (a, b, c):
            status = jobqueue.batch_status(batch.id)
            assert (status.pending, status.succeeded, status.completions) == (0, 8, 1)
            assert Job.objects.filter(type=REPORT, payload__batch__id=batch.id).count() == 1
