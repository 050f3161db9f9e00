"""The ORM store's claim order: the claim of ``store/sql/claim.sql``, ranked in Python.

The generic (SQLite) store reads the due claimable rows and ranks them here, by the lanes'
virtual times as the SQL claim's two levels do (docs/fairness.md); the PostgreSQL store ranks in
SQL. Both take the same :class:`~jobqueue.store.plan.ClaimPlan` (weights, start tags,
strictness, tenant caps), a value type of the store seam, so the store needs nothing of the
worker's queue selection (:mod:`jobqueue.limits.fairness`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobqueue.store.plan import ClaimPlan

__all__ = ["Candidate", "Lane", "Served", "lane_bases", "serve_order"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A due, claimable job as the ORM store's claim sees it (the SQL claim ranks in SQL)."""

    id: int
    queue: str
    tenant_id: str
    priority: int
    run_at: object  # a datetime; only compared


#: A lane: (queue, tenant_id).
Lane = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Served:
    """What a claim ranked: the jobs in service order with their tags, and each lane's new time.

    ``vtimes`` holds the virtual time each lane moves to: the lanes that gave jobs, past what
    they gave, and the lanes that had no job to give, charged one (as ``claim.sql``'s
    ``served``). The store writes it (``jobqueue_lane``).
    """

    jobs: list[tuple[Candidate, float]]
    vtimes: dict[Lane, float]


#: A lane served within this long of its queue's latest service is current (claim.sql).
CURRENT = timedelta(seconds=2)

#: Most credit a current lane keeps behind the lane furthest ahead, in jobs (claim.sql).
MOST_CREDIT = 1000.0


def lane_bases(
    lanes: Sequence[Lane], vtimes: Mapping[Lane, tuple[float, datetime]]
) -> dict[Lane, float]:
    """Return each lane's virtual start, as ``claim.sql``'s "fronts" computes it.

    A current lane (served within :data:`CURRENT` of its queue's latest service) keeps its own
    time, at most :data:`MOST_CREDIT` behind the lane furthest ahead; a lane back from idle is
    raised to one job behind the lowest time of the current lanes, and a new lane starts there.

    Args:
        lanes: the lanes with claimable jobs.
        vtimes: each known lane's (virtual time in jobs / weight, last service, database clock).

    Returns:
        Each lane's base, in the same units as ``vtimes``.
    """
    base: dict[Lane, float] = {}
    for queue in {lane[0] for lane in lanes}:
        known = {lane: vtimes[lane] for lane in lanes if lane[0] == queue and lane in vtimes}
        latest = max((served for _, served in known.values()), default=None)
        current = {
            lane for lane, (_, served) in known.items() if latest and served >= latest - CURRENT
        }
        front = max((v for v, _ in known.values()), default=None)
        now = min((known[lane][0] for lane in current), default=None)
        for lane in (x for x in lanes if x[0] == queue):
            if lane not in known:
                ahead = now if now is not None else front
                base[lane] = ahead - 1 if ahead is not None else 0.0
                continue
            v = known[lane][0]
            floor = [front - MOST_CREDIT] if front is not None else []
            if lane not in current and now is not None:
                floor.append(now - 1)
            base[lane] = max([v, *floor])
    return base


