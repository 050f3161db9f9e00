"""Internal: the ORM store, for SQLite (the zero-setup default) and other Django databases.

It keeps the same contract as the PostgreSQL store, with these costs: a claim is a short
transaction of a few statements instead of one, and time comes from this process's clock
(``django.utils.timezone.now``), since SQLite has no shared server clock. On SQLite, configure
``OPTIONS = {"transaction_mode": "IMMEDIATE", "timeout": 30}`` so writers queue for the lock
instead of failing with "database is locked"; SQLite serializes writers, which is what keeps two
claims from taking the same job.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobqueue.errors import DuplicateJob, LeaseLost
from jobqueue.models import Job
from jobqueue.models.rollups import EXPIRED_KIND
from jobqueue.retries import Outcome
from jobqueue.states import CLAIMABLE, LIVE, JobState
from jobqueue.store.finishing import (
    LEASE_COLUMNS,
    charge_expired,
    charged_outcome,
    expired_entry,
    lease_of,
    target_fields,
)
from jobqueue.store.generic_batches import GenericBatchStore
from jobqueue.store.generic_breakers import GenericDependencyStore
from jobqueue.store.generic_candidates import GenericCandidates
from jobqueue.store.generic_cron import GenericCronStore
from jobqueue.store.generic_deaths import GenericDeathStore
from jobqueue.store.generic_gauges import GenericGaugeStore
from jobqueue.store.generic_operator import GenericOperatorStore
from jobqueue.store.generic_outbox import GenericOutboxStore
from jobqueue.store.generic_parents import GenericParentStore
from jobqueue.store.generic_pauses import GenericPauseStore
from jobqueue.store.generic_progress import GenericProgressStore
from jobqueue.store.generic_ratelimits import GenericRateLimitStore
from jobqueue.store.generic_rollups import GenericRollupStore
from jobqueue.store.interface import (
    ENQUEUE_MANY_CHUNK_BYTES,
    RELEASED_MESSAGE,
    ClaimedJob,
    ClaimRequest,
    ExpiredLease,
    FinishedThenClaimed,
    HeldLease,
    NewJob,
    ReapDecision,
)
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.ranking import serve_order
from jobqueue.store.shared import WorkerRegistry, claim_again, finish_then_claim_in_turn


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


class GenericStore(
    GenericCandidates,
    GenericBatchStore,
    GenericGaugeStore,
    GenericCronStore,
    GenericDependencyStore,
    GenericDeathStore,
    GenericOperatorStore,
    GenericParentStore,
    GenericOutboxStore,
    GenericPauseStore,
    GenericProgressStore,
    GenericRateLimitStore,
    GenericRollupStore,
    WorkerRegistry,
):
    """The queue on any Django database through the ORM."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias

    @property
    def _jobs(self):
        return Job.objects.using(self.alias)

    def _held(self, job_id: int, lease_token: uuid.UUID):
        return self._jobs.filter(id=job_id, lease_token=lease_token, state=JobState.LEASED)

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        job_id, created, _ = self.enqueue_stamped(job)
        return job_id, created

    def enqueue_stamped(self, job: NewJob) -> tuple[int, bool, datetime]:
        if job.ordering_key is not None and job.dedupe_key is None:
            return self._enqueue_in_order(job)
        now = timezone.now()
        run_at = job.run_at or now + timedelta(seconds=job.delay_s)
        for _ in range(5):
            if job.dedupe_key is not None:
                existing = (
                    self._jobs.filter(queue=job.queue, dedupe_key=job.dedupe_key, state__in=LIVE)
                    .values_list("id", "created_at")
                    .first()
                )
                if existing is not None:
                    return existing[0], False, existing[1]
            try:
                with transaction.atomic(using=self.alias):
                    row = Job(
                        queue=job.queue,
                        type=job.type,
                        payload=json.loads(job.payload_json),
                        priority=job.priority,
                        tenant_id=job.tenant_id,
                        state=JobState.SCHEDULED if run_at > now else JobState.READY,
                        run_at=run_at,
                        max_attempts=job.max_attempts,
                        timeout_s=job.timeout_s,
                        dedupe_key=job.dedupe_key,
                        ordering_key=job.ordering_key,
                        concurrency_key=job.concurrency_key,
                        concurrency_limit=job.concurrency_limit,
                        created_at=now,
                    )
                    row.save(using=self.alias, force_insert=True)
                    return row.id, True, now
            except IntegrityError:
                if job.dedupe_key is None:
                    raise
        raise DuplicateJob(job.queue, job.dedupe_key or "")

    def enqueue_many(
        self, jobs: Sequence[NewJob], chunk_bytes: int = ENQUEUE_MANY_CHUNK_BYTES
    ) -> list[tuple[int, bool]]:
        # chunk_bytes bounds PostgreSQL's statements; here every job is its own. One
        # transaction (SQLite: one commit): row by row, each as enqueue_or_get would. A
        # repeated (queue, dedupe key) finds the job its first occurrence just inserted.
        with transaction.atomic(using=self.alias):
            return [self.enqueue_or_get(job) for job in jobs]

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
    ) -> list[ClaimedJob]:
        return claim_again(self._claim_once, queues, worker_id, max_jobs, lease_s, now, plan)

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
        now = _now(now)
        lease_until = now + timedelta(seconds=lease_s)
        claimed: list[ClaimedJob] = []
        with transaction.atomic(using=self.alias):
            paused_queues, paused_types = self._paused_names()
            if plan.every:
                found = self._jobs.filter(state__in=CLAIMABLE).order_by().values_list("queue")
                queues, plan = plan.with_others(queues, (q for (q,) in found.distinct()))
            claimable = self._jobs.filter(queue__in=queues, state__in=CLAIMABLE).exclude(
                Q(queue__in=paused_queues) | Q(type__in=paused_types)
            )
            # order_by(): Job's default ordering would add "id" to the DISTINCT.
            gate = None
            if plan.rates.enabled:
                tenants = claimable.order_by().values_list("tenant_id", flat=True).distinct()
                gate = self._rate_gate(plan.rates, tenants, now)
                # Out before the candidates are chosen: a drained limiter's jobs never take
                # the places of jobs it does not limit.
                claimable = claimable.exclude(
                    Q(type__in=gate.empty_types()) | Q(tenant_id__in=gate.empty_tenants())
                )
            pairs = sorted(claimable.order_by().values_list("queue", "tenant_id").distinct())
            running = self._running({t for _, t in pairs}, plan)
            candidates = self._candidates(claimable, pairs, max_jobs, plan, running, now)
            picked = serve_order(candidates, queues, plan, running, max_jobs)
            rows = self._jobs.in_bulk([c.id for c, _ in picked], field_name="id") if picked else {}
            for candidate, tag in picked:
                job = rows[candidate.id]
                if gate is not None and not gate.admit(job.type, candidate.tenant_id):
                    continue
                token = uuid.uuid4()
                # Conditional per row: a backend without row locks still cannot double-claim.
                won = self._jobs.filter(id=candidate.id, state__in=CLAIMABLE).update(
                    state=JobState.LEASED,
                    attempts=F("attempts") + 1,
                    lease_token=token,
                    lease_until=lease_until,
                    leased_by=worker_id,
                    started_at=now,
                )
                if won:
                    job = rows[candidate.id]
                    claimed.append(
                        ClaimedJob(
                            id=candidate.id,
                            job_type=job.type,
                            payload=job.payload,
                            attempt=job.attempts + 1,
                            max_attempts=job.max_attempts,
                            timeout_s=job.timeout_s,
                            lease_token=token,
                            lease_until=lease_until,
                            queue=candidate.queue,
                            priority=candidate.priority,
                            tenant_id=candidate.tenant_id,
                            tag=tag,
                            suspect=job.suspect,
                        )
                    )
            if gate is not None:
                self._rate_save(gate)
        return claimed

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        until = timezone.now() + timedelta(seconds=lease_s)
        kept: dict[int, HeldLease] = {}
        with transaction.atomic(using=self.alias):
            for job_id, token in sorted(leases):
                if self._held(job_id, token).update(lease_until=until):
                    cancel = self._jobs.filter(
                        id=job_id, cancel_requested_at__isnull=False
                    ).exists()
                    kept[job_id] = HeldLease(lease_until=until, cancel_requested=cancel)
        return kept

    def _finish(
        self,
        job_id: int,
        lease_token: uuid.UUID,
        entry: dict[str, Any] | None,
        *,
        at: datetime | None = None,
        **fields: Any,
    ) -> str:
        """Apply ``fields`` to a held job, or end it cancelled if a cancel was requested.

        This is the ORM twin of the cancel-requested ``CASE`` of finish_many.sql (and of the
        give-backs: release.sql, hand_back.sql, defer_many.sql). ``at`` stands for the clock.
        """
        now = at or timezone.now()
        with transaction.atomic(using=self.alias):
            row = (
                self._held(job_id, lease_token)
                .values("errors", "cancel_requested_at", "attempts", "leased_by", "has_children")
                .first()
            )
            if row is None:
                raise LeaseLost(job_id)
            errors = list(row["errors"])
            if entry is not None:
                errors.append(entry)
            if row["cancel_requested_at"] is not None:
                if entry is None:
                    errors.append(
                        {
                            "kind": "cancelled",
                            "attempt": row["attempts"],
                            "at": now.isoformat(),
                            "worker": row["leased_by"],
                            "message": "cancel requested while running; "
                            "the handler completed anyway",
                        }
                    )
                keep = {k: v for k, v in fields.items() if k in {"result", "attempts"}}
                fields = {
                    **keep,
                    "state": JobState.CANCELLED,
                    "finished_at": now,
                    "dead_reason": "",
                }
            updated = self._held(job_id, lease_token).update(
                errors=errors, lease_token=None, lease_until=None, **fields
            )
            if not updated:
                raise LeaseLost(job_id)
            if row["has_children"]:
                self._settle_children(job_id, JobState.LEASED, fields["state"], now)
            return fields["state"]

    def finish_then_claim(
        self, outcomes: Sequence[Outcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        return finish_then_claim_in_turn(self, outcomes, request)

    def finish_many(
        self, outcomes: Sequence[Outcome], now: datetime | None = None
    ) -> dict[int, str]:
        recorded: dict[int, str] = {}
        now = _now(now)
        with transaction.atomic(using=self.alias):
            before = self._before(o.job_id for o in outcomes)
            for o in sorted(outcomes, key=lambda o: o.job_id):
                entry = None if o.error is None else {**o.error, "at": now.isoformat()}
                fields = target_fields(
                    o.state,
                    now,
                    dead_reason=o.dead_reason,
                    retry_at=o.retry_at,
                    delay_s=o.delay_s,
                    result_json=o.result_json,
                )
                try:
                    recorded[o.job_id] = self._finish(
                        o.job_id, o.lease_token, entry, at=now, **fields
                    )
                except LeaseLost:
                    continue
            expired = {
                o.job_id for o in outcomes if o.error and o.error.get("kind") == EXPIRED_KIND
            }
            self._roll_up(before, recorded, now, expired)
        return recorded

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = self._held(job_id, lease_token).values("attempts", "leased_by").first()
            if row is None:
                raise LeaseLost(job_id)
            entry = {
                "kind": "released",
                "attempt": row["attempts"],
                "at": now.isoformat(),
                "worker": row["leased_by"],
                "message": message,
            }
            return self._finish(
                job_id,
                lease_token,
                entry,
                state=JobState.READY,
                run_at=now,
                attempts=max(row["attempts"] - 1, 0),
                finished_at=None,
            )

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        row = (
            self._held(job_id, lease_token)
            .values_list("id", "lease_token", "type", "attempts", "max_attempts", named=True)
            .first()
        )
        if row is None:
            raise LeaseLost(job_id)
        return ExpiredLease.of(row)

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        rows = self._jobs.filter(state=JobState.LEASED, lease_until__lt=_now(now)).order_by("id")
        return [lease_of(r) for r in rows.values_list(*LEASE_COLUMNS, named=True)[:limit]]

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        decide = decide or charge_expired
        now = _now(now)
        with transaction.atomic(using=self.alias):
            expired = self.expired_leases(limit, now)
            outcomes = [charged_outcome(x, decide(x), expired_entry(x)) for x in expired]
            states = list(self.finish_many(outcomes, now=now).values())
        return states.count(JobState.SCHEDULED), states.count(JobState.DEAD)
