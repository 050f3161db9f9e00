"""The claim's plan: how one claim shares free slots between queues and tenants.

Value types of the store contract: a worker's :class:`jobqueue.limits.fairness.QueueSelector` builds
them claim after claim, a one-off claim (:func:`jobqueue.claim`) takes :meth:`ClaimPlan.even`,
and both stores read them (``store/sql/claim.sql``, ``store/ranking.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from jobqueue.settings.rates import RateLimits

__all__ = [
    "ClaimPlan",
    "ConcurrencyLimits",
    "Limit",
    "Rotation",
    "TenantCaps",
    "ordering_limit",
    "window",
]


@dataclass(slots=True)
class Rotation:
    """Where the next claim of ``*`` starts reading the other queues (issue 33).

    A claim of ``*`` considers at most as many other queues as it may take jobs (its window),
    the next ones by name after :attr:`after`, wrapping round to the first; the store moves
    :attr:`after` to the last queue of each window it claims from, so over successive claims
    every queue with claimable jobs gets its turn however many there are. Mutable: one per
    worker (its :class:`~jobqueue.limits.fairness.QueueSelector`), advanced by the store's claim.

    Attributes:
        after: the last queue of the previous window ("": start at the first name).
    """

    after: str = ""


def window(found: Iterable[tuple[int, str]], size: int) -> list[str]:
    """Return the first ``size`` of ``found`` in rotation order (both stores' window).

    Args:
        found: ``(lap, name)`` pairs: lap 0 for names after the rotation's cursor, 1 for names
            from the first up to it (wrapped round), unordered, without duplicates by name.
        size: the most queues the window holds (the claim's ``max_jobs``).

    Returns:
        The names, in rotation order: those after the cursor by name, then the wrapped ones.
    """
    taken: list[str] = []
    seen: set[str] = set()
    for _, name in sorted(found):
        if name not in seen and len(taken) < size:
            seen.add(name)
            taken.append(name)
    return taken


@dataclass(frozen=True, slots=True)
class Limit:
    """The one rule of the claim's three limits: at most ``most`` leased jobs of a key at once.

    Counted across all queues and workers, on the jobs' leased rows (a killed worker's slots come
    back when the reaper expires its leases), and never claim-then-requeue: a job over its limit
    is read past. The three surfaces are this rule keyed differently (issue 18):

    * a tenant cap: ``Limit("tenant", tenant_id, cap)`` (:meth:`TenantCaps.limit`);
    * a concurrency key: ``Limit("concurrency", key, n)`` (:meth:`ConcurrencyLimits.limit`);
    * an ordering key: ``Limit("ordering", key, 1, ordered=True)`` (:func:`ordering_limit`):
      one at a time, and in enqueue (id) order, so a job also waits while an earlier live job of
      its key exists. A job enqueued behind its key's last job waits off the claim's path
      (state ``waiting``, released when that one ends); the rule covers the rest (an operator's
      retry of an earlier job, a bulk enqueue).

    Both stores apply them: the ORM store through this type (``store/sqlite/jobs.py``),
    the SQL claim with one shape per key kind (``store/sql/claim.sql``; docs/decisions.md,
    "One limit, three keys").

    Attributes:
        kind: ``"tenant"``, ``"concurrency"`` or ``"ordering"``: keys of different kinds are
            different keys.
        key: the tenant id, concurrency key or ordering key.
        most: the most leased jobs of the key; None: no limit.
        ordered: also in enqueue order (ordering keys).
    """

    kind: str
    key: str
    most: int | None
    ordered: bool = False


def ordering_limit(key: str) -> Limit:
    """Return the limit of ordering key ``key``: one leased job at a time, in enqueue order."""
    return Limit("ordering", key, 1, ordered=True)


@dataclass(frozen=True, slots=True)
class TenantCaps:
    """Most leased jobs a tenant may hold at once, across all workers.

    Attributes:
        default: the cap of every tenant without an override; None means no cap. Jobs without a
            tenant (``tenant_id=""``) are the site's own work and are not capped by the default;
            give ``""`` an override to cap them too.
        overrides: ``{tenant_id: cap}`` for tenants with their own cap; a cap of None exempts
            that tenant from the default.
        weights: ``{tenant_id: weight > 0}`` (``JOBQUEUE["TENANT_WEIGHTS"]``; unlisted tenants
            weigh 1). Within a queue and priority, the claim serves the tenant with the lowest
            ``(leased + nth) / weight``: under contention leased slots go in proportion to
            weight (weighted fair queueing over running jobs).
    """

    default: int | None = None
    overrides: Mapping[str, int | None] = field(default_factory=lambda: MappingProxyType({}))
    weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def enabled(self) -> bool:
        """True when some tenant has a cap (the claim must then be serialized to honour it)."""
        return self.default is not None or any(v is not None for v in self.overrides.values())

    def cap_of(self, tenant_id: str) -> int | None:
        """Return ``tenant_id``'s cap, or None when it has none."""
        if tenant_id in self.overrides:
            return self.overrides[tenant_id]
        return None if tenant_id == "" else self.default

    def limit(self, tenant_id: str) -> Limit:
        """Return ``tenant_id``'s cap as a :class:`Limit` (``most`` None: not capped)."""
        return Limit("tenant", tenant_id, self.cap_of(tenant_id))

    def weight_of(self, tenant_id: str) -> float:
        """Return ``tenant_id``'s weight (1 when it has none)."""
        return self.weights.get(tenant_id, 1.0)


@dataclass(frozen=True, slots=True)
class ConcurrencyLimits:
    """What a claim knows of concurrency limits besides the limit stored on each job.

    Each limited job carries its key and limit (fixed at enqueue,
    :mod:`jobqueue.limits.concurrency`);
    the claim never leases a job whose key has ``limit`` leased jobs already (all workers).

    Attributes:
        overrides: ``{key: limit}`` from ``JOBQUEUE["CONCURRENCY_LIMITS"]``: overrides the
            limit stored on the jobs of that key, so an operator's change binds queued jobs too.
        declared: some job type this process knows declares a limit. With ``overrides`` it
            tells the store that claims must take turns (see :attr:`enabled`).
    """

    overrides: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    declared: bool = False

    @property
    def enabled(self) -> bool:
        """True when limited jobs are expected (claims then take turns to honour the limits)."""
        return self.declared or bool(self.overrides)

    def limit_of(self, key: str, stored: int | None) -> int | None:
        """Return the limit of ``key``: the setting's, else ``stored`` (a job's; None: none)."""
        return self.overrides.get(key, stored)

    def limit(self, key: str, stored: int | None) -> Limit:
        """Return concurrency key ``key``'s :class:`Limit` (``stored``: the job's limit)."""
        return Limit("concurrency", key, self.limit_of(key, stored))


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """How one claim shares the free slots between its queues and their tenants.

    A worker's :class:`jobqueue.limits.fairness.QueueSelector` builds one per claim; a one-off claim
    takes :meth:`even`.

    Attributes:
        weights: one weight per queue of the claim, in the same order.
        start: one virtual start tag per queue (see ``jobqueue/limits/fairness.py``).
        strict: serve queues in list order instead of by weight.
        caps: the per-tenant caps and weights.
        limits: the concurrency limits' settings.
        every: also serve every other queue with claimable jobs (``runworkers --queues '*'``):
            the store reads which queues have some at each claim, so a queue created after the
            worker started is served by its next claim.
        others_weight: the weight of each such other queue.
        others_start: the virtual start tag of each such other queue.
        exclude: queues ``every`` never serves (``--exclude-queues``).
        rates: the rate limits the claim spends tokens of (``jobqueue/settings/rates.py``).
        others_starts: the virtual start tags of the other queues served lately (by name); one
            not here, or below ``others_start``, starts at ``others_start``.
        rotation: where ``every`` reads the next window of other queues (:class:`Rotation`);
            None reads from the first name each claim.
    """

    weights: tuple[float, ...]
    start: tuple[float, ...]
    strict: bool = False
    caps: TenantCaps = field(default_factory=TenantCaps)
    limits: ConcurrencyLimits = field(default_factory=ConcurrencyLimits)
    every: bool = False
    others_weight: float = 1.0
    others_start: float = 0.0
    exclude: tuple[str, ...] = ()
    rates: RateLimits = field(default_factory=RateLimits)
    others_starts: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    rotation: Rotation | None = None

    @property
    def cursor(self) -> str:
        """Return where this claim's window of other queues starts (after this name)."""
        return "" if self.rotation is None or self.strict else self.rotation.after

    def skipped(self, queues: Sequence[str]) -> list[str]:
        """Return the names a window of other queues leaves out: ``queues`` and ``exclude``."""
        return [*queues, *self.exclude]

    def with_others(
        self, queues: Sequence[str], others: Sequence[str]
    ) -> tuple[list[str], ClaimPlan]:
        """Return the claim's queues and plan with a window of other queues added.

        Both stores call this with the window they read (:func:`window`), so they serve it
        alike, and the window's last queue becomes the rotation's cursor (strict order always
        reads from the first name: the other queues are served by name).

        Args:
            queues: the claim's listed queues, in the plan's order.
            others: the window: other queues with claimable jobs, in rotation order, none of
                ``queues`` or ``exclude``.

        Returns:
            ``(queues, plan)``: the listed queues, then ``others``, each with
            ``others_weight`` and its start (``others_starts``, at least ``others_start``);
            unchanged without ``every``.
        """
        if not self.every:
            return list(queues), self
        if others and self.rotation is not None and not self.strict:
            self.rotation.after = others[-1]
        if self.strict:
            others = sorted(others)
        floor = self.others_start
        plan = replace(
            self,
            weights=(*self.weights, *[self.others_weight] * len(others)),
            start=(*self.start, *[max(self.others_starts.get(q, floor), floor) for q in others]),
            every=False,
        )
        return [*queues, *others], plan

    @classmethod
    def even(
        cls,
        queues: int,
        caps: TenantCaps | None = None,
        limits: ConcurrencyLimits | None = None,
    ) -> ClaimPlan:
        """Return the plan of a claim with no history: equal weights, every queue at tag 0.

        Args:
            queues: how many queues the claim serves.
            caps: the per-tenant caps and weights (default: none).
            limits: the concurrency limits' settings (default: none).
        """
        return cls(
            weights=(1.0,) * queues,
            start=(0.0,) * queues,
            caps=caps or TenantCaps(),
            limits=limits or ConcurrencyLimits(),
        )
