"""The worker driven in-process, one pass at a time (``Worker.run_once``), on both stores.

No subprocess and no signal handlers: the test thread is the worker's main thread, handler
threads run the jobs, and each pass records its outcomes before it returns. The heartbeat and
reaper services are driven through their own ``run_once``. These pin behaviour the process tests
(``test_process_*.py``) already cover end to end; here each is one pass, on PostgreSQL and on
the SQLite store.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import jobqueue
from jobqueue import job
from jobqueue.maintenance.reaper import Reaper
from jobqueue.models import Job
from jobqueue.states import DeadReason, JobState
from jobqueue.store import get_store
from jobqueue.worker.context import JobContext
from jobqueue.worker.heartbeat import Heartbeat
from jobqueue.worker.loop import Worker
from jobqueue.worker.outage import ReapHold
from jobqueue.worker.runs import Run, Runs
from tests.factories import make_job
from tests.jobqueue_cli import cli

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)

ADD = "tests.testapp.jobs.add"
FAIL = "tests.testapp.jobs.fail"
STEAL = "tests.worker.test_loop.steal_own_lease"
#: Retries far away, so a retried job stays scheduled while the test looks at it.
FAR_BACKOFF = {"BACKOFF": {"policy": "none", "base_seconds": 600, "cap_seconds": 600}}

both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])


@job(takes_context=True)
def steal_own_lease(context: JobContext, alias: str) -> str:
    """Play the other worker: take this job's lease away while its handler runs."""
    Job.objects.using(alias).filter(id=context.job_id).update(
        lease_token=uuid.uuid4(), leased_by="thief"
    )
    return "done, but too late"


def worker(using: str, **options) -> Worker:
    return Worker(
        queues=["w"], using=using, install_signal_handlers=False, listen_notify=False, **options
    )


def row(using: str, job_id: int) -> Job:
    return Job.objects.using(using).get(id=job_id)


@both_stores
def test_an_untuned_worker_claims_25_jobs_in_one_pass(using):
    """The default concurrency is what one claim takes: 25 (was 10; docs/decisions.md)."""
    jobqueue.enqueue_many(
        [{"queue": "w", "job_type": ADD, "payload": {"a": n, "b": 0}} for n in range(30)],
        using=using,
    )
    w = worker(using)

    assert w.run_once() == 25
    assert Job.objects.using(using).filter(state=JobState.SUCCEEDED).count() == 25


@both_stores
def test_a_succeeding_job_ends_succeeded_with_its_result(using):
    job_id = jobqueue.enqueue("w", ADD, {"a": 2, "b": 3}, using=using)
    w = worker(using, concurrency=2)

    assert w.run_once() == 1

    job = row(using, job_id)
    assert (job.state, job.result, job.attempts, job.lease_token) == (
        JobState.SUCCEEDED,
        5,
        1,
        None,
    )
    assert w.stats["succeeded"] == 1 and w.running_jobs == 0
    assert w.run_once() == 0  # nothing left to claim


@job
def unstorable_result() -> dict:
    """Return what JSON cannot hold: the work is done, the result cannot be stored."""
    return {"at": timezone.now()}


@both_stores
def test_a_result_that_cannot_be_stored_is_said_on_the_succeeded_job(using):
    """Issue 33: only a log line said why the result was null; the job's history says it now."""
    job_id = jobqueue.enqueue("w", "tests.worker.test_loop.unstorable_result", using=using)

    assert worker(using).run_once() == 1

    job = row(using, job_id)
    assert (job.state, job.result, job.attempts) == (JobState.SUCCEEDED, None, 1)
    [entry] = job.errors
    assert entry["kind"] == "result_not_stored"
    assert "result['at']" in entry["message"] and entry["attempt"] == 1
    assert entry["at"]  # the store's clock, as every entry
    if using == "default":  # what the operator reads
        shown = cli("show", str(job_id))
        assert "result_not_stored" in shown.stdout and "result['at']" in shown.stdout


