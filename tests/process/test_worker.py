"""Real ``runworkers`` processes on PostgreSQL: every outcome end to end, cancel of a running job,
``--burst``, and many processes claiming from one queue at once.

Worker subprocesses read what the test commits, so these tests use
``django_db(transaction=True)``. Waits are ``wait_for`` with generous timeouts; durations are
only bounded loosely (the machine is shared).
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import jobqueue
from jobqueue.errors import LeaseLost
from jobqueue.models import Job, Worker
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    ROOT,
    record_lines,
    requires_postgres,
    subprocess_env,
    wait_for,
)
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

FINISHED = ("succeeded", "dead", "cancelled")

#: One line per recorded outcome: "job 12 tests.testapp.jobs.add attempt 1/8 succeeded in 0.4 ms",
#: "... attempt 1/2 failed in 0.3 ms, retry in 0.10 s: ...",
#: "... attempt 2/2 dead (reason) after 0.2 ms: ...".
OUTCOME = re.compile(
    r"job (?P<id>\d+) (?P<type>\S+) attempt (?P<attempt>\d+)/(?P<max>\d+) "
    r"(?P<outcome>succeeded|failed|dead)\b.*? (?P<ms>\d+\.\d) ms"
)


def outcome_lines(log: str) -> dict[int, list[dict[str, str]]]:
    """Group the worker's outcome log lines by job id, in log order."""
    found: dict[int, list[dict[str, str]]] = {}
    for line in log.splitlines():
        match = OUTCOME.search(line)
        if match:
            found.setdefault(int(match["id"]), []).append({**match.groupdict(), "line": line})
    return found


def all_finished(ids: list[int]) -> bool:
    return Job.objects.filter(id__in=ids, state__in=FINISHED).count() == len(ids)


def test_every_outcome_through_a_real_worker(workers):
    q = "life"
    with transaction.atomic():
        adds = {jobqueue.enqueue(q, jobs.add, {"a": i, "b": 10}): i + 10 for i in range(3)}
        fails = [
            jobqueue.enqueue(q, jobs.fail, {"message": f"down {i}"}, max_attempts=2)
            for i in range(2)
        ]
        permanent = jobqueue.enqueue(q, jobs.fail_permanently, {"message": "card declined"})
        unknown = jobqueue.enqueue(q, "tests.testapp.jobs.no_such_handler", {}, max_attempts=1)
        snoozer = jobqueue.enqueue(q, jobs.retry_after, {"seconds": 0.2}, max_attempts=3)
    ids = [*adds, *fails, permanent, unknown, snoozer]

    proc = workers.start(
        "--queues",
        q,
        "--concurrency",
        "4",
        "--worker-id",
        "life-w1",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: Worker.objects.filter(worker_id="life-w1", pid=proc.pid).exists())
    wait_for(lambda: all_finished(ids), timeout=30)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0
    assert not Worker.objects.filter(worker_id="life-w1").exists()

    rows = {job.id: job for job in Job.objects.filter(id__in=ids)}
    for job_id, total in adds.items():
        job = rows[job_id]
        assert (job.state, job.attempts, job.result, job.errors, job.dead_reason) == (
            "succeeded",
            1,
            total,
            [],
            "",
        )
        assert job.finished_at is not None and job.lease_token is None

    def failures(job: Job) -> list[tuple[str, int, str, str]]:
        return [(e["kind"], e["attempt"], e["type"], e["message"]) for e in job.errors]

    for i, job_id in enumerate(fails):
        job = rows[job_id]
        assert (job.state, job.dead_reason, job.attempts) == ("dead", "attempts_exhausted", 2)
        assert failures(job) == [
            ("error", 1, "ConnectionError", f"down {i}"),
            ("error", 2, "ConnectionError", f"down {i}"),
        ]
        assert "ConnectionError: down" in job.errors[-1]["traceback"]

    job = rows[permanent]
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "permanent_error", 1)
    assert failures(job) == [("error", 1, "PermanentError", "card declined")]

    job = rows[unknown]
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "unknown_type", 1)
    assert [(e["kind"], e["attempt"], e["type"]) for e in job.errors] == [
        ("error", 1, "UnknownJobType")
    ]

    job = rows[snoozer]
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "attempts_exhausted", 3)
    assert [(e["kind"], e["attempt"], e["type"]) for e in job.errors] == [
        ("error", n, "RetryAfter") for n in (1, 2, 3)
    ]
    # RetryAfter is exact: each next attempt ran no sooner than 0.2 s after the previous failure.
    failed_at = [datetime.fromisoformat(e["at"]) for e in job.errors]
    assert all(b - a >= timedelta(seconds=0.19) for a, b in itertools.pairwise(failed_at))

    # One log line per outcome, naming job id, type, attempt and a duration.
    log = workers.log(proc)
    lines = outcome_lines(log)
    assert set(lines) == set(ids), log
    expected = {
        **{job_id: ["succeeded"] for job_id in adds},
        **{job_id: ["failed", "dead"] for job_id in fails},
        permanent: ["dead"],
        unknown: ["dead"],
        snoozer: ["failed", "failed", "dead"],
    }
    for job_id, outcomes in expected.items():
        seen = lines[job_id]
        assert [entry["outcome"] for entry in seen] == outcomes, seen
        assert [int(entry["attempt"]) for entry in seen] == list(range(1, len(outcomes) + 1))
        assert {entry["type"] for entry in seen} == {rows[job_id].type}
        assert {int(entry["max"]) for entry in seen} == {rows[job_id].max_attempts}
    assert all("retry in 0.10 s" in e["line"] for job_id in fails for e in lines[job_id][:1])
    assert all("retry in 0.20 s" in e["line"] for e in lines[snoozer][:2])
    assert "dead (permanent_error)" in lines[permanent][0]["line"]
    assert "dead (unknown_type)" in lines[unknown][0]["line"]
    assert "stopped: succeeded 3, retried 4, dead 5, cancelled 0, lost 0, released 0" in log


