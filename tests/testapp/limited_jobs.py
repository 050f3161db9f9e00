"""Job types with concurrency limits (issue 18), for the tests that enqueue and run them.

Not named jobs.py, so nothing imports it at startup: a worker or producer finds a handler here
by its dotted type name alone.
"""

import time

from jobqueue import job


@job(concurrency_key=lambda account_id, **_: f"acct:{account_id}", concurrency_limit=2)
def per_account(account_id, sleep_s=0.0, **kwargs):
    """At most two jobs of one account run at once; sleeps ``sleep_s`` seconds."""
    time.sleep(sleep_s)


@job(concurrency_limit=3)
def per_type(**kwargs):
    """At most three jobs of this type run at once."""


@job(dependency="partner-api")
def partner_call(**kwargs):
    """Limited only when JOBQUEUE["CONCURRENCY_LIMITS"] lists "dependency:partner-api"."""


@job(concurrency_key=lambda region=None, **_: region and f"region:{region}", concurrency_limit=1)
def maybe_regional(**kwargs):
    """Limited per region when the payload names one; not limited otherwise."""


@job(concurrency_key=lambda n, **_: 100 // n, concurrency_limit=1)
def bad_key(n, **kwargs):
    """A key function that fails (n=0) or returns no string (any other n)."""
