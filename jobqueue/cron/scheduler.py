"""Internal: the cron scheduler, a background service of every ``runworkers`` process.

Each tick (every ``SCHEDULER_INTERVAL_SECONDS``) the scheduler renews the leader lease, or tries
to take it once it has lapsed. Only the leader fires: it reads the entries whose next fire time
is due by the database clock (up to one tick ahead), plans each entry's fires from its previous
fire time (:func:`jobqueue.cron.planning.plan`: time zones, DST, missed runs), and fires them one
transaction each. A paused or partitioned ex-leader is fenced out by the lease's token, and even
two schedulers that both believe they lead cannot fire one (entry, fire time) twice: the fire
record's unique constraint turns the second attempt into "already fired".

A follower among ``sharing`` processes of one host (``runworkers --processes N``) asks for the
lease ``N`` times less often, jittered (``settings.conf.shared_interval_s``): the host asks
about once a tick, not once per process (each ask is a write, and most of what an idle fleet
sent the primary). A leader renews at every tick.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobqueue.cron.entries import cron_store, reconcile_settings
from jobqueue.cron.firing import fire
from jobqueue.cron.planning import plan
from jobqueue.logging import job_extra
from jobqueue.settings.conf import get_settings, shared_interval_s
from jobqueue.settings.crontab import Schedule
from jobqueue.store.interface import SCHEDULER_LEASE, DueEntry, Leadership

logger = logging.getLogger("jobqueue.scheduler")

#: How often the leader deletes fire records past ``CRON_FIRE_RETENTION_SECONDS``, seconds.
PRUNE_INTERVAL_S = 3600.0
#: Most due entries handled in one tick (the rest wait for the next).
ENTRIES_PER_TICK = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class Fired:
    """One job a tick enqueued."""

    entry: str
    fire_time: datetime
    job_id: int


@dataclass(slots=True, kw_only=True)
class Tick:
    """What one :meth:`Scheduler.run_once` did (for logs and tests)."""

    leading: bool
    token: int | None = None
    fired: list[Fired] = field(default_factory=list)
    already_fired: list[tuple[str, datetime]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """The cron scheduler service (see the module docstring); ``runworkers`` runs one.

    Args:
        holder: who holds the leader lease when this one leads (the worker id).
        using: database alias of the queue.
        interval_s: seconds between ticks; default ``SCHEDULER_INTERVAL_SECONDS``.
        lease_s: leader lease length, seconds; default ``LEADER_LEASE_SECONDS``.
        grace_s: how late a fire time may be and still fire whatever the missed-run policy;
            default ``CRON_GRACE_SECONDS``.
        lookahead_s: how far ahead of its fire time a job is enqueued (as ``scheduled``, with
            ``run_at`` = fire time); default one tick.
        reconcile: make the settings entries match ``JOBQUEUE["CRON"]`` at the first tick.
        sharing: how many processes on this host run a scheduler (``runworkers --processes``):
            as a follower this one asks for the lease that many times less often.
    """

    name = "scheduler"
    #: The leader lease this scheduler runs for.
    lease_name = SCHEDULER_LEASE

    def __init__(
        self,
        *,
        holder: str | None = None,
        using: str | None = None,
        interval_s: float | None = None,
        lease_s: float | None = None,
        grace_s: float | None = None,
        lookahead_s: float | None = None,
        reconcile: bool = True,
        sharing: int = 1,
    ) -> None:
        conf = get_settings()
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.using = using or "default"
        self.interval_s = interval_s or conf.scheduler_interval_seconds
        self.lease_s = lease_s or conf.leader_lease_seconds
        self.grace_s = conf.cron_grace_seconds if grace_s is None else grace_s
        self.lookahead_s = self.interval_s if lookahead_s is None else lookahead_s
        self.retention_s = conf.cron_fire_retention_seconds
        self.store = cron_store(self.using)
        self.leadership: Leadership | None = None
        self._reconciled = not reconcile
        self._stopped = False
        self._next_prune = time.monotonic()
        self._bad_entries: dict[int, float] = {}
        self.sharing = sharing
        #: Monotonic time before which a follower does not ask for the lease (see the module).
        self._ask_at = 0.0

    def __repr__(self) -> str:
        return f"<Scheduler {self.holder} {'leader' if self.leadership else 'follower'}>"

    @property
    def is_leader(self) -> bool:
        """Return True if the last tick held the leader lease."""
        return self.leadership is not None

    # -- the service -----------------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> Tick:
        """Run one tick: lead (or try to), then fire what is due.

        Args:
            now: stands in for the database clock (tests only); None in production.

        Raises:
            django.db.DatabaseError: the worker's service loop logs it and retries next tick.
        """
        if self._stopped:
            return Tick(leading=False)
        if not self._reconciled:
            reconcile_settings(self.using)
            self._reconciled = True
        if self.leadership is None and time.monotonic() < self._ask_at:
            return Tick(leading=False)  # another process of this host asks in between
        lead = self._elect(now)
        if lead is None:
            if self.sharing > 1:
                self._ask_at = time.monotonic() + shared_interval_s(self.interval_s, self.sharing)
            return Tick(leading=False)
        tick = Tick(leading=True, token=lead.token)
        horizon = lead.now + timedelta(seconds=self.lookahead_s)
        for entry in self.store.due_cron_entries(horizon, ENTRIES_PER_TICK):
            if not self._handle(entry, lead, tick, now):
                self._lost(lead)
                tick.leading = False
                return tick
        if now is None and time.monotonic() >= self._next_prune:
            self._next_prune = time.monotonic() + PRUNE_INTERVAL_S
            self.prune(lead.now)
        return tick

    def prune(self, now: datetime) -> int:
        """Delete fire records older than ``CRON_FIRE_RETENTION_SECONDS`` before ``now``.

        Each entry keeps its latest record. The leader calls this once an hour.
        """
        pruned = self.store.prune_cron_fires(now - timedelta(seconds=self.retention_s))
        if pruned:
            logger.info("pruned %d cron fire record(s) past retention", pruned)
        return pruned

    def stop(self) -> None:
        """Stop firing and let the leader lease lapse now, so another process takes over."""
        self._stopped = True
        lead, self.leadership = self.leadership, None
        if lead is not None and self.store.resign_leader(lead.name, lead.holder, lead.token):
            logger.info("scheduler %s: resigned the leader lease", self.holder)

    # -- internals -------------------------------------------------------------------------

    def _elect(self, now: datetime | None) -> Leadership | None:
        token = self.leadership.token if self.leadership else None
        lead = self.store.elect_leader(self.lease_name, self.holder, token, self.lease_s, now)
        if lead is None:
            if self.leadership is not None:
                self._lost(self.leadership)
            return None
        if self.leadership is None or self.leadership.token != lead.token:
            logger.info(
                "scheduler %s leads (fencing token %d, lease %.1f s)",
                self.holder,
                lead.token,
                self.lease_s,
            )
        self.leadership = lead
        return lead

    def _lost(self, lead: Leadership) -> None:
        logger.warning("scheduler %s lost the leader lease (token %d)", self.holder, lead.token)
        self.leadership = None

    def _handle(self, entry: DueEntry, lead: Leadership, tick: Tick, now: datetime | None) -> bool:
        """Fire one entry's due times; return False if the lease turned out lost."""
        try:
            schedule = Schedule(entry.cron_expr, entry.timezone)
            steps = plan(
                schedule,
                entry.next_fire_at,
                missed=entry.missed,
                missed_cap=entry.missed_cap,
                now=lead.now,
                grace_s=self.grace_s,
                lookahead_s=self.lookahead_s,
            )
        except ValueError as exc:  # an entry written around validation (raw SQL, old data)
            self._complain(entry, f"cannot be scheduled: {exc}")
            return True
        last = steps.fire_times[-1] if steps.fire_times else None
        if last is not None and steps.next_fire_at <= last:
            # Never store a next fire time at or before the last fire (FIELD-CASES 35): it
            # would fire the same slot again, or loop. Step past it, and say so.
            self._complain(
                entry,
                f"computed next fire time {steps.next_fire_at.isoformat()} at or before its "
                f"last fire {last.isoformat()}; stepping past it",
            )
            steps = dataclasses.replace(steps, next_fire_at=schedule.next_after(last))
        if steps.skipped:
            tick.skipped[entry.name] = steps.skipped
            logger.warning(
                "cron entry %r: %d missed fire time(s) from %s to %s not run (missed=%s)",
                entry.name,
                steps.skipped,
                steps.skipped_from.isoformat() if steps.skipped_from else "?",
                steps.skipped_to.isoformat() if steps.skipped_to else "?",
                entry.missed,
            )
        times: list[datetime | None] = list(steps.fire_times) or [None]
        skipped = steps.skipped
        for index, fire_time in enumerate(times):
            following = (
                steps.fire_times[index + 1]
                if index + 1 < len(steps.fire_times)
                else steps.next_fire_at
            )
            try:
                outcome = fire(
                    self.store,
                    entry,
                    fire_time,
                    next_fire_at=following,
                    skipped=skipped,
                    leader=lead,
                    now=lead.now,
                    injected_now=now,
                    using=self.using,
                )
            except ValueError as exc:  # the payload outgrew MAX_PAYLOAD_BYTES, say
                self._complain(entry, f"cannot enqueue its job: {exc}")
                return True
            if not outcome.leading:
                return False
            if not outcome.advanced:
                # Edited, disabled or advanced by another scheduler since we read it.
                logger.debug("cron entry %r changed under us; next tick re-reads it", entry.name)
                return True
            skipped = 0
            if fire_time is None:
                continue
            if outcome.job_id is None:
                tick.already_fired.append((entry.name, fire_time))
                logger.info("cron entry %r: %s already fired", entry.name, fire_time.isoformat())
            else:
                tick.fired.append(
                    Fired(entry=entry.name, fire_time=fire_time, job_id=outcome.job_id)
                )
                logger.info(
                    "cron entry %r fired for %s: job %d",
                    entry.name,
                    fire_time.isoformat(),
                    outcome.job_id,
                    extra=job_extra(
                        job_id=outcome.job_id, job_type=entry.job_type, queue=entry.queue
                    ),
                )
            entry = dataclasses.replace(entry, next_fire_at=following)
        return True

    def _complain(self, entry: DueEntry, problem: str) -> None:
        # Once a minute per entry: the entry stays due, so every tick would say it again.
        last = self._bad_entries.get(entry.id)
        if last is None or time.monotonic() - last >= 60:
            self._bad_entries[entry.id] = time.monotonic()
            logger.error("cron entry %r %s", entry.name, problem)
