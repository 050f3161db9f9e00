"""Internal: services (periodic duties with ``run_once``) and the runner that runs them on a thread.

A worker runs its own services (heartbeat, reaper, worker-row pruning: one runner, one thread)
and the ones it is given (:func:`start_services`): a frequent one (the cron scheduler, every
second) joins that runner while the worker claims, so it needs no connection of its own; the
rare ones (the pruner, every minute; the depth sampler, every 30 s) share a runner of their own,
so their slow rounds never delay a heartbeat, and that runner closes its connection between
rounds. The connection budget this gives is in
docs/deployment.md.

The rollup's depth sampler (:class:`DepthSampler`) is a service too: every non-burst worker runs
it (``runworkers``); the store writes the first sample of each minute and nothing for later
calls that minute (``sample_depth``), so the cluster counts the claimable jobs once a minute,
with the capped index walk of the metrics' queue gauges, whatever its size. Sampling every 30 s
leaves no minute unsampled while any worker runs. The dashboard's depth and lag charts read
these rows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from django.db import DatabaseError, connections

from jobqueue.store import get_store
from jobqueue.store.failures import classify

logger = logging.getLogger("jobqueue.worker")

#: A runner that ticks this rarely (seconds) closes its connection after each tick: one connect
#: a minute costs less than a server connection held idle (and a pooled slot) all the time.
RELEASE_IDLE_S = 10.0
#: Longest a runner that waits on a service's bell goes without looking at its stop event, s.
STOP_CHECK_S = 0.5


class Service(Protocol):
    """A periodic duty a worker runs beside its claim loop (heartbeat, reaper, cron, pruner).

    ``run_once`` is called every ``interval_s`` seconds on the service's runner thread, until
    the worker stops; it must return promptly. Database errors are logged and retried.

    Optional: ``ready() -> bool``: when it returns False the round is put off to the runner's
    next tick (the reaper, held after an outage); ``stop()``: called once on the runner's
    thread when the runner stops (the scheduler resigns its leader lease there);
    ``own_thread = True``: a frequent service that still gets a runner of its own (the outbox
    relay, whose other databases must not delay the heartbeat); ``set_bell(ring)`` and
    ``rung() -> bool``: the runner gives the service ``ring()``, which wakes the runner at once
    (the relay's listener calls it on a NOTIFY), and runs the service before its interval is up
    when ``rung()`` (which clears the request) returns True.
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

    A database restart must not turn into a line per heartbeat tick from every thread. The
    failure is classified (``jobqueue/store/failures.py``) and a change of kind within an
    outage gets its line too (connection lost, then read-only after a failover).

    Args:
        what: the thread's name in the log.
        using: the database alias the failures are on.
    """

    def __init__(self, what: str, using: str = "default") -> None:
        self.what = what
        self.using = using
        self.failures = 0
        self._kind = ""

    def failed(self, exc: Exception) -> None:
        """Count a failure; log the first one, and each that changes the kind."""
        self.failures += 1
        failure = classify(exc, self.using)
        if failure.kind != self._kind:
            self._kind = failure.kind
            logger.error("%s: %s", self.what, failure.describe("retrying"))
        else:
            logger.debug("%s: %s (%d failures)", self.what, failure.describe(), self.failures)

    def ok(self) -> None:
        """Say once that the database is back, if it was away."""
        if self.failures:
            logger.warning("%s: database is back after %d failure(s)", self.what, self.failures)
            self.failures = 0
            self._kind = ""


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
        self._outage = OutageLog(name, using)
        #: Seconds between ticks: the shortest interval.
        self.tick_s = min(s.interval_s for s in self.services)
        self._first_at_once = first_at_once
        self._next: list[float] = []
        self._schedule()
        # Rung by services that hear of work (set_bell): the loop then waits on it, not on stop.
        self._bell: threading.Event | None = None
        for service in self.services:
            self._give_bell(service)

    def _give_bell(self, service: Service) -> None:
        set_bell = getattr(service, "set_bell", None)
        if set_bell is None:
            return
        if self._bell is None:
            self._bell = threading.Event()
        set_bell(self._bell.set)

    def add(self, service: Service) -> None:
        """Add ``service`` (before :meth:`loop` starts); it runs one interval from now."""
        self._give_bell(service)
        self.services.append(service)
        self.tick_s = min(self.tick_s, service.interval_s)
        self._next.append(time.monotonic() + service.interval_s)

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
            rung = getattr(service, "rung", None)
            if now < self._next[index] and (rung is None or not rung()):
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
                if self.tick_s >= RELEASE_IDLE_S:
                    connections[self.using].close()
                if self._wait():
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

    def _wait(self) -> bool:
        """Sleep one tick, or until a service rings; return whether the runner must stop."""
        if self._bell is None:
            return self._stop.wait(self.tick_s)
        # The bell cannot also wait on the stop event: look at it every STOP_CHECK_S.
        deadline = time.monotonic() + self.tick_s
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._bell.wait(min(left, STOP_CHECK_S)):
                break
        self._bell.clear()
        return self._stop.is_set()

    def thread(self) -> threading.Thread:
        """Return a daemon thread that runs :meth:`loop` (not started)."""
        return threading.Thread(target=self.loop, name=f"jobqueue-{self.name}", daemon=True)


class WhileClaiming:
    """A given service run on the maintenance runner, only while the worker claims.

    Once claiming stops its rounds end and its ``stop()`` runs (the scheduler resigns the
    leader lease): a draining process must not fire cron for work it will not do.
    """

    def __init__(self, service: Service, stopping: threading.Event) -> None:
        self.service = service
        self.name = service.name
        self.interval_s = service.interval_s
        self._stopping = stopping
        self._stopped = False

    def ready(self) -> bool:
        """Return whether the service may run now: the worker claims, and it is ready."""
        if self._stopping.is_set():
            self.stop()
            return False
        ready = getattr(self.service, "ready", None)
        return True if ready is None else bool(ready())

    def run_once(self) -> object:
        """Run one round of the service."""
        return self.service.run_once()

    def stop(self) -> None:
        """Call the service's ``stop()`` once (a database error is logged: it lapses anyway)."""
        if self._stopped:
            return
        self._stopped = True
        stop = getattr(self.service, "stop", None)
        if stop is not None:
            try:
                stop()
            except DatabaseError as exc:
                logger.error("%s: could not stop cleanly: %s", self.name, exc)


def start_services(
    services: Sequence[Service],
    maintenance: ServiceRunner,
    *,
    using: str,
    stopping: threading.Event,
) -> list[threading.Thread]:
    """Place a worker's given services and start the threads of those that need their own.

    Args:
        services: the services (``interval_s`` in seconds).
        maintenance: the worker's maintenance runner, not started yet: a service that ticks
            more often than every :data:`RELEASE_IDLE_S` seconds joins it (:class:`WhileClaiming`),
            unless it asks for ``own_thread``.
        using: database alias.
        stopping: set once the worker stops claiming; it ends the services.

    Returns:
        The threads started: none, or one for all the rare services together (its runner
        releases its connection between rounds, so they cost one connect per round of the
        most frequent of them, not one each); the caller joins them at shutdown.
    """
    rare = []
    for service in services:
        if service.interval_s < RELEASE_IDLE_S and not getattr(service, "own_thread", False):
            maintenance.add(WhileClaiming(service, stopping))
        else:
            rare.append(service)
    if not rare:
        return []
    name = " and ".join(service.name for service in rare)
    thread = ServiceRunner(rare, name=name, using=using, stop=stopping).thread()
    thread.start()
    return [thread]


#: Seconds between samples of one worker: two chances per minute, so one worker alone leaves no
#: minute unsampled, and with the pruner on the same runner (services.start_services) a worker
#: process connects for them twice a minute.
SAMPLE_INTERVAL_S = 30.0


class DepthSampler:
    """Record each queue's claimable count and oldest claimable age for the current minute.

    Args:
        using: database alias of the queue.
    """

    name = "depth sampler"
    interval_s = SAMPLE_INTERVAL_S

    def __init__(self, using: str = "default") -> None:
        self.using = using

    def run_once(self) -> int:
        """Sample now; return how many rollup rows were written (0: sampled already).

        Raises:
            DatabaseError: the database is unavailable.
        """
        return get_store(self.using).sample_depth()
