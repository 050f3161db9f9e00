"""Who gets the next free slot: queue weights, strict queue order, and per-tenant caps.

A worker serves its queues in one of two ways:

* **weighted** (the default; plain ``a,b`` means equal weights): weighted fair queueing over
  claims. The ``k``-th job a claim could take from queue ``q`` gets the tag
  ``start[q] + k / weight[q]``, the claim takes the lowest tags, and ``start[q]`` then moves past
  what ``q`` got. Over many claims, saturated queues are served in proportion to their weights,
  one job at a time or a hundred, and a queue with no work simply yields its share to the others
  (work conserving). A queue that was idle re-enters at the current tag, so an idle spell does not
  bank credit it could later spend starving the others. This is the virtual-time bookkeeping of
  weighted fair queueing (Demers, Keshav and Shenker, SIGCOMM 1989), applied to jobs instead of
  packets.
* **strict**: the first queue listed is drained first; the next is served only when it has no
  claimable job.

Tenant fairness and caps are computed by the store inside the claim (see ``store/sql/claim.sql``);
this module holds the caps as the worker passes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from .validation import validate_queue_name

if TYPE_CHECKING:
    from .store.base import ClaimedJob

__all__ = ["ClaimPlan", "QueueSelector", "TenantCaps", "parse_queue_spec"]

#: Largest queue weight: a ratio beyond 1000:1 is a strict order in all but name.
MAX_WEIGHT = 1000

# A ":<number>" suffix is read as a weight, also when the number is bad (":0", ":-1", ":1.5"),
# so a mistyped weight is an error instead of silently becoming part of a queue's name.
_WEIGHT_SUFFIX = re.compile(r"^(?P<name>.+):(?P<weight>[+-]?[0-9]+(?:\.[0-9]*)?)$")


def parse_queue_spec(spec: str | Sequence[str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``"critical:6,default:3,bulk:1"`` (or a list of such items) into names and weights.

    A queue without ``:N`` has weight 1. Queue names may themselves contain ``:``; a name that
    ends in ``:`` and digits (``v2:1``) must be written with its weight (``v2:1:1``).

    Args:
        spec: comma-separated ``name[:weight]`` items, or a list of them.

    Returns:
        ``(names, weights)`` in the order given.

    Raises:
        ValueError: an empty item, an invalid queue name, a weight that is not a whole number
            from 1 to 1000, or a queue named twice; the message names the offending item.
    """
    items = [part.strip() for part in spec.split(",")] if isinstance(spec, str) else list(spec)
    if not items or any(not isinstance(item, str) or not item for item in items):
        raise ValueError(
            f"expected comma-separated queues like 'critical:6,default:3,bulk' (name[:weight]), "
            f"got {spec!r}"
        )
    names: list[str] = []
    weights: list[int] = []
    for item in items:
        if item.endswith(":"):
            # Legal in a queue name, but here it is a weight left out ("critical:,bulk").
            raise ValueError(f"queue weight missing after ':' in {item!r}")
        match = _WEIGHT_SUFFIX.match(item)
        name, weight = (match["name"], match["weight"]) if match else (item, "1")
        if not re.fullmatch(r"[0-9]+", weight) or not 1 <= int(weight) <= MAX_WEIGHT:
            raise ValueError(
                f"queue weight must be a whole number from 1 to {MAX_WEIGHT}, got {item!r}"
            )
        names.append(validate_queue_name(name))
        weights.append(int(weight))
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f"queue named twice in {spec!r}: {', '.join(duplicated)}")
    return tuple(names), tuple(weights)


@dataclass(frozen=True, slots=True)
class TenantCaps:
    """Most leased jobs a tenant may hold at once, across all workers.

    Attributes:
        default: the cap of every tenant without an override; None means no cap. Jobs without a
            tenant (``tenant_id=""``) are the site's own work and are not capped by the default;
            give ``""`` an override to cap them too.
        overrides: ``{tenant_id: cap}`` for tenants with their own cap; a cap of None exempts
            that tenant from the default.
    """

    default: int | None = None
    overrides: Mapping[str, int | None] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def enabled(self) -> bool:
        """True when some tenant has a cap (the claim must then be serialized to honour it)."""
        return self.default is not None or any(v is not None for v in self.overrides.values())

    def cap_of(self, tenant_id: str) -> int | None:
        """Return ``tenant_id``'s cap, or None when it has none."""
        if tenant_id in self.overrides:
            return self.overrides[tenant_id]
        return None if tenant_id == "" else self.default


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """How one claim shares the free slots; built by :class:`QueueSelector`.

    Attributes:
        weights: one weight per queue of the claim, in the same order.
        start: one virtual start tag per queue (see the module docstring).
        strict: serve queues in list order instead of by weight.
        caps: the per-tenant caps.
    """

    weights: tuple[float, ...]
    start: tuple[float, ...]
    strict: bool = False
    caps: TenantCaps = field(default_factory=TenantCaps)


