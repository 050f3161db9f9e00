"""Internal: the store's circuit-breaker and retry-budget operations: interface and value objects.

:class:`DependencyStore` is one part of the composite :class:`~jobqueue.store.protocol.Store`
(see the ``StoreContract`` breaker and budget tests). Each state change of a breaker is one
statement that reads and writes the row under its lock, so workers in different processes never
lose each other's counts or both win the probe. Times come from the database clock; ``now`` is
for tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from jobqueue.settings.policies import Breaker, RetryBudgetSettings

#: ``BreakerOutcomes.probe_result`` values.
PROBE_OK, PROBE_FAILED, PROBE_NEUTRAL = "ok", "failed", "neutral"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerView:
    """One breaker as the claim gate reads it.

    Attributes:
        name: the dependency.
        state: ``closed``, ``open`` or ``half_open``.
        open_until: end of the cool-down (open), else None.
        probe_until: when the probe in flight lapses (half_open), else None.
        cooldown_s: the current cool-down, seconds.
        now: the store's clock when it was read.
    """

    name: str
    state: str
    open_until: datetime | None
    probe_until: datetime | None
    cooldown_s: float
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerOutcomes:
    """One worker's batch of outcomes of one dependency's jobs.

    Attributes:
        name: the dependency.
        successes: runs that succeeded.
        failures: runs that failed in a way that blames the dependency (not a permanent error).
        probe_job_id: the probe job this worker ran for the breaker, if its outcome is in the batch.
        probe_result: that probe's verdict: ``"ok"``, ``"failed"`` or ``"neutral"``.
    """

    name: str
    successes: int = 0
    failures: int = 0
    probe_job_id: int | None = None
    probe_result: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Deferral:
    """A claimed job to put back unrun until ``run_at``, with ``message`` in its history."""

    id: int
    lease_token: uuid.UUID
    run_at: datetime
    message: str


class DependencyStore(Protocol):
    """Breaker and budget operations a store provides beside the queue's."""

    def breaker_states(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[str, BreakerView]:
        """Return the breakers of ``names`` that exist (a missing one is closed)."""

    def claim_probe(
        self, name: str, job_id: int, probe_s: float, now: datetime | None = None
    ) -> datetime | None:
        """Make ``job_id`` the probe of breaker ``name`` if it is open past its cool-down.

        Also takes over a probe that lapsed (``probe_until`` passed). One compare-and-set:
        of concurrent callers, at most one wins.

        Returns:
            The probe's ``probe_until`` when this call won, else None.
        """

    def record_breaker_outcomes(
        self, batch: Sequence[BreakerOutcomes], breaker: Breaker, now: datetime | None = None
    ) -> dict[str, str]:
        """Count a batch of outcomes per dependency and move each breaker accordingly.

        Closed: the counts go into the window (which starts over once ``window_seconds``
        passed); at ``failure_threshold`` failures that are ``failure_ratio`` of the window's
        outcomes it opens for ``cooldown_seconds``. Half-open: the probe's result (only when
        ``probe_job_id`` is the breaker's probe) closes it (ok), reopens it with the cool-down
        doubled up to ``max_cooldown_seconds`` (failed), or lets the next claim probe
        (neutral). Creates missing breakers (closed) first.

        Returns:
            ``{name: state after}``.
        """

    def open_breaker(
        self,
        name: str,
        seconds: float,
        reason: str,
        breaker: Breaker,
        now: datetime | None = None,
    ) -> datetime:
        """Open breaker ``name`` for ``seconds`` (creating it); never shortens an open one.

        Returns:
            Its ``open_until``.
        """

    def close_breaker(self, name: str, reason: str, breaker: Breaker) -> bool:
        """Close breaker ``name`` now, resetting its window and cool-down.

        Returns:
            False when there is no such breaker.
        """

    def release_deferred(self, job_types: Sequence[str], now: datetime | None = None) -> int:
        """Make the held-back jobs of ``job_types`` ready now (their breaker was closed).

        Only ``scheduled`` jobs whose newest history entry is a deferral; attempts and history
        are kept. Returns how many jobs were released.
        """

    def defer_many(
        self, deferrals: Sequence[Deferral], now: datetime | None = None
    ) -> dict[int, str]:
        """Put held jobs back unrun until their ``run_at``; the claim's attempt is given back.

        Each gets a ``kind: "deferred"`` history entry. Fenced like ``release``: a lease no
        longer held changes nothing. A job whose cancel was requested ends ``cancelled``.

        Returns:
            ``{job_id: new state}`` for the jobs put back.
        """

    def take_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> dict[str, float]:
        """Spend ``counts[queue]`` retry tokens per queue, after the floor refill.

        A queue without a bucket starts with a full one (``capacity``).

        Returns:
            ``{queue: tokens left}``; negative is a debt (the caller delays those retries).
        """

    def credit_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> None:
        """Add ``ratio`` tokens per success (and the floor refill) to each queue's bucket."""

    def delete_retry_budgets(self, queues: Collection[str]) -> int:
        """Delete the buckets of ``queues`` (each starts full again); return how many."""
