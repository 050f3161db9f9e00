"""Internal: the store's interface, whole: every operation a store provides, and its values.

One :class:`Store` Protocol declares each operation once, with its contract in the docstring;
the value objects the operations take and return are the frozen dataclasses above it. Two
drivers implement it: :class:`~jobqueue.store.postgres.PostgresStore` (``store/postgres/``, SQL on
PostgreSQL) and :class:`~jobqueue.store.sqlite.GenericStore` (``store/sqlite/``, the ORM, on any
other Django database), each with one module per area. tests/store/ is the one conformance suite
both pass (``StoreContract``, tests/store/test_contract.py); it calls every method declared here
(``test_interface_coverage.py`` checks that). The rules below hold on both drivers.

A store owns all writes that move a job through its lifecycle. Every write after the claim is a
compare-and-set on ``(id, lease_token, state = 'leased')``: when it matches nothing it raises
:class:`~jobqueue.errors.LeaseLost` and changes nothing. Times come from the database clock; the
``now`` arguments exist only so tests can stand in for ``now()``.

A worker process's death (``hand_back``)
----------------------------------------

``hand_back(worker_id, decide) -> HandBack`` is the store's part in a worker process's death under
the supervisor. It locks every job leased under ``worker_id`` (a process that is known to be dead,
so no one else holds these leases) and, in one transaction:

* if it held exactly one job, charges it: the run counts as an attempt, as an expired lease's
  does; ``decide(lease)`` says whether it is dead (attempts spent: reason ``attempts_exhausted``)
  or retried after ``delay_s``. Its error entry is ``process_died`` with ``charged: true``.
* if it held several, charges none of them: each goes back to ``ready`` now with its attempt
  refunded and ``suspect`` set, so that it next runs alone (``jobqueue/worker/solo.py``); its
  error entry is ``process_died`` with ``charged: false``.

A job whose cancel was requested ends ``cancelled`` either way. Each write is fenced on
``(id, lease_token, state = 'leased')``.

Jobs after other jobs (``enqueue_after``)
-----------------------------------------

On PostgreSQL, migration 0015_parents's trigger does the settling described here.

* ``enqueue_after`` locks the parents in id order, flags them ``has_children`` and reads their
  states, in the caller's transaction. A parent that already succeeded counts as done. If any
  parent is dead or cancelled (and the child does not run anyway), the child is inserted
  ``cancelled`` with a ``parent_failed`` entry; else, if some parents have not succeeded, it is
  inserted ``waiting`` with ``waiting_for`` = how many; else ready (or scheduled) at once. One
  ``JobParent`` row per parent (``counted`` for those already done).
* When a parent with children succeeds (or fails, for a child that runs anyway), each uncounted
  edge is counted and its child's ``waiting_for`` goes down by one under the child's row lock;
  the one that reaches 0 makes it ready (``run_at`` no earlier than now), in the transaction
  that recorded the parent's outcome. A child ``takes_parent_results`` then gets the payload key
  :data:`PARENT_RESULTS_KEY`: its parents' results, in the order of ``after``.
* When a parent ends dead or cancelled, its waiting children end cancelled with a
  ``parent_failed`` entry naming it; their own children follow (transitive).
* When an operator retries a dead or cancelled parent, the children its failure cancelled (last
  entry ``parent_failed``) wait again with a ``parent_retried`` entry, unless another of their
  parents is still dead or cancelled; their own children follow.

Batches
-------

The store writes a batch row, its members and an empty batch's end: only the writes
``jobqueue.batch()`` makes. What happens when a member finishes is in the statement that records
it: ``finish_many.sql`` counts a run's outcomes per batch (one update of each batch row per
statement, rows locked in id order), and the row trigger of migration 0016_batches counts the
other transitions (cancel, retry; every transition on SQLite); the update that brings ``pending``
to zero enqueues the callbacks (docs/decisions.md, "Batches"). Jobs without a batch pay no extra
statement.

Progress and checkpoints
------------------------

* A running handler reports progress (:meth:`Store.record_progress`) and writes a checkpoint
  (:meth:`Store.save_checkpoint`). Both are fenced on ``(id, lease_token, state = 'leased')``
  like every write after the claim: a zombie (a run whose lease another claim or the reaper took)
  writes nothing and gets :class:`~jobqueue.errors.LeaseLost`.
* The next attempt reads the checkpoint back (:meth:`Store.read_checkpoint`).
* :meth:`Store.watch` marks a job as waited on: on PostgreSQL, finishing it then sends
  ``pg_notify(FINISHED_CHANNEL, '<id>')`` (migration 0013_progress's trigger), so
  ``jobqueue.wait`` sleeps on LISTEN instead of reading the row in a loop. Jobs nobody waits on
  send nothing: the finish path of a drain pays no notification.

Breakers, deferrals and retry budgets
-------------------------------------

Each state change of a circuit breaker is one statement that reads and writes the row under its
lock, so workers in different processes never lose each other's counts or both win the probe
(see the ``StoreContract`` breaker and budget tests).

Rate limits
-----------

The store reads the rate limiters (issue 18): the wake-up time of drained buckets, and each
limiter's state for the dashboard and the metrics. Both claims spend the buckets
(``sql/claim.sql``; ``store/sqlite/jobs.py``); the claim's rate parameters are
:func:`~jobqueue.store.shared.claim_params`.

Pauses
------

A queue or a job type is paused and resumed by a row in ``jobqueue_pause``; the claim of each
store reads the same rows and leaves the jobs they name where they are.

Cron and the leader lease
-------------------------

Exactly once per (cron entry, fire time) rests on one rule: :meth:`Store.fire_cron` inserts the
fire record and the job in one transaction, under a unique constraint on (entry, fire time), and a
conflict there means "already fired". The leader lease and the compare-and-set on
``next_fire_at`` only keep a second scheduler from trying (see the ``StoreContract`` cron tests).

The metrics' gauges
-------------------

The gauges are bounded reads of the jobs table. Counts are exact up to a cap and read as the cap
past it ("that many or more"), so a scrape reads a bounded number of index entries however many
jobs there are. On PostgreSQL each statement (``queue_gauges.sql``, ``dead_gauges.sql``,
``waiting_gauges.sql``, ``running_gauges.sql``, ``count_prunable.sql``) walks a partial index,
never the table (FIELD-CASES 30); on the ORM they are plain counts (SQLite sites are small).

The per-minute rollup
---------------------

Per-minute outcome counts and depth samples; the rows are ``jobqueue.models.Rollup``. Outcomes
reach the rollup inside ``finish_many`` itself (PostgreSQL: the same statement,
``finish_many.sql``; the ORM store: :func:`~jobqueue.store.shared.tally`, then one upsert per key);
the rollup's own operations are the once-a-minute depth sample and the pruning.

The outbox
----------

Jobs written in a caller's transaction, on the caller's database, then relayed to their queue's
database by the workers. On PostgreSQL the statements are ``outbox_put.sql``, ``outbox_take.sql``,
``outbox_delete.sql``, ``relay_jobs.sql`` and ``outbox_gauges.sql``.

The job's id is drawn from the queue database's sequence at enqueue (:meth:`Store.reserve_job_id`)
and written in the outbox row; the relay inserts the job under that id and does nothing when the
id is taken already, so relaying a row twice (a relay killed between its insert and its delete)
makes one job.

Operator writes
---------------

Cancel, retry, run now, prune.

Worker rows
-----------

The worker registry (the ``Worker`` rows) is written rarely, so both stores implement it with
the same plain ORM class, :class:`~jobqueue.store.shared.WorkerRegistry`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from jobqueue.models import CronEntry
from jobqueue.retries import RunOutcome
from jobqueue.settings.policies import Breaker, RetryBudgetSettings
from jobqueue.settings.rates import RateLimits
from jobqueue.states import JobState
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.rows import json_value


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
        concurrency_key: the job's concurrency key, or None (a driver that does not return
            it leaves None): its ack frees a slot of that key (``jobqueue/worker/completer.py``
            wakes the other workers for it).
        trace: the W3C trace context its enqueue stored (``traceparent``, ``tracestate``), or
            None: the run's span is its child (``jobqueue/tracing.py``).
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
    concurrency_key: str | None = None
    trace: dict[str, str] | None = None

    @classmethod
    def from_row(cls, row: Any) -> ClaimedJob:
        """Return the job of one row a claim statement returned (``claim.sql``'s columns).

        ``row`` has the job's columns as attributes, after the claim's update (``attempts``
        counts this attempt); a ``payload`` the driver left as JSON text is decoded.
        """
        return cls(
            id=row.id,
            job_type=row.type,
            payload=json_value(row.payload),
            attempt=row.attempts,
            max_attempts=row.max_attempts,
            timeout_s=row.timeout_s,
            lease_token=row.lease_token,
            lease_until=row.lease_until,
            queue=row.queue,
            priority=row.priority,
            tenant_id=row.tenant_id,
            tag=row.tag,
            suspect=row.suspect,
            concurrency_key=getattr(row, "concurrency_key", None),
            trace=json_value(row.trace) if row.trace is not None else None,
        )


#: Error message of a job charged for its process's death; ``{died}``: how it died
#: (``store.finishing.died_words``).
ALONE_MESSAGE = "its worker process {died} while running it alone; the attempt counts"


#: Error message of a job refunded because its process died while running several.
COMPANY_MESSAGE = (
    "its worker process {died} while running {n} jobs; the attempt is not counted and the job "
    "next runs alone"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandBack:
    """What :meth:`hand_back` did with a dead worker process's leases.

    Attributes:
        refunded: jobs made ready (and suspect) with their attempt not counted.
        retried: the one job charged and scheduled for a retry (0 or 1).
        dead: the one job charged and dead-lettered (0 or 1).
        cancelled: jobs whose cancel was requested, now cancelled.
    """

    refunded: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0

    @classmethod
    def count(cls, states: list[str], *, company: bool) -> HandBack:
        """Return the counts of the jobs' new ``states`` after a hand-back (in ``company``)."""
        return cls(
            refunded=states.count("ready") if company else 0,
            retried=0 if company else states.count("scheduled"),
            dead=states.count("dead"),
            cancelled=states.count("cancelled"),
        )


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
    #: The W3C trace context of the enqueue, as JSON text (``jobqueue/tracing.py``); None: none.
    trace_json: str | None = None


#: A new job's values in the one order every insert form takes them: (the name the statements
#: give it, the :class:`NewJob` attribute, its PostgreSQL type). The VALUES parameters
#: (``store/postgres/db.py``), the JSON rows of ``enqueue_many.sql`` and of the outbox
#: (``store/shared.py``) and the COPY rows (``store/postgres/jobs.py``) are built from it;
#: ``tests/store/test_insert_columns.py`` holds each statement's list to it.
NEW_JOB_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("queue", "queue", "text"),
    ("type", "type", "text"),
    ("payload", "payload_json", "jsonb"),
    ("priority", "priority", "int2"),
    ("tenant_id", "tenant_id", "text"),
    ("run_at", "run_at", "timestamptz"),
    ("delay_s", "delay_s", "float8"),
    ("max_attempts", "max_attempts", "int4"),
    ("timeout_s", "timeout_s", "float8"),
    ("dedupe_key", "dedupe_key", "text"),
    ("ordering_key", "ordering_key", "text"),
    ("concurrency_key", "concurrency_key", "text"),
    ("concurrency_limit", "concurrency_limit", "int4"),
    ("trace", "trace_json", "jsonb"),
)


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


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A claim to make right after recording outcomes: :meth:`Store.claim`'s arguments."""

    queues: Sequence[str]
    worker_id: str
    max_jobs: int
    lease_s: float
    plan: ClaimPlan | None = None


