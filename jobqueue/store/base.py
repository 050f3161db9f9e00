"""Internal: the job lifecycle's part of the store seam (:class:`JobStore`) and its value objects.

The whole seam is :class:`~jobqueue.store.protocol.Store`, of which :class:`JobStore` is a part.

A store owns all writes that move a job through its lifecycle. Every write after the claim is a
compare-and-set on ``(id, lease_token, state = 'leased')``: when it matches nothing it raises
:class:`~jobqueue.errors.LeaseLost` and changes nothing. Times come from the database clock; the
``now`` arguments exist only so tests can stand in for ``now()``.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import DatabaseError
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from jobqueue.models import Worker
from jobqueue.retries import RunOutcome as Outcome  # renamed (issue 28); the store keeps its word
from jobqueue.store.bounded import own_transaction
from jobqueue.store.claimed import ClaimedJob
from jobqueue.store.deaths import HandBack
from jobqueue.store.plan import ClaimPlan


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
    #: At most ``concurrency_limit`` leased jobs of ``concurrency_key`` (both or neither).
    concurrency_key: str | None = None
    concurrency_limit: int | None = None


#: The error message of a lease released at graceful shutdown.
RELEASED_MESSAGE = "released at shutdown; the attempt is not counted"


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldLease:
    """A lease a heartbeat extended: its new end, and whether the job was asked to cancel."""

    lease_until: datetime
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiredLease:
    """A leased job whose lease ran out, as the reaper sees it.

    ``leased_by`` and ``lease_until`` (who held it, and when its lease ran out) are read by the
    reaper and the hand-back for the error entry they record; ``lease_info`` leaves them unset.
    """

    id: int
    lease_token: uuid.UUID
    job_type: str
    attempts: int
    max_attempts: int
    leased_by: str = ""
    lease_until: datetime | None = None

    @classmethod
    def of(cls, row: Any) -> ExpiredLease:
        """Return the lease in ``row``, read by name (a store's row or a named values_list).

        Args:
            row: has ``id``, ``lease_token``, ``type``, ``attempts`` and ``max_attempts``; and
                ``leased_by`` and ``lease_until`` when the caller selected them (the reaper and
                the hand-back write them into the job's history; ``lease_info`` does not).
        """
        return cls(
            id=row.id,
            lease_token=row.lease_token,
            job_type=row.type,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            leased_by=getattr(row, "leased_by", None) or "",
            lease_until=getattr(row, "lease_until", None),
        )


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

#: The channel an outbox write notifies (payload: the target queue database's alias), at the
#: caller's commit, on the caller's database: the relays listening there wake (``relay.py``).
OUTBOX_CHANNEL = "jobqueue_outbox"


class JobStore(Protocol):
    """The job lifecycle a store provides: enqueue, claim, heartbeat, outcomes, recovery.

    One part of the composite :class:`~jobqueue.store.protocol.Store` (which callers type
    against); tests/store/test_contract.py checks both stores against the whole.
    """

    alias: str

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        """Insert ``job`` in the caller's transaction and return its id, and whether it is new.

        A live job (ready, scheduled, leased) with the same queue and dedupe key wins: its id is
        returned and nothing is written. A competitor's uncommitted insert is waited on, never
        trusted.

        Returns:
            ``(job_id, created)``: ``created`` is False when a live job held the dedupe key and
            its id was returned instead.
        """

    def enqueue_stamped(self, job: NewJob) -> tuple[int, bool, datetime]:
        """Like :meth:`enqueue_or_get`, and return the row's ``created_at`` too.

        Returns:
            ``(job_id, created, created_at)``: ``created_at`` is the returned job's, as stored
            (PostgreSQL: the inserting transaction's clock), so a caller can describe the job
            exactly as a later read of the row will.
        """

    def enqueue_many(
        self, jobs: Sequence[NewJob], chunk_bytes: int = ENQUEUE_MANY_CHUNK_BYTES
    ) -> list[tuple[int, bool]]:
        """Insert ``jobs`` in the caller's transaction, each exactly as :meth:`enqueue_or_get`.

        Several jobs with one (queue, dedupe key) become one job (the first of them); a live
        job holding a key wins as in :meth:`enqueue_or_get`. All or nothing. Ids follow input order.
        Jobs with dedupe keys take them in (queue, key) byte order, so two batches sharing keys
        never deadlock. On PostgreSQL this is one statement per :data:`ENQUEUE_MANY_CHUNK` jobs
        or ``chunk_bytes`` bytes of them (a job alone may be larger), plus one that draws the
        ids when there are several; a batch of ``COPY_MIN_JOBS`` (``postgres_copy.py``) or more
        keyless jobs is one COPY after the statement that draws the ids.

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
        ``jobqueue/limits/fairness.py``).
        """

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        """Extend every still-held lease to ``now() + lease_s`` in one statement.

        A job with a cancel request keeps its lease (its handler is still running) and says so.

        Returns:
            ``{job_id: HeldLease}`` for the leases still held; a missing id was lost.
        """

    def finish_many(
        self, outcomes: Sequence[Outcome], now: datetime | None = None
    ) -> dict[int, str]:
        """Record each outcome of ``outcomes`` (any mix of target states), together.

        Each row is fenced on its own ``(job_id, lease_token, state = 'leased')`` and moves to
        the outcome's ``state``: ``succeeded`` (its result stored), ``scheduled`` (its error
        appended; ``run_at`` is ``retry_at``, else now + ``delay_s``) or ``dead`` (its error
        appended, with ``dead_reason``). A job whose cancel was requested while it ran ends
        ``cancelled`` instead (an ack's result is kept, and a ``cancelled`` entry says the
        handler completed). On PostgreSQL this is one statement (``finish_many.sql``). ``now``
        stands in for the database clock (tests, and the reaper's own ``now``).

        Returns:
            ``{job_id: recorded state}`` for the jobs recorded; a missing id's lease was no
            longer held under its token, and that job is unchanged.
        """

    def finish_then_claim(
        self, outcomes: Sequence[Outcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        """Record ``outcomes`` (as :meth:`finish_many`), then claim (as :meth:`claim`).

        Two transactions, in that order: the claim runs only once the outcomes committed, and
        a failed claim leaves them recorded. On PostgreSQL both go in one round trip when the
        claim is one statement (no tenant caps, concurrency limits, rate limits or ``"*"``);
        otherwise, and elsewhere, in two calls (:func:`finish_then_claim_in_turn`).

        Returns:
            A :class:`FinishedThenClaimed`; it never raises ``DatabaseError``, it reports it.
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

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        """Return expired leases to the claimable set, or dead-letter them when attempts are spent.

        Args:
            decide: ``callable(ExpiredLease) -> ReapDecision``; default
                ``store.finishing.charge_expired`` (``retries.decide``, the type's backoff).
            limit: most jobs handled in one pass.
            now: stands in for the database clock (tests only).

        Returns:
            ``(retried, dead)`` counts.
        """

    def hand_back(
        self, worker_id: str, decide: Callable[[ExpiredLease], ReapDecision] | None = None
    ) -> HandBack:
        """Return the leases of a worker process that died: see ``jobqueue/store/deaths.py``.

        Args:
            worker_id: the dead process's worker id (no live process may hold it).
            decide: ``callable(ExpiredLease) -> ReapDecision`` for a job charged for the death;
                default ``store.finishing.charge_expired``.

        Returns:
            A :class:`~jobqueue.store.deaths.HandBack` of counts.
        """


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A claim to make right after recording outcomes: :meth:`JobStore.claim`'s arguments."""

    queues: Sequence[str]
    worker_id: str
    max_jobs: int
    lease_s: float
    plan: ClaimPlan | None = None


@dataclass(frozen=True, slots=True)
class FinishedThenClaimed:
    """What :meth:`JobStore.finish_then_claim` did.

    ``states`` is ``finish_many``'s return, or None when the outcomes were not recorded;
    ``claimed`` the claim's jobs, or None when no claim was made (it failed, or the outcomes
    were not recorded); ``error`` the ``django.db.DatabaseError`` that stopped either.
    """

    states: dict[int, str] | None
    claimed: list[ClaimedJob] | None
    error: Exception | None = None


def finish_then_claim_in_turn(
    store: JobStore, outcomes: Sequence[Outcome], request: ClaimRequest
) -> FinishedThenClaimed:
    """Record ``outcomes``, then claim: two calls, the claim only once the outcomes are in."""
    try:
        states = store.finish_many(outcomes)
    except DatabaseError as exc:
        return FinishedThenClaimed(None, None, exc)
    try:
        claimed = store.claim(
            request.queues, request.worker_id, request.max_jobs, request.lease_s, plan=request.plan
        )
    except DatabaseError as exc:
        return FinishedThenClaimed(states, None, exc)
    return FinishedThenClaimed(states, claimed)


class WorkerRegistry:
    """Worker rows: written rarely, so plain ORM is enough for every backend.

    Each write is a transaction of jobqueue's own, bounded like the others (``bounded.py``).
    """

    alias: str

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        """Insert or refresh this process's Worker row (a reused id takes the row over).

        Its times are the database's (``Now()``), never this host's: ``health``, ``status``,
        the metrics and the admin judge liveness on the database clock (issue 32: a worker
        whose host clock was 60 s behind was reported dead while it served).
        """
        now = Now()
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
                last_seen_at=Now(), running_jobs=running_jobs, status=status
            )

    def set_listener_up(self, worker_id: str, up: bool | None) -> None:
        """Record whether the worker's LISTEN connection is up (None: it does not LISTEN)."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).update(listener_up=up)

    def prune_workers(self, silent_for_s: float) -> int:
        """Delete the rows of workers not seen for ``silent_for_s`` seconds; return how many.

        Those processes died without a clean exit (SIGKILL, a lost host). Their jobs were
        recovered by lease expiry long before; the row is only history.
        """
        cutoff = Now() - Value(timedelta(seconds=silent_for_s), output_field=DurationField())
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
