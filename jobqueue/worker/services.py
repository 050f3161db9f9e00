"""Internal: services (periodic duties with ``run_once``) and the runner that runs them on a thread.

A worker runs its own services (heartbeat, reaper, worker-row pruning: one runner, one thread)
and the ones it is given (the cron scheduler, the pruner: one runner and thread each, so a slow
one never delays a heartbeat).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from django.db import DatabaseError, connections

logger = logging.getLogger("jobqueue.worker")


class Service(Protocol):
    """A periodic duty a worker runs beside its claim loop (heartbeat, reaper, cron, pruner).

    ``run_once`` is called every ``interval_s`` seconds on the service's runner thread, until
    the worker stops; it must return promptly. Database errors are logged and retried.

    Optional: ``ready() -> bool``: when it returns False the round is put off to the runner's
    next tick (the reaper, held after an outage); ``stop()``: called once on the runner's
    thread when the runner stops (the scheduler resigns its leader lease there).
    """

    name: str
    interval_s: float

    def run_once(self) -> object:
        """Do one round of the service's work."""


class DatabaseWatcher(Protocol):
    """Told whether the database answered a service's round (``recovery.ReapHold``)."""

    def ok(self) -> None:
        """A round worked."""

    def failed(self) -> None:
        """A round failed on the database."""


class OutageLog:
    """One log line when a thread's database calls start failing, one when they work again.

    A database restart must not turn into a line per heartbeat tick from every thread.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0

    def failed(self, exc: Exception) -> None:
        """Count a failure; log the first one."""
        self.failures += 1
        if self.failures == 1:
            logger.error("%s: database unavailable (%s); retrying", self.what, exc)
        else:
            logger.debug("%s: database still unavailable (%d): %s", self.what, self.failures, exc)

    def ok(self) -> None:
        """Say once that the database is back, if it was away."""
        if self.failures:
            logger.warning("%s: database is back after %d failure(s)", self.what, self.failures)
            self.failures = 0


class ServiceRunner:
    """Run services, each every ``interval_s`` seconds, on one thread.

    Args:
        services: what to run, in this order within a tick.
        name: the runner's name in log lines and its thread's name.
        using: database alias (its connection is closed after a database error).
        stop: set to end :meth:`loop`.
        first_at_once: run each service at once when the loop starts; else one interval later.
        watcher: told after each round whether the database answered.
    """

    def __init__(
        self,
        services: Sequence[Service],
        *,
        name: str,
        using: str,
        stop: threading.Event,
        first_at_once: bool = True,
        watcher: DatabaseWatcher | None = None,
    ) -> None:
        self.services = list(services)
        self.name = name
        self.using = using
        self._stop = stop
        self._watcher = watcher
        self._outage = OutageLog(name)
        #: Seconds between ticks: the shortest interval.
        self.tick_s = min(s.interval_s for s in self.services)
        self._first_at_once = first_at_once
        self._next: list[float] = []
        self._schedule()

    def _schedule(self) -> None:
        """Set every service's first run: now, or one interval from now."""
        now = time.monotonic()
        self._next = [now if self._first_at_once else now + s.interval_s for s in self.services]

    def run_due(self) -> None:
        """Run the services whose time has come (and that are ready), in order.

        A database error ends the tick; the service it came from runs again at the next tick
        (after an outage the heartbeat must renew leases before other workers' reapers resume).
        Any other exception is logged and the service runs again after its interval.
        """
        for index, service in enumerate(self.services):
            now = time.monotonic()
            if now < self._next[index]:
                continue
            ready = getattr(service, "ready", None)
            if ready is not None and not ready():
                continue
            self._next[index] = now + service.interval_s
            try:
                service.run_once()
            except DatabaseError as exc:
                self._next[index] = now
                self._outage.failed(exc)
                if self._watcher is not None:
                    self._watcher.failed()
                connections[self.using].close()
                return
            except Exception:
                # A bug in one service must not take the worker down; say so loudly.
                logger.exception("%s failed; retrying in %.1f s", service.name, service.interval_s)
                continue
            self._outage.ok()
            if self._watcher is not None:
                self._watcher.ok()

    def loop(self) -> None:
        """Run due services every tick until ``stop`` is set; then their ``stop()`` hooks."""
        # Counted from when the thread starts, not from when the runner was built.
        self._schedule()
        try:
            while not self._stop.is_set():
                self.run_due()
                if self._stop.wait(self.tick_s):
                    break
            for service in self.services:
                stop = getattr(service, "stop", None)
                if stop is not None:
                    try:
                        stop()
                    except DatabaseError as exc:
                        logger.error("%s: could not stop cleanly: %s", service.name, exc)
        finally:
            connections.close_all()

    def thread(self) -> threading.Thread:
        """Return a daemon thread that runs :meth:`loop` (not started)."""
        return threading.Thread(target=self.loop, name=f"jobqueue-{self.name}", daemon=True)
