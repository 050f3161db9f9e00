"""Internal: the ORM claim's reads: which due jobs a claim may take, per (queue, tenant).

A mixin of :class:`~jobqueue.store.generic.GenericStore` (the host gives ``alias``): the ORM
twin of ``claim.sql``'s "heads": tenant caps, ordering keys and concurrency limits, each job
read past rather than blocking the ones behind it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count, Q

from ..states import LIVE, JobState
from .plan import ClaimPlan
from .ranking import Candidate


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

        As in the SQL claim: a tenant at its cap has none, a job with an ordering key is left
        out while an earlier live job of its key exists or one of its key is leased, and a job
        with a concurrency key is read past once its key has no room left (its limit less its
        leased jobs and the ones taken here).
        """
        out: list[Candidate] = []
        key_room: dict[str, int] = {}
        for queue, tenant_id in pairs:
            room = max_jobs
            cap = plan.caps.cap_of(tenant_id)
            if cap is not None:
                room = min(room, cap - running.get(tenant_id, 0))
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
            taken = 0
            chunk = max(room, 1) * 4
            for job_id, priority, run_at, ordering_key, key, limit in rows.iterator(
                chunk_size=chunk
            ):
                if taken >= room:
                    break
                if ordering_key is not None and self._ordering_key_held(ordering_key, job_id):
                    continue
                if key is not None:
                    if key not in key_room:
                        key_room[key] = self._key_room(key, limit, plan)
                    if key_room[key] <= 0:
                        continue
                    key_room[key] -= 1
                out.append(Candidate(job_id, queue, tenant_id, priority, run_at))
                taken += 1
        return out

    def _key_room(self, key: str, limit: int | None, plan: ClaimPlan) -> int:
        """Return how many more jobs of concurrency key ``key`` may be leased now."""
        limit = plan.limits.limit_of(key, limit)
        if limit is None:
            return 2**31 - 1
        return limit - self._jobs.filter(state=JobState.LEASED, concurrency_key=key).count()

    def _ordering_key_held(self, key: str, job_id: int) -> bool:
        """True when an earlier live job of ``key`` exists, or a job of ``key`` is leased."""
        return (
            self._jobs.filter(ordering_key=key, state__in=LIVE)
            .filter(Q(id__lt=job_id) | Q(state=JobState.LEASED))
            .exists()
        )
