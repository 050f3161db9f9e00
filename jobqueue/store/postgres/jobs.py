"""Internal: enqueue and claims on PostgreSQL, and the finish-then-claim pipeline.

:class:`PostgresJobs` is the area of :class:`~jobqueue.store.postgres.PostgresStore` that
inserts jobs and claims them: the insert forms (VALUES, JSON, COPY), the claim and its
concurrency check, and ``finish_then_claim``.

Each public method runs in the caller's transaction when there is one, so an enqueue commits or
rolls back with the caller's business data. A transaction the store opens itself (a statement in
autocommit included) runs under the transaction limits (``bounded.py``); a caller's transaction,
and an enqueue, get none.

Enqueue. One job is ``enqueue_plain.sql``, or ``enqueue.sql`` and ``find_live_dedupe.sql`` with
a dedupe key; a job with an ordering key goes to the flows area (``enqueue_in_order.sql``).
``enqueue_many.sql`` takes a JSON array (:func:`_jobs_json`) and carries what a job with a dedupe
key (``ON CONFLICT`` against the live holder) needs; it takes the jobs with an ordering key too
(they took the key's lock there until issue 33; not moved to COPY since, unmeasured). A batch
larger than one statement's chunk is several such statements in one transaction, its ids drawn
first (``reserve_ids.sql``). A batch with neither key is plain rows, and binary COPY writes them
(:func:`copy_jobs`, ``enqueue_copy.sql``) without the JSON array, its parse and the conflict
check: about half the time of the statement per job (docs/performance.md, "Bulk enqueue by
COPY"). The COPY rows are the statement's, column for column: the ids are drawn first, ascending
in input order (``enqueue_copy_ids.sql``, which also reads the transaction's ``now()``), and
state, ``run_at`` and ``created_at`` are computed here from that ``now()`` as the statement
computes them in SQL.

Claim. ``claim.sql`` (its text without the rate limiters, ``claim~rates``, when none is declared),
under ``claim_turn.sql`` when claims must take turns (caps, limits, rates); ``"*"`` adds windows
of other queues (``claimable_queues.sql``). A worker that knows of no concurrency limit (none
declared in its settings or job types) claims without the claim turn; the limit of a job
enqueued with ``concurrency_limit=`` alone is learned from the first keyed job such a claim
returns. That claim is checked here before its jobs run, under the turn, and what passes a key's
limit is given back unspent (``claim_recount.sql``, ``unclaim.sql``; issue 18); docs/decisions.md,
"Enqueue-only concurrency limits are exact".

Finish, then claim, in one round trip (issue 15). ``finish_many`` and the claim go in one psycopg
pipeline with one Sync, each in its own transaction under the transaction limits
(``bounded.execute_each``): two commits, one round trip. Only a claim that is one statement in
autocommit goes this way; one that takes turns (caps, limits, rates, ``"*"``) records, then
claims, in two calls. docs/decisions.md, "The ack and the next claim share a round trip, not a
transaction".
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from django.db import DatabaseError, connections, transaction
from psycopg.types.json import Jsonb

from jobqueue.errors import DuplicateJob, InvalidPayload
from jobqueue.retries import RunOutcome
from jobqueue.store import bounded
from jobqueue.store.chunks import job_bytes, plan_chunks
from jobqueue.store.interface import (
    ENQUEUE_MANY_CHUNK_BYTES,
    MAX_STATEMENT_BYTES,
    NEW_JOB_COLUMNS,
    ClaimedJob,
    ClaimRequest,
    FinishedThenClaimed,
    NewJob,
    Store,
)
from jobqueue.store.plan import ClaimPlan, ConcurrencyLimits, window
from jobqueue.store.postgres.db import Executor, PostgresArea, enqueue_params
from jobqueue.store.postgres.finishing import (
    PostgresFinishing,
    finish_statement,
    may_complete_batch,
    note_claimed,
)
from jobqueue.store.postgres.flows import PostgresFlows
from jobqueue.store.postgres.limits import PostgresLimits
from jobqueue.store.postgres.routines import claim_call
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import (
    claim_again,
    claim_params,
    finish_then_claim_in_turn,
    job_json,
)
from jobqueue.store.sqltext import sql


def _jobs_json(jobs: Sequence[NewJob], ids: Sequence[int | None]) -> str:
    """Return ``jobs`` as one JSON array for enqueue_many.sql (payloads are JSON already)."""
    return "[{}]".format(",".join(map(job_json, jobs, ids)))


#: Most lanes (a queue's tenants with work) one claim reads, at least two per job asked for (as many
#: as the claim allots places, spare ones included: claim.sql, "allotted"): a
#: queue with more is read a window at a time, each claim of a server session moving on from
#: where its last one stopped (claim.sql, "tenants"; docs/decisions.md, "The lane window"). A
#: lane read is one probe of the claim index: 64 of them bound a claim's scan whatever the
#: number of tenants (a claim of 10 over 1,000 or 10,000 tenants reads about 400 buffers, 1,000
#: with 256, 30,000 without a window: bench/claim_profile.py), and every lane is seen at least
#: once in lanes / 64 claims of any one worker.
LANE_WINDOW = 64


#: Fewest jobs written by COPY: below it the statement's one round trip wins over COPY's two
#: (ids, stream; four in autocommit, with BEGIN and COMMIT). Measured in autocommit (load 14,
#: 20 calls x 5, jobs/s, COPY / statement): 100 jobs 5,181 / 5,420; 200 6,551 / 5,361; 300
#: 7,326 / 5,941; 500 13,809 / 10,848.
COPY_MIN_JOBS = 200


#: The new job's columns a COPY writes: :data:`NEW_JOB_COLUMNS` but what only the statement
#: needs (the delay is turned into ``run_at`` here; no dedupe or ordering key is ever copied).
_COPIED = tuple(
    column
    for column in NEW_JOB_COLUMNS
    if column[0] not in ("delay_s", "dedupe_key", "ordering_key")
)
#: enqueue_copy.sql's columns and their types, in its order (``test_insert_columns.py`` checks the
#: file's list against it): the id, :data:`_COPIED`, then what every new row starts with. Binary
#: COPY sends each value in its column's exact binary format (``varchar`` as ``text``).
COPY_COLUMNS = (
    ("id", "int8"),
    *((name, kind) for name, _, kind in _COPIED),
    ("state", "text"),
    ("attempts", "int4"),
    ("leased_by", "text"),
    ("errors", "jsonb"),
    ("dead_reason", "text"),
    ("created_at", "timestamptz"),
)
_TYPES = tuple(kind for _, kind in COPY_COLUMNS)
_COPIED_VALUES = operator.attrgetter(*(attribute for _, attribute, _ in _COPIED))
_JSONB_AT = tuple(i for i, (_, _, kind) in enumerate(_COPIED) if kind == "jsonb")
_RUN_AT = next(i for i, (name, _, _) in enumerate(_COPIED) if name == "run_at")


def _as_is(text: str) -> str:
    """Return JSON text unchanged: the payloads are JSON already (``payloads.to_json``)."""
    return text


_NO_ERRORS = Jsonb("[]", dumps=_as_is)


def copyable(jobs: Sequence[NewJob]) -> bool:
    """Return whether ``jobs`` can be written by :func:`copy_jobs`: no dedupe or ordering key."""
    return all(job.dedupe_key is None and job.ordering_key is None for job in jobs)


def copy_jobs(alias: str, jobs: Sequence[NewJob]) -> list[int]:
    """Insert ``jobs`` (:func:`copyable`, not empty) by one COPY; return their ids in order.

    One round trip and the stream, all or nothing: in the caller's transaction, or in one of
    their own (in autocommit). Each job is inserted (no dedupe key can hold it back).

    Args:
        alias: the queue database's alias.
        jobs: the validated jobs.

    Returns:
        One new id per job, ascending in input order.

    Raises:
        InvalidPayload: one job is over :data:`MAX_STATEMENT_BYTES` (PostgreSQL would close the
            connection on such a row); nothing was written.
        django.db.DatabaseError: the database refused or could not be reached.
    """
    for index, job in enumerate(jobs):
        # Characters are at most 4 bytes: only a payload that large can be over the limit.
        if len(job.payload_json) * 4 > MAX_STATEMENT_BYTES and job_bytes(job) > MAX_STATEMENT_BYTES:
            raise InvalidPayload(
                f"jobs[{index}].payload",
                f"{job_bytes(job)} bytes is over the {MAX_STATEMENT_BYTES} bytes one PostgreSQL "
                "message can carry (lower MAX_PAYLOAD_BYTES)",
            )
    connection = connections[alias]
    # No savepoint in the caller's transaction: a failed COPY leaves it as a failed statement
    # would (to be rolled back), and a savepoint would cost two more round trips.
    with transaction.atomic(using=alias, savepoint=False), connection.cursor() as cursor:
        cursor.execute(sql("enqueue_copy_ids"), {"n": len(jobs)})
        row = fetchone(cursor)
        # The transaction's now(), as enqueue_many.sql reads it: the UTC wall time, made aware
        # here whatever USE_TZ makes Django's loaders return.
        now = row.now_utc.replace(tzinfo=timezone.utc)
        ids: list[int] = row.ids
        # Errors raised by the stream are psycopg's: Django's wrapper makes them its own, as
        # for a statement (QueueUnavailable is raised for an OperationalError).
        with connection.wrap_database_errors, cursor.cursor.copy(sql("enqueue_copy")) as copy:
            copy.set_types(_TYPES)
            write = copy.write_row
            for job, job_id in zip(jobs, ids, strict=True):
                # As enqueue_many.sql: coalesce(at, now() + delay), scheduled if after now().
                run_at = (
                    job.run_at if job.run_at is not None else now + timedelta(seconds=job.delay_s)
                )
                values = list(_COPIED_VALUES(job))
                for index in _JSONB_AT:
                    if values[index] is not None:
                        values[index] = Jsonb(values[index], dumps=_as_is)
                values[_RUN_AT] = run_at
                state = "scheduled" if run_at > now else "ready"
                write((job_id, *values, state, 0, "", _NO_ERRORS, "", now))
    return ids


#: Databases on which this process claimed a job with a concurrency key: its claims there take
#: turns from then on even when its settings and job types declare no limit (the job was
#: enqueued by another service with its own limit). Only ever grows; a set of aliases.
_KEYED_SEEN: set[str] = set()


class PostgresJobs(PostgresArea):
    """Enqueue, claims and the finish-then-claim pipeline on PostgreSQL."""

    def __init__(
        self,
        db: Executor,
        store: Store,
        flows: PostgresFlows,
        limits: PostgresLimits,
        finishing: PostgresFinishing,
    ) -> None:
        super().__init__(db)
        #: The whole store: finish_then_claim records and claims through its operations.
        self.store = store
        self.flows = flows
        self.limits = limits
        self.finishing = finishing

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        job_id, created, _ = self.enqueue_stamped(job)
        return job_id, created

    def enqueue_stamped(self, job: NewJob) -> tuple[int, bool, datetime]:
        params = enqueue_params(job)
        if job.dedupe_key is None:
            if job.ordering_key is not None:
                return self.flows.enqueue_in_order(params)
            with self.db.execute("enqueue_plain", params, callers=True) as cursor:
                row = fetchone(cursor)
            return row.id, True, row.created_at
        # The live holder of a dedupe key can finish between our insert giving way and our
        # look-up; then the key is free, so insert again. Twice is already rare.
        for _ in range(5):
            with self.db.execute("enqueue", params, callers=True) as cursor:
                row = fetchone(cursor)
            if row is not None:
                return row.id, True, row.created_at
            with self.db.execute("find_live_dedupe", params, callers=True) as cursor:
                row = fetchone(cursor)
            if row is not None:
                return row.id, False, row.created_at
        raise DuplicateJob(job.queue, job.dedupe_key or "")

    def enqueue_many(
        self, jobs: Sequence[NewJob], chunk_bytes: int = ENQUEUE_MANY_CHUNK_BYTES
    ) -> list[tuple[int, bool]]:
        if not jobs:
            return []
        if len(jobs) >= COPY_MIN_JOBS and copyable(jobs):
            return [(job_id, True) for job_id in copy_jobs(self.alias, jobs)]
        results: list[tuple[int, bool] | None] = [None] * len(jobs)
        # A batch may name one (queue, dedupe key) several times: the first one stands for all.
        first: dict[tuple[str, str], int] = {}
        unique: list[int] = []
        for index, job in enumerate(jobs):
            if job.dedupe_key is not None:
                key = (job.queue, job.dedupe_key)
                if key in first:
                    continue
                first[key] = index
            unique.append(index)
        chunks = plan_chunks(jobs, unique, chunk_bytes)
        if len(chunks) == 1:
            self._insert_chunk(jobs, chunks[0], {}, results)
        else:
            # Several statements are still one batch: all or nothing, in the caller's
            # transaction (a savepoint) or in one of their own (autocommit).
            with transaction.atomic(using=self.alias):
                reserved = self._reserve_ids(jobs, unique)
                for chunk in chunks:
                    self._insert_chunk(jobs, chunk, reserved, results)
        for index, job in enumerate(jobs):
            if results[index] is None:
                holder = results[first[(job.queue, job.dedupe_key)]]  # type: ignore[index]
                assert holder is not None
                results[index] = (holder[0], False)
        return results  # type: ignore[return-value]

    def _reserve_ids(self, jobs: Sequence[NewJob], unique: Sequence[int]) -> dict[int, int]:
        """Draw one id per job to insert, ascending in input order (reserve_ids.sql)."""
        params = {"n": len(unique)}
        with self.db.execute("reserve_ids", params, callers=True) as cursor:
            ids = [row.id for row in fetchall(cursor)]
        return dict(zip(unique, ids, strict=True))

    def _insert_chunk(
        self,
        jobs: Sequence[NewJob],
        chunk: Sequence[int],
        reserved: dict[int, int],
        results: list[tuple[int, bool] | None],
    ) -> None:
        batch = [jobs[i] for i in chunk]
        params = {"jobs": _jobs_json(batch, [reserved.get(i) for i in chunk])}
        with self.db.execute("enqueue_many", params, callers=True) as cursor:
            rows = fetchall(cursor)
        del params
        for row in rows:
            index = chunk[row.ord - 1]
            job_id, created = row.job_id, row.created
            # None: the key's holder committed after this statement's snapshot; the
            # single-row path waits for it and reads it (or inserts, if it is gone).
            results[index] = (
                (job_id, created) if job_id is not None else self.enqueue_or_get(jobs[index])
            )

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
        return claim_again(
            self._claim_once,
            queues,
            worker_id,
            max_jobs,
            lease_s,
            now,
            plan,
            self.limits.ensure_buckets,
            taken,
        )

    def has_work(self, queues: Sequence[str]) -> bool:
        with self.db.execute("has_work", {"queues": list(queues)}) as cursor:
            row = cursor.fetchone()
        return bool(row[0])

    def _claim_once(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
    ) -> tuple[list[ClaimedJob], bool]:
        """One claim (for "*", of as many windows of queues as it takes).

        Returns:
            ``(jobs, held)``: ``held`` True when a rate bucket kept a job out or may be
            missing (``claim_again``).
        """
        queues = list(queues)
        plan = plan or ClaimPlan.even(len(queues))
        if not plan.every:
            return self._claim_queues(queues, worker_id, max_jobs, lease_s, now, plan)
        # "*": the listed queues and a window of as many other queues as the claim may take jobs
        # (issue 33). A window whose queues gave less than asked (their tenants capped, their
        # keys at their limits) is followed by the next, the listed queues left out (they were
        # served), until the claim is full or the rotation has come round.
        claimed: list[ClaimedJob] = []
        held = False
        listed, after = queues, plan.cursor
        while True:
            want = max_jobs - len(claimed)
            found = self._window(after, plan.skipped(queues), want)
            others = window(found, want)
            names, window_plan = plan.with_others(listed, others)
            if names:
                more, kept_out = self._claim_queues(
                    names, worker_id, want, lease_s, now, window_plan
                )
                claimed, held = claimed + more, held or kept_out
            if len(claimed) >= max_jobs or sum(1 for lap, _ in found if lap == 0) < want:
                return claimed, held  # full, or this window reached the last name (or wrapped)
            listed, after = [], others[-1]
            plan = replace(plan, weights=(), start=())

    def _window(self, after: str, skip: list[str], limit: int) -> list[tuple[int, str]]:
        """Return ``(lap, name)`` of the next ``limit`` other queues (claimable_queues.sql)."""
        params = {"after": after, "skip": skip, "limit": limit}
        with self.db.execute("claimable_queues", params) as cursor:
            return [(lap, name) for (lap, name) in cursor.fetchall()]

    def _claim_queues(
        self,
        queues: list[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None,
        plan: ClaimPlan,
    ) -> tuple[list[ClaimedJob], bool]:
        """Claim up to ``max_jobs`` of ``queues`` (no ``"*"`` left) in one claim statement.

        Returns:
            ``(jobs, held)``: ``held`` True when the statement sent its row of no job (a rate
            bucket kept a job out, or one it may draw on is missing: claim.sql's last lines).
        """
        caps, limits = plan.caps, plan.limits
        statement, params = self._claim_statement(queues, worker_id, max_jobs, lease_s, now, plan)
        # The claim's server-side function (planned once per session), else the statement.
        text = claim_call(self.alias, statement) or sql(statement)
        turned = caps.enabled or limits.enabled or self.alias in _KEYED_SEEN
        if turned:
            # Two claims running at once would each read the other's leases as not yet taken
            # and could together pass a tenant's cap or a concurrency limit. Such claims take
            # turns (a worker that knows of no limit learns of them from the first limited job
            # it claims, see _KEYED_SEEN, and checks that claim afterwards: _within_limits): the
            # lock is held
            # to commit, and the claim statement that follows reads the counts after it. The
            # transaction limits bound the wait for the turn (lock timeout) and how long a frozen
            # holder keeps it (idle limit).
            with bounded.own_transaction(self.alias):
                with self.db.execute("claim_turn", {}) as cursor:
                    cursor.fetchone()
                bounded.checkpoint("claim", self.alias)
                with self.db.execute_text(text, params) as cursor:
                    rows = fetchall(cursor)
        else:
            with self.db.execute_text(text, params) as cursor:
                rows = fetchall(cursor)
        return self._claimed_held(rows, plan, turned)

    def _claim_statement(
        self,
        queues: list[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None,
        plan: ClaimPlan,
    ) -> tuple[str, dict[str, Any]]:
        """Return the claim statement's name and parameters for ``queues`` (no ``"*"`` left)."""
        caps, limits = plan.caps, plan.limits
        params = {
            "queues": queues,
            "weights": list(plan.weights),
            "start": list(plan.start),
            "strict": plan.strict,
            "default_cap": caps.default,
            "cap_tenants": list(caps.overrides),
            "cap_values": list(caps.overrides.values()),
            # Two small JSON objects ({tenant: weight}, {key: limit}): read with ->> in SQL.
            "tenant_weights": json.dumps(dict(caps.weights)),
            "limits": json.dumps(dict(limits.overrides)),
            "worker_id": worker_id,
            "max_jobs": max_jobs,
            "lane_window": max(LANE_WINDOW, 2 * max_jobs),
            "lease_s": lease_s,
            "now": now,
            **claim_params(plan.rates),
        }
        return ("claim" if plan.rates.enabled else "claim~rates"), params

    def _claimed_held(
        self, rows: list[Any], plan: ClaimPlan, turned: bool
    ) -> tuple[list[ClaimedJob], bool]:
        """Return the claim statement's ``rows`` as ``(jobs, held)`` (:meth:`_claimed`).

        ``held``: the statement sent its row of no job (id NULL: a rate bucket kept a job out,
        or one it may draw on is missing; claim.sql's last lines), which is left out.
        """
        jobs = [r for r in rows if r.id is not None]
        return self._claimed(jobs, plan, turned), len(jobs) < len(rows)

    def _claimed(self, rows: list[Any], plan: ClaimPlan, turned: bool) -> list[ClaimedJob]:
        """Return the claim statement's ``rows`` as jobs, in the order it served them.

        A claim that did not take turns (``turned`` False) and returned keyed jobs is checked
        against their limits first (``_within_limits``); the jobs it gives back are left out.

        Raises:
            DatabaseError: the check failed; the claim's jobs were given back (best effort).
        """
        # UPDATE ... RETURNING gives rows in no particular order; hand them out in the order
        # the picked CTE served them.
        note_claimed(self.alias, rows)
        if plan.strict:
            rows.sort(key=lambda r: (r.pos, r.nth_of_queue))
        else:
            rows.sort(key=lambda r: (r.tag, r.pos))
        if any(r.concurrency_key is not None for r in rows):
            _KEYED_SEEN.add(self.alias)
            if not turned:
                try:
                    rows = self._within_limits(rows, plan.limits)
                except DatabaseError:
                    # None of these jobs runs: give them back unspent rather than leave their
                    # leases to expire and be charged (best effort; else the reaper does).
                    self._unclaim(rows)
                    raise
        return [ClaimedJob.from_row(r) for r in rows]

    def _within_limits(self, rows: list[Any], limits: ConcurrencyLimits) -> list[Any]:
        """Return ``rows`` less the jobs that put a concurrency key over its limit, given back.

        ``rows`` came from a claim that did not take turns (this process knew of no limit), so
        a claim running beside it may have read the same free slots. Before any of them runs,
        this takes the claim's turn and counts each returned key's leased jobs afresh; a key
        over its limit (the setting's, else the lowest stored on these jobs: ``limit_of``) gets
        back the excess of this claim's jobs of it, the last served first, unspent
        (``unclaim.sql``). Why this is exact: docs/decisions.md, "Enqueue-only concurrency
        limits are exact".

        Args:
            rows: the claim's rows (``claim.sql``'s RETURNING), in serve order.
            limits: the claim's concurrency limits' settings (overrides).

        Returns:
            The rows kept, in the same order.
        """
        keyed = [r for r in rows if r.concurrency_key is not None]
        params = {
            "keys": sorted({r.concurrency_key for r in keyed}),
            "ids": [r.id for r in keyed],
        }
        with bounded.own_transaction(self.alias):
            with self.db.execute("claim_turn", {}) as cursor:
                cursor.fetchone()
            with self.db.execute("claim_recount", params) as cursor:
                counts = fetchall(cursor)
            excess: list[Any] = []
            for count in counts:
                limit = limits.limit_of(count.key, count.stored)
                if limit is None or count.leased <= limit:
                    continue
                mine = [r for r in keyed if r.concurrency_key == count.key]
                excess += mine[max(len(mine) - (count.leased - limit), 0) :]
            if excess:
                self._unclaim(excess, strict=True)
        gone = {r.id for r in excess}
        return [r for r in rows if r.id not in gone]

    def _unclaim(self, rows: list[Any], *, strict: bool = False) -> None:
        """Give back claimed, unstarted jobs unspent, in their place (``unclaim.sql``).

        Args:
            rows: the claim's rows to give back (``id``, ``lease_token``).
            strict: raise a database error (else swallow it: the leases expire, are reaped).
        """
        ordered = sorted(rows, key=lambda r: r.id)
        back = {"ids": [r.id for r in ordered], "tokens": [r.lease_token for r in ordered]}
        try:
            with self.db.execute("unclaim", back) as cursor:
                cursor.fetchall()
        except DatabaseError:
            if strict:
                raise

    def _one_statement_claim(self, plan: ClaimPlan | None) -> bool:
        """Return whether a claim under ``plan`` starts with one statement in autocommit.

        No turn to take (caps, concurrency limits) and no window of queues (``"*"``). Rate
        limits may be on: their first claim is one statement too; the check of the buckets and
        the second claim follow only when it comes back short (``claim_again``).
        """
        if plan is None:
            return True
        caps, limits = plan.caps, plan.limits
        return not (plan.every or caps.enabled or limits.enabled or self.alias in _KEYED_SEEN)

    def finish_then_claim(
        self, outcomes: Sequence[RunOutcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        """Record ``outcomes``, then claim per ``request``: ``Store.finish_then_claim``."""
        if not outcomes or not self._one_statement_claim(request.plan):
            return finish_then_claim_in_turn(
                self.store.finish_many, self.store.claim, outcomes, request
            )
        if not bounded.pipelines(self.alias):
            return finish_then_claim_in_turn(
                self.store.finish_many, self.store.claim, outcomes, request
            )
        queues = list(request.queues)
        plan = request.plan or ClaimPlan.even(len(queues))
        name, claim_params_ = self._claim_statement(
            queues, request.worker_id, request.max_jobs, request.lease_s, None, plan
        )
        finish_params = self.finishing.finish_params(outcomes, None)
        finish_name = finish_statement(self.alias, finish_params["ids"])
        done, error = bounded.execute_each(
            self.alias,
            [
                (sql(finish_name), finish_params),
                (claim_call(self.alias, name) or sql(name), claim_params_),
            ],
            durable=(0,) if may_complete_batch(finish_name) else (),
            # The ack: planned once per session, not at every call (0.45-0.7 ms of planning an
            # ack in a drain; docs/performance.md, branch drain2).
            prepared=(0,),
        )
        states = {r.id: r.state for r in fetchall(done[0])} if done else None
        held = False
        try:
            claimed = None
            if len(done) > 1:
                claimed, held = self._claimed_held(fetchall(done[1]), plan, False)
        except DatabaseError as exc:  # the limit check failed: its jobs went back
            return FinishedThenClaimed(states, None, exc)
        if claimed is not None and held and len(claimed) < request.max_jobs:
            # The rest of claim_again: the buckets' check and a second claim for the places
            # a limiter left empty. Its failure must not lose the first claim's jobs (they are
            # leased to this worker): the next claim meets the error again and backs off.
            try:
                self.limits.ensure_buckets(queues, plan, None)
                more, _ = self._claim_once(
                    queues,
                    request.worker_id,
                    request.max_jobs - len(claimed),
                    request.lease_s,
                    None,
                    plan,
                )
                claimed = claimed + more
            except DatabaseError:
                pass
        return FinishedThenClaimed(states, claimed, error)
