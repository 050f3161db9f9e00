"""The ORM store's claim order: the claim of ``store/sql/claim.sql``, ranked in Python.

The generic (SQLite) store reads the due claimable rows and ranks them here; the PostgreSQL store
ranks in SQL. Both take the same :class:`~jobqueue.store.plan.ClaimPlan` (weights, start tags,
strictness, tenant caps), a value type of the store seam, so the store needs nothing of the
worker's queue selection (:mod:`jobqueue.limits.fairness`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jobqueue.store.plan import ClaimPlan

__all__ = ["Candidate", "serve_order"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A due, claimable job as the ORM store's claim sees it (the SQL claim ranks in SQL)."""

    id: int
    queue: str
    tenant_id: str
    priority: int
    run_at: object  # a datetime; only compared


def serve_order(
    candidates: Sequence[Candidate],
    queues: Sequence[str],
    plan: ClaimPlan,
    running: Mapping[str, int],
    max_jobs: int,
) -> list[tuple[Candidate, float]]:
    """Return up to ``max_jobs`` of ``candidates`` in service order, each with its tag.

    The same order as ``store/sql/claim.sql``: within a queue priority DESC, then the tenant
    with the lowest (leased jobs + the ones taken here) / its weight, then run_at and id; across
    queues by tag, or by list position when ``plan.strict``; no tenant past its cap.

    Args:
        candidates: due claimable jobs of ``queues`` (ordering keys already applied).
        queues: the claim's queues, in the plan's order.
        plan: weights, start tags, strictness, tenant caps and weights.
        running: leased jobs per tenant, all queues and workers.
        max_jobs: most jobs to return.
    """
    position = {queue: pos for pos, queue in enumerate(queues)}
    by_claim_order = sorted(candidates, key=lambda c: (-c.priority, c.run_at, c.id))
    taken_of_tenant: dict[str, int] = {}
    loaded: list[tuple[int, float, object, int, Candidate]] = []
    for c in by_claim_order:
        nth = taken_of_tenant.get(c.tenant_id, 0) + 1
        cap = plan.caps.cap_of(c.tenant_id)
        if cap is not None and nth > cap - running.get(c.tenant_id, 0):
            continue
        taken_of_tenant[c.tenant_id] = nth
        load = (running.get(c.tenant_id, 0) + nth) / plan.caps.weight_of(c.tenant_id)
        loaded.append((-c.priority, load, c.run_at, c.id, c))
    loaded.sort(key=lambda item: item[:4])
    nth_of_queue: dict[str, int] = {}
    served: list[tuple[tuple[float, float, int], Candidate, float]] = []
    for *_, c in loaded:
        pos = position[c.queue]
        nth = nth_of_queue.get(c.queue, 0) + 1
        nth_of_queue[c.queue] = nth
        tag = plan.start[pos] + nth / plan.weights[pos]
        key = (float(pos), float(nth), pos) if plan.strict else (0.0, tag, pos)
        served.append((key, c, tag))
    served.sort(key=lambda item: item[0])
    return [(c, tag) for _, c, tag in served[:max_jobs]]