@pytest.mark.parametrize("draining", [False, True], ids=["running", "draining"])
def test_cancel_of_a_running_job_reaches_the_handler(workers, tmp_path, draining):
    """FIELD-CASES 5: cancel a leased job; at its next heartbeat the handler is told
    (``context.cancel_requested``) and returns.

    The job ends ``cancelled`` (its result kept, with a "cancelled" history entry) and the worker
    goes on: it runs K next, or, while draining after SIGTERM, still delivers the cancel but
    claims nothing new.
    """
    path = tmp_path / "runs.txt"
    q = "cancel"
    j = jobqueue.enqueue(q, jobs.wait_for_lease_lost, {"path": str(path), "max_s": 120})
    k = jobqueue.enqueue(q, jobs.record, {"path": str(path)})
    proc = workers.start(
        "--queues",
        q,
        "--concurrency",
        "1",
        "--grace",
        "120",
        "--worker-id",
        "cancel-w1",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: [str(j), "1", str(proc.pid), "start"] in record_lines(path))
    token = Job.objects.get(id=j).lease_token
    assert token is not None
    if draining:
        proc.send_signal(signal.SIGTERM)
        workers.wait_for_log(proc, "SIGTERM: no new claims")

    assert jobqueue.cancel(j) is True
    wait_for(
        lambda: [str(j), "1", str(proc.pid), "cancel_requested"] in record_lines(path), timeout=60
    )

    if draining:
        assert workers.exit_code(proc, timeout=60) == 0
        assert Job.objects.get(id=k).state == "ready"
        assert Job.objects.get(id=k).attempts == 0
    else:
        wait_for(lambda: Job.objects.get(id=k).state == "succeeded", timeout=60)
        assert proc.poll() is None, workers.log(proc)
        assert Job.objects.get(id=k).attempts == 1
        proc.send_signal(signal.SIGTERM)
        assert workers.exit_code(proc) == 0

    job = Job.objects.get(id=j)
    assert (job.state, job.attempts, job.result) == (
        "cancelled",
        1,
        "stopped early: cancel_requested",
    )
    assert job.errors[-1]["kind"] == "cancelled"
    assert job.finished_at is not None and job.lease_token is None
    assert not [e for e in job.errors if e.get("kind") in ("error", "lease_expired")]
    assert [r[3] for r in record_lines(path) if r[0] == str(j)] == ["start", "cancel_requested"]
    with pytest.raises(LeaseLost):
        jobqueue.heartbeat(j, token)
    with pytest.raises(LeaseLost):
        jobqueue.ack(j, token, "late")
    assert Job.objects.get(id=j).state == "cancelled"
    log = workers.log(proc)
    assert f"job {j} tests.testapp.jobs.wait_for_lease_lost attempt 1/8: cancel requested" in log
    assert ", cancelled 1, lost 0, " in log


