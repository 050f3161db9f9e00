"""What an operator sees after ``kill -9`` of a supervised worker process mid-job.

Real supervisor (``runworkers --processes 2``), real SIGKILL; waits follow progress.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    record_lines,
    requires_postgres,
    wait_for,
)
from tests.jobqueue_cli import cli
from tests.testapp import jobs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    requires_postgres(),
]


def test_a_job_whose_process_was_killed_says_why_its_attempt_ended(workers, tmp_path):
    path, flag = tmp_path / "runs.txt", tmp_path / "go"
    job_id = jobqueue.enqueue(
        "killed1", jobs.hold_until_file, {"path": str(path), "flag": str(flag)}
    )
    sup = workers.start(
        "--queues",
        "killed1",
        "--processes",
        "2",
        "--concurrency",
        "1",
        settings=FAST_WORKER_SETTINGS,
    )
    first = wait_for(lambda: record_lines(path))
    victim = int(first[0][2])
    held_by = Job.objects.get(id=job_id).leased_by
    os.kill(victim, signal.SIGKILL)
    # Run again (attempt 2) in another process, then let it finish.
    wait_for(lambda: len(record_lines(path)) == 2, timeout=60)
    flag.touch()
    wait_for(lambda: Job.objects.get(id=job_id).state == "succeeded", timeout=60)

    job = Job.objects.get(id=job_id)
    last = job.last_error
    assert last is not None, job.errors
    assert (last["kind"], last["worker"], last["attempt"]) == ("process_died", held_by, 1)
    said = "its worker process was killed by SIGKILL while running it alone; the attempt counts"
    assert last["message"] == said
    listed = cli("jobs", "--queue", "killed1", "--json", in_process=False)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["last_error"] == f"ProcessDied: {said}", row
    shown = cli("show", str(job_id), in_process=False)
    assert shown.returncode == 0, shown.stderr
    assert f"process_died 1 {held_by}: ProcessDied: {said}" in shown.stdout, shown.stdout
    # The supervisor's hand-back removed the dead process's Worker row: health, the admin and
    # ``jobqueue workers`` count no silent worker (nothing to prune an hour later).
    assert not Worker.objects.filter(pid=victim).exists()

    def workers_check() -> dict:
        checked = json.loads(cli("health", "--json", in_process=False).stdout)
        return next(c for c in checked["checks"] if c["name"] == "workers")

    # The slot's replacement registers when it starts: wait for it, then no silent worker.
    seen = wait_for(lambda: (c := workers_check())["alive"] == 2 and c, timeout=60)
    assert seen["silent"] == 0, seen
    assert sup.poll() is None
