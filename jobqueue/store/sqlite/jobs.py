"""Internal: enqueue and claims on the ORM.

:class:`GenericJobs` is the area of :class:`~jobqueue.store.sqlite.GenericStore` that inserts jobs
and claims them, with the contract of ``store/postgres/jobs.py``. A claim is a short transaction
of a few statements instead of one; SQLite serializes writers, which is what keeps two claims from
taking the same job (the IMMEDIATE transaction mode: :mod:`jobqueue.store.sqlite`).

The claim's candidates (:meth:`~GenericJobs._candidates`): which due jobs a claim may take, per
(queue, tenant). This is the ORM twin of ``claim.sql``'s "heads": tenant caps, ordering keys and
concurrency limits, each job read past rather than blocking the ones behind it. The rate limiters
are the limits area's (:class:`~jobqueue.store.sqlite.limits.RateGate`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from jobqueue.errors import DuplicateJob
from jobqueue.models import Lane
from jobqueue.retries import RunOutcome
from jobqueue.states import CLAIMABLE, LIVE, JobState
from jobqueue.store.interface import (
    ENQUEUE_MANY_CHUNK_BYTES,
    ClaimedJob,
    ClaimRequest,
    FinishedThenClaimed,
    NewJob,
    Store,
)
from jobqueue.store.plan import ClaimPlan, Limit, ordering_limit, window
from jobqueue.store.ranking import Candidate, serve_order
from jobqueue.store.shared import claim_again, finish_then_claim_in_turn
from jobqueue.store.sqlite.db import Executor, GenericArea, new_row, now_or
from jobqueue.store.sqlite.finishing import GenericFinishing
from jobqueue.store.sqlite.flows import GenericFlows
from jobqueue.store.sqlite.limits import GenericLimits


class GenericJobs(GenericArea):
    """Enqueue and claims on the ORM."""

    def __init__(
        self,
        db: Executor,
        store: Store,
        flows: GenericFlows,
        limits: GenericLimits,
        finishing: GenericFinishing,
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
        if job.ordering_key is not None and job.dedupe_key is None:
            return self.flows.enqueue_in_order(job)
        now = timezone.now()
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
                    row = new_row(job, now)
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
        taken: Callable[[list[ClaimedJob]], object] | None = None,
    ) -> list[ClaimedJob]:
        claimed = claim_again(self._claim_once, queues, worker_id, max_jobs, lease_s, now, plan)
        # Once, after both claims: a worker's handler threads must not write to SQLite while
        # this thread's second claim holds it (an in-memory database says "table is locked").
        if taken is not None and claimed:
            taken(claimed)
        return claimed

    def has_work(self, queues: Sequence[str]) -> bool:
        return self._jobs.filter(queue__in=list(queues), state__in=CLAIMABLE).exists()

    def _claim_once(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
    ) -> tuple[list[ClaimedJob], bool]:
        queues = list(queues)
        plan = plan or ClaimPlan.even(len(queues))
        now = now_or(now)
        lease_until = now + timedelta(seconds=lease_s)
        claimed: list[ClaimedJob] = []
        with transaction.atomic(using=self.alias):
            paused_queues, paused_types = self.limits.paused_names()
            if plan.every:
                # The same window of other queues as on PostgreSQL (claimable_queues.sql), read
                # from every claimable queue's name: the ORM store serves small sites.
                found = self._jobs.filter(state__in=CLAIMABLE).order_by().values_list("queue")
                after, skip = plan.cursor, {*plan.skipped(queues), *paused_queues}
                laps = [(int(q <= after), q) for (q,) in found.distinct() if q not in skip]
                queues, plan = plan.with_others(queues, window(laps, max_jobs))
            claimable = self._jobs.filter(queue__in=queues, state__in=CLAIMABLE).exclude(
                Q(queue__in=paused_queues) | Q(type__in=paused_types)
            )
            # order_by(): Job's default ordering would add "id" to the DISTINCT.
            gate = None
            if plan.rates.enabled:
                tenants = claimable.order_by().values_list("tenant_id", flat=True).distinct()
                gate = self.limits.rate_gate(plan.rates, tenants, now)
                # Out before the candidates are chosen: a drained limiter's jobs never take
                # the places of jobs it does not limit.
                claimable = claimable.exclude(
                    Q(type__in=gate.empty_types()) | Q(tenant_id__in=gate.empty_tenants())
                )
            pairs = sorted(claimable.order_by().values_list("queue", "tenant_id").distinct())
            running = self._running({t for _, t in pairs}, plan)
            # A tenant at its cap has no lane in this claim (claim.sql's "lanes").
            pairs = [
                (queue, tenant)
                for queue, tenant in pairs
                if (cap := plan.caps.cap_of(tenant)) is None or cap > running.get(tenant, 0)
            ]
            candidates = self._candidates(claimable, pairs, max_jobs, plan, running, now)
            lanes = Lane.objects.using(self.alias).filter(queue__in=queues)
            vtimes = {(lane.queue, lane.tenant_id): (lane.vtime, lane.served_at) for lane in lanes}
            served = serve_order(candidates, pairs, queues, plan, running, vtimes, max_jobs)
            picked = served.jobs
            for (queue, tenant), vtime in served.vtimes.items():
                Lane.objects.using(self.alias).update_or_create(
                    queue=queue, tenant_id=tenant, defaults={"vtime": vtime, "served_at": now}
                )
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
                            trace=job.trace,
                        )
                    )
            if gate is not None:
                self.limits.rate_save(gate)
        # (jobs, held): this store cannot tell what a bucket kept out, so a short claim may
        # always have been held (claim_again claims once more, with limits only).
        return claimed, len(claimed) < max_jobs

    _jobs: Any  # the host's queryset of jobs on ``alias``

    def _running(self, tenants: set[str], plan: ClaimPlan) -> dict[str, int]:
        """Return leased jobs per tenant of ``tenants`` that have a cap (only caps need them)."""
        capped = {t for t in tenants if plan.caps.cap_of(t) is not None}
        if not capped:
            return {}
        rows = (
            self._jobs.filter(state=JobState.LEASED, tenant_id__in=capped)
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

        As in the SQL claim, every limit is one rule (:class:`~jobqueue.store.plan.Limit`): a
        tenant at its cap has none; a job is read past while one of its limits has no room left
        (its most less its leased jobs and the ones taken here): its concurrency key's, and its
        ordering key's (one, in enqueue order: also while an earlier live job of its key exists).
        The tenant's room is per (queue, tenant) here, as the SQL claim reads each pair's heads;
        the ranking applies the cap across queues (``ranking.serve_order``).
        """
        out: list[Candidate] = []
        taken: dict[Limit, int] = {}
        for queue, tenant_id in pairs:
            room = max_jobs
            cap = plan.caps.limit(tenant_id)
            if cap.most is not None:
                room = min(room, cap.most - running.get(tenant_id, 0))
            rows = (
                claimable.filter(queue=queue, tenant_id=tenant_id, run_at__lte=now)
                .order_by("-priority", "run_at", "id")
                .values_list(
                    "id",
                    "priority",
                    "run_at",
                    "ordering_key",
                    "concurrency_key",
                    "concurrency_limit",
                )
            )
            if connections[self.alias].features.has_select_for_update_skip_locked:
                rows = rows.select_for_update(skip_locked=True)
            chunk = max(room, 1) * 4
            got = 0
            for job_id, priority, run_at, ordering_key, key, limit in rows.iterator(
                chunk_size=chunk
            ):
                if got >= room:
                    break
                limits = []
                if ordering_key is not None:
                    limits.append(ordering_limit(ordering_key))
                if key is not None:
                    limits.append(plan.limits.limit(key, limit))
                if not all(self._has_room(x, job_id, taken) for x in limits):
                    continue
                for x in limits:
                    taken[x] = taken.get(x, 0) + 1
                out.append(Candidate(job_id, queue, tenant_id, priority, run_at))
                got += 1
        return out

    def _has_room(self, limit: Limit, job_id: int, taken: dict[Limit, int]) -> bool:
        """Return whether job ``job_id`` fits ``limit`` (``taken``: leased + taken, per limit).

        It fits when the key's leased jobs and those this claim took are fewer than its most,
        and, for an ordered limit, no earlier job of its key is live.
        """
        if limit.most is None:
            return True
        if taken.get(limit, 0) >= limit.most:
            return False
        if limit not in taken:
            # Leased rows, all queues and workers, read once per key and claim.
            field = f"{limit.kind}_key"  # ordering_key, concurrency_key
            leased = self._jobs.filter(state=JobState.LEASED, **{field: limit.key}).count()
            taken[limit] = leased
            if leased >= limit.most:
                return False
        if limit.ordered:
            earlier = self._jobs.filter(ordering_key=limit.key, state__in=LIVE, id__lt=job_id)
            return not earlier.exists()
        return True

    def finish_then_claim(
        self, outcomes: Sequence[RunOutcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        return finish_then_claim_in_turn(
            self.store.finish_many, self.store.claim, outcomes, request
        )
