"""The job of ``bench/shapes.py``: ``bench.shape_jobs.stamp`` appends ``"<key> <time.time()>"``
to a file as the handler starts, so a job's start is the handler's wall time (the pickup the
bench reports: handler start - the wall time at which ``enqueue`` was called). Its enqueuer is
``bench/shape_enqueue.py``."""

from __future__ import annotations

import time

from jobqueue import job


@job
def stamp(path: str, key: str, **_: object) -> None:
    """Append ``key`` and the handler's start (wall clock, seconds) to ``path``."""
    started = time.time()
    with open(path, "a") as out:
        out.write(f"{key} {started:.6f}\n")
