"""jobqueue: a durable job queue for Django, stored in PostgreSQL.

The public API is re-exported lazily (PEP 562), so importing ``jobqueue`` never touches models
before the app registry is ready.
"""

from __future__ import annotations

import importlib
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
    "batch": "jobqueue.flows.batches",
    "batch_status": "jobqueue.flows.batches",
    "BatchStatus": "jobqueue.flows.batches",
    "enqueue": "jobqueue.client",
    "enqueue_many": "jobqueue.client",
    "claim": "jobqueue.consumer",
    "heartbeat": "jobqueue.consumer",
    "ack": "jobqueue.consumer",
    "nack": "jobqueue.consumer",
    "cancel": "jobqueue.ops.repairs",
    "retry": "jobqueue.ops.repairs",
    "retry_many": "jobqueue.ops.repairs",
    "run_now": "jobqueue.ops.repairs",
    "schedule": "jobqueue.cron.entries",
    "open_breaker": "jobqueue.limits.breakers",
    "close_breaker": "jobqueue.limits.breakers",
    "pause": "jobqueue.limits.pauses",
    "pause_type": "jobqueue.limits.pauses",
    "paused": "jobqueue.limits.pauses",
    "resume": "jobqueue.limits.pauses",
    "resume_type": "jobqueue.limits.pauses",
    "job": "jobqueue.client",
    "chain": "jobqueue.flows.chains",
    "step": "jobqueue.client",
    "JobContext": "jobqueue.worker.context",
    "status": "jobqueue.flows.results",
    "result": "jobqueue.flows.results",
    "wait": "jobqueue.flows.results",
    "JobStatus": "jobqueue.flows.status",
    "JobResult": "jobqueue.flows.status",
    "Progress": "jobqueue.flows.status",
    "WaitError": "jobqueue.errors",
    "WaitTimeout": "jobqueue.errors",
    "JobFailed": "jobqueue.errors",
    "JobCancelled": "jobqueue.errors",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jobqueue' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
