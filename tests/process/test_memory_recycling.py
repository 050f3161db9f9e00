"""Recycling by resident memory (``runworkers --max-memory-per-child MB``), in real processes.

A handler that leaks 40 MB per job, one job at a time: after each job the worker reads its
resident memory; past the limit it stops claiming, drains and ends, and a fresh process (the
supervisor's new child, or the same pid re-run in place) takes the rest. Outcomes: every job
ran once (one line each, attempt 1), succeeded; more than one process (or run) did them; the
reason is logged and counted, never as a spent attempt.
"""

from __future__ import annotations

import uuid

import pytest

import jobqueue
from jobqueue.models import GaugeSnapshot, Job
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

LEAK = "tests.testapp.jobs.leak_memory"
JOBS = 12


def recycles() -> int:
    row = GaugeSnapshot.objects.filter(name="recycles:memory").values_list("body", flat=True)
    return int(row.first() or 0)


def leaking_jobs(tmp_path) -> tuple[str, list[int], object]:
    q = f"mem-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "runs.txt"
    ids = jobqueue.enqueue_many(
        [{"queue": q, "job_type": LEAK, "payload": {"path": str(path), "mb": 40}}] * JOBS
    )
    return q, ids, path


def assert_each_ran_once(ids, path) -> set[str]:
    lines = record_lines(path)
    assert sorted(int(line[0]) for line in lines) == sorted(ids)  # each once
    assert {line[1] for line in lines} == {"1"}  # attempt 1: no attempt was charged
    jobs = Job.objects.filter(id__in=ids)
    assert {(j.state, j.attempts) for j in jobs} == {("succeeded", 1)}
    return {line[2] for line in lines}


def test_the_supervisor_replaces_a_child_past_its_memory_limit(workers, tmp_path):
    q, ids, path = leaking_jobs(tmp_path)
    before = recycles()
    proc = workers.start(
        "--queues", q, "--processes", "1", "--concurrency", "1",
        "--max-memory-per-child", "200", settings=FAST_WORKER_SETTINGS,
    )  # fmt: skip
    wait_for(lambda: Job.objects.filter(id__in=ids, state="succeeded").count() == JOBS, 120)
    log = workers.log(proc)
    pids = assert_each_ran_once(ids, path)
    assert len(pids) >= 2, log  # the first child was replaced
    assert "is over --max-memory-per-child 200 MB" in log
    assert "recycled (a job overran, or it reached --max-tasks or --max-memory-per-child)" in log
    assert recycles() >= before + len(pids) - 1


def test_a_single_process_past_its_memory_limit_reruns_itself_in_place(workers, tmp_path):
    q, ids, path = leaking_jobs(tmp_path)
    proc = workers.start(
        "--queues", q, "--concurrency", "1", "--max-memory-per-child", "200",
        settings=FAST_WORKER_SETTINGS,
    )  # fmt: skip
    wait_for(lambda: Job.objects.filter(id__in=ids, state="succeeded").count() == JOBS, 120)
    log = workers.log(proc)
    assert assert_each_ran_once(ids, path) == {str(proc.pid)}  # same pid: re-run in place
    assert log.count("recycling this process in place") >= 1, log
    assert "is over --max-memory-per-child 200 MB" in log
