"""Internal: the ORM claim's reads: which due jobs a claim may take, per (queue, tenant).

A mixin of :class:`~jobqueue.store.generic.GenericStore` (the host gives ``alias``): the ORM
twin of ``claim.sql``'s "heads": tenant caps, ordering keys and concurrency limits, each job
read past rather than blocking the ones behind it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count

from jobqueue.states import LIVE, JobState
from jobqueue.store.plan import ClaimPlan, Limit, ordering_limit
from jobqueue.store.ranking import Candidate


class GenericCandidates:
    """The claim's candidate reads on the ORM."""

    alias: str
    _jobs: Any  # the host's queryset of jobs on ``alias``

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
