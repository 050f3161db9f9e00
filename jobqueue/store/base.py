"""Internal: the store interface every backend implements, and its value objects.

A store owns all writes that move a job through its lifecycle. Every write after the claim is a
compare-and-set on ``(id, lease_token, state = 'leased')``: when it matches nothing it raises
:class:`~jobqueue.errors.LeaseLost` and changes nothing. Times come from the database clock; the
``now`` arguments exist only so tests can stand in for ``now()``.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone

from ..models import Worker
from .bounded import own_transaction
from .plan import ClaimPlan


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """A validated job, ready to insert. ``run_at`` wins over ``delay_s`` when both are set."""

    queue: str
    type: str
    payload_json: str
    priority: int = 0
    tenant_id: str = ""
    run_at: datetime | None = None
    delay_s: float = 0.0
    max_attempts: int = 8
    timeout_s: float = 30.0
    dedupe_key: str | None = None
    ordering_key: str | None = None


#: The error message of a lease released at graceful shutdown.
RELEASED_MESSAGE = "released at shutdown; the attempt is not counted"


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
        tag: the job's weighted-fair tag in this claim (``jobqueue/fairness.py``).
        suspect: its worker process died while it ran beside other jobs; it must run alone
            (``jobqueue/solo.py``).
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Nack:
    """One failed attempt to record with :meth:`Store.nack_many` (the arguments of ``nack``).

    Attributes:
        id: the job.
        lease_token: the token of the claim whose attempt failed.
        error: the error-history entry (the store adds ``at``, database clock).
        dead_reason: a :class:`~jobqueue.states.DeadReason` value to dead-letter the job, or
            None to schedule a retry.
        retry_at: aware datetime of the retry, exact; wins over ``delay_s``.
        delay_s: seconds from now (database clock) to the retry, when ``retry_at`` is None.
    """

    id: int
    lease_token: uuid.UUID
    error: dict[str, Any]
    dead_reason: str | None = None
    retry_at: datetime | None = None
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldLease:
    """A lease a heartbeat extended: its new end, and whether the job was asked to cancel."""

    lease_until: datetime
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiredLease:
    """A leased job whose lease ran out, as the reaper sees it."""

    id: int
    lease_token: uuid.UUID
    job_type: str
    attempts: int
    max_attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapDecision:
    """What the reaper does with one expired lease: dead-letter it, or retry after ``delay_s``."""

    id: int
    lease_token: uuid.UUID
    dead: bool
    delay_s: float


#: Most jobs per statement in :meth:`Store.enqueue_many` (bounds one statement's memory).
ENQUEUE_MANY_CHUNK = 10_000

#: Most bytes of jobs per statement in :meth:`Store.enqueue_many` (8 MiB): a batch of large
#: payloads goes in several statements, so the client never builds one message of the whole
#: batch and the server never sees one over its 1 GB message limit. ``enqueue_many(...,
#: chunk_bytes=)`` lowers or raises it.
ENQUEUE_MANY_CHUNK_BYTES = 8 * 1024 * 1024

#: Largest job (its JSON, bytes) one statement can carry: PostgreSQL refuses a message over
#: 1 GB (``MaxAllocSize``), and closes the connection instead of answering an error.
MAX_STATEMENT_BYTES = 1024 * 1024 * 1024 - 64 * 1024

#: The channel PostgreSQL notifies (payload: the queue name) when jobs become ready; see
#: migration 0006_notify and the ``*.sql`` files that make jobs ready.
NOTIFY_CHANNEL = "jobqueue_ready"


class Store(Protocol):
    """The queue operations a backend provides (see tests/test_store_contract.py)."""

    alias: str

    def enqueue(self, job: NewJob) -> int:
        """Insert ``job`` in the caller's transaction and return its id.

        A live job (ready, scheduled, leased) with the same queue and dedupe key wins: its id is
        returned and nothing is written. A competitor's uncommitted insert is waited on, never
        trusted.
        """

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        """Like :meth:`enqueue`, and say whether a row was inserted.

        Returns:
            ``(job_id, created)``: ``created`` is False when a live job held the dedupe key and
            its id was returned instead.
        """

    def enqueue_many(
        self, jobs: Sequence[NewJob], chunk_bytes: int = ENQUEUE_MANY_CHUNK_BYTES
    ) -> list[tuple[int, bool]]:
        """Insert ``jobs`` in the caller's transaction, each exactly as :meth:`enqueue_or_get`.

        Several jobs with one (queue, dedupe key) become one job (the first of them); a live
        job holding a key wins as in :meth:`enqueue`. All or nothing. Ids follow input order.
        Jobs with dedupe keys take them in (queue, key) byte order, so two batches sharing keys
        never deadlock. On PostgreSQL this is one statement per :data:`ENQUEUE_MANY_CHUNK` jobs
        or ``chunk_bytes`` bytes of them (a job alone may be larger), plus one that draws the
        ids when there are several.

        Returns:
            ``(job_id, created)`` per input job, in input order.
        """

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to ``max_jobs`` due jobs of ``queues``, in service order.

        Within a queue: priority DESC, then the tenant with the fewest leased jobs, then run_at,
        id. Across queues: by ``plan``'s weighted-fair tags (equal weights without a plan), or
        in list order when ``plan.strict``. A tenant never exceeds its cap in ``plan.caps``;
        a job with an ordering key waits for the earlier live jobs of its key.

        Each claim adds one attempt and mints a new lease token. Concurrent claims never hand
        out the same job. Each returned job's ``tag`` is its weighted-fair tag (see
        ``jobqueue/fairness.py``).
        """

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        """Extend every still-held lease to ``now() + lease_s`` in one statement.

        A job with a cancel request keeps its lease (its handler is still running) and says so.

        Returns:
            ``{job_id: HeldLease}`` for the leases still held; a missing id was lost.
        """

    def ack(self, job_id: int, lease_token: uuid.UUID, result_json: str) -> str:
        """Mark the job ``succeeded`` with ``result_json`` and return the new state.

        A job whose cancel was requested while it ran ends ``cancelled`` instead (the result is
        kept). Raises LeaseLost.
        """

    def ack_many(self, acks: Sequence[tuple[int, uuid.UUID, str]]) -> dict[int, str]:
        """Ack each ``(job_id, lease_token, result_json)``, in one statement.

        Returns:
            ``{job_id: new state}`` for the jobs acked; a missing id's lease was lost and that
            job is unchanged.
        """

    def nack(
        self,
        job_id: int,
        lease_token: uuid.UUID,
        error: dict[str, Any],
        *,
        dead_reason: str | None,
        retry_at: datetime | None = None,
        delay_s: float = 0.0,
    ) -> str:
        """Append ``error`` to the history; dead-letter (``dead_reason``) or schedule a retry.

        Returns:
            The job's new state. Raises LeaseLost.
        """

    def nack_many(self, nacks: Sequence[Nack]) -> dict[int, str]:
        """Record each failed attempt of ``nacks`` exactly as :meth:`nack` would, together.

        Each row is fenced on its own ``(id, lease_token, state = 'leased')``.

        Returns:
            ``{job_id: new state}`` for the jobs recorded; a missing id's lease was lost and
            that job is unchanged.
        """

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        """Return the job to ``ready`` without spending the attempt; return the new state.

        A job whose cancel was requested ends ``cancelled`` instead. Raises LeaseLost. The
        ``released`` error entry says ``message`` (default: released at shutdown).
        """

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        """Return the held job's attempt counters (for a caller that has only id and token)."""

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        """Internal to ``reap``: the expired leases a reaper pass will handle."""

    def reap(self, decide: Any, limit: int = 500, now: datetime | None = None) -> tuple[int, int]:
        """Return expired leases to the claimable set, or dead-letter them when attempts are spent.

        Args:
            decide: ``callable(ExpiredLease) -> ReapDecision``.
            limit: most jobs handled in one pass.
            now: stands in for the database clock (tests only).

        Returns:
            ``(retried, dead)`` counts.
        """

    def hand_back(self, worker_id: str, decide: Any) -> Any:
        """Return the leases of a worker process that died: see ``jobqueue/store/deaths.py``.

        Args:
            worker_id: the dead process's worker id (no live process may hold it).
            decide: ``callable(ExpiredLease) -> ReapDecision`` for a job charged for the death.

        Returns:
            A :class:`~jobqueue.store.deaths.HandBack` of counts.
        """

    def cancel(self, job_id: int) -> bool:
        """Cancel a ready, scheduled, leased or dead job. Returns False if it already finished.

        Raises JobNotFound.
        """

    def cancel_or_request(self, job_id: int) -> str | None:
        """Like :meth:`cancel`, and say what happened.

        Returns:
            ``"cancelled"`` (cancelled now), ``"leased"`` (running: its cancel was requested), or
            None (already finished, or a cancel already requested). Raises JobNotFound.
        """

    def retry(self, job_id: int) -> bool:
        """Send a dead or cancelled job back to ``ready`` with a fresh attempt budget.

        Returns False when the job is in another state. Raises JobNotFound, DuplicateJob.
        """

    def retry_many(self, job_ids: Sequence[int]) -> set[int]:
        """Retry each dead or cancelled job of ``job_ids`` exactly as :meth:`retry` would.

        A row in another state, a missing id, and a row whose dedupe key a live job holds are
        left alone. When several of ``job_ids`` share one (queue, dedupe key), only the lowest
        id is retried. Never raises DuplicateJob.

        Returns:
            The ids retried.
        """

    def run_now(self, job_id: int) -> bool:
        """Make a ``scheduled`` job ``ready`` now (``run_at = now()``); attempts and history kept.

        Returns False when the job is in another state. Raises JobNotFound.
        """

    def prune(
        self,
        states: Sequence[str],
        older_than_s: float,
        limit: int,
        now: datetime | None = None,
    ) -> int:
        """Delete up to ``limit`` jobs in ``states`` that finished more than ``older_than_s`` ago.

        Args:
            states: finished states only (``succeeded``, ``cancelled``, ``dead``); other states
                never match.
            older_than_s: seconds before now (database clock) a job must have finished.
            limit: most rows deleted by this call (one bounded statement).
            now: stands in for the database clock (tests only).

        Rows another pruner is deleting are skipped, not waited on.

        Returns:
            How many jobs were deleted.
        """

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        """Return how many jobs :meth:`prune` would delete with no limit (for a dry run)."""