def test_sigterm_wakes_an_idle_worker_at_once(workers):
    """An idle worker waiting out a 600 s poll interval exits on SIGTERM: long before the
    interval could end (the exit is waited for 120 s, a bound for a loaded machine)."""
    proc = workers.start(
        "--queues",
        "idle",
        "--worker-id",
        "idle-w1",
        settings={**FAST_WORKER_SETTINGS, "POLL_INTERVAL_SECONDS": 600},
    )
    workers.wait_for_log(proc, "worker idle-w1: queues idle", timeout=60)
    wait_for(lambda: Worker.objects.filter(worker_id="idle-w1").exists(), timeout=60)
    # Settled into its poll wait: its heartbeat thread has beaten since it registered.
    registered = Worker.objects.get(worker_id="idle-w1").last_seen_at
    wait_for(
        lambda: Worker.objects.filter(worker_id="idle-w1", last_seen_at__gt=registered).exists(),
        timeout=60,
    )
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=120) == 0
    assert not Worker.objects.filter(worker_id="idle-w1").exists()


def test_burst_on_an_empty_queue_exits_at_once(workers):
    # With a 600 s poll interval, a burst worker that waited one poll before exiting would run
    # into the 120 s timeout (subprocess.TimeoutExpired fails the test).
    result = workers.run(
        "--burst",
        "--queues",
        "burst-empty",
        settings={**FAST_WORKER_SETTINGS, "POLL_INTERVAL_SECONDS": 600},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "stopped: succeeded 0, retried 0, dead 0, cancelled 0, lost 0, released 0" in result.stderr
    )
    assert Worker.objects.count() == 0


def test_burst_runs_every_ready_job_then_exits(workers):
    with transaction.atomic():
        ids = [jobqueue.enqueue("burst", jobs.noop, {"n": n}) for n in range(200)]
    result = workers.run(
        "--burst",
        "--queues",
        "burst",
        "--concurrency",
        "8",
        settings=FAST_WORKER_SETTINGS,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "stopped: succeeded 200, retried 0, dead 0, cancelled 0, lost 0, released 0"
        in result.stderr
    )
    assert Counter(Job.objects.filter(id__in=ids).values_list("state", "attempts")) == {
        ("succeeded", 1): 200
    }
    assert Worker.objects.count() == 0


def test_four_processes_of_four_threads_claim_each_job_exactly_once(tmp_path):
    """5,000 ready jobs, 16 claimers in 4 processes, claims of 10: no job is handed out twice."""
    total, processes, threads = 5000, 4, 4
    past = timezone.now() - timedelta(seconds=1)
    Job.objects.bulk_create(
        [
            Job(
                queue="contention",
                type="tests.testapp.jobs.noop",
                payload={"n": n},
                state="ready",
                run_at=past,
            )
            for n in range(total)
        ],
        batch_size=1000,
    )
    ids = set(Job.objects.filter(queue="contention").values_list("id", flat=True))
    assert len(ids) == total

    env = subprocess_env()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                os.path.join("tests", "claimers.py"),
                "contention",
                "--threads",
                str(threads),
                "--name",
                f"p{n}",
                "--sync-dir",
                str(tmp_path),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    try:
        wait_for(
            lambda: all(
                (tmp_path / f"ready-p{n}").exists() or procs[n].poll() is not None
                for n in range(processes)
            ),
            timeout=60,
        )
        (tmp_path / "go").touch()
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err

    per_process = [[int(line) for line in out.split()] for out, _ in outputs]
    claimed = [job_id for chunk in per_process for job_id in chunk]
    duplicates = {job_id: n for job_id, n in Counter(claimed).items() if n > 1}
    assert duplicates == {}
    assert set(claimed) == ids
    assert len(claimed) == total
    # Every process took part (they started together), so the claims really raced.
    assert all(per_process), [err for _, err in outputs]
    assert Counter(Job.objects.filter(queue="contention").values_list("state", "attempts")) == {
        ("leased", 1): total
    }
    assert jobqueue.claim("contention", "late", 10) == []
