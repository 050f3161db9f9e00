"""The reliability issue's fault-injection scenarios: real processes, real signals, a real server.

Scenarios 4 (long job kept alive by heartbeats) and 5 (zombie after SIGSTOP) live in
test_process_faults.py; scenario 8 (bad input at every entry point) in test_bad_input.py.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict

import psycopg
import pytest
from django.db import connection

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    ROOT,
    migrated_database,
    record_lines,
    requires_postgres,
    start_runworkers,
    wait_for,
)
from tests.factories import insert_ready_jobs
from tests.testapp import jobs
from tests.testapp.models import Run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    requires_postgres(),
]

FINISHED = {"succeeded", "dead", "cancelled"}


def state(job_id: int) -> str:
    return Job.objects.values_list("state", flat=True).get(id=job_id)


def worker_pids() -> list[int]:
    return list(Worker.objects.values_list("pid", flat=True))


# -- 1. kill -9 storm -----------------------------------------------------------------------------


def test_kill_storm_loses_nothing_and_reruns_only_what_a_killed_worker_held(workers):
    """4 supervised worker processes drain 5,000 jobs while one is SIGKILLed every ~2 s.

    End: every job succeeded, none leased, each ran at least once, and every run but the last of
    a job was in a process that was killed (live workers never duplicate work).
    """
    n = 5000
    with connection.cursor() as cursor:
        insert_ready_jobs(
            cursor, "storm", "tests.testapp.jobs.recorded_work", n, '{"sleep_s": 0.02}'
        )
    settings = {**FAST_WORKER_SETTINGS, "LEASE_SECONDS": 2}
    sup = workers.start(
        "--queues", "storm", "--processes", "4", "--concurrency", "4", settings=settings
    )
    killed: set[int] = set()
    rng = random.Random(5)
    deadline = time.monotonic() + 600  # bounds a hang only
    while Job.objects.filter(queue="storm", state="succeeded").count() < n:
        assert time.monotonic() < deadline, workers.log(sup)
        time.sleep(2)
        pids = [p for p in worker_pids() if p not in killed]
        if pids and len(killed) < 6:
            victim = rng.choice(pids)
            try:
                os.kill(victim, signal.SIGKILL)
                killed.add(victim)
            except ProcessLookupError:
                pass
    assert killed, "no worker was killed: the storm did not happen"
    assert Job.objects.filter(queue="storm").exclude(state="succeeded").count() == 0
    runs: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for job_id, run_id, pid in Run.objects.values_list("job_id", "id", "pid"):
        runs[job_id].append((run_id, pid))
    ids = set(Job.objects.filter(queue="storm").values_list("id", flat=True))
    assert set(runs) == ids
    for job_id, job_runs in runs.items():
        earlier = sorted(job_runs)[:-1]
        assert all(pid in killed for _, pid in earlier), (job_id, job_runs, killed)
    assert sup.poll() is None, workers.log(sup)
    # Every killed child had served: replaced at once, no crash-loop backoff (issue 32).
    assert "it had served: replacing it now" in workers.log(sup)


# -- 2. database restart --------------------------------------------------------------------------


def test_database_restart_mid_drain_loses_nothing(private_cluster, tmp_path):
    """Restart the (private) server while 2 workers drain 2,000 jobs: all succeed, the workers
    ride it out, and the log says so in a bounded number of lines (no traceback storm)."""
    url, env = migrated_database(
        private_cluster,
        "jq_restart",
        POLL_INTERVAL_SECONDS=0.1,
        LEASE_SECONDS=3,
        REAPER_INTERVAL_SECONDS=0.5,
    )
    with psycopg.connect(url, autocommit=True) as conn:
        insert_ready_jobs(conn, "restart", "tests.testapp.jobs.noop", 2000)
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = start_runworkers(env, logs, "--queues", "restart", "--concurrency", "4")

    def counts() -> dict[str, int]:
        with psycopg.connect(url, autocommit=True) as conn:
            return dict(conn.execute("SELECT state, count(*) FROM jobqueue_job GROUP BY 1"))

    def workers_up() -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute("SELECT count(*) FROM jobqueue_worker").fetchone()[0]

    try:
        # Both workers are connected and working before the restart: on a loaded machine one
        # can start so late that it first connects after it, and sees no outage to ride out.
        wait_for(lambda: workers_up() == 2, timeout=120)
        wait_for(lambda: counts().get("succeeded", 0) >= 200, timeout=120)
        private_cluster.restart()
        wait_for(lambda: counts().get("succeeded", 0) == 2000, timeout=180)
        assert counts() == {"succeeded": 2000}
        assert [p.poll() for p in procs] == [None, None]
        for log in logs:
            text = log.read_text()
            assert "database is back" in text, text
            assert "Traceback" not in text, text
            assert (
                len([ln for ln in text.splitlines() if "ERROR" in ln or "unavailable" in ln]) < 20
            )
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
    assert [p.returncode for p in procs] == [0, 0]


def test_enqueue_while_the_database_is_down_raises_queue_unavailable(private_cluster):
    url, env = migrated_database(private_cluster, "jq_down")
    private_cluster.stop()
    script = (
        "import django; django.setup()\n"
        "import jobqueue\n"
        "from jobqueue.errors import QueueUnavailable\n"
        "try:\n"
        "    jobqueue.enqueue('q', 'tests.testapp.jobs.noop', {})\n"
        "except QueueUnavailable as exc:\n"
        "    print('QueueUnavailable:', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    said = "QueueUnavailable: database 'default' is unreachable (connection lost)"
    assert said in result.stdout, result.stdout + result.stderr
    private_cluster.start()
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobqueue_job").fetchone()[0] == 0


# -- 3. deploy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("grace", [10, 1])
def test_deploy_with_ten_running_jobs(workers, tmp_path, grace):
    """SIGTERM a worker running ten 3-second jobs: with --grace 10 all ten ack; with --grace 1
    the unfinished go back to ready without spending the attempt, and another worker completes
    them."""
    path = tmp_path / "runs.txt"
    ids = [
        jobqueue.enqueue("deploy", jobs.sleep_on_first_run, {"path": str(path), "sleep_s": 3})
        for _ in range(10)
    ]
    w1 = workers.start(
        "--queues",
        "deploy",
        "--concurrency",
        "10",
        "--grace",
        str(grace),
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: len(record_lines(path)) == 10, timeout=30)
    w1.send_signal(signal.SIGTERM)
    assert workers.exit_code(w1, timeout=30) == 0
    if grace == 10:
        assert {state(i) for i in ids} == {"succeeded"}
        assert set(Job.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}
        assert len(record_lines(path)) == 10
        return
    assert {state(i) for i in ids} == {"ready"}
    assert set(Job.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {0}
    for job in Job.objects.filter(id__in=ids):
        assert [e["kind"] for e in job.errors] == ["released"]
    w2 = workers.start("--queues", "deploy", "--concurrency", "10", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: {state(i) for i in ids} == {"succeeded"}, timeout=30)
    assert set(Job.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}
    assert len(record_lines(path)) == 20
    w2.send_signal(signal.SIGTERM)
    assert workers.exit_code(w2) == 0


# -- 6. runaway -----------------------------------------------------------------------------------


def test_runaway_job_dies_of_timeout_and_its_process_is_recycled(workers, tmp_path):
    """A handler that never returns, timeout_s=2, two attempts, under --processes 1: each
    overrun recycles the process; the job ends dead (reason timeout) after 2 attempts, and other
    jobs keep flowing meanwhile."""
    path = tmp_path / "runs.txt"
    runaway = jobqueue.enqueue(
        "runaway", jobs.spin_forever, {"path": str(path)}, timeout_s=2, max_attempts=2
    )
    sup = workers.start(
        "--queues",
        "runaway",
        "--processes",
        "1",
        "--concurrency",
        "2",
        "--grace",
        "1",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: state(runaway) in FINISHED, timeout=60)
    job = Job.objects.get(id=runaway)
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "timeout", 2)
    assert [e["type"] for e in job.errors] == ["JobTimeout", "JobTimeout"]
    others = [jobqueue.enqueue("runaway", jobs.noop, {}) for _ in range(5)]
    wait_for(lambda: {state(i) for i in others} == {"succeeded"}, timeout=30)
    log = workers.log(sup)
    assert (
        log.count(
            "recycled (a job overran, or it reached --max-tasks or --max-memory-per-child); "
            "replacing it"
        )
        == 2
    ), log
    assert len(record_lines(path)) == 2


# -- 7. poison ------------------------------------------------------------------------------------


def test_poison_job_that_exits_its_process_is_dead_after_max_attempts(workers, tmp_path):
    """A handler calling os._exit(1), max_attempts=3, under the supervisor: three claims, three
    restarts, then dead (attempts exhausted); each death, alone in its process, is charged and
    recorded at once by the supervisor's hand-back (process_died); other jobs flow."""
    path = tmp_path / "runs.txt"
    poison = jobqueue.enqueue("poison7", jobs.exit_process, {"path": str(path)}, max_attempts=3)
    sup = workers.start(
        "--queues",
        "poison7",
        "--processes",
        "1",
        "--concurrency",
        "2",
        settings={**FAST_WORKER_SETTINGS, "LEASE_SECONDS": 1},
    )
    wait_for(lambda: state(poison) in FINISHED, timeout=60)
    job = Job.objects.get(id=poison)
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "attempts_exhausted", 3)
    assert [(e["kind"], e["charged"]) for e in job.errors] == [("process_died", True)] * 3
    assert [line[1] for line in record_lines(path)] == ["1", "2", "3"]
    others = [jobqueue.enqueue("poison7", jobs.noop, {}) for _ in range(5)]
    wait_for(lambda: {state(i) for i in others} == {"succeeded"}, timeout=30)
    log = workers.log(sup)
    assert log.count("exited with status 1") == 3, log
    assert sup.poll() is None