@dataclass(frozen=True, slots=True)
class FinishedThenClaimed:
    """What :meth:`Store.finish_then_claim` did.

    ``states`` is ``finish_many``'s return, or None when the outcomes were not recorded;
    ``claimed`` the claim's jobs, or None when no claim was made (it failed, or the outcomes
    were not recorded); ``error`` the ``django.db.DatabaseError`` that stopped either.
    """

    states: dict[int, str] | None
    claimed: list[ClaimedJob] | None
    error: Exception | None = None


#: ``BreakerOutcomes.probe_result`` values.
PROBE_OK, PROBE_FAILED, PROBE_NEUTRAL = "ok", "failed", "neutral"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerView:
    """One breaker as the claim gate reads it.

    Attributes:
        name: the dependency.
        state: ``closed``, ``open`` or ``half_open``.
        open_until: end of the cool-down (open), else None.
        probe_until: when the probe in flight lapses (half_open), else None.
        cooldown_s: the current cool-down, seconds.
        now: the store's clock when it was read.
    """

    name: str
    state: str
    open_until: datetime | None
    probe_until: datetime | None
    cooldown_s: float
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerOutcomes:
    """One worker's batch of outcomes of one dependency's jobs.

    Attributes:
        name: the dependency.
        successes: runs that succeeded.
        failures: runs that failed in a way that blames the dependency (not a permanent error).
        probe_job_id: the probe job this worker ran for the breaker, if its outcome is in the batch.
        probe_result: that probe's verdict: ``"ok"``, ``"failed"`` or ``"neutral"``.
    """

    name: str
    successes: int = 0
    failures: int = 0
    probe_job_id: int | None = None
    probe_result: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Deferral:
    """A claimed job to put back unrun until ``run_at``, with ``message`` in its history."""

    id: int
    lease_token: uuid.UUID
    run_at: datetime
    message: str


