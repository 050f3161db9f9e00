"""Plain factory functions that build state-consistent Job rows through the ORM.

They write rows directly, the way River's ``testfactory.Job`` does, so a test can start from any
state without driving the whole lifecycle. Every row they build satisfies the invariants the store
relies on: a ``leased`` row has a token, an expiry, a holder and at least one attempt; a finished
row has ``finished_at``; a ``dead`` row has a reason and an error entry.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobqueue.models import Job
from jobqueue.retries import RunOutcome
from jobqueue.settings.rates import RateLimits
from jobqueue.states import DeadReason, JobState
from jobqueue.store import get_store
from jobqueue.store.finishing import ack_outcome, finished
from jobqueue.store.postgres.jobs import LANE_WINDOW
from jobqueue.store.shared import claim_params as rate_params
from jobqueue.worker.context import JobContext
from jobqueue.worker.executor import execute

__all__ = ["error_entry", "insert_ready_jobs", "job_kwargs", "make_job", "make_jobs"]


def error_entry(
    attempt: int, *, at: datetime | None = None, message: str = "boom"
) -> dict[str, Any]:
    """Return an error-history entry shaped like the ones the store writes."""
    return {
        "kind": "error",
        "attempt": attempt,
        "at": (at or timezone.now()).isoformat(),
        "worker": "factory-worker",
        "type": "ConnectionError",
        "message": message,
        "traceback": "Traceback (most recent call last):\nConnectionError: boom\n",
    }


def job_kwargs(state: str = JobState.READY, **overrides: Any) -> dict[str, Any]:
    """Return the field values of a state-consistent job (without saving it).

    Args:
        state: one of the :class:`~jobqueue.states.JobState` values.
        **overrides: any Job field; applied last, so a test can build an inconsistent row on
            purpose.
    """
    now = timezone.now()
    fields: dict[str, Any] = {
        "queue": "default",
        "type": "tests.testapp.jobs.noop",
        "payload": {},
        "priority": 0,
        "tenant_id": "",
        "state": state,
        # A minute in the past: on PostgreSQL a test's transaction pins now() to its start, so a
        # row stamped with this process's "now" would not yet be due for the claim.
        "run_at": now - timedelta(minutes=1),
        "attempts": 0,
        "max_attempts": 8,
        "timeout_s": 30.0,
        "errors": [],
        "created_at": now,
    }
    if state == JobState.SCHEDULED:
        fields["run_at"] = now + timedelta(hours=1)
    elif state == JobState.LEASED:
        fields.update(
            attempts=1,
            lease_token=uuid.uuid4(),
            lease_until=now + timedelta(seconds=30),
            leased_by="factory-worker",
            started_at=now,
        )
    elif state == JobState.SUCCEEDED:
        fields.update(attempts=1, started_at=now, finished_at=now, result=None)
    elif state == JobState.DEAD:
        attempts = overrides.get("attempts", overrides.get("max_attempts", 3))
        fields.update(
            attempts=attempts,
            max_attempts=overrides.get("max_attempts", attempts),
            errors=[error_entry(n) for n in range(1, attempts + 1)],
            dead_reason=DeadReason.ATTEMPTS_EXHAUSTED,
            started_at=now,
            finished_at=now,
        )
    elif state == JobState.CANCELLED:
        fields.update(finished_at=now)
    elif state == JobState.WAITING:
        fields.update(waiting_for=1)  # one parent not succeeded yet (no JobParent row: counts only)
    elif state != JobState.READY:
        raise ValueError(f"unknown job state {state!r}")
    fields.update(overrides)
    return fields


def make_job(state: str = JobState.READY, using: str = "default", **overrides: Any) -> Job:
    """Insert and return one state-consistent job on database alias ``using``."""
    job = Job(**job_kwargs(state, **overrides))
    job.save(using=using, force_insert=True)
    return job


def make_jobs(
    count: int, state: str = JobState.READY, using: str = "default", **overrides: Any
) -> list[Job]:
    """Bulk-insert ``count`` jobs of one state (one INSERT) and return them."""
    return Job.objects.using(using).bulk_create(
        [Job(**job_kwargs(state, **overrides)) for _ in range(count)]
    )


def claim_params(
    queues: list[str],
    *,
    max_jobs: int = 10,
    weights: list[float] | None = None,
    default_cap: int | None = None,
    caps: dict[str, int] | None = None,
    strict: bool = False,
    tenant_weights: dict[str, float] | None = None,
    concurrency_limits: dict[str, int] | None = None,
    lane_window: int = LANE_WINDOW,
) -> dict[str, Any]:
    """Return the parameters of ``store/sql/claim.sql``, for running it under EXPLAIN."""
    return {
        "queues": queues,
        "weights": weights or [1.0] * len(queues),
        "start": [0.0] * len(queues),
        "strict": strict,
        "default_cap": default_cap,
        "cap_tenants": list(caps or {}),
        "cap_values": list((caps or {}).values()),
        "tenant_weights": json.dumps(tenant_weights or {}),
        "limits": json.dumps(concurrency_limits or {}),
        "worker_id": "w1",
        "max_jobs": max_jobs,
        "lane_window": lane_window,
        "lease_s": 30.0,
        "now": None,
        **rate_params(RateLimits()),
    }


def ack(store: Any, job_id: int, lease_token: uuid.UUID, result_json: str = "null") -> str:
    """Record one success through ``store.finish_many``; return the new state.

    Raises:
        LeaseLost: the lease is no longer held under ``lease_token``.
    """
    return finished(store.finish_many([ack_outcome(job_id, lease_token, result_json)]), job_id)


def nack(
    store: Any,
    job_id: int,
    lease_token: uuid.UUID,
    error: dict[str, Any],
    *,
    dead_reason: str | None,
    retry_at: datetime | None = None,
    delay_s: float = 0.0,
) -> str:
    """Record one failure through ``store.finish_many``: dead with ``dead_reason``, else
    scheduled at ``retry_at`` or after ``delay_s`` seconds; return the new state.

    Raises:
        LeaseLost: the lease is no longer held under ``lease_token``.
    """
    if dead_reason is not None:
        outcome = RunOutcome(
            job_id=job_id,
            lease_token=lease_token,
            state=JobState.DEAD,
            error=error,
            dead_reason=dead_reason,
        )
    else:
        outcome = RunOutcome(
            job_id=job_id,
            lease_token=lease_token,
            state=JobState.SCHEDULED,
            error=error,
            retry_at=retry_at,
            delay_s=delay_s,
        )
    return finished(store.finish_many([outcome]), job_id)


def run_one(
    queue: str = "q",
    worker_id: str = "w1",
    now: datetime | None = None,
    *,
    retry_in: float | None = None,
) -> tuple[Any, RunOutcome]:
    """Claim one job of ``queue``, run its handler, record the outcome with ``finish_many``.

    What a worker does for one job, without the worker's threads (``Worker.run_once`` is the
    whole worker in-process; this is for tests of a single run's outcome).

    Args:
        queue: the queue to claim from.
        worker_id: the claiming worker's id.
        now: the database clock to claim at (None: the database's).
        retry_in: seconds until a retry, replacing the backoff (None keeps the backoff).

    Returns:
        ``(claimed job, outcome)``.
    """
    store = get_store()
    [claimed] = store.claim([queue], worker_id, 1, 30.0, now=now)
    context = JobContext(
        job_id=claimed.id,
        job_type=claimed.job_type,
        queue=claimed.queue,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        worker_id=worker_id,
    )
    outcome = execute(claimed, context)
    if retry_in is not None and outcome.state == JobState.SCHEDULED:
        outcome = replace(outcome, delay_s=retry_in, retry_at=None)
    store.finish_many([outcome])
    return claimed, outcome


def insert_ready_jobs(
    db: Any, queue: str, job_type: str, n: int, payload: str = "{}", *, timeout_s: int = 30
) -> None:
    """Insert ``n`` ready jobs in one statement: the setup of a load test, not what it tests.

    Args:
        db: what runs the statement, ``db.execute(sql, params)``: a Django cursor, or a psycopg
            connection (to a private cluster's database).
        queue, job_type: the jobs' queue and type.
        n: how many jobs.
        payload: every job's payload, JSON text.
        timeout_s: every job's run limit, seconds.
    """
    db.execute(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
        " SELECT %s, %s, %s::jsonb, 0, '', 'ready', now(), 0, 8, %s, '', '[]', '', now()"
        " FROM generate_series(1, %s)",
        [queue, job_type, payload, timeout_s, n],
    )


def claim_bitmaps(plan: str) -> set[str]:
    """Return the indexes a claim's EXPLAIN reads by bitmap scans, but the limited types' probe.

    A bitmap scan reads every match before a LIMIT: none in a claim, but for the seek of each
    rate-limited type (``jobqueue_job_claim_type``), which the statement, planned per call for
    its own types, may plan so; the claim's function plans with bitmap scans off
    (store/postgres/routines.py).
    """
    return set(re.findall(r"Bitmap Index Scan on (\w+)", plan)) - {"jobqueue_job_claim_type"}