def serve_order(
    candidates: Sequence[Candidate],
    lanes: Sequence[Lane],
    queues: Sequence[str],
    plan: ClaimPlan,
    running: Mapping[str, int],
    vtimes: Mapping[Lane, tuple[float, datetime]],
    max_jobs: int,
) -> Served:
    """Return up to ``max_jobs`` of ``candidates`` in service order, each with its tag.

    The same order as ``store/sql/claim.sql``'s two levels: each lane (queue, tenant) starts at
    its base (:func:`lane_bases`), its ``k``-th job is tagged ``base + k / weight``; within a queue,
    priority DESC, then tag, tenant, run_at and id; no tenant past its cap; across queues by the
    queue's tag, or by list position when ``plan.strict``.

    Args:
        candidates: due claimable jobs of ``queues`` (keys and limits already applied), each
            lane's in claim order (priority DESC, run_at, id).
        lanes: every lane with claimable jobs (one without a candidate, among the places a
            claim of this size would allot, is charged one job).
        queues: the claim's queues, in the plan's order.
        plan: weights, start tags, strictness, tenant caps and weights.
        running: leased jobs per tenant (all queues and workers), for the tenants with a cap.
        vtimes: the lanes' stored virtual times and last service (a lane without one is new).
        max_jobs: most jobs to return.

    Returns:
        The jobs and the lanes' new virtual times (:class:`Served`).
    """
    position = {queue: pos for pos, queue in enumerate(queues)}
    base = lane_bases(lanes, vtimes)
    by_claim_order = sorted(candidates, key=lambda c: (-c.priority, c.run_at, c.id))
    nth_of_lane: dict[Lane, int] = {}
    tagged: list[tuple[float, Candidate]] = []
    for c in by_claim_order:
        lane = (c.queue, c.tenant_id)
        nth = nth_of_lane.get(lane, 0) + 1
        nth_of_lane[lane] = nth
        tagged.append((base[lane] + nth / plan.caps.weight_of(c.tenant_id), c))
    # Caps: a tenant's jobs in tag order, all queues, up to its cap less its leased jobs.
    taken_of_tenant: dict[str, int] = {}
    within: list[tuple[int, float, str, object, int, Candidate]] = []
    for tag, c in sorted(tagged, key=lambda item: (item[0], item[1].queue)):
        cap = plan.caps.cap_of(c.tenant_id)
        nth = taken_of_tenant.get(c.tenant_id, 0) + 1
        if cap is not None and nth > cap - running.get(c.tenant_id, 0):
            continue
        taken_of_tenant[c.tenant_id] = nth
        within.append((-c.priority, tag, c.tenant_id, c.run_at, c.id, c))
    within.sort(key=lambda item: item[:5])
    nth_of_queue: dict[str, int] = {}
    ranked: list[tuple[tuple[float, float, int], Candidate, float, float]] = []
    for _priority, lane_tag, _tenant, _run_at, _id, c in within:
        pos = position[c.queue]
        nth = nth_of_queue.get(c.queue, 0) + 1
        nth_of_queue[c.queue] = nth
        tag = plan.start[pos] + nth / plan.weights[pos]
        key = (float(pos), float(nth), pos) if plan.strict else (0.0, tag, pos)
        ranked.append((key, c, tag, lane_tag))
    ranked.sort(key=lambda item: item[0])
    picked = ranked[:max_jobs]
    got: dict[Lane, int] = {}
    for _, c, _, _ in picked:
        got[(c.queue, c.tenant_id)] = got.get((c.queue, c.tenant_id), 0) + 1
    # Charged one job: a lane that had nothing to give, among those a claim of this size would
    # have allotted places (claim.sql's "fronts": twice the claim, by first tag, per queue).
    fronts: set[Lane] = set()
    for queue in {lane[0] for lane in lanes}:
        mine = sorted(
            (lane for lane in lanes if lane[0] == queue),
            key=lambda lane: (base[lane] + 1 / plan.caps.weight_of(lane[1]), lane[1]),
        )
        fronts.update(mine[: 2 * max_jobs])
    moved: dict[Lane, float] = {}
    for lane in lanes:
        weight = plan.caps.weight_of(lane[1])
        if lane in got:
            moved[lane] = base[lane] + got[lane] / weight
        elif lane in fronts and lane not in nth_of_lane:
            moved[lane] = base[lane] + 1 / weight  # nothing to give: charged one
        elif lane in fronts and (lane not in vtimes or base[lane] > vtimes[lane][0]):
            moved[lane] = base[lane]  # entered (new, or back from idle): keeps its place
    return Served([(c, tag) for _, c, tag, _ in picked], moved)