#: The leader lease the cron scheduler holds.
SCHEDULER_LEASE = "scheduler"


@dataclass(frozen=True, slots=True, kw_only=True)
class Leadership:
    """A leader lease this holder holds now.

    Attributes:
        name: the lease's name (``"scheduler"``).
        holder: who holds it (the worker id).
        token: the fencing token; it goes up each time the lease changes hands.
        expires_at: when it lapses unless renewed (database clock).
        now: the database clock when it was taken or renewed (or the injected ``now``).
    """

    name: str
    holder: str
    token: int
    expires_at: datetime
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DueEntry:
    """An enabled cron entry whose ``next_fire_at`` is due (or unset), as the scheduler reads it."""

    id: int
    name: str
    cron_expr: str
    timezone: str
    queue: str
    job_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    missed: str = "once"
    missed_cap: int = 10
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Fire:
    """One fire to record: (entry, fire time) and the job it enqueues.

    Attributes:
        entry_id: the cron entry.
        fire_time: the scheduled instant (aware); unique per entry.
        job: the job to insert; its ``run_at`` (None: now) is when it may start.
        fired_by: who fires it (the leader's holder id, or "admin:<user>").
        manual: a "run now", not a scheduled fire.
        leader: the lease to present; None for a manual fire (no leader needed).
        now: stands in for the database clock (tests only).
    """

    entry_id: int
    fire_time: datetime
    job: NewJob
    fired_by: str = ""
    manual: bool = False
    leader: Leadership | None = None
    now: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Fired:
    """What :meth:`Store.fire_cron` did.

    ``job_id`` is the new job's id, or None when nothing was written: either the fire time had
    already fired (``leading`` True), or the leader lease is no longer this holder's
    (``leading`` False).
    """

    leading: bool
    job_id: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Advance:
    """Move an entry's ``next_fire_at`` forward, if nobody else moved or edited it first.

    Attributes:
        entry_id: the cron entry.
        expected: the ``next_fire_at`` the scheduler planned from (compare-and-set).
        cron_expr, timezone: the schedule it planned with (an edit in between refuses the move).
        next_fire_at: the new value.
        last_fired_at: a fire time that just fired (kept if later than the stored one), or None.
        skipped: missed fire times dropped by the policy, added to ``skipped_fires``.
        leader: the lease to present; None to skip that check.
    """

    entry_id: int
    expected: datetime | None
    cron_expr: str
    timezone: str
    next_fire_at: datetime
    last_fired_at: datetime | None = None
    skipped: int = 0
    leader: Leadership | None = None


#: Default cap of one count: exact up to this, this value past it.
COUNT_CAP = 10_000


