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

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from ..errors import DuplicateJob, LeaseLost
from ..states import CLAIMABLE, LIVE, JobState
from .base import (
    ENQUEUE_MANY_CHUNK_BYTES,
    RELEASED_MESSAGE,
    ClaimedJob,
    ExpiredLease,
    HeldLease,
    Nack,
    NewJob,
    ReapDecision,
    WorkerRegistry,
)
from .generic_breakers import GenericDependencyStore
from .generic_cron import GenericCronStore
from .generic_deaths import GenericDeathStore
from .generic_operator import GenericOperatorStore
from .plan import ClaimPlan
from .ranking import Candidate, serve_order


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


class GenericStore(
    GenericCronStore,
    GenericDependencyStore,
    GenericDeathStore,
    GenericOperatorStore,
    WorkerRegistry,
):
    """The queue on any Django database through the ORM."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias

    @property
    def _jobs(self):
        from ..models import Job

        return Job.objects.using(self.alias)

    def _held(self, job_id: int, lease_token: uuid.UUID):
        return self._jobs.filter(id=job_id, lease_token=lease_token, state=JobState.LEASED)

    def enqueue(self, job: NewJob) -> int:
        return self.enqueue_or_get(job)[0]

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        from ..models import Job

        now = timezone.now()
        run_at = job.run_at or now + timedelta(seconds=job.delay_s)
        for _ in range(5):
            if job.dedupe_key is not None:
                existing = (
                    self._jobs.filter(queue=job.queue, dedupe_key=job.dedupe_key, state__in=LIVE)
                    .values_list("id", flat=True)
                    .first()
                )
                if existing is not None:
                    return existing, False
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
                        created_at=now,
                    )
                    row.save(using=self.alias, force_insert=True)
                    return row.id, True
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
        queues = list(queues)
        plan = plan or ClaimPlan.even(len(queues))
        now = _now(now)
        lease_until = now + timedelta(seconds=lease_s)
        claimed: list[ClaimedJob] = []
        with transaction.atomic(using=self.alias):
            claimable = self._jobs.filter(queue__in=queues, state__in=CLAIMABLE)
            # order_by(): Job's default ordering would add "id" to the DISTINCT.
            pairs = sorted(claimable.order_by().values_list("queue", "tenant_id").distinct())
            running = self._running({t for _, t in pairs}, plan)
            candidates = self._candidates(claimable, pairs, max_jobs, plan, running, now)
            picked = serve_order(candidates, queues, plan, running, max_jobs)
            rows = self._jobs.in_bulk([c.id for c, _ in picked], field_name="id") if picked else {}
            for candidate, tag in picked:
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
        return claimed

    def _running(self, tenants: set[str], plan: ClaimPlan) -> dict[str, int]:
        """Return leased jobs per tenant of ``tenants``, when a cap or a choice needs them."""
        if len(tenants) <= 1 and all(plan.caps.cap_of(t) is None for t in tenants):
            return {}
        rows = (
            self._jobs.filter(state=JobState.LEASED, tenant_id__in=tenants)
            .values("tenant_id")
            .annotate(n=Count("id"))
        )
        return {row["tenant_id"]: row["n"] for row in rows}

    def _candidates(
        self,
        claimable: Any,
        pairs: list[tuple[str, str]],
        max_jobs: int,
        plan: ClaimPlan,
        running: dict[str, int],
        now: datetime,
    ) -> list[Candidate]:
        """Return each (queue, tenant)'s first ``max_jobs`` due jobs a claim may take.

        As in the SQL claim: a tenant at its cap has none, and a job with an ordering key is
        left out while an earlier live job of its key exists or one of its key is leased.
        """
        out: list[Candidate] = []
        for queue, tenant_id in pairs:
            room = max_jobs
            cap = plan.caps.cap_of(tenant_id)
            if cap is not None:
                room = min(room, cap - running.get(tenant_id, 0))
            rows = (
                claimable.filter(queue=queue, tenant_id=tenant_id, run_at__lte=now)
                .order_by("-priority", "run_at", "id")
                .values_list("id", "priority", "run_at", "ordering_key")
            )
            if connections[self.alias].features.has_select_for_update_skip_locked:
                rows = rows.select_for_update(skip_locked=True)
            taken = 0
            chunk = max(room, 1) * 4
            for job_id, priority, run_at, ordering_key in rows.iterator(chunk_size=chunk):
                if taken >= room:
                    break
                if ordering_key is not None and self._ordering_key_held(ordering_key, job_id):
                    continue
                out.append(Candidate(job_id, queue, tenant_id, priority, run_at))
                taken += 1
        return out

    def _ordering_key_held(self, key: str, job_id: int) -> bool:
        """True when an earlier live job of ``key`` exists, or a job of ``key`` is leased."""
        return (
            self._jobs.filter(ordering_key=key, state__in=LIVE)
            .filter(Q(id__lt=job_id) | Q(state=JobState.LEASED))
            .exists()
        )

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
        **fields: Any,
    ) -> str:
        """Apply ``fields`` to a held job, or end it cancelled if a cancel was requested."""
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = (
                self._held(job_id, lease_token)
                .values("errors", "cancel_requested_at", "attempts", "leased_by")
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
            return fields["state"]

    def ack(self, job_id: int, lease_token: uuid.UUID, result_json: str) -> str:
        return self._finish(
            job_id,
            lease_token,
            None,
            state=JobState.SUCCEEDED,
            result=json.loads(result_json),
            finished_at=timezone.now(),
        )

    def ack_many(self, acks: Sequence[tuple[int, uuid.UUID, str]]) -> dict[int, str]:
        acked: dict[int, str] = {}
        with transaction.atomic(using=self.alias):
            for job_id, token, result_json in sorted(acks):
                try:
                    acked[job_id] = self.ack(job_id, token, result_json)
                except LeaseLost:
                    continue
        return acked

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
        now = timezone.now()
        entry = {**error, "at": now.isoformat()}
        if dead_reason is not None:
            return self._finish(
                job_id,
                lease_token,
                entry,
                state=JobState.DEAD,
                dead_reason=dead_reason,
                finished_at=now,
            )
        return self._finish(
            job_id,
            lease_token,
            entry,
            state=JobState.SCHEDULED,
            run_at=retry_at or now + timedelta(seconds=delay_s),
            finished_at=None,
            dead_reason="",
        )

    def nack_many(self, nacks: Sequence[Nack]) -> dict[int, str]:
        recorded: dict[int, str] = {}
        with transaction.atomic(using=self.alias):
            for n in sorted(nacks, key=lambda n: n.id):
                try:
                    recorded[n.id] = self.nack(
                        n.id,
                        n.lease_token,
                        n.error,
                        dead_reason=n.dead_reason,
                        retry_at=n.retry_at,
                        delay_s=n.delay_s,
                    )
                except LeaseLost:
                    continue
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
            .values_list("id", "lease_token", "type", "attempts", "max_attempts")
            .first()
        )
        if row is None:
            raise LeaseLost(job_id)
        return ExpiredLease(
            id=row[0], lease_token=row[1], job_type=row[2], attempts=row[3], max_attempts=row[4]
        )

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        rows = self._jobs.filter(state=JobState.LEASED, lease_until__lt=_now(now)).order_by("id")
        return [
            ExpiredLease(id=r[0], lease_token=r[1], job_type=r[2], attempts=r[3], max_attempts=r[4])
            for r in rows.values_list("id", "lease_token", "type", "attempts", "max_attempts")[
                :limit
            ]
        ]

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision],
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        now = _now(now)
        retried = dead = 0
        with transaction.atomic(using=self.alias):
            for lease in self.expired_leases(limit, now):
                decision = decide(lease)
                row = (
                    self._held(lease.id, lease.lease_token)
                    .values("leased_by", "lease_until")
                    .first()
                )
                if row is None:
                    continue
                entry = {
                    "kind": "lease_expired",
                    "attempt": lease.attempts,
                    "at": now.isoformat(),
                    "worker": row["leased_by"],
                    "type": "LeaseExpired",
                    "message": f"lease expired at {row['lease_until'].isoformat()} without an ack "
                    "(worker crashed or stalled)",
                }
                if decision.dead:
                    fields = {
                        "state": JobState.DEAD,
                        "dead_reason": "attempts_exhausted",
                        "finished_at": now,
                    }
                else:
                    fields = {
                        "state": JobState.SCHEDULED,
                        "run_at": now + timedelta(seconds=decision.delay_s),
                    }
                state = self._finish(lease.id, lease.lease_token, entry, **fields)
                retried += state == JobState.SCHEDULED
                dead += state == JobState.DEAD
        return retried, dead
