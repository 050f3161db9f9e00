"""Bounded transactions under real faults (hardening items 1 and 10).

1. A worker frozen (SIGSTOP) inside the tenant-capped claim, holding the claim turn: the server
   ends its idle transaction after the idle limit, and the other workers drain meanwhile.
10. An outage of the database longer than the lease (3 x lease, on a private cluster): jobs whose
   handler returned during it are acked when the database is back, not reaped and run again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

import jobqueue
from jobqueue.models import Job
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    migrated_database,
    requires_postgres,
    start_runworkers,
    wait_for,
)
from tests.factories import insert_ready_jobs
from tests.testapp.hooks import FREEZE_IN_CLAIM

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), requires_postgres()]

NOOP = "tests.testapp.jobs.noop"


def stopped(pid: int) -> bool:
    """Return whether process ``pid`` is stopped (SIGSTOP): state T in /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return any(line.split()[1] == "T" for line in status.splitlines() if line.startswith("State:"))


def test_a_worker_frozen_inside_the_capped_claim_does_not_stop_the_others(
    workers, tmp_path, monkeypatch
):
    """Item 1. Expected: while W1 stays frozen with the claim turn, W2 and W3 drain all 60 jobs
    (before the fix: none, until W1 resumes); W1's session is ended by the server (its locks go
    with it); once resumed, W1 logs it and claims again."""
    settings = {**FAST_WORKER_SETTINGS, "TENANT_MAX_RUNNING": 2}
    marker = tmp_path / "frozen.txt"
    monkeypatch.setenv(FREEZE_IN_CLAIM, str(marker))
    frozen = workers.start("--queues", "capped", "--no-scheduler", settings=settings)
    monkeypatch.delenv(FREEZE_IN_CLAIM)
    wait_for(lambda: marker.exists(), timeout=60)
    pid, backend = map(int, marker.read_text().split())
    assert pid == frozen.pid
    wait_for(lambda: stopped(pid), timeout=10)
    for i in range(60):
        jobqueue.enqueue("capped", NOOP, {"i": i}, tenant_id=f"t{i % 3}")
    others = [
        workers.start("--queues", "capped", "--no-scheduler", settings=settings) for _ in range(2)
    ]
    try:
        wait_for(
            lambda: Job.objects.filter(queue="capped", state="succeeded").count() == 60,
            timeout=60,
        )
        # Ordering, not a duration: all of it happened while W1 was still frozen.
        assert stopped(pid)
        with psycopg.connect(_url(), autocommit=True) as conn:
            alive = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backend]
            ).fetchone()[0]
        assert alive == 0, "the frozen worker's session outlived its idle limit"
    finally:
        os.kill(pid, signal.SIGCONT)
    for proc in others:
        # Under load one of them may drain nothing and still be starting: a SIGTERM before its
        # handler is installed kills it (-15). It handles stops once it says it is serving.
        workers.wait_for_log(proc, ": queues ", timeout=60)
    for proc in others:
        proc.send_signal(signal.SIGTERM)
    for proc in others:
        assert workers.exit_code(proc) == 0
    # W1 carries on: it claims (alone now) what is enqueued next.
    later = [jobqueue.enqueue("capped", NOOP, {"later": i}, tenant_id="t9") for i in range(3)]
    wait_for(lambda: Job.objects.filter(id__in=later, state="succeeded").count() == 3, 60)
    assert set(Job.objects.filter(id__in=later).values_list("leased_by", flat=True)) != {""}
    log = workers.log(frozen)
    assert "idle-in-transaction" in log, log
    assert frozen.poll() is None, log


def _url() -> str:
    from tests.conftest import database_url

    return database_url()


# -- item 10: outage longer than the lease -------------------------------------------------------


def test_jobs_finished_during_an_outage_longer_than_the_lease_do_not_run_again(
    private_cluster, tmp_path
):
    """Item 10. 10 jobs run on 2 workers; the server stops; their handlers return while it is
    down; it stays down for 3 x lease. Expected: each job ran once (attempt 1), succeeded, and
    has no "lease expired" entry (before the fix: some were reaped and ran a second time)."""
    lease = 3.0
    url, env = migrated_database(
        private_cluster,
        "jq_outage",
        LEASE_SECONDS=lease,
        REAPER_INTERVAL_SECONDS=0.5,
        POLL_INTERVAL_SECONDS=0.1,
    )
    runs, gate = tmp_path / "runs.txt", tmp_path / "gate"
    payload = f'{{"path": "{runs}", "gate": "{gate}"}}'
    with psycopg.connect(url, autocommit=True) as conn:
        insert_ready_jobs(
            conn, "outage", "tests.testapp.jobs.wait_for_gate", 10, payload, timeout_s=120
        )
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = start_runworkers(env, logs, "--queues", "outage", "--concurrency", "5")

    def marks(kind: str) -> Counter:
        text = runs.read_text() if runs.exists() else ""
        return Counter(ln.split()[0] for ln in text.splitlines() if ln.endswith(kind))

    try:
        wait_for(lambda: len(marks("start")) == 10, timeout=60)
        private_cluster.stop("fast")
        gate.touch()  # the handlers return while the server is down: their acks must wait
        wait_for(lambda: len(marks("done")) == 10, timeout=30)
        time.sleep(3 * lease)  # the outage itself (the fault), not a wait for progress
        private_cluster.start()

        def states() -> Counter:
            with psycopg.connect(url, autocommit=True) as conn:
                return Counter(s for (s,) in conn.execute("SELECT state FROM jobqueue_job"))

        wait_for(lambda: states()["succeeded"] == 10, timeout=120)
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT id, attempts, jsonb_array_length(errors) FROM jobqueue_job"
            ).fetchall()
        reruns = sum(n - 1 for n in marks("start").values())
        assert reruns == 0, (reruns, rows, [log.read_text() for log in logs])
        assert all(attempts == 1 and errors == 0 for _, attempts, errors in rows), rows
        assert [p.poll() for p in procs] == [None, None]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
