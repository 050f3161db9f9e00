"""Internal: the metrics' part of the store seam: bounded reads of the jobs table for gauges.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_gauges.py`` (``queue_gauges.sql``, ``dead_gauges.sql``, ``waiting_gauges.sql``,
``running_gauges.sql``, ``count_prunable.sql``, each walking a partial index, never the table:
FIELD-CASES 30), the generic store in ``generic_gauges.py`` (plain ORM counts: SQLite sites are
small).

Counts are exact up to a cap and read as the cap past it ("that many or more"), so a scrape
reads a bounded number of index entries however many jobs there are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

#: Default cap of one count: exact up to this, this value past it.
COUNT_CAP = 10_000
#: Default number of tenants per queue walked for the ready count and the oldest due job.
MAX_TENANTS = 1_000


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueGauge:
    """One queue with claimable jobs. Counts are capped (see :data:`COUNT_CAP`)."""

    queue: str
    #: Jobs claimable now (state ready, or scheduled with run_at come).
    ready: int
    #: Jobs whose run_at is still ahead.
    scheduled: int
    #: run_at of the oldest claimable job (aware), None when none is due.
    oldest_due: datetime | None
    #: More tenants than the walk visits: ready and oldest_due cover the first ones only.
    truncated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningGauge:
    """Leased jobs per queue, and per tenant for the tenants running the most."""

    by_queue: dict[str, int]
    #: ``(tenant_id, leased)``, most first.
    top_tenants: list[tuple[str, int]]
    #: ``(concurrency key, leased, limit stored on its leased jobs)`` of the keys running the
    #: most, most first (``JOBQUEUE["CONCURRENCY_LIMITS"]`` may override the limit).
    top_keys: list[tuple[str, int, int | None]] = field(default_factory=list)


class GaugeStore(Protocol):
    """Bounded counts for the metrics endpoint (every statement on an index)."""

    def queue_gauges(
        self, cap: int = COUNT_CAP, max_tenants: int = MAX_TENANTS, now: datetime | None = None
    ) -> list[QueueGauge]:
        """Return one :class:`QueueGauge` per queue with claimable jobs, by queue name.

        Args:
            cap: counts are exact up to this, and read as ``cap`` past it (>= 1).
            max_tenants: tenants walked per queue (>= 1).
            now: the instant "due" is judged at (default: the database clock; the depth
                sample passes its own reading, tests an injected one).
        """

    def dead_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        """Return queue -> dead jobs, exact up to ``cap`` per queue and ``cap`` past it."""

    def waiting_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        """Return queue -> jobs waiting for parent jobs, exact up to ``cap`` and ``cap`` past it.

        Args:
            cap: counts are exact up to this, and read as ``cap`` past it (>= 1).
        """

    def running_gauges(self, top: int) -> RunningGauge:
        """Return leased jobs per queue, and of the ``top`` tenants and keys running the most."""

    def concurrency_gauges(self, top: int) -> list[tuple[str, int, int | None]]:
        """Return :attr:`RunningGauge.top_keys` alone, in one read (the admin's dashboard).

        Args:
            top: most keys returned (>= 1), the ones running the most first.
        """

    def prunable_by_state(
        self,
        retention: Mapping[str, float],
        cap: int | None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        """Return finished state -> jobs finished more than its retention ago.

        Args:
            retention: state (``succeeded``, ``dead``, ``cancelled``) -> seconds kept.
            cap: count at most this many per state (the metrics); None: exactly.
            now: the instant retention counts from (default: the database clock).
        """

    def estimate_prunable(
        self, state: str, older_than_s: float, now: datetime | None = None
    ) -> int | None:
        """Return the planner's estimate of ``prunable_by_state``'s uncapped count of ``state``.

        Reads no rows (PostgreSQL's ``EXPLAIN``); None where the database has no such estimate.
        """
