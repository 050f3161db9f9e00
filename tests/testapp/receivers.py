"""Receivers of jobqueue's signals for the process tests (imported by tests/testapp/jobs.py).

With ``JOBQUEUE_TEST_SIGNAL_LOG`` set, each receiver appends one JSON line to that file, so a test
can see what a worker process sent. With ``JOBQUEUE_BENCH_NO_RECEIVERS`` set
(bench/profile_worker.py ``--no-receivers``) none is connected, as in a project that connects none.
"""

import json
import os

from django.dispatch import receiver

from jobqueue import signals as jobqueue_signals


def log(name, **fields):
    """Append one JSON line for signal ``name`` to $JOBQUEUE_TEST_SIGNAL_LOG, if set."""
    path = os.environ.get("JOBQUEUE_TEST_SIGNAL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"signal": name, "pid": os.getpid(), **fields}) + "\n")


def _connect(signal):
    """Return ``@receiver(signal)``, or a no-op decorator under ``JOBQUEUE_BENCH_NO_RECEIVERS``."""
    if os.environ.get("JOBQUEUE_BENCH_NO_RECEIVERS"):
        return lambda func: func
    return receiver(signal)


@_connect(jobqueue_signals.job_started)
def _on_job_started(sender, job_id, attempt, **kwargs):
    log("job_started", job_id=job_id, attempt=attempt)


@_connect(jobqueue_signals.job_succeeded)
def _on_job_succeeded(sender, job_id, attempt, result, **kwargs):
    log("job_succeeded", job_id=job_id, attempt=attempt, result=result)


@_connect(jobqueue_signals.job_retrying)
def _on_job_retrying(sender, job_id, attempt, error, delay_s, **kwargs):
    log("job_retrying", job_id=job_id, attempt=attempt, error=error["type"], delay_s=delay_s)


@_connect(jobqueue_signals.job_dead)
def _on_job_dead(sender, job_id, attempt, error, reason, **kwargs):
    log("job_dead", job_id=job_id, attempt=attempt, error=error["type"], reason=reason)


@_connect(jobqueue_signals.job_lease_lost)
def _on_job_lease_lost(sender, job_id, attempt, status, **kwargs):
    log("job_lease_lost", job_id=job_id, attempt=attempt, status=status)


@_connect(jobqueue_signals.job_cancelled)
def _on_job_cancelled(sender, job_id, attempt=None, status=None, **kwargs):
    log("job_cancelled", job_id=job_id, attempt=attempt, status=status)
