"""``async def`` jobs on the worker's event loop, in-process (``Worker.run_once``), both stores.

The handlers (``tests/testapp/async_jobs.py``) await a local HTTP server the test starts
(``tests/httpserver.py``). Concurrency is shown without a clock: ``/gather/<key>/<n>`` answers
only once ``n`` requests wait on it together, which one thread per job at ``--concurrency 1``
could never reach.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest

import jobqueue
from jobqueue.models import GaugeSnapshot, Job
from jobqueue.models.metrics import LOOP_STALL_MS_PREFIX, LOOP_STALLS_PREFIX
from jobqueue.states import JobState
from jobqueue.worker.loop import Worker
from jobqueue.worker.stalls import StallReporter
from tests.httpserver import LocalHTTPServer
from tests.testapp import async_jobs

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)

both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])

FETCH = "tests.testapp.async_jobs.fetch"
NOOP = "tests.testapp.jobs.noop"
assert async_jobs.fetch.name == FETCH  # registered before any Worker is built


@pytest.fixture
def server() -> Iterator[LocalHTTPServer]:
    srv = LocalHTTPServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def worker(using: str, **options) -> Worker:
    options.setdefault("concurrency", 1)
    return Worker(
        queues=["async"], using=using, install_signal_handlers=False, listen_notify=False, **options
    )


def drain(w: Worker) -> None:
    try:
        while w.run_once():
            pass
    finally:
        w._starter.loop.close()


def row(using: str, job_id: int) -> Job:
    return Job.objects.using(using).get(id=job_id)


@both_stores
def test_async_jobs_run_together_on_one_loop_beyond_the_thread_count(using, server):
    """20 jobs that can only finish together, on one thread slot: all succeed, each once."""
    key = uuid.uuid4().hex[:8]
    url = f"{server.url}/gather/{key}/20"
    ids = jobqueue.enqueue_many(
        [{"queue": "async", "job_type": FETCH, "payload": {"url": url}} for _ in range(20)],
        using=using,
    )
    w = worker(using, concurrency=1, async_concurrency=50)
    threads_before = w._handlers.threads

    assert w.run_once() == 20
    w._starter.loop.close()

    jobs = Job.objects.using(using).filter(id__in=ids)
    assert {(j.state, j.attempts, j.result) for j in jobs} == {(JobState.SUCCEEDED, 1, 200)}
    assert server.served["gather"] == 20
    assert w._handlers.threads == threads_before == 0  # no handler thread was started


@both_stores
def test_the_async_limit_caps_how_many_run_at_once(using, server):
    """At --async-concurrency 5, a group of 6 that must gather never completes: 5 time out."""
    key = uuid.uuid4().hex[:8]
    ids = jobqueue.enqueue_many(
        [
            {
                "queue": "async",
                "job_type": FETCH,
                "payload": {"url": f"{server.url}/gather/{key}/6"},
                "timeout_s": 1,
                "max_attempts": 1,
            }
            for _ in range(6)
        ],
        using=using,
    )
    w = worker(using, async_concurrency=5)
    assert w.run_once() == 5
    w._starter.loop.close()
    states = sorted(row(using, i).state for i in ids)
    assert states == [JobState.DEAD] * 5 + [JobState.READY]


@both_stores
def test_an_async_run_past_its_timeout_is_cancelled_and_recorded_as_a_timeout(using, tmp_path):
    marker = tmp_path / "cancelled"
    job_id = jobqueue.enqueue(
        "async",
        "tests.testapp.async_jobs.sleep_forever",
        {"marker": str(marker)},
        timeout_s=0.2,
        max_attempts=1,
        using=using,
    )
    w = worker(using)
    assert w.run_once() == 1
    job = row(using, job_id)
    assert job.state == JobState.DEAD
    assert job.errors[-1]["type"] == "JobTimeout"
    # The task was cancelled (a coroutine can be stopped): no runaway, no recycle.
    w._starter.loop.close()
    assert marker.read_text() == f"cancelled {job_id}"
    assert w._handlers.runaways == 0
    assert w._recycle is False


@both_stores
def test_an_operator_cancel_cancels_the_running_task(using):
    cancel_myself = "tests.testapp.async_jobs.cancel_myself"
    job_id = jobqueue.enqueue("async", cancel_myself, {"alias": using}, timeout_s=60, using=using)
    # Heartbeats every second: the cancel request is seen at the first one.
    w = worker(using, lease_s=3)
    assert w.run_once() == 1
    w._starter.loop.close()
    job = row(using, job_id)
    assert job.state == JobState.CANCELLED
    assert job.attempts == 1


@both_stores
def test_retry_after_and_permanent_errors_from_async_handlers(using):
    later = jobqueue.enqueue(
        "async", "tests.testapp.async_jobs.retry_after", {"seconds": 600}, using=using
    )
    never = jobqueue.enqueue("async", "tests.testapp.async_jobs.give_up", {}, using=using)
    w = worker(using)
    drain(w)
    retried, dead = row(using, later), row(using, never)
    assert retried.state == JobState.SCHEDULED
    assert 599 <= (retried.run_at - retried.started_at).total_seconds() <= 601
    assert dead.state == JobState.DEAD
    assert dead.errors[-1]["type"] == "PermanentError"


@both_stores
def test_progress_and_checkpoints_from_an_async_handler(using):
    job_id = jobqueue.enqueue("async", "tests.testapp.async_jobs.steps", {"total": 3}, using=using)
    drain(worker(using))
    job = row(using, job_id)
    assert job.state == JobState.SUCCEEDED
    assert job.result == 3
    assert (job.progress_done, job.progress_total) == (3, 3)
    assert job.checkpoint == {"done": 3}


@both_stores
def test_sync_and_async_jobs_of_one_claim_each_run_once(using, server):
    """One claim brings both kinds: the sync one takes the thread, the async ones the loop;
    a sync job beyond the free threads goes back uncharged and runs in a later pass."""
    url = f"{server.url}/delay/1"
    specs = []
    for n in range(6):
        specs.append({"queue": "async", "job_type": FETCH, "payload": {"url": url}})
        specs.append({"queue": "async", "job_type": NOOP, "payload": {"n": n}})
    ids = jobqueue.enqueue_many(specs, using=using)
    w = worker(using, concurrency=1, async_concurrency=10, poll_interval_s=0.05)
    drain(w)
    jobs = list(Job.objects.using(using).filter(id__in=ids))
    assert {(j.state, j.attempts) for j in jobs} == {(JobState.SUCCEEDED, 1)}
    assert server.served["delay"] == 6


@both_stores
def test_a_handler_that_blocks_the_loop_is_logged_and_counted(using, caplog):
    job_id = jobqueue.enqueue(
        "async", "tests.testapp.async_jobs.block_the_loop", {"seconds": 0.3}, using=using
    )
    w = worker(using)
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        drain(w)
    assert row(using, job_id).state == JobState.SUCCEEDED
    [line] = [r for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert f"job {job_id} tests.testapp.async_jobs.block_the_loop" in line.getMessage()
    assert line.duration_s >= 0.3  # the stall's length, as measured: at least the sleep
    reporter = StallReporter(w._starter.stalls, using=using)
    assert reporter.run_once() == 1
    assert reporter.run_once() == 0  # reported once
    counts = dict(
        GaugeSnapshot.objects.using(using)
        .filter(name__endswith="async_jobs.block_the_loop")
        .values_list("name", "body")
    )
    assert counts[f"{LOOP_STALLS_PREFIX}tests.testapp.async_jobs.block_the_loop"] == "1"
    assert int(counts[f"{LOOP_STALL_MS_PREFIX}tests.testapp.async_jobs.block_the_loop"]) >= 300


def test_the_metrics_count_event_loop_stalls_by_job_type(client):
    """What the reporter wrote is what Prometheus reads (PostgreSQL: the metrics' database)."""
    from django.test import override_settings

    from tests.ops.test_metrics import parse

    job_id = jobqueue.enqueue("async", "tests.testapp.async_jobs.block_the_loop", {"seconds": 0.2})
    w = worker("default")
    drain(w)
    assert row("default", job_id).state == JobState.SUCCEEDED
    StallReporter(w._starter.stalls, using="default").run_once()
    public = {"METRICS_PUBLIC": True, "METRICS_INTERVAL_SECONDS": 0}
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE=public):
        m = parse(client.get("/metrics/").content.decode())
    label = '{job_type="tests.testapp.async_jobs.block_the_loop"}'
    assert m[f"jobqueue_event_loop_stalls_total{label}"] == 1
    assert m[f"jobqueue_event_loop_stalled_seconds_total{label}"] >= 0.2
