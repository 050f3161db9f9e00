"""The backend for Django's tasks framework (``django.tasks``, Django 6.0+): its public path.

Put it in ``TASKS`` and code written against Django's standard API runs on jobqueue's workers::

    TASKS = {
        "default": {
            "BACKEND": "jobqueue.backends.JobQueueBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"max_attempts": 5, "timeout_s": 60, "backoff": {"base_seconds": 2}},
        }
    }

The code lives in the package ``jobqueue.tasks`` (options, backend, results, runner); this module
re-exports its public names, so ``jobqueue.backends.JobQueueBackend`` stays the path to name in
settings. A task's job type is the task's own module path, so jobs enqueued before the move run
unchanged. This module imports ``django.tasks``; on Django 5.2, which has none, it cannot be
imported.
"""

from jobqueue.tasks.backend import JobQueueBackend
from jobqueue.tasks.options import BackendOptions, JobQueueTask, parse_backend_params
from jobqueue.tasks.results import to_task_result, to_task_result_status

__all__ = [
    "BackendOptions",
    "JobQueueBackend",
    "JobQueueTask",
    "parse_backend_params",
    "to_task_result",
    "to_task_result_status",
]
