"""Field case 28, steps 1-5: a dedupe key on every retry path, with real workers.

Nack, the reaper, release and run-now never change which job holds a key (the job stays live),
so they cannot meet a unique violation. An operator retry of a dead or cancelled job whose key a
live job now holds raises ``DuplicateJob`` naming the queue, the key and that job, and changes
nothing; the admin's Retry reports it skipped, naming the holder, in a normal response;
``retry_many`` reports it without raising. Invariant, sampled every 100 ms: at most one live job
per (queue, key). (Step 6, the cron overlap policy, is a separate feature.)
"""

from __future__ import annotations

import os
import signal
import threading

import psycopg
import pytest

import jobqueue
from jobqueue.errors import DuplicateJob
from jobqueue.models import Job
from jobqueue.states import JobState
from tests.admin.test_pages import DEAD, client_for, confirm, messages_of
from tests.conftest import database_url, requires_postgres, wait_for

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

Q, K = "q28", "k"
SETTINGS = {
    "LEASE_SECONDS": 2,
    "REAPER_INTERVAL_SECONDS": 0.5,
    "POLL_INTERVAL_SECONDS": 0.1,
    "BACKOFF": {"policy": "none", "base_seconds": 0.1, "cap_seconds": 0.1},
}
RETRY_ONCE = "tests.testapp.typed_jobs.retry_once_after"
SLEEP = "tests.testapp.typed_jobs.sleep_for"
SLEEP_THEN_FAIL = "tests.testapp.typed_jobs.sleep_then_fail_on_second"


class LiveHolders:
    """Sample, every 100 ms on a connection of its own, the live jobs holding (Q, K)."""

    def __init__(self) -> None:
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._url = database_url()
        self._thread.start()

    def _run(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.wait(0.1):
                (n,) = conn.execute(
                    "SELECT count(*) FROM jobqueue_job WHERE queue = %s AND dedupe_key = %s "
                    "AND state IN ('ready', 'scheduled', 'leased')",
                    (Q, K),
                ).fetchone()
                self.most = max(self.most, n)
                self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def enqueue(job_type: str, payload: dict, **options) -> int:
    return jobqueue.enqueue(Q, job_type, payload, dedupe_key=K, **options)


def row(job_id: int) -> Job:
    return Job.objects.get(id=job_id)


def start_worker(workers, name: str):
    return workers.start(
        "--queues", Q, "--concurrency", "2", "--worker-id", name, settings=SETTINGS
    )


def test_retry_paths_never_collide_on_the_dedupe_key(workers, admin_user):
    sampler = LiveHolders()
    w1 = start_worker(workers, "c28-w1")
    try:
        # 1. A runs (sleeps 1 s, then asks to retry in 2 s); B while A is leased gets A's id.
        a = enqueue(RETRY_ONCE, {"sleep_s": 1.0, "retry_s": 2.0})
        wait_for(lambda: row(a).state == JobState.LEASED, timeout=60)
        assert enqueue(RETRY_ONCE, {}) == a
        # 2. A's first attempt ends scheduled (it still holds k): C gets A's id.
        wait_for(lambda: row(a).state == JobState.SCHEDULED, timeout=60)
        assert enqueue(RETRY_ONCE, {}) == a
        wait_for(lambda: row(a).state == JobState.SUCCEEDED, timeout=60)
        assert row(a).attempts == 2
        # D runs 3 s (not 1 s): it is certainly still live when the batch comes.
        d = enqueue(SLEEP, {"sleep_s": 3.0})
        assert d != a
        ids = jobqueue.enqueue_many(
            [{"queue": Q, "job_type": SLEEP, "payload": {"sleep_s": 0}, "dedupe_key": K}] * 3
        )
        assert ids == [d, d, d]
        wait_for(lambda: row(d).state == JobState.SUCCEEDED, timeout=60)

        # 3. E runs on W1, which is killed: the reaper makes E scheduled (k kept), W2 runs
        # attempt 2, which fails: E dead, attempts == 2.
        e = enqueue(SLEEP_THEN_FAIL, {"sleep_s": 60.0}, max_attempts=2)
        wait_for(lambda: row(e).state == JobState.LEASED, timeout=60)
        os.killpg(w1.pid, signal.SIGKILL)
        w1.wait(timeout=30)
        assert enqueue(SLEEP, {"sleep_s": 0}) == e  # leased by a dead worker: still E's key
        start_worker(workers, "c28-w2")
        wait_for(lambda: row(e).state == JobState.DEAD, timeout=60)
        dead_e = row(e)
        assert (dead_e.attempts, dead_e.dead_reason) == (2, "attempts_exhausted")
        assert [entry["kind"] for entry in dead_e.errors] == ["lease_expired", "error"]

        # 4. F takes the freed key; while F is live, retrying E is refused, naming F.
        f = enqueue(SLEEP, {"sleep_s": 10.0})
        assert f != e
        snapshot = Job.objects.filter(id=e).values().get()
        with pytest.raises(DuplicateJob) as excinfo:
            jobqueue.retry(e)
        assert (excinfo.value.queue, excinfo.value.dedupe_key, excinfo.value.existing_id) == (
            Q,
            K,
            f,
        )
        assert Job.objects.filter(id=e).values().get() == snapshot
        response = confirm(client_for(admin_user), DEAD, "retry_jobs", [e])
        assert response.status_code < 400
        assert messages_of(response) == [
            f"Skipped 1 job whose dedupe key a live job holds: #{e} (held by #{f})."
        ]
        result = jobqueue.retry_many([e])
        assert (result.retried, result.duplicate, result.holders) == ((), (e,), {e: f})
        assert Job.objects.filter(id=e).values().get() == snapshot
        wait_for(lambda: row(f).state == JobState.SUCCEEDED, timeout=60)
    finally:
        workers.stop_all()
    # Once F has finished, E's retry works, as in case 24 (workers stopped: E stays ready).
    assert jobqueue.retry(e) is True
    retried = row(e)
    assert (retried.state, retried.attempts, retried.finished_at) == ("ready", 0, None)
    assert jobqueue.cancel(e) is True  # frees k for step 5, through the API

    # 5. Workers stopped: a cancelled G whose key H took cannot be retried either.
    g = enqueue(SLEEP, {"sleep_s": 0})
    assert jobqueue.cancel(g) is True
    h = enqueue(SLEEP, {"sleep_s": 0})
    assert h != g
    with pytest.raises(DuplicateJob) as excinfo:
        jobqueue.retry(g)
    assert excinfo.value.existing_id == h
    assert row(g).state == JobState.CANCELLED

    sampler.stop()
    assert sampler.samples > 10
    assert sampler.most == 1
    for proc in workers.procs:
        log = workers.log(proc)
        assert "IntegrityError" not in log and "UniqueViolation" not in log, log
