"""A job type only a test that enqueues it by name imports (through the registry's resolve)."""

from jobqueue import job


@job(priority=-3, max_attempts=2, timeout_s=45)
def lazy(**kwargs):
    return None
