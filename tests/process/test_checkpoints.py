"""Long jobs resume from their checkpoint after a SIGKILL (issue 19), with real worker processes.

A 200-step job writes each step's effect and its checkpoint in one transaction and reports
progress after each. Its worker is killed with SIGKILL at a random step, once progress shows
that step; a new worker reaps the lease, runs the next attempt, and that attempt starts at the
last checkpoint: every step ran exactly once, and none after the checkpoint was lost.
"""

from __future__ import annotations

import os
import random
import signal

import pytest

import jobqueue
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.testapp import jobs
from tests.testapp.models import StepRun

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

STEPS = 200


def test_sigkilled_long_job_resumes_from_its_checkpoint_and_runs_each_step_once(workers):
    kill_at = random.randint(20, 150)
    job_id = jobs.checkpointed_steps.enqueue(queue="longjobs", steps=STEPS, step_s=0.02)
    first = workers.start("--queues", "longjobs", settings=FAST_WORKER_SETTINGS)

    def reached() -> bool:
        progress = jobqueue.status(job_id).progress
        return progress is not None and progress.done >= kill_at

    wait_for(reached, timeout=120, interval=0.01)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    killed_at = jobqueue.status(job_id)
    assert killed_at.state == "leased" and killed_at.progress.total == STEPS
    assert killed_at.progress.done < STEPS, "the job finished before the kill"

    workers.start("--queues", "longjobs", settings=FAST_WORKER_SETTINGS)
    done = jobqueue.wait(job_id, timeout=180)

    job = Job.objects.get(id=job_id)
    resumed_at = done.result["resumed_at"]
    assert job.attempts >= 2
    assert resumed_at >= killed_at.progress.done >= kill_at
    runs = list(StepRun.objects.filter(job_id=job_id).values_list("step", "attempt"))
    assert sorted(step for step, _ in runs) == list(range(STEPS)), "a step ran twice or never"
    assert {a for s, a in runs if s >= resumed_at} == {job.attempts}
    assert all(a < job.attempts for s, a in runs if s < resumed_at)
    assert (job.checkpoint, job.progress_done, job.progress_total) == (
        {"next": STEPS},
        STEPS,
        STEPS,
    )
    assert jobqueue.status(job_id).progress.fraction == 1.0
