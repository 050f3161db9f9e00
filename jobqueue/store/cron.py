"""Internal: the store's cron and leader-lease operations: their interface and value objects.

:class:`CronStore` is one part of the composite :class:`~jobqueue.store.protocol.Store` (see the
``StoreContract`` cron tests). Exactly once per (cron entry, fire time) rests on one rule:
:meth:`CronStore.fire_cron` inserts the fire record and the job in one transaction, under a
unique constraint on (entry, fire time), and a conflict there means "already fired". The leader
lease and the compare-and-set on ``next_fire_at`` only keep a second scheduler from trying.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from jobqueue.models import CronEntry
from jobqueue.store.base import NewJob

#: The leader lease the cron scheduler holds.
SCHEDULER_LEASE = "scheduler"


@dataclass(frozen=True, slots=True, kw_only=True)
class Leadership:
    """A leader lease this holder holds now.

    Attributes:
        name: the lease's name (``"scheduler"``).
        holder: who holds it (the worker id).
        token: the fencing token; it goes up each time the lease changes hands.
        expires_at: when it lapses unless renewed (database clock).
        now: the database clock when it was taken or renewed (or the injected ``now``).
    """

    name: str
    holder: str
    token: int
    expires_at: datetime
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DueEntry:
    """An enabled cron entry whose ``next_fire_at`` is due (or unset), as the scheduler reads it."""

    id: int
    name: str
    cron_expr: str
    timezone: str
    queue: str
    job_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    missed: str = "once"
    missed_cap: int = 10
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Fire:
    """One fire to record: (entry, fire time) and the job it enqueues.

    Attributes:
        entry_id: the cron entry.
        fire_time: the scheduled instant (aware); unique per entry.
        job: the job to insert; its ``run_at`` (None: now) is when it may start.
        fired_by: who fires it (the leader's holder id, or "admin:<user>").
        manual: a "run now", not a scheduled fire.
        leader: the lease to present; None for a manual fire (no leader needed).
        now: stands in for the database clock (tests only).
    """

    entry_id: int
    fire_time: datetime
    job: NewJob
    fired_by: str = ""
    manual: bool = False
    leader: Leadership | None = None
    now: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Fired:
    """What :meth:`CronStore.fire_cron` did.

    ``job_id`` is the new job's id, or None when nothing was written: either the fire time had
    already fired (``leading`` True), or the leader lease is no longer this holder's
    (``leading`` False).
    """

    leading: bool
    job_id: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Advance:
    """Move an entry's ``next_fire_at`` forward, if nobody else moved or edited it first.

    Attributes:
        entry_id: the cron entry.
        expected: the ``next_fire_at`` the scheduler planned from (compare-and-set).
        cron_expr, timezone: the schedule it planned with (an edit in between refuses the move).
        next_fire_at: the new value.
        last_fired_at: a fire time that just fired (kept if later than the stored one), or None.
        skipped: missed fire times dropped by the policy, added to ``skipped_fires``.
        leader: the lease to present; None to skip that check.
    """

    entry_id: int
    expected: datetime | None
    cron_expr: str
    timezone: str
    next_fire_at: datetime
    last_fired_at: datetime | None = None
    skipped: int = 0
    leader: Leadership | None = None


class CronStore(Protocol):
    """The cron operations a store provides beside the queue's."""

    def db_now(self) -> datetime:
        """Return the store's clock: ``now()`` on PostgreSQL, this process's clock elsewhere."""

    def elect_leader(
        self,
        name: str,
        holder: str,
        token: int | None,
        lease_s: float,
        now: datetime | None = None,
    ) -> Leadership | None:
        """Renew ``holder``'s lease, or take the lease if it has expired; one statement.

        A holder renews with the token it holds (the token stays). Anyone takes an expired
        lease, and the token goes up by one. Returns None when someone else holds it.
        """

    def resign_leader(self, name: str, holder: str, token: int) -> bool:
        """Let the lease lapse now, if ``holder`` still holds it under ``token``."""

    def due_cron_entries(self, until: datetime, limit: int = 100) -> list[DueEntry]:
        """Return enabled entries with ``next_fire_at <= until`` or unset, soonest first."""

    def fire_cron(self, fire: Fire) -> Fired:
        """Record (entry, fire time) and insert its job, in the caller's transaction.

        Writes both or nothing: nothing when the fire time already fired (the unique
        constraint; never an error) or when ``fire.leader`` is no longer the lease's holder
        and token. The lease row is not locked: a takeover never waits for a fire in flight;
        a stale leader's fire is undone by the fenced :meth:`advance_cron` in its transaction,
        or is the one that counts (the new leader's insert then finds "already fired").
        """

    def advance_cron(self, advance: Advance) -> bool:
        """Compare-and-set ``next_fire_at``; return False if the entry moved or changed."""

    def prune_cron_fires(self, older_than: datetime, limit: int = 10_000) -> int:
        """Delete fire records older than ``older_than``, except each entry's latest one."""

    def save_cron_entry(
        self, values: Mapping[str, Any], *, source: str, replace_other: bool = True
    ) -> tuple[CronEntry, str]:
        """Create or update the entry named ``values["name"]``; return it and what happened.

        The outcome is ``created``, ``updated``, ``unchanged`` or ``conflict`` (the entry is
        another source's and ``replace_other`` is False).
        """

    def edit_cron_entry(self, entry_id: int, values: Mapping[str, Any]) -> CronEntry:
        """Set an entry's name and fields by id, keeping its source and the scheduler's fields."""

    def set_cron_entries_enabled(self, entry_ids: Collection[int], enabled: bool) -> list[str]:
        """Enable or disable those entries not so already; return their names."""

    def disable_cron_entries(self, source: str, keep: Collection[str]) -> list[str]:
        """Disable the enabled entries of ``source`` not named in ``keep``; return their names."""

    def delete_cron_entries(self, entry_ids: Collection[int]) -> list[str]:
        """Delete the entries ``entry_ids`` with their fire records; return their names."""
