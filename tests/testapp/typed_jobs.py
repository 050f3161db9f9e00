"""Job types with ``@job`` defaults, for the tests that enqueue them every way there is.

Not named jobs.py, so nothing imports it at startup: a worker or producer finds a handler here
by its dotted type name alone.
"""

import time

from jobqueue import job
from jobqueue.errors import RetryAfter


@job(queue="typed", priority=7, max_attempts=3, timeout_s=60)
def typed(**kwargs):
    return None


@job(takes_context=True)
def retry_once_after(context, sleep_s=0.0, retry_s=2.0, **kwargs):
    """Sleep, then ask for a retry after ``retry_s`` on attempt 1; succeed on attempt 2."""
    time.sleep(sleep_s)
    if context.attempt == 1:
        raise RetryAfter(retry_s)
    return "done"


@job(takes_context=True)
def sleep_then_fail_on_second(context, sleep_s, **kwargs):
    """Sleep ``sleep_s`` (wakes early when told to stop) on attempt 1; fail on attempt 2."""
    if context.attempt == 1:
        context.wait_for_stop(sleep_s)
        return "slept"
    raise ConnectionError("attempt 2 fails")


@job
def sleep_for(sleep_s, **kwargs):
    time.sleep(sleep_s)
    return "slept"
