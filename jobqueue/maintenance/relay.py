"""Internal: the outbox relay: move jobs from callers' outbox tables to their queue's database.

Each worker process relays to its own queue database (``runworkers --database``, the relay's
``target``) from every other alias of ``OUTBOX_DATABASES``, on a thread of its own, every
``OUTBOX_RELAY_INTERVAL_SECONDS`` (a full batch is followed at once by the next), and at once
when a source notifies: on PostgreSQL with ``LISTEN_NOTIFY`` the relay LISTENs on each source's
``jobqueue_outbox`` channel (``outbox_put*.sql`` notify it at the caller's commit, the target
alias as payload), on a direct connection of its own per source (``store/notify.py``'s
listener; a pooled source's ``LISTEN_DATABASE``, or none: it polls). The poll stays as the
fallback for a lost listener and for SQLite. One batch:

1. lock up to :data:`RELAY_BATCH` rows in the source's outbox (``SKIP LOCKED``: relays in many
   processes share them), in a bounded transaction of the relay's own on the source;
2. insert their jobs on the target, each under the id drawn at enqueue, and commit there;
3. delete the rows on the source and commit.

A relay killed after 2 and before 3 leaves the rows; the next relay inserts them again and the
ids, taken already, make that a no-op: each job exists once. Killed before 2's commit, nothing
happened. The test hooks ``relay_taken``, ``relay_inserted`` and ``relay_deleted``
(``store.bounded.HOOKS``) stop a relay between the steps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connections

from jobqueue.settings.conf import get_settings
from jobqueue.store import bounded, get_store
from jobqueue.store.interface import OUTBOX_CHANNEL
from jobqueue.store.notify import ReadyListener
from jobqueue.store.pooler import listen_alias

logger = logging.getLogger("jobqueue.relay")

__all__ = ["RELAY_BATCH", "OutboxRelay", "relay_batch"]

#: Outbox rows per relay transaction: one insert statement on the queue database.
RELAY_BATCH = 500
#: Most batches per source in one round, so a round returns promptly (the next one follows).
MAX_BATCHES_PER_ROUND = 20


def relay_batch(source: str, target: str, limit: int = RELAY_BATCH) -> tuple[int, int]:
    """Relay one batch of ``source``'s outbox rows to ``target``.

    Args:
        source: alias of the outbox (a caller's database).
        target: alias of the queue database the rows are for.
        limit: most rows in the batch (>= 1).

    Returns:
        ``(rows relayed and deleted, jobs inserted)``: fewer inserted than relayed are rows
        relayed before (a relay killed before its delete) or whose dedupe key a live job held.

    Raises:
        django.db.DatabaseError: either database failed; what was not deleted is relayed again.
    """
    with bounded.own_transaction(source):
        rows = get_store(source).take_outbox(target, limit)
        if not rows:
            return 0, 0
        bounded.checkpoint("relay_taken", source)
        inserted = get_store(target).insert_relayed(rows)
        bounded.checkpoint("relay_inserted", source)
        get_store(source).delete_outbox([row.id for row in rows])
        bounded.checkpoint("relay_deleted", source)
    return len(rows), inserted


class OutboxRelay:
    """Relay outbox rows for the queue database ``using``: a service on a thread of its own.

    Args:
        using: the queue database alias (the worker's).
        interval_s: seconds between rounds; default ``OUTBOX_RELAY_INTERVAL_SECONDS``.
    """

    name = "outbox relay"
    #: Its own runner thread (``worker.services.start_services``): a slow caller database must
    #: not delay the worker's heartbeats.
    own_thread = True

    def __init__(self, *, using: str, interval_s: float | None = None) -> None:
        self.using = using
        settings = get_settings()
        self.interval_s = (
            settings.outbox_relay_interval_seconds if interval_s is None else interval_s
        )
        self.sources = tuple(a for a in settings.outbox_databases if a != using)
        self._failing: set[str] = set()
        self._listen = settings.listen_notify
        self._woken = threading.Event()
        self._ring: Callable[[], None] | None = None
        #: The listeners, once started (by the first round run under a runner that gave a bell).
        self.listeners: list[ReadyListener] | None = None

    def set_bell(self, ring: Callable[[], None]) -> None:
        """Take the runner's ``ring()``: a source's notification wakes the runner with it."""
        self._ring = ring

    def rung(self) -> bool:
        """Return whether a source notified since the last call (and forget it)."""
        if not self._woken.is_set():
            return False
        self._woken.clear()
        return True

    def _wake(self, delay_s: float) -> None:
        """On a listener's thread: rows for this database were committed on a source."""
        self._woken.set()
        if self._ring is not None:
            self._ring()

    def listen_aliases(self) -> list[str]:
        """Return the aliases the relay LISTENs on: one per PostgreSQL source, never pooled.

        A pooled source is listened to through its ``LISTEN_DATABASE`` (a direct connection to
        the same primary); one without it, and every source with ``LISTEN_NOTIFY`` off or on
        another vendor, is only polled.
        """
        if not self._listen:
            return []
        aliases = []
        for source in self.sources:
            direct = listen_alias(source)
            if direct is not None and connections[source].vendor == "postgresql":
                aliases.append(direct)
        return aliases

    def _start_listeners(self) -> None:
        self.listeners = [
            ReadyListener(
                alias,
                self.using.__eq__,
                self._wake,
                f"jobqueue-relay {self.using} <- {alias}",
                channels=(OUTBOX_CHANNEL,),
            )
            for alias in self.listen_aliases()
        ]
        for listener in self.listeners:
            listener.start()

    def stop(self) -> None:
        """Stop the listeners (the runner calls it once, when the worker stops)."""
        for listener in self.listeners or ():
            listener.stop()

    def run_once(self) -> int:
        """Relay what waits in every source's outbox for this queue database; return the count.

        A source that fails is logged (once until it works again) and skipped this round; the
        others are relayed.

        Raises:
            django.db.DatabaseError: the queue database failed.
        """
        if self.listeners is None and self._ring is not None:
            # On the runner's thread, at its first round: the listeners live as long as it
            # (its stop() ends them). Without a runner's bell nothing would hear them.
            self._start_listeners()
        total = 0
        for source in self.sources:
            try:
                total += self._drain(source)
            except DatabaseError as exc:
                if not self._target_ok():
                    raise
                if source not in self._failing:
                    logger.error("outbox relay from %r: %s; retrying", source, exc)
                self._failing.add(source)
                connections[source].close()
                continue
            if source in self._failing:
                logger.warning("outbox relay from %r works again", source)
                self._failing.discard(source)
        return total

    def _drain(self, source: str) -> int:
        relayed = 0
        for _ in range(MAX_BATCHES_PER_ROUND):
            count, inserted = relay_batch(source, self.using)
            relayed += count
            if count:
                logger.debug(
                    "relayed %d outbox row(s) from %r (%d new jobs)", count, source, inserted
                )
            if count < RELAY_BATCH:
                break
        return relayed

    def _target_ok(self) -> bool:
        """Return whether the queue database's connection is usable (not the one that failed)."""
        connection = connections[self.using]
        return connection.connection is None or connection.is_usable()
