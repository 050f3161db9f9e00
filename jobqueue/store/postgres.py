"""Internal: the PostgreSQL store. Runs the statements in ``sql/`` on a Django connection.

Each public method is one statement (``reap`` is two, in one transaction) and runs in the
caller's transaction when there is one, so an enqueue commits or rolls back with the caller's
business data. A transaction the store opens itself (a statement in autocommit included) runs
under the transaction limits (``bounded.py``); a caller's transaction, and an enqueue, get none.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections, transaction

from jobqueue.errors import DuplicateJob, LeaseLost
from jobqueue.models.rollups import EXPIRED_KIND, ROLLUP_SHARDS
from jobqueue.retries import Outcome
from jobqueue.store import bounded
from jobqueue.store.chunks import plan_chunks
from jobqueue.store.finishing import (
    charge_expired,
    charged_outcome,
    expired_entry,
    lease_of,
)
from jobqueue.store.interface import (
    ENQUEUE_MANY_CHUNK_BYTES,
    RELEASED_MESSAGE,
    ClaimedJob,
    ExpiredLease,
    HeldLease,
    NewJob,
    ReapDecision,
)
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.postgres_batches import PostgresBatchStore
from jobqueue.store.postgres_breakers import PostgresDependencyStore
from jobqueue.store.postgres_concurrency import _KEYED_SEEN, PostgresConcurrencyCheck
from jobqueue.store.postgres_copy import COPY_MIN_JOBS, copy_jobs, copyable
from jobqueue.store.postgres_cron import PostgresCronStore
from jobqueue.store.postgres_deaths import PostgresDeathStore
from jobqueue.store.postgres_gauges import PostgresGaugeStore
from jobqueue.store.postgres_operator import PostgresOperatorStore
from jobqueue.store.postgres_outbox import PostgresOutboxStore
from jobqueue.store.postgres_parents import PostgresParentStore
from jobqueue.store.postgres_pauses import PostgresPauseStore
from jobqueue.store.postgres_pipeline import PostgresFinishThenClaim, finish_statement, note_claimed
from jobqueue.store.postgres_progress import PostgresProgressStore
from jobqueue.store.postgres_ratelimits import PostgresRateLimitStore
from jobqueue.store.postgres_rollups import PostgresRollupStore
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import WorkerRegistry, claim_again, claim_params
from jobqueue.store.sqltext import sql


def _json(value: Any) -> Any:
    # Django registers a text loader for jsonb on psycopg 3 (JSONField decodes it);
    # raw SQL decodes here.
    return json.loads(value) if isinstance(value, str | bytes) else value


def _jobs_json(jobs: Sequence[NewJob], ids: Sequence[int | None]) -> str:
    """Return ``jobs`` as one JSON array for enqueue_many.sql (payloads are JSON already)."""
    dumps = json.dumps
    return "[{}]".format(
        ",".join(
            f'{{"queue":{dumps(j.queue)},"type":{dumps(j.type)},"payload":{j.payload_json},'
            f'"priority":{j.priority},"tenant_id":{dumps(j.tenant_id)},'
            f'"at":{dumps(j.run_at.isoformat()) if j.run_at is not None else "null"},'
            f'"delay_s":{float(j.delay_s)!r},"max_attempts":{j.max_attempts},'
            f'"timeout_s":{float(j.timeout_s)!r},"dedupe_key":{dumps(j.dedupe_key)},'
            f'"ordering_key":{dumps(j.ordering_key)},'
            f'"concurrency_key":{dumps(j.concurrency_key)},'
            f'"concurrency_limit":{dumps(j.concurrency_limit)},"id":{dumps(job_id)}}}'
            for j, job_id in zip(jobs, ids, strict=True)
        )
    )


class PostgresStore(
    PostgresBatchStore,
    PostgresConcurrencyCheck,
    PostgresFinishThenClaim,
    PostgresGaugeStore,
    PostgresCronStore,
    PostgresDependencyStore,
    PostgresDeathStore,
    PostgresOperatorStore,
    PostgresParentStore,
    PostgresOutboxStore,
    PostgresPauseStore,
    PostgresProgressStore,
    PostgresRateLimitStore,
    PostgresRollupStore,
    WorkerRegistry,
):
    """The queue on PostgreSQL: SKIP LOCKED claims, fenced writes, batch heartbeats."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias

    def _execute(self, name: str, params: dict[str, Any], *, callers: bool = False) -> Any:
        # In autocommit, under jobqueue's transaction limits; in a transaction, as it is.
        # An enqueue (``callers``) is the caller's statement even in autocommit: it may wait on
        # a competitor's dedupe key for as long as the caller's own settings allow.
        if callers:
            cursor = connections[self.alias].cursor()
            cursor.execute(sql(name), params)
            return cursor
        return bounded.execute(self.alias, sql(name), params)

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        job_id, created, _ = self.enqueue_stamped(job)
        return job_id, created

    def enqueue_stamped(self, job: NewJob) -> tuple[int, bool, datetime]:
        params = {
            "queue": job.queue,
            "type": job.type,
            "payload": job.payload_json,
            "priority": job.priority,
            "tenant_id": job.tenant_id,
            "run_at": job.run_at,
            "delay_s": job.delay_s,
            "max_attempts": job.max_attempts,
            "timeout_s": job.timeout_s,
            "dedupe_key": job.dedupe_key,
            "ordering_key": job.ordering_key,
            "concurrency_key": job.concurrency_key,
            "concurrency_limit": job.concurrency_limit,
        }
        if job.dedupe_key is None:
            if job.ordering_key is not None:
                return self._enqueue_in_order(params)
            with self._execute("enqueue_plain", params, callers=True) as cursor:
                row = fetchone(cursor)
            return row.id, True, row.created_at
        # The live holder of a dedupe key can finish between our insert giving way and our
        # look-up; then the key is free, so insert again. Twice is already rare.
        for _ in range(5):
            with self._execute("enqueue", params, callers=True) as cursor:
                row = fetchone(cursor)
            if row is not None:
                return row.id, True, row.created_at
            with self._execute("find_live_dedupe", params, callers=True) as cursor:
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
        keys = sorted({k for i in unique if (k := jobs[i].ordering_key) is not None})
        params = {"n": len(unique), "ordering_keys": keys}
        with self._execute("reserve_ids", params, callers=True) as cursor:
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
        with self._execute("enqueue_many", params, callers=True) as cursor:
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
    ) -> list[ClaimedJob]:
        return claim_again(
            self._claim_once, queues, worker_id, max_jobs, lease_s, now, plan, self._ensure_buckets
        )

    def _claim_once(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
    ) -> list[ClaimedJob]:
        queues = list(queues)
        plan = plan or ClaimPlan.even(len(queues))
        if plan.every:
            with self._execute("claimable_queues", {}) as cursor:
                found = [name for (name,) in cursor.fetchall()]
            queues, plan = plan.with_others(queues, found)
        caps, limits = plan.caps, plan.limits
        statement, params = self._claim_statement(queues, worker_id, max_jobs, lease_s, now, plan)
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
                with self._execute("claim_turn", {}) as cursor:
                    cursor.fetchone()
                bounded.checkpoint("claim", self.alias)
                with self._execute(statement, params) as cursor:
                    rows = fetchall(cursor)
        else:
            with self._execute(statement, params) as cursor:
                rows = fetchall(cursor)
        return self._claimed(rows, plan, turned)

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
            "lease_s": lease_s,
            "now": now,
            **claim_params(plan.rates),
        }
        return ("claim" if plan.rates.enabled else "claim~rates"), params

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
        return [
            ClaimedJob(
                id=r.id,
                job_type=r.type,
                payload=_json(r.payload),
                attempt=r.attempts,
                max_attempts=r.max_attempts,
                timeout_s=r.timeout_s,
                lease_token=r.lease_token,
                lease_until=r.lease_until,
                queue=r.queue,
                priority=r.priority,
                tenant_id=r.tenant_id,
                tag=r.tag,
                suspect=r.suspect,
            )
            for r in rows
        ]

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        if not leases:
            return {}
        ordered = sorted(leases)
        params = {
            "ids": [job_id for job_id, _ in ordered],
            "tokens": [token for _, token in ordered],
            "lease_s": lease_s,
        }
        with self._execute("heartbeat", params) as cursor:
            return {
                r.id: HeldLease(lease_until=r.lease_until, cancel_requested=r.cancel_requested)
                for r in fetchall(cursor)
            }

    def finish_many(
        self, outcomes: Sequence[Outcome], now: datetime | None = None
    ) -> dict[int, str]:
        if not outcomes:
            return {}
        params = self._finish_params(outcomes, now)
        with self._execute(finish_statement(self.alias, params["ids"]), params) as cursor:
            return {r.id: r.state for r in fetchall(cursor)}

    def _finish_params(self, outcomes: Sequence[Outcome], now: datetime | None) -> dict[str, Any]:
        """Return ``finish_many.sql``'s parameters for ``outcomes`` (not empty)."""
        # Rows in id order, as every multi-row write here: two batches never wait on each other
        # in opposite orders.
        ordered = sorted(outcomes, key=lambda o: o.job_id)
        return {
            "ids": [o.job_id for o in ordered],
            "tokens": [o.lease_token for o in ordered],
            "states": [str(o.state) for o in ordered],
            "results": [o.result_json for o in ordered],
            "errors": [None if o.error is None else json.dumps(o.error) for o in ordered],
            "dead_reasons": [o.dead_reason for o in ordered],
            "retry_ats": [o.retry_at for o in ordered],
            "delays": [o.delay_s for o in ordered],
            "now": now,
            "shards": ROLLUP_SHARDS,
            "expired_kind": EXPIRED_KIND,
        }

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        params = {"id": job_id, "lease_token": lease_token, "message": message}
        with self._execute("release", params) as cursor:
            row = fetchone(cursor)
        if row is None:
            raise LeaseLost(job_id)
        return row.state

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        with self._execute("lease_info", {"id": job_id, "lease_token": lease_token}) as cursor:
            row = fetchone(cursor)
        if row is None:
            raise LeaseLost(job_id)
        return ExpiredLease.of(row)

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        with self._execute("expired_leases", {"limit": limit, "now": now}) as cursor:
            return [lease_of(r) for r in fetchall(cursor)]

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        decide = decide or charge_expired
        with bounded.own_transaction(self.alias):
            expired = self.expired_leases(limit, now)
            if not expired:
                return 0, 0
            bounded.checkpoint("reaper", self.alias)
            outcomes = [charged_outcome(x, decide(x), expired_entry(x)) for x in expired]
            states = list(self.finish_many(outcomes, now=now).values())
        return states.count("scheduled"), states.count("dead")
