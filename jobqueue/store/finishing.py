"""Internal: outcomes as the stores record them (``finish_many``), shared by both stores.

* :func:`ack_outcome` is the outcome of a success (``jobqueue.ack``); :func:`finished` reads one
  job's recorded state from what ``finish_many`` returned, or raises ``LeaseLost``.
* :func:`charge_expired` is the reaper's and the hand-back's retry-or-dead decision for a lease
  that ran out: :func:`jobqueue.retries.decide` with no exception and the type's backoff.
* :func:`target_fields` is the ORM store's one mapping of a target state to the columns it sets
  (``finish_many``, the reaper, the hand-back); ``finish_many.sql`` is its PostgreSQL twin.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from jobqueue.errors import LeaseLost
from jobqueue.models.metrics import EXPIRED_KIND
from jobqueue.retries import Backoff, RunOutcome, decide
from jobqueue.settings.conf import get_settings
from jobqueue.states import DeadReason, JobState
from jobqueue.store.interface import ExpiredLease, ReapDecision

__all__ = [
    "ack_outcome",
    "charge_expired",
    "charged_outcome",
    "died_entry",
    "died_words",
    "expired_entry",
    "finished",
    "lease_of",
    "target_fields",
]


def ack_outcome(job_id: int, lease_token: uuid.UUID, result_json: str) -> RunOutcome:
    """Return the outcome ``ack(job_id, lease_token, result_json)`` records: succeeded."""
    return RunOutcome(
        job_id=job_id, lease_token=lease_token, state=JobState.SUCCEEDED, result_json=result_json
    )


def finished(states: dict[int, str], job_id: int) -> str:
    """Return the state ``finish_many`` recorded for ``job_id``.

    Raises:
        LeaseLost: it recorded none: the job is no longer leased under the token given.
    """
    try:
        return states[job_id]
    except KeyError:
        raise LeaseLost(job_id) from None


def charge_expired(lease: ExpiredLease, backoff: Backoff | None = None) -> ReapDecision:
    """Return the decision for a lease that ran out (or whose process died running it alone).

    The run counts as an attempt: :func:`jobqueue.retries.decide` with no exception, so the job
    is dead (``attempts_exhausted``) when its attempts are spent, else retried after the
    backoff. This is the default ``decide`` of ``Store.reap`` and ``Store.hand_back``; the
    store knows no job types, so the workers' reaper and hand-back pass the type's backoff
    (``jobqueue.maintenance.reaper.charge_by_type``).

    Args:
        lease: the expired lease (its attempts include the run that ended).
        backoff: the policy to use; default ``JOBQUEUE["BACKOFF"]``.

    Returns:
        A :class:`~jobqueue.store.interface.ReapDecision`: dead, or the retry delay in seconds.
    """
    outcome = decide(
        lease.id,
        lease.lease_token,
        attempt=lease.attempts,
        max_attempts=lease.max_attempts,
        error=None,
        backoff=backoff or get_settings().backoff,
    )
    return ReapDecision(
        id=lease.id,
        lease_token=lease.lease_token,
        dead=outcome.state == JobState.DEAD,
        delay_s=outcome.delay_s,
    )


#: The columns of a lease as :func:`lease_of` reads them (expired_leases.sql and
#: dead_worker_leases.sql select the same).
LEASE_COLUMNS = (
    "id",
    "lease_token",
    "type",
    "attempts",
    "max_attempts",
    "leased_by",
    "lease_until",
)


def lease_of(row: Any) -> ExpiredLease:
    """Return the ``ExpiredLease`` of a named row of :data:`LEASE_COLUMNS`."""
    return ExpiredLease.of(row)


def expired_entry(lease: ExpiredLease) -> dict[str, Any]:
    """Return the error entry of a lease the reaper found run out (the store adds ``at``).

    Its message names the worker that held the lease: the one list row an operator reads
    (``jobqueue jobs``, the admin's last error) says whose process to look at.
    """
    until = lease.lease_until.isoformat() if lease.lease_until is not None else "?"
    return {
        "kind": EXPIRED_KIND,
        "attempt": lease.attempts,
        "worker": lease.leased_by,
        "type": "LeaseExpired",
        "message": (
            f"lease expired at {until} without an ack: worker {lease.leased_by or '?'} "
            "stopped renewing it (its process died or froze)"
        ),
    }


def died_words(cause: str) -> str:
    """Return how a worker process died, for a hand-back's error message.

    Args:
        cause: the supervisor's name for the death (``jobqueue.worker.causes``): ``"OOM"``, a
            signal's name (``"SIGKILL"``), ``"signal N"`` or ``"exit status N"``; empty if
            not known.

    Returns:
        ``"was killed by SIGKILL"``, ``"was killed by the kernel's OOM killer"``, ``"exited
        with status 1"``, or ``"died"``.
    """
    if cause == "OOM":
        return "was killed by the kernel's OOM killer"
    if cause.startswith(("SIG", "signal ")):
        return f"was killed by {cause}"
    if cause.startswith("exit status "):
        return f"exited with status {cause.removeprefix('exit status ')}"
    return "died"


def died_entry(lease: ExpiredLease, *, charged: bool, message: str) -> dict[str, Any]:
    """Return the error entry of a job whose worker process died (``Store.hand_back``)."""
    return {
        "kind": "process_died",
        "attempt": lease.attempts,
        "worker": lease.leased_by,
        "type": "ProcessDied",
        "charged": charged,
        "message": message,
    }


def charged_outcome(
    lease: ExpiredLease, decision: ReapDecision, entry: dict[str, Any]
) -> RunOutcome:
    """Return the outcome ``finish_many`` records for a lease charged as ``decision`` says.

    Dead (``attempts_exhausted``: a lease that ran out has no exception to read), or scheduled
    after ``decision.delay_s``; ``entry`` says why the run ended.
    """
    if decision.dead:
        return RunOutcome(
            job_id=lease.id,
            lease_token=lease.lease_token,
            state=JobState.DEAD,
            error=entry,
            dead_reason=DeadReason.ATTEMPTS_EXHAUSTED,
        )
    return RunOutcome(
        job_id=lease.id,
        lease_token=lease.lease_token,
        state=JobState.SCHEDULED,
        error=entry,
        delay_s=decision.delay_s,
    )


def target_fields(
    state: str,
    now: datetime,
    *,
    dead_reason: str | None = None,
    retry_at: datetime | None = None,
    delay_s: float = 0.0,
    result_json: str | None = None,
) -> dict[str, Any]:
    """Return the columns the ORM store sets to move a held job to ``state`` at ``now``.

    Args:
        state: ``succeeded``, ``scheduled`` or ``dead``.
        now: the store's clock.
        dead_reason: why it is dead (dead only; default ``attempts_exhausted``).
        retry_at: when it retries, exact (scheduled only); wins over ``delay_s``.
        delay_s: seconds from ``now`` to the retry (scheduled only).
        result_json: its result as JSON (succeeded only).

    Returns:
        Field values for ``QuerySet.update``; a cancel requested while it ran overrides them
        (``GenericFinishing._finish``).
    """
    if state == JobState.SUCCEEDED:
        return {
            "state": JobState.SUCCEEDED,
            "result": json.loads(result_json or "null"),
            "finished_at": now,
            "dead_reason": "",
        }
    if state == JobState.DEAD:
        return {
            "state": JobState.DEAD,
            "dead_reason": dead_reason or DeadReason.ATTEMPTS_EXHAUSTED,
            "finished_at": now,
        }
    return {
        "state": JobState.SCHEDULED,
        "run_at": retry_at or now + timedelta(seconds=delay_s),
        "finished_at": None,
        "dead_reason": "",
    }
