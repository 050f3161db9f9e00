"""Internal: the worker's listener and its health (FIELD-CASES 26).

On PostgreSQL with ``LISTEN_NOTIFY`` the worker listens (``store/notify.py``). This module keeps
what the worker must do about that connection's state:

* while it is down (lost, or not yet open) the claim loop waits at most
  :data:`~jobqueue.store.notify.FAST_POLL_S` between claims, whatever ``POLL_INTERVAL_SECONDS``
  says, and the loss rings the loop at once so it does not finish a long poll wait first;
* the state is written to the worker's row (``Worker.listener_up``, counted in
  ``jobqueue_worker_listeners{state}``, shown in the admin, ``jobqueue status`` and
  ``jobqueue health``) within a
  second by :meth:`ListenerHealth.run_once`, a service of the maintenance runner (on its
  connection: the listener's thread uses none of Django's); a loss is written even when the
  listener is back half a second later, and a write that failed is tried again each second.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from jobqueue.settings.conf import shared_interval_s
from jobqueue.store.notify import FAST_POLL_S, ReadyListener
from jobqueue.worker.handoff import HandedListener

logger = logging.getLogger("jobqueue.worker")


class ListenerHealth:
    """The listener of one worker, its up/down state, and the record of it on the worker's row.

    Args:
        store: the queue's store (``set_listener_up``).
        worker_id: the worker whose row is written.
        using: database alias of the queues.
        enabled: whether the worker listens at all; if not, this does nothing and the worker
            polls every ``POLL_INTERVAL_SECONDS`` (its row's ``listener_up`` stays None).
        handoff_fd: under the supervisor, the read end of this process's pipe from the
            supervisor's relay (``handoff.py``): the worker reads wake-ups there instead of
            LISTENing on a connection of its own. None: it listens itself.
        sharing: how many worker processes share that relay: an idle one polls that many
            times less often while the relay is up (``settings.conf.shared_interval_s``).
    """

    name = "listener-state"
    interval_s = 1.0

    def __init__(
        self,
        store,
        worker_id: str,
        using: str,
        enabled: bool,
        handoff_fd: int | None = None,
        sharing: int = 1,
    ) -> None:
        self.store = store
        self.handoff_fd = handoff_fd
        self.sharing = sharing
        self.worker_id = worker_id
        self.using = using
        self.enabled = enabled
        self._lock = threading.Lock()
        #: Whether the connection is up now (False until the first LISTEN).
        self.up = False
        self._written: bool | None = None
        self._lost = False
        self._wake: Callable[[float], None] = lambda delay_s: None
        #: Called on the listener's thread each time its connection is up again: the worker
        #: wakes its claim loop out of a database backoff (``outage.py``).
        self.on_up: Callable[[], None] = lambda: None
        self.listener: ReadyListener | HandedListener | None = None

    def attach(self, serves: Callable[[str], bool], wake: Callable[[float], None]) -> None:
        """Give the listener the worker's queue filter and the claim loop's ``wake(delay_s)``."""
        self._wake = wake
        if self.enabled and self.handoff_fd is not None:
            self.listener = HandedListener(self.handoff_fd, serves, wake, self._changed)
        elif self.enabled:
            name = f"jobqueue-listener {self.worker_id}"
            self.listener = ReadyListener(self.using, serves, wake, name, self._changed)

    def start(self) -> None:
        """Start the listener's thread (if the worker listens)."""
        if self.listener is not None:
            self.listener.start()

    def stop(self) -> None:
        """Stop the listener's thread."""
        if self.listener is not None:
            self.listener.stop()

    def idle_wait_s(self, poll_interval_s: float) -> float:
        """Return how long the claim loop may wait idle: the poll interval, or less while down.

        A process whose wake-ups come from the supervisor's relay waits longer while the relay
        is up: the processes sharing it poll about once per interval together.
        """
        if not self.enabled:
            return poll_interval_s
        if self.up:
            return shared_interval_s(poll_interval_s, self.sharing if self.handoff_fd else 1)
        return min(poll_interval_s, FAST_POLL_S)

    def _changed(self, up: bool) -> None:
        """On the listener's thread: remember the state (and any loss), poll fast while down."""
        with self._lock:
            self.up = up
            if not up:
                self._lost = True
        if not up:
            # The loop may be inside a long poll wait: claim now, then every FAST_POLL_S.
            self._wake(0.0)
        else:
            self.on_up()

    def run_once(self) -> bool:
        """Write the state to the worker's row if it changed since the last write.

        A loss is written even if the listener is back by now (a 0 first, a 1 at the next
        round), so a reconnect within a second still shows on the row.

        Returns:
            Whether a write was made.

        Raises:
            DatabaseError: the database is unavailable (the next round tries again).
        """
        with self._lock:
            if not self.enabled:
                return False
            if self._lost and self._written is not False:
                value = False
            elif self.up != self._written:
                value = self.up
            else:
                self._lost = False
                return False
        self.store.set_listener_up(self.worker_id, value)
        with self._lock:
            self._written = value
            if not value:
                self._lost = False
        return True
