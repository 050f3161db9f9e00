"""jobqueue: a durable job queue for Django, stored in PostgreSQL.

The public API is re-exported lazily (PEP 562), so importing ``jobqueue`` never touches models
before the app registry is ready.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "BatchStatus",
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobResult",
    "JobStatus",
    "Progress",
    "WaitError",
    "WaitTimeout",
    "ack",
    "batch",
    "batch_status",
    "cancel",
    "chain",
    "claim",
    "close_breaker",
    "enqueue",
    "enqueue_many",
    "heartbeat",
    "job",
    "nack",
    "open_breaker",
    "pause",
    "pause_type",
    "paused",
    "result",
    "resume",
    "resume_type",
    "retry",
    "retry_many",
    "run_now",
    "schedule",
    "status",
    "step",
    "wait",
]

_LAZY = {
    "batch": "jobqueue.batches",
    "batch_status": "jobqueue.batches",
    "BatchStatus": "jobqueue.batches",
    "enqueue": "jobqueue.client",
    "enqueue_many": "jobqueue.client",
    "claim": "jobqueue.consumer",
    "heartbeat": "jobqueue.consumer",
    "ack": "jobqueue.consumer",
    "nack": "jobqueue.consumer",
    "cancel": "jobqueue.repairs",
    "retry": "jobqueue.repairs",
    "retry_many": "jobqueue.repairs",
    "run_now": "jobqueue.repairs",
    "schedule": "jobqueue.cron.entries",
    "open_breaker": "jobqueue.breakers",
    "close_breaker": "jobqueue.breakers",
    "pause": "jobqueue.pausing",
    "pause_type": "jobqueue.pausing",
    "paused": "jobqueue.pausing",
    "resume": "jobqueue.pausing",
    "resume_type": "jobqueue.pausing",
    "job": "jobqueue.jobs",
    "chain": "jobqueue.chains",
    "step": "jobqueue.chains",
    "JobContext": "jobqueue.jobtypes",
    "status": "jobqueue.results",
    "result": "jobqueue.results",
    "wait": "jobqueue.results",
    "JobStatus": "jobqueue.jobstatus",
    "JobResult": "jobqueue.jobstatus",
    "Progress": "jobqueue.jobstatus",
    "WaitError": "jobqueue.errors",
    "WaitTimeout": "jobqueue.errors",
    "JobFailed": "jobqueue.errors",
    "JobCancelled": "jobqueue.errors",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jobqueue' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
