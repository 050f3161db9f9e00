"""Internal: the parts of the queue the ``django.tasks`` backend calls, loaded on first use.

Django imports a ``TASKS`` backend's module whenever ``django.tasks`` is used, also in a project
that lists the backend but not the ``jobqueue`` app; that module must then import without
jobqueue's models, so that the backend's ``check()`` can report the missing app (jobqueue.E006)
instead of the import failing. Everything here reaches the models, so ``backend.py`` imports this
module only inside the calls that need it.
"""

from __future__ import annotations

from jobqueue.client import enqueue_or_get
from jobqueue.tasks.results import read_result
from jobqueue.tasks.runner import run_task

__all__ = ["enqueue_or_get", "read_result", "run_task"]