class WorkerRegistry:
    """Worker rows: written rarely, so plain ORM is enough for every backend.

    Each write is a transaction of jobqueue's own, bounded like the others (``bounded.py``).
    """

    alias: str

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        """Insert or refresh this process's Worker row (a reused id takes the row over)."""
        now = timezone.now()
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).update_or_create(
                worker_id=worker_id,
                defaults={
                    "host": socket.gethostname(),
                    "pid": _pid(),
                    "queues": list(queues),
                    "concurrency": concurrency,
                    "started_at": now,
                    "last_seen_at": now,
                    "heartbeat_interval_s": heartbeat_interval_s,
                },
            )

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        """Mark the worker seen now, with how many jobs it runs and whether it is draining."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).update(
                last_seen_at=timezone.now(), running_jobs=running_jobs, status=status
            )

    def prune_workers(self, silent_for_s: float) -> int:
        """Delete the rows of workers not seen for ``silent_for_s`` seconds; return how many.

        Those processes died without a clean exit (SIGKILL, a lost host). Their jobs were
        recovered by lease expiry long before; the row is only history.
        """
        cutoff = timezone.now() - timedelta(seconds=silent_for_s)
        with own_transaction(self.alias):
            deleted, _ = Worker.objects.using(self.alias).filter(last_seen_at__lt=cutoff).delete()
        return deleted

    def deregister_worker(self, worker_id: str) -> None:
        """Delete the worker's row at clean exit."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).delete()


def _pid() -> int:
    import os

    return os.getpid()
