"""Who gets the next free slot: queue weights, strict queue order, tenant caps and weights.

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

A last ``*`` in the list (``runworkers --queues 'critical:6,*'``) stands for every other queue,
now and later, minus ``exclude``: at each claim the store reads a window of the other queues that
have claimable jobs (``ClaimPlan.every``), each weighing what ``*`` weighs (1 unless ``*:N``). The
window holds as many queues as the claim may take jobs, the next ones by name after the previous
window's last (:class:`~jobqueue.store.plan.Rotation`), so a claim's work does not grow with the
number of queues (issue 33: 10,000 queues) and over successive claims each queue gets its turn.
A queue served that way keeps its own virtual start here (``_others``) for as long as it is ahead
of the current tag; one never served, or not lately, enters at the current tag, like a queue back
from idle. With fewer other queues than a claim takes jobs, the window holds them all, as if they
were listed. In strict order the other queues come after the listed ones, by name.

Tenant fairness and caps are computed by the store inside the claim (see ``store/sql/claim.sql``);
the plan a claim takes and the caps it carries are the store's value types
(:mod:`jobqueue.store.plan`), re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from jobqueue.registry import registry
from jobqueue.settings.conf import get_settings
from jobqueue.settings.queues import EVERY_QUEUE, advertised_queues
from jobqueue.settings.rates import RateLimits
from jobqueue.store.plan import ClaimPlan, ConcurrencyLimits, Rotation, TenantCaps

__all__ = ["ClaimPlan", "ConcurrencyLimits", "QueueSelector", "TenantCaps"]


#: Virtual tags are shifted back towards 0 once every one passes this (float precision; rare).
_RENORMALIZE_ABOVE = 1e6


class Claimed(Protocol):
    """What :meth:`QueueSelector.claimed` reads of a claimed job (``store.interface.ClaimedJob``).

    A protocol rather than an import: the generic store imports this module (``serve_order``).
    """

    @property
    def queue(self) -> str: ...

    @property
    def tag(self) -> float: ...


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
        exclude: Sequence[str] = (),
        limits: ConcurrencyLimits | None = None,
        rates: RateLimits | None = None,
    ) -> None:
        """Serve ``queues`` with ``weights`` (default: all 1), or in list order with ``strict``.

        A last ``"*"`` in ``queues`` serves every other queue but those in ``exclude``, each
        with the weight given to ``"*"``. ``caps`` (tenant caps and weights) and ``limits``
        (concurrency limits) pass through to every plan.

        Raises:
            ValueError: ``weights`` does not give one positive weight per queue, or ``exclude``
                is given without ``"*"``.
        """
        names = tuple(queues)
        given = tuple(float(w) for w in (weights or [1] * len(names)))
        if len(given) != len(names) or any(w <= 0 for w in given):
            raise ValueError(f"need one positive weight per queue, got {weights!r}")
        self._spec = tuple(zip(names, given, strict=True))
        self.every = bool(names) and names[-1] == EVERY_QUEUE
        if exclude and not self.every:
            raise ValueError(f"exclude needs '*' among the queues, got {names!r}")
        self.exclude = tuple(exclude)
        #: The listed queues (without ``*``); the others ``*`` serves are read by the store.
        self.queues = names[:-1] if self.every else names
        self.weights = given[:-1] if self.every else given
        self.others_weight = given[-1] if self.every else 1.0
        self.strict = strict
        self.caps = caps or TenantCaps()
        self.limits = limits or ConcurrencyLimits()
        self.rates = rates or RateLimits()
        self._start = dict.fromkeys(self.queues, 0.0)
        self._others_start = 0.0
        # The starts of other queues "*" served lately, by name: only those above
        # _others_start (the rest start there), so it holds at most the queues of one rotation.
        self._others: dict[str, float] = {}
        self.rotation = Rotation()

    def describe(self) -> str:
        """Return the queues as the log shows them: ``critical:6,default:3`` or ``a,b (strict)``."""
        plain = self.strict or all(w == 1 for _, w in self._spec)
        text = ",".join(q if plain else f"{q}:{w:g}" for q, w in self._spec)
        if self.exclude:
            text += f" (except {','.join(self.exclude)})"
        return text + " (strict)" if self.strict else text

    def advertised(self) -> list[str]:
        """Return the queues as the Worker row lists them: ``["a", "*", "!x"]``."""
        return advertised_queues([q for q, _ in self._spec], self.exclude)

    def serves(self, queue: str) -> bool:
        """Return whether this worker claims from ``queue`` (its notifications wake the worker)."""
        if self.every:
            return queue not in self.exclude
        return queue in self._start

    def plan(self) -> ClaimPlan:
        """Return the plan for the next claim (of :attr:`queues`, and the others with ``*``)."""
        return ClaimPlan(
            weights=self.weights,
            start=tuple(self._start[q] for q in self.queues),
            strict=self.strict,
            caps=self.caps,
            limits=self.limits,
            every=self.every,
            others_weight=self.others_weight,
            others_start=self._others_start,
            exclude=self.exclude,
            rates=self.rates,
            others_starts=self._others,
            rotation=self.rotation if self.every else None,
        )

    def claimed(self, jobs: Sequence[Claimed]) -> None:
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
        for queue in tags.keys() - self._start.keys():
            self._others[queue] = tags[queue]  # served by "*": its own place in the rotation
        # Every other queue, served or not, enters no lower than the current tag (the store
        # reads max(its start, _others_start)), like one back from idle.
        floor = max(self._others_start, now - 1.0 / self.others_weight)
        if floor > self._others_start:
            self._others_start = floor
            self._others = {q: t for q, t in self._others.items() if t > floor}
        # Only differences matter; keep the numbers small over a long run (rarely: shifting
        # every start read costs one pass over the others of a rotation).
        least = min((*self._start.values(), self._others_start))
        if least > _RENORMALIZE_ABOVE:
            for queue in self._start:
                self._start[queue] -= least
            self._others = {q: t - least for q, t in self._others.items()}
            self._others_start -= least


def rate_limits() -> RateLimits:
    """Return ``JOBQUEUE["RATE_LIMITS"]`` with the ``@job`` rate limits and dependencies known here.

    A type this process has not registered is limited by its type's and tenant's limits only
    (its dependency is declared by its ``@job``).
    """
    types = registry()
    known = {name: t.dependency for name, t in types.items()}
    declared = {name: t.rate_limit for name, t in types.items() if t.rate_limit is not None}
    return get_settings().rate_limits.with_type_limits(declared).with_dependencies(known)