@both_stores
@override_settings(JOBQUEUE=FAR_BACKOFF)
def test_a_raising_job_is_scheduled_with_its_error_in_history(using):
    job_id = jobqueue.enqueue("w", FAIL, {"message": "partner down"}, max_attempts=3, using=using)
    w = worker(using)

    assert w.run_once() == 1

    job = row(using, job_id)
    assert (job.state, job.attempts, job.lease_token) == (JobState.SCHEDULED, 1, None)
    assert job.run_at > timezone.now() + timedelta(seconds=500)
    [entry] = job.errors
    assert (entry["attempt"], entry["type"], entry["message"]) == (
        1,
        "ConnectionError",
        "partner down",
    )
    assert w.stats["retried"] == 1 and w.stats["dead"] == 0


@both_stores
def test_the_last_attempt_goes_dead(using):
    job_id = jobqueue.enqueue("w", FAIL, {"message": "still down"}, max_attempts=1, using=using)
    w = worker(using)

    assert w.run_once() == 1

    job = row(using, job_id)
    assert (job.state, job.dead_reason, job.attempts) == (
        JobState.DEAD,
        DeadReason.ATTEMPTS_EXHAUSTED,
        1,
    )
    assert [e["message"] for e in job.errors] == ["still down"]
    assert w.stats["dead"] == 1 and w.stats["retried"] == 0


@both_stores
def test_a_job_whose_lease_was_stolen_records_nothing(using):
    job_id = jobqueue.enqueue("w", STEAL, {"alias": using}, using=using)
    w = worker(using)

    assert w.run_once() == 1  # the run ended: its outcome was discarded

    job = row(using, job_id)
    # The thief's lease stands: no result, no finish, the state the thief left.
    assert (job.state, job.leased_by, job.result, job.finished_at) == (
        JobState.LEASED,
        "thief",
        None,
        None,
    )
    assert w.stats["lost"] == 1 and w.stats["succeeded"] == 0
    assert w.running_jobs == 0


@both_stores
def test_the_heartbeat_service_extends_the_lease_and_marks_a_lost_one(using):
    kept = make_job(JobState.READY, using=using, queue="w").id
    stolen = make_job(JobState.READY, using=using, queue="w").id
    store = get_store(using)
    claimed = {c.id: c for c in store.claim(["w"], "w1", 2, 30.0)}
    assert set(claimed) == {kept, stolen}
    before = row(using, kept).lease_until
    Job.objects.using(using).filter(id=stolen).update(lease_token=uuid.uuid4())
    runs = Runs()
    for c in claimed.values():
        context = JobContext(
            job_id=c.id,
            job_type=c.job_type,
            queue=c.queue,
            attempt=c.attempt,
            max_attempts=c.max_attempts,
            worker_id="w1",
        )
        runs.add(Run(claimed=c, context=context))
    heartbeat = Heartbeat(
        store,
        runs,
        worker_id="w1",
        lease_s=3600.0,
        db_lock=threading.Lock(),
        stopping=threading.Event(),
    )

    assert heartbeat.run_once() == 1

    assert row(using, kept).lease_until >= before + timedelta(seconds=3000)
    assert runs.get(kept).context.lease_lost is False
    assert runs.get(stolen).context.lease_lost is True


@both_stores
@override_settings(JOBQUEUE=FAR_BACKOFF)
def test_the_reaper_service_hands_expired_leases_back_or_dead_letters_them(using):
    expired = timezone.now() - timedelta(minutes=5)
    left = make_job(JobState.LEASED, using=using, queue="w", lease_until=expired, max_attempts=2).id
    spent = make_job(
        JobState.LEASED, using=using, queue="w", lease_until=expired, max_attempts=1
    ).id
    live = make_job(JobState.LEASED, using=using, queue="w").id
    reaper = Reaper(
        get_store(using), interval_s=1.0, hold=ReapHold(0.0), stopping=threading.Event()
    )
    assert reaper.ready()

    assert reaper.run_once() == (1, 1)

    job = row(using, left)
    assert (job.state, job.attempts, job.lease_token) == (JobState.SCHEDULED, 1, None)
    assert [e["kind"] for e in job.errors] == ["lease_expired"]
    job = row(using, spent)
    assert (job.state, job.dead_reason) == (JobState.DEAD, DeadReason.ATTEMPTS_EXHAUSTED)
    assert row(using, live).state == JobState.LEASED
    assert reaper.run_once() == (0, 0)
