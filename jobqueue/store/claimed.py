"""Internal: a claimed job, as the store hands it to whoever runs it.

A value type of the store seam that the executor reads without importing the store (the store
re-exports it as ``jobqueue.store.ClaimedJob``). A leaf: it imports nothing of ours.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["ClaimedJob"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    """A job a worker now holds a lease on.

    Attributes:
        id: the job id (also the idempotency key).
        job_type: the registered type name.
        payload: the decoded JSON payload (a dict of handler keyword arguments).
        attempt: this attempt's number (attempts after the claim), from 1.
        max_attempts: attempts allowed before the job is dead-lettered.
        timeout_s: hard limit on this run, seconds.
        lease_token: the fencing token every later write must present.
        lease_until: when the lease runs out (aware datetime, database clock).
        queue, priority, tenant_id: as enqueued.
        tag: the job's weighted-fair tag in this claim (``jobqueue/limits/fairness.py``).
        suspect: its worker process died while it ran beside other jobs; it must run alone
            (``jobqueue/worker/solo.py``).
    """

    id: int
    job_type: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    timeout_s: float
    lease_token: uuid.UUID
    lease_until: datetime
    queue: str
    priority: int
    tenant_id: str
    tag: float = 0.0
    suspect: bool = False