#: Default number of tenants per queue walked for the ready count and the oldest due job.
MAX_TENANTS = 1_000


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueGauge:
    """One queue with claimable jobs. Counts are capped (see :data:`COUNT_CAP`)."""

    queue: str
    #: Jobs claimable now (state ready, or scheduled with run_at come).
    ready: int
    #: Jobs whose run_at is still ahead.
    scheduled: int
    #: run_at of the oldest claimable job (aware), None when none is due.
    oldest_due: datetime | None
    #: More tenants than the walk visits: ready and oldest_due cover the first ones only.
    truncated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningGauge:
    """Leased jobs per queue, and per tenant for the tenants running the most."""

    by_queue: dict[str, int]
    #: ``(tenant_id, leased)``, most first.
    top_tenants: list[tuple[str, int]]
    #: ``(concurrency key, leased, limit stored on its leased jobs)`` of the keys running the
    #: most, most first (``JOBQUEUE["CONCURRENCY_LIMITS"]`` may override the limit).
    top_keys: list[tuple[str, int, int | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeTotals:
    """One job type's recorded runs over a window of the per-minute rollup (all its queues)."""

    type: str
    succeeded: int
    #: Failed runs that will run again.
    retried: int
    dead: int
    cancelled: int
    #: Cumulative ``le`` counts of the run-duration histogram
    #: (:data:`jobqueue.models.metrics.BUCKETS`), in order.
    run_buckets: tuple[int, ...]
    #: Runs timed, and their summed duration (seconds).
    run_count: int
    run_sum_s: float

    @property
    def runs(self) -> int:
        """Return every recorded run: succeeded, retried, dead and cancelled."""
        return self.succeeded + self.retried + self.dead + self.cancelled

    @property
    def failures(self) -> int:
        """Return the runs that failed: retried or dead."""
        return self.retried + self.dead


#: Most dead-letter groups :meth:`Store.dead_letter_groups` returns by default.
DEAD_LETTER_GROUPS = 100


def message_digest(message: str) -> str:
    """Return the key a dead-letter group's message is named by in a link: its MD5, hex.

    A message may carry a secret the page masks; a URL (kept in access logs and browser
    history) names the group by this digest instead. PostgreSQL's ``md5(text)`` gives the
    same hex digest of the same UTF-8 text, so ``dead_letter_ids.sql`` compares it there.
    """
    return hashlib.md5(message.encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetterGroup:
    """Dead jobs whose last error has the same exception type and message."""

    #: The last history entry's ``type`` ("" when it has none).
    error_type: str
    #: The last history entry's ``message``, as stored (unmasked: the caller masks it).
    message: str
    count: int
    #: The first and the last ``finished_at`` of the group (aware).
    first_seen: datetime
    last_seen: datetime
    #: The group's highest job id: a job whose payload and result say which values the
    #: message may hold that are masked (the same message holds the same values).
    newest_id: int


#: Default cap of the outbox depth gauge: exact up to this, this value past it.
OUTBOX_COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRow:
    """One outbox row the relay took."""

    id: int
    #: The job's id on the queue database (its dedupe identity there).
    job_id: int
    #: The job as JSON text (:func:`job_json`, with ``at`` set).
    job: str
    #: When the caller wrote it (the caller's database clock), aware.
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxGauge:
    """The rows of one outbox waiting for one queue database. ``waiting`` is capped."""

    target: str
    waiting: int
    #: Seconds since the oldest waiting row was written (this database's clock); None: none waits.
    oldest_age_s: float | None


#: The payload key a child enqueued with ``takes_parent_results=True`` gets its parents' results
#: under (a list, in the order of ``after``), when it is released.
PARENT_RESULTS_KEY = "parent_results"


#: The states of a parent that make its waiting children end cancelled.
FAILED = frozenset({JobState.DEAD, JobState.CANCELLED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """How a job enqueued after parents starts: the row's state and the edges' ``counted``.

    ``state`` None means ready or scheduled by its ``run_at``, as any new job.
    """

    state: str | None
    waiting_for: int
    counted: tuple[bool, ...]
    errors: tuple[dict[str, Any], ...]
    payload_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    """One paused queue (``kind="queue"``) or job type (``kind="type"``)."""

    kind: str
    name: str
    paused_by: str
    #: When the pause began (database clock on PostgreSQL), aware.
    paused_at: datetime
    reason: str

    @classmethod
    def of(cls, row: Any) -> Paused:
        """Return the pause in ``row`` (a named row or a ``Pause`` model instance)."""
        return cls(
            kind=row.kind,
            name=row.name,
            paused_by=row.paused_by,
            paused_at=row.paused_at,
            reason=row.reason,
        )


#: The channel a finished watched job is notified on; the payload is its id. Keep in sync with
#: migration 0013_progress.
FINISHED_CHANNEL = "jobqueue_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitRow:
    """One limiter as the dashboard and the metrics show it.

    Attributes:
        key: the bucket (``type:<name>``, ``dependency:<name>``, ``tenant:<id>``).
        rate: tokens per second.
        burst: most tokens the bucket holds.
        text: the rate as declared (``"600/min"``).
        tokens: tokens in the bucket now (refilled to the database's now, not stored).
        held: due claimable jobs the limiter holds back now (0 while it has a token), exact up
            to the cap given and the cap past it.
    """

    key: str
    rate: float
    burst: float
    text: str
    tokens: float
    held: int


#: Rows deleted per statement by ``prune_rollups``.
PRUNE_ROLLUPS_LIMIT = 10_000


#: One recorded run: (queue, type, recorded state, run_at before the outcome, started_at,
#: whether the reaper ended it because its lease ran out).
Observation = tuple[str, str, str, datetime | None, datetime | None, bool]


class Store(Protocol):
    """Everything jobqueue asks of a store, on one database alias (``alias``)."""

    alias: str

    # --- The job lifecycle a store provides: enqueue, claim, heartbeat, outcomes, recovery.

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
        ids when there are several; a batch of ``COPY_MIN_JOBS`` (``postgres/jobs.py``) or more
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
        taken: Callable[[list[ClaimedJob]], object] | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to ``max_jobs`` due jobs of ``queues``, in service order.

        Within a queue: priority DESC, then the tenant with the fewest leased jobs, then run_at,
        id. Across queues: by ``plan``'s weighted-fair tags (equal weights without a plan), or
        in list order when ``plan.strict``. A tenant never exceeds its cap in ``plan.caps``;
        a job with an ordering key waits for the earlier live jobs of its key.

        Each claim adds one attempt and mints a new lease token. Concurrent claims never hand
        out the same job. Each returned job's ``tag`` is its weighted-fair tag (see
        ``jobqueue/limits/fairness.py``).

        With rate limits a short claim is followed by a second one (``shared.claim_again``).
        ``taken``, if given, is called with the jobs of each of those claims as soon as it
        returns (a worker starts them while the second claim runs); the return value still
        lists every job taken.
        """

    def has_work(self, queues: Sequence[str]) -> bool:
        """Return whether any of ``queues`` holds a job a claim could take, now or later.

        True when a job of those queues is ``ready`` or ``scheduled``, due or not (so a job
        that limits, keys or pauses hold counts too): False means a claim of those queues would
        take nothing. A worker whose last claim came back short asks this before claiming
        again (``jobqueue/worker/claiming.py``): on PostgreSQL one probe of the claim index
        per queue, no lock and no write, where a claim is one or more statements that write.

        Args:
            queues: queue names (no ``"*"``).
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
        self, outcomes: Sequence[RunOutcome], now: datetime | None = None
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
        self, outcomes: Sequence[RunOutcome], request: ClaimRequest
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

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        """Return up to ``limit`` leased jobs whose lease ended before ``now``, lowest id first.

        What :meth:`reap` charges. On PostgreSQL the rows are locked (``FOR UPDATE SKIP
        LOCKED``) until the caller's transaction ends; nothing is written.

        Args:
            limit: most jobs returned.
            now: stands in for the database clock (tests only).
        """

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
        self,
        worker_id: str,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        *,
        cause: str = "",
    ) -> HandBack:
        """Return the leases of a worker process that died, settled by the contract below.

        Args:
            worker_id: the dead process's worker id (no live process may hold it).
            decide: ``callable(ExpiredLease) -> ReapDecision`` for a job charged for the death;
                default ``store.finishing.charge_expired``.
            cause: why it died, as the supervisor names it (``"SIGKILL"``, ``"OOM"``,
                ``"exit status 1"``: ``jobqueue.worker.causes``); each job's error entry says
                so. Empty: not known.

        Returns:
            A :class:`~jobqueue.store.interface.HandBack` of counts.
        """

    # --- Breaker and budget operations a store provides beside the queue's.

    def breaker_states(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[str, BreakerView]:
        """Return the breakers of ``names`` that exist (a missing one is closed)."""

    def claim_probe(
        self, name: str, job_id: int, probe_s: float, now: datetime | None = None
    ) -> datetime | None:
        """Make ``job_id`` the probe of breaker ``name`` if it is open past its cool-down.

        Also takes over a probe that lapsed (``probe_until`` passed). One compare-and-set:
        of concurrent callers, at most one wins.

        Returns:
            The probe's ``probe_until`` when this call won, else None.
        """

    def record_breaker_outcomes(
        self, batch: Sequence[BreakerOutcomes], breaker: Breaker, now: datetime | None = None
    ) -> dict[str, str]:
        """Count a batch of outcomes per dependency and move each breaker accordingly.

        Closed: the counts go into the window (which starts over once ``window_seconds``
        passed); at ``failure_threshold`` failures that are ``failure_ratio`` of the window's
        outcomes it opens for ``cooldown_seconds``. Half-open: the probe's result (only when
        ``probe_job_id`` is the breaker's probe) closes it (ok), reopens it with the cool-down
        doubled up to ``max_cooldown_seconds`` (failed), or lets the next claim probe
        (neutral). Creates missing breakers (closed) first.

        Returns:
            ``{name: state after}``.
        """

    def open_breaker(
        self,
        name: str,
        seconds: float,
        reason: str,
        breaker: Breaker,
        now: datetime | None = None,
    ) -> datetime:
        """Open breaker ``name`` for ``seconds`` (creating it); never shortens an open one.

        Returns:
            Its ``open_until``.
        """

    def close_breaker(self, name: str, reason: str, breaker: Breaker) -> bool:
        """Close breaker ``name`` now, resetting its window and cool-down.

        Returns:
            False when there is no such breaker.
        """

    def release_deferred(self, job_types: Sequence[str], now: datetime | None = None) -> int:
        """Make the held-back jobs of ``job_types`` ready now (their breaker was closed).

        Only ``scheduled`` jobs whose newest history entry is a deferral; attempts and history
        are kept. Returns how many jobs were released.
        """

    def defer_many(
        self, deferrals: Sequence[Deferral], now: datetime | None = None
    ) -> dict[int, str]:
        """Put held jobs back unrun until their ``run_at``; the claim's attempt is given back.

        Each gets a ``kind: "deferred"`` history entry. Fenced like ``release``: a lease no
        longer held changes nothing. A job whose cancel was requested ends ``cancelled``.

        Returns:
            ``{job_id: new state}`` for the jobs put back.
        """

    def take_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> dict[str, float]:
        """Spend ``counts[queue]`` retry tokens per queue, after the floor refill.

        A queue without a bucket starts with a full one (``capacity``).

        Returns:
            ``{queue: tokens left}``; negative is a debt (the caller delays those retries).
        """

    def credit_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> None:
        """Add ``ratio`` tokens per success (and the floor refill) to each queue's bucket."""

    def delete_retry_budgets(self, queues: Collection[str]) -> int:
        """Delete the buckets of ``queues`` (each starts full again); return how many."""

    # --- The cron operations a store provides beside the queue's.

    def db_now(self) -> datetime:
        """Return the store's clock: ``now()`` on PostgreSQL, this process's clock elsewhere."""

    def elect_leader(
        self,
        name: str,
        holder: str,
        token: int | None,
        lease_s: float,
        now: datetime | None = None,
    ) -> Leadership | None:
        """Renew ``holder``'s lease, or take the lease if it has expired; one statement.

        A holder renews with the token it holds (the token stays). Anyone takes an expired
        lease, and the token goes up by one. Returns None when someone else holds it.
        """

    def resign_leader(self, name: str, holder: str, token: int) -> bool:
        """Let the lease lapse now, if ``holder`` still holds it under ``token``."""

    def due_cron_entries(self, until: datetime, limit: int = 100) -> list[DueEntry]:
        """Return enabled entries with ``next_fire_at <= until`` or unset, soonest first."""

    def fire_cron(self, fire: Fire) -> Fired:
        """Record (entry, fire time) and insert its job, in the caller's transaction.

        Writes both or nothing: nothing when the fire time already fired (the unique
        constraint; never an error) or when ``fire.leader`` is no longer the lease's holder
        and token. The lease row is not locked: a takeover never waits for a fire in flight;
        a stale leader's fire is undone by the fenced :meth:`advance_cron` in its transaction,
        or is the one that counts (the new leader's insert then finds "already fired").
        """

    def advance_cron(self, advance: Advance) -> bool:
        """Compare-and-set ``next_fire_at``; return False if the entry moved or changed."""

    def prune_cron_fires(self, older_than: datetime, limit: int = 10_000) -> int:
        """Delete fire records older than ``older_than``, except each entry's latest one."""

    def save_cron_entry(
        self, values: Mapping[str, Any], *, source: str, replace_other: bool = True
    ) -> tuple[CronEntry, str]:
        """Create or update the entry named ``values["name"]``; return it and what happened.

        The outcome is ``created``, ``updated``, ``unchanged`` or ``conflict`` (the entry is
        another source's and ``replace_other`` is False).
        """

    def edit_cron_entry(self, entry_id: int, values: Mapping[str, Any]) -> CronEntry:
        """Set an entry's name and fields by id, keeping its source and the scheduler's fields."""

    def set_cron_entries_enabled(self, entry_ids: Collection[int], enabled: bool) -> list[str]:
        """Enable or disable those entries not so already; return their names."""

    def disable_cron_entries(self, source: str, keep: Collection[str]) -> list[str]:
        """Disable the enabled entries of ``source`` not named in ``keep``; return their names."""

    def delete_cron_entries(self, entry_ids: Collection[int]) -> list[str]:
        """Delete the entries ``entry_ids`` with their fire records; return their names."""

    # --- Bounded counts for the metrics endpoint (every statement on an index).

    def queue_gauges(
        self, cap: int = COUNT_CAP, max_tenants: int = MAX_TENANTS, now: datetime | None = None
    ) -> list[QueueGauge]:
        """Return one :class:`QueueGauge` per queue with claimable jobs, by queue name.

        Args:
            cap: counts are exact up to this, and read as ``cap`` past it (>= 1).
            max_tenants: tenants walked per queue (>= 1).
            now: the instant "due" is judged at (default: the database clock; the depth
                sample passes its own reading, tests an injected one).
        """

    def dead_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        """Return queue -> dead jobs, exact up to ``cap`` per queue and ``cap`` past it."""

    def waiting_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        """Return queue -> jobs waiting for parent jobs, exact up to ``cap`` and ``cap`` past it.

        Args:
            cap: counts are exact up to this, and read as ``cap`` past it (>= 1).
        """

    def running_gauges(self, top: int) -> RunningGauge:
        """Return leased jobs per queue, and of the ``top`` tenants and keys running the most."""

    def type_totals(self, start: datetime, end: datetime) -> list[TypeTotals]:
        """Return each job type's recorded runs in the rollup minutes ``[start, end)``.

        Sums over queues and shards; the depth samples (type "") are left out. One read of
        the rollup's key range (``jobqueue_rollup_key`` leads with ``minute``): its cost
        follows the window's rows, never the jobs table.

        Args:
            start: the first minute included (aware).
            end: the first minute excluded (aware).

        Returns:
            One :class:`TypeTotals` per type with a rollup row in the window, by type name.
        """

    def dead_letter_groups(self, limit: int = DEAD_LETTER_GROUPS) -> list[DeadLetterGroup]:
        """Return the dead jobs grouped by their last error's type and message, most first.

        Reads every dead row once (the partial index of finished rows finds them); dead
        letters are few, and an operator deletes or retries them.

        Args:
            limit: most groups returned (>= 1); ties are broken by the latest ``last_seen``.
        """

    def dead_letter_ids(self, error_type: str, digest: str, limit: int) -> list[int]:
        """Return the ids of dead jobs whose last error is ``error_type`` with this message.

        The newest ``limit`` (>= 1) of them, by id descending: the admin's filter of the
        dead-letter list by one :class:`DeadLetterGroup`.

        Args:
            error_type: the last history entry's ``type`` ("" for none).
            digest: :func:`message_digest` of the last entry's ``message``.
            limit: most ids returned (>= 1).
        """

    def concurrency_gauges(self, top: int) -> list[tuple[str, int, int | None]]:
        """Return :attr:`RunningGauge.top_keys` alone, in one read (the admin's dashboard).

        Args:
            top: most keys returned (>= 1), the ones running the most first.
        """

    def prunable_by_state(
        self,
        retention: Mapping[str, float],
        cap: int | None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        """Return finished state -> jobs finished more than its retention ago.

        Args:
            retention: state (``succeeded``, ``dead``, ``cancelled``) -> seconds kept.
            cap: count at most this many per state (the metrics); None: exactly.
            now: the instant retention counts from (default: the database clock).
        """

    def estimate_prunable(
        self, state: str, older_than_s: float, now: datetime | None = None
    ) -> int | None:
        """Return the planner's estimate of ``prunable_by_state``'s uncapped count of ``state``.

        Reads no rows (PostgreSQL's ``EXPLAIN``); None where the database has no such estimate.
        """

    # --- What an operator (the client's ``cancel``, ``retry``, ``run_now``, the pruner) writes.

    def cancel_or_request(self, job_id: int, by: str = "") -> str | None:
        """Cancel a ready, scheduled or dead job now; ask a leased (running) one to stop.

        Either way the job's history gains an ``operator_cancel`` entry naming ``by`` (who).

        Returns:
            ``"cancelled"`` (cancelled now), ``"leased"`` (running: its cancel was requested), or
            None (already finished, or a cancel already requested). Raises JobNotFound.
        """

    def retry(self, job_id: int, by: str = "") -> bool:
        """Send a dead or cancelled job back to ``ready`` with a fresh attempt budget.

        Its history gains an ``operator_retry`` entry naming ``by`` (who).

        Returns False when the job is in another state. Raises JobNotFound, DuplicateJob.
        """

    def cancel_many(self, job_ids: Sequence[int], by: str = "") -> dict[int, str]:
        """Cancel or ask to stop each job of ``job_ids`` exactly as :meth:`cancel_or_request` would.

        One statement on PostgreSQL (issue 33: a statement per job made 20,000 cancels take
        21 s). Finished jobs, jobs already asked to stop and missing ids are left alone.

        Returns:
            id -> ``"cancelled"`` or ``"leased"`` (cancel requested), for the jobs acted on.
        """
        ...

    def retry_many(self, job_ids: Sequence[int], by: str = "") -> set[int]:
        """Retry each dead or cancelled job of ``job_ids`` exactly as :meth:`retry` would.

        A row in another state, a missing id, and a row whose dedupe key a live job holds are
        left alone. When several of ``job_ids`` share one (queue, dedupe key), only the lowest
        id is retried. Never raises DuplicateJob.

        Returns:
            The ids retried.
        """

    def run_now(self, job_id: int, by: str = "") -> bool:
        """Make a ``scheduled`` job ``ready`` now (``run_at = now()``); attempts and history kept.

        Its history gains an ``operator_run_now`` entry naming ``by`` (who).

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

        Rows another pruner is deleting are skipped, not waited on. The parent links whose child
        is deleted go with it (a link whose parent is deleted stays while its child lives: a
        waiting child reads its parents' results through its links, in order), and then, after
        that commit, the batches of the deleted jobs that are done and have no member left.

        Returns:
            How many jobs were deleted.
        """

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        """Return how many jobs :meth:`prune` would delete with no limit (for a dry run)."""

    # --- Write jobs to this database's outbox, relay them to the queue database, read its depth.

    def reserve_job_id(self) -> int:
        """Draw one job id from this (queue) database's job id sequence, in autocommit.

        Returns:
            An id no job has and no other call gets.
        """

    def reserve_job_ids(self, n: int) -> list[int]:
        """Draw ``n`` job ids from this (queue) database's job id sequence, in autocommit.

        Args:
            n: how many (>= 1).

        Returns:
            ``n`` ascending ids no job has and no other call gets (one statement on PostgreSQL).
        """

    def put_outbox(self, target: str, job_id: int, job: NewJob) -> datetime:
        """Write ``job`` to this database's outbox, in the caller's transaction.

        Args:
            target: the alias of the queue's database.
            job_id: the id :meth:`reserve_job_id` drew on ``target``.
            job: the validated job; a ``delay_s`` becomes its run_at now (this clock).

        Returns:
            The row's ``created_at`` (this database's clock), aware.
        """

    def put_outbox_many(self, target: str, jobs: Sequence[tuple[int, NewJob]]) -> datetime:
        """Write ``jobs`` to this database's outbox in one statement, in the caller's transaction.

        Args:
            target: the alias of the queue's database.
            jobs: ``(job id, job)`` pairs, each id drawn by :meth:`reserve_job_ids` on
                ``target`` and distinct; a ``delay_s`` becomes the job's run_at now.

        Returns:
            The rows' ``created_at`` (this database's clock: one for the statement), aware.
        """

    def take_outbox(self, target: str, limit: int) -> list[OutboxRow]:
        """Lock and return up to ``limit`` outbox rows for ``target``, oldest first.

        Call inside a transaction (the relay's); rows another relay holds are skipped, so relays
        in many processes share the rows.
        """

    def delete_outbox(self, ids: Sequence[int]) -> int:
        """Delete the outbox rows ``ids`` (relayed); return how many were deleted."""

    def insert_relayed(self, rows: Sequence[OutboxRow]) -> int:
        """Insert the jobs of ``rows`` on this (queue) database, each under its ``job_id``.

        A job whose id exists already (relayed before), or whose (queue, dedupe key) a live job
        holds, is not inserted. All rows or none: one transaction, committed on return.

        Returns:
            How many jobs were inserted.
        """

    def outbox_gauges(
        self, targets: Sequence[str], cap: int = OUTBOX_COUNT_CAP
    ) -> list[OutboxGauge]:
        """Return, per alias of ``targets``, how many rows wait for it here and the oldest's age.

        Args:
            targets: queue database aliases.
            cap: most rows counted per target; the count reads ``cap`` past it.

        Returns:
            One gauge per target, in ``targets``' sorted order.
        """

    # --- Jobs enqueued after other jobs.

    def release_stranded(self, limit: int = 500) -> int:
        """Release ordering-key followers whose parent ended before their enqueue committed.

        Internal: every worker's reaper tick calls it. An ordering-key follower is linked to its
        key's last job without a lock (issue 33), so that job can end before the follower's
        transaction commits, unseen by the release that its end runs; this releases such a
        job (its key's first waiting one) as that release would have.

        Args:
            limit: most jobs released in one call.

        Returns:
            How many jobs were released (ready or scheduled).
        """
        ...

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        """Insert ``job`` to run once every job of ``after`` has succeeded; return id, created_at.

        In the caller's transaction (a savepoint in it, or one of its own): nothing is written
        when it raises. ``after`` holds distinct ids. The rules are this module's docstring's.

        Raises:
            InvalidJobOption: a parent id names no job (``option`` is ``after``).
        """
        ...

    # --- Pause and resume claims of a queue or a job type (every worker, every host).

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        """Stop every claim from taking jobs of queue (``kind="queue"``) or type ``name``.

        Running jobs are left alone and enqueue keeps working. Pausing what is paused already
        changes nothing: the first pause's ``by``, time and reason stand.

        Args:
            kind: ``"queue"`` or ``"type"``.
            name: the queue or job type name (validated by the caller).
            by: who paused it (a user name), for the record.
            reason: why, for the record (may be empty).

        Returns:
            ``(the pause in force, True if this call made it)``.
        """

    def resume(self, kind: str, name: str) -> Paused | None:
        """Let claims take jobs of queue or type ``name`` again, and wake idle workers for them.

        Returns:
            The pause that was lifted, or None when ``name`` was not paused.
        """

    def paused(self) -> list[Paused]:
        """Return every pause in force, by kind and name."""

    # --- Progress and checkpoints of running jobs, and the mark that makes finishing notify.

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        """Store ``done`` of ``total`` (None: unknown) steps on the held job's row.

        Raises:
            LeaseLost: the job is no longer leased under ``lease_token``; nothing was written.
        """

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        """Store ``state_json`` (checked JSON text) as the held job's checkpoint.

        Raises:
            LeaseLost: the job is no longer leased under ``lease_token``; nothing was written.
        """

    def read_checkpoint(self, job_id: int) -> Any:
        """Return the job's last checkpoint (decoded JSON), or None when it has none.

        Raises:
            JobNotFound: no job has this id.
        """

    def watch(self, job_id: int) -> str | None:
        """Mark the job as waited on and return its state, or None when no job has this id.

        On PostgreSQL, once marked, the statement that finishes it (succeeded, dead, cancelled)
        notifies :data:`FINISHED_CHANNEL` at commit; the caller LISTENs before calling this, so
        a job that finishes in between is either seen finished here or notified.
        """

    # --- Read the token buckets the claim spends.

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        """Return seconds until the soonest drained bucket of ``rates`` has a token again.

        A drained bucket (less than one token, refilled to now) was spent by a claim in the
        last ``1/rate`` seconds: its jobs are likely waiting, so an idle worker sleeps until
        then rather than a poll interval (``worker/loop.py``).

        Args:
            rates: the worker's limits (with its registry's dependencies).
            since_s: seconds ago the caller's claim began (>= 0): a bucket drained then counts
                as drained (wait 0 if it has refilled since), because that claim may have left
                jobs for it. Without it, a worker descheduled for longer than ``1/rate``
                between its claim and this read saw no drained bucket, and ``--burst`` exited
                with jobs left behind.

        Returns:
            Seconds (>= 0), or None when no bucket was drained then or is now.
        """

    def rate_limit_rows(self, rates: RateLimits, cap: int = 10_000) -> list[RateLimitRow]:
        """Return every limiter with a bucket, by key: its limit, tokens now and held jobs.

        Args:
            rates: the declared limits (a bucket whose limit was removed is left out).
            cap: held counts are exact up to this, and read as ``cap`` past it (>= 1).
        """

    # --- The per-minute rollup's own writes (outcomes are added by ``finish_many``).

    def sample_depth(self, now: datetime | None = None) -> int:
        """Record each queue's claimable count and oldest claimable age for this minute.

        The first sample of a minute stands (later calls that minute, from any worker, write
        nothing), so every worker may call it; a row ``(minute, "", "")`` holds the totals.
        Counts are ``queue_gauges``' capped ones (:func:`depth_samples`).

        Args:
            now: stands in for the database clock (tests).

        Returns:
            How many rows were written (0 when this minute was sampled already).
        """

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` rollup rows of minutes older than ``older_than_s`` seconds.

        Returns:
            How many rows were deleted.
        """

    # --- Register, refresh and remove the row of a worker process.

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        """Insert or refresh this process's Worker row (a reused id takes the row over).

        Args:
            worker_id: the process's id.
            queues: the queues it serves.
            concurrency: most jobs it runs at once.
            heartbeat_interval_s: seconds between its heartbeats.
        """

    def wake_queues(self, queues: Sequence[str]) -> None:
        """Wake the idle workers of ``queues`` as an enqueue does (PostgreSQL: ``NOTIFY``).

        A worker whose ack freed a slot of a full concurrency key calls it, so a worker with
        free slots claims the key's next job now instead of at its next poll. Drivers whose
        workers only poll do nothing.

        Args:
            queues: queue names.
        """

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        """Mark the worker seen now, with how many jobs it runs and its status (``draining``)."""

    def set_listener_up(self, worker_id: str, up: bool | None) -> None:
        """Record whether the worker's LISTEN connection is up (None: it does not LISTEN)."""

    def prune_workers(self, silent_for_s: float) -> int:
        """Delete the rows of workers not seen for ``silent_for_s`` seconds; return how many."""

    def deregister_worker(self, worker_id: str) -> None:
        """Delete the worker's row at clean exit."""

    # --- The writes of ``jobqueue.batch()``, in the caller's transaction.

    def create_batch(self, payload_json: str, callbacks_json: str) -> int:
        """Insert an empty batch and return its id.

        Args:
            payload_json: the JSON object handed to the callbacks as ``payload``.
            callbacks_json: the JSON list of callback specs (``kind``: ``success`` or
                ``complete``; ``type``, ``queue``, ``priority``, ``max_attempts``,
                ``timeout_s`` as resolved for the callback's job type).
        """
        ...

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        """Make the jobs ``job_ids`` members of ``batch_id``; return how many joined.

        A job that already belongs to a batch stays where it is and is not counted. The jobs
        are expected unfinished (just enqueued, in the same transaction): each joins
        ``pending``.
        """
        ...

    def close_empty_batch(
        self, batch_id: int, success_job_id: int | None, complete_job_id: int | None
    ) -> None:
        """Record the completion of a batch with no members and the callbacks enqueued for it."""
        ...
