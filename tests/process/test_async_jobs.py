"""``async def`` jobs in a real ``runworkers`` process: many at once on one event loop, and a
SIGTERM's drain (running async jobs get the grace; past it their tasks are cancelled and their
leases released, attempt not counted).

The handlers await a local HTTP server this test starts (``tests/httpserver.py``); outcomes are
job states, attempts and what the server saw, never durations.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator

import pytest

import jobqueue
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.httpserver import LocalHTTPServer

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

FETCH = "tests.testapp.async_jobs.fetch"


@pytest.fixture
def server() -> Iterator[LocalHTTPServer]:
    srv = LocalHTTPServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def fetches(q: str, url: str, n: int) -> list[int]:
    return jobqueue.enqueue_many(
        [{"queue": q, "job_type": FETCH, "payload": {"url": url}, "timeout_s": 300}] * n
    )


def test_a_drain_lets_running_async_jobs_finish_within_the_grace(workers, server):
    q, key = f"aq-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:8]
    ids = fetches(q, f"{server.url}/wait/{key}", 30)
    proc = workers.start(
        "--queues", q, "--concurrency", "2", "--grace", "60", settings=FAST_WORKER_SETTINGS
    )
    # All 30 await the server at once, on two threads' worth of slots.
    wait_for(lambda: server.served["wait"] == 30, timeout=60)
    proc.send_signal(signal.SIGTERM)
    workers.wait_for_log(proc, "no new claims")
    server.release(key)
    assert workers.exit_code(proc, timeout=60) == 0
    jobs = Job.objects.filter(id__in=ids)
    assert {(j.state, j.attempts, j.result) for j in jobs} == {("succeeded", 1, 200)}


def test_async_jobs_still_running_after_the_grace_are_cancelled_and_released(workers, server):
    q = f"aq-{uuid.uuid4().hex[:6]}"
    ids = fetches(q, f"{server.url}/hold", 5)
    proc = workers.start("--queues", q, "--grace", "0.5", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: server.served["hold"] == 5, timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=60) == 0
    jobs = Job.objects.filter(id__in=ids)
    # Back to ready, the attempt not counted: the next worker runs them from the start.
    assert {(j.state, j.attempts) for j in jobs} == {("ready", 0)}
    assert all(j.errors[-1]["kind"] == "released" for j in jobs)
    assert workers.log(proc).count("released at shutdown (attempt not counted)") == 5
