"""Handlers the tests enqueue. Importable by worker subprocesses (autodiscovered as jobs.py)."""

import os
import signal
import time

from jobqueue import job
from jobqueue.errors import PermanentError, RetryAfter


@job
def noop(**kwargs):
    return None


@job
def add(a, b):
    return a + b


@job(takes_context=True)
def record(context, path, sleep_s=0.0, **kwargs):
    """Append 'job_id attempt pid' to a file, then sleep."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    time.sleep(sleep_s)
    return {"attempt": context.attempt}


@job(takes_context=True)
def sleep_on_first_attempt(context, path, sleep_s):
    """Record the attempt; sleep long on the first attempt only (to be killed mid-job)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    if context.attempt == 1:
        time.sleep(sleep_s)
    return "done"


@job(takes_context=True)
def kill_own_process(context, path):
    """A poison job: records its attempt, then kills its worker process outright."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
        f.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@job
def fail(message="boom"):
    raise ConnectionError(message)


@job
def fail_permanently(message="no"):
    raise PermanentError(message)


@job
def retry_after(seconds):
    raise RetryAfter(seconds)