class QueueSelector:
    """The weighted-fair-queueing state of one worker process (see the module docstring).

    Not thread-safe: the claim loop owns it.
    """

    def __init__(
        self,
        queues: Sequence[str],
        weights: Sequence[int] | None = None,
        *,
        strict: bool = False,
        caps: TenantCaps | None = None,
    ) -> None:
        """Serve ``queues`` with ``weights`` (default: all 1), or in list order with ``strict``.

        Raises:
            ValueError: ``weights`` does not give one positive weight per queue.
        """
        self.queues = tuple(queues)
        self.weights = tuple(float(w) for w in (weights or [1] * len(self.queues)))
        if len(self.weights) != len(self.queues) or any(w <= 0 for w in self.weights):
            raise ValueError(f"need one positive weight per queue, got {weights!r}")
        self.strict = strict
        self.caps = caps or TenantCaps()
        self._start = dict.fromkeys(self.queues, 0.0)

    def describe(self) -> str:
        """Return the queues as the log shows them: ``critical:6,default:3`` or ``a,b (strict)``."""
        if self.strict:
            return ",".join(self.queues) + " (strict)"
        if all(w == 1 for w in self.weights):
            return ",".join(self.queues)
        return ",".join(f"{q}:{w:g}" for q, w in zip(self.queues, self.weights, strict=True))

    def plan(self) -> ClaimPlan:
        """Return the plan for the next claim."""
        return ClaimPlan(
            weights=self.weights,
            start=tuple(self._start[q] for q in self.queues),
            strict=self.strict,
            caps=self.caps,
        )

    def claimed(self, jobs: Sequence[ClaimedJob]) -> None:
        """Advance the virtual start of each queue past the largest tag a claim gave it.

        Args:
            jobs: what the claim returned (each carries its queue and tag).
        """
        tags: dict[str, float] = {}
        for job in jobs:
            tags[job.queue] = max(tags.get(job.queue, job.tag), job.tag)
        if self.strict or not tags:
            return
        now = min(tags.values())
        for queue, weight in zip(self.queues, self.weights, strict=True):
            if queue in tags:
                self._start[queue] = tags[queue]
            else:
                # An idle (or out-served) queue may not fall further behind than "its next job
                # gets the current tag": credit from an idle spell would let it starve the rest.
                self._start[queue] = max(self._start[queue], now - 1.0 / weight)
        # Only differences matter; keep the numbers small over a long run.
        floor = min(self._start.values())
        for queue in self._start:
            self._start[queue] -= floor


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
    with the fewest leased jobs (counting the ones taken here), then run_at and id; across
    queues by tag, or by list position when ``plan.strict``; no tenant past its cap.

    Args:
        candidates: due claimable jobs of ``queues`` (ordering keys already applied).
        queues: the claim's queues, in the plan's order.
        plan: weights, start tags, strictness and caps.
        running: leased jobs per tenant, all queues and workers.
        max_jobs: most jobs to return.
    """
    position = {queue: pos for pos, queue in enumerate(queues)}
    by_claim_order = sorted(candidates, key=lambda c: (-c.priority, c.run_at, c.id))
    taken_of_tenant: dict[str, int] = {}
    loaded: list[tuple[int, int, object, int, Candidate]] = []
    for c in by_claim_order:
        nth = taken_of_tenant.get(c.tenant_id, 0) + 1
        cap = plan.caps.cap_of(c.tenant_id)
        if cap is not None and nth > cap - running.get(c.tenant_id, 0):
            continue
        taken_of_tenant[c.tenant_id] = nth
        loaded.append((-c.priority, running.get(c.tenant_id, 0) + nth, c.run_at, c.id, c))
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
