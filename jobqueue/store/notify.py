"""Internal: the PostgreSQL side of wake-ups. A thread that LISTENs and wakes a worker's claim loop.

Enqueue needs nothing from here: migration 0006_notify's trigger sends
``pg_notify('jobqueue_ready', <queue>)`` once per statement and queue (PostgreSQL delivers it at
commit), and the statements that make existing jobs ready (release, retry, run now) send the same.

The listener holds its own psycopg connection, outside Django's connection handling: it sits
idle in LISTEN for hours, which Django's per-thread connections (closed and reopened around
requests and ``CONN_MAX_AGE``) are not built for. If the connection drops (a database restart,
``pg_terminate_backend``, a failover) it says so at once (``on_state(False)``: the worker logs it,
records it on its row and polls every second meanwhile), reconnects with backoff, LISTENs again
on every channel it listened on, says so (``on_state(True)``) and wakes the worker once, for
whatever was enqueued while it was deaf (FIELD-CASES 26).
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections

from jobqueue.store.interface import NOTIFY_CHANNEL

logger = logging.getLogger("jobqueue.worker")

#: Longest wait between attempts to re-open a dropped listening connection, seconds.
MAX_RECONNECT_DELAY_S = 10.0
#: How often an idle listening connection is checked (a repeated LISTEN), seconds: a connection
#: cut without a TCP reset (a failover behind a load balancer) shows up within about this long
#: (FIELD-CASES 26: within 5 s). One trivial statement per worker process every few seconds.
PING_INTERVAL_S = 4.0
#: Longest a notification wait blocks before the ping is looked at, seconds (a stop ends it at
#: once: it wakes the wait through a pipe).
STOP_CHECK_S = 0.5
#: Longest idle wait of a worker whose listener is down, seconds: it claims at least this often
#: whatever ``POLL_INTERVAL_SECONDS`` says (FIELD-CASES 26).
FAST_POLL_S = 1.0


def listen_connection_params(alias: str) -> dict[str, Any]:
    """Return psycopg connection arguments for database ``alias``, without Django's extras.

    Raises:
        django.core.exceptions.ImproperlyConfigured: the alias is not usable PostgreSQL.
    """
    params = dict(connections[alias].get_connection_params())
    # Django's cursor class and type adapters are for its own connections; ours only LISTENs,
    # under its own application_name (an OPTIONS one would be passed twice: a TypeError).
    for key in ("cursor_factory", "context", "prepare_threshold", "application_name"):
        params.pop(key, None)
    return params


def wake_for(payload: str, serves: Callable[[str], bool], wake: Callable[[float], None]) -> None:
    """Call ``wake(delay_s)`` for a ready-channel payload of a queue that ``serves`` accepts.

    Args:
        payload: ``"<queue>"`` (ready now) or ``"<queue> <seconds>"`` (delayed jobs due then).
        serves: ``serves(queue)``: whether the worker claims from that queue.
        wake: the claim loop's ``wake(delay_s)``.
    """
    queue, _, due = payload.partition(" ")
    if serves(queue):
        try:
            wake(float(due) if due else 0.0)
        except ValueError:
            wake(0.0)  # not ours to judge: claim, which costs little


class ReadyListener:
    """LISTEN on the ready channel and call ``wake(delay_s)`` for the worker's queues.

    A notification's payload is ``"<queue>"`` (jobs are ready now: ``wake(0.0)``) or
    ``"<queue> <seconds>"`` (delayed jobs: the earliest is due in that many seconds).

    Args:
        alias: database alias of the queues (PostgreSQL).
        serves: ``serves(queue)``: whether the worker claims from ``queue`` (with ``*``, every
            queue but the excluded ones); notifications for other queues are ignored.
        wake: ``wake(delay_s)``, called on the listener's thread; must be cheap and thread-safe.
        name: the connection's ``application_name`` (shown in ``pg_stat_activity``).
        on_state: ``on_state(up)``, called on the listener's thread when it has LISTENed on
            every channel (True) and when its connection is lost or cannot be opened (False).
        channels: the channels to LISTEN on, each again after every reconnect.
    """

    def __init__(
        self,
        alias: str,
        serves: Callable[[str], bool],
        wake: Callable[[float], None],
        name: str,
        on_state: Callable[[bool], None] | None = None,
        channels: tuple[str, ...] = (NOTIFY_CHANNEL,),
    ) -> None:
        self.alias = alias
        self.serves = serves
        self.wake = wake
        self.on_state = on_state
        self.channels = channels
        self.name = name[:63]  # PostgreSQL truncates application_name to 63 bytes
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0
        # A pipe the notification wait also watches: stop() writes to it, so the thread ends
        # at once instead of at the end of its wait (a worker's exit waited for it: half a
        # second of every start and exit, docs/performance.md). Made by start().
        self._stop_pipe: tuple[int, int] | None = None

    def start(self) -> None:
        """Start listening on a daemon thread."""
        self._stop_pipe = os.pipe()
        self._thread = threading.Thread(target=self._run, name="jobqueue-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and wait up to ``timeout`` seconds for the thread to end."""
        self._stop.set()
        pipe = self._stop_pipe
        if pipe is not None:
            os.write(pipe[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return  # it may still poll the pipe: leave it open
        if pipe is not None:
            self._stop_pipe = None
            os.close(pipe[0])
            os.close(pipe[1])

    def dispatch(self, payload: str) -> None:
        """Act on one notification's payload (on the listener's thread): wake if it is ours."""
        wake_for(payload, self.serves, self.wake)

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                params = listen_connection_params(self.alias)
                with psycopg.connect(**params, autocommit=True, application_name=self.name) as conn:
                    for channel in self.channels:
                        conn.execute(f"LISTEN {channel}")
                    self._listening()
                    delay = 0.5
                    self._serve(conn)
            except psycopg.Error as exc:
                self.connected.clear()
                self._failures += 1
                if self._failures == 1:
                    logger.warning(
                        "listener: connection lost (%s); polling every %.0f s until it is back",
                        exc,
                        FAST_POLL_S,
                    )
                    self._tell(False)
                else:
                    logger.debug("listener: still no connection (%d): %s", self._failures, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, MAX_RECONNECT_DELAY_S)
        self.connected.clear()

    def _listening(self) -> None:
        if self._failures:
            logger.warning("listener: listening again after %d failure(s)", self._failures)
            self._failures = 0
        self.connected.set()
        self._tell(True)
        # Jobs enqueued while we were not listening sent notifications nobody heard.
        self.wake(0.0)

    def _tell(self, up: bool) -> None:
        if self.on_state is None:
            return
        try:
            self.on_state(up)
        except Exception:
            # Reporting must never stop the listening itself.
            logger.exception("listener: reporting its state failed")

    def _serve(self, conn: Any) -> None:
        last_ping = time.monotonic()
        # poll(), not select(): select() refuses a descriptor numbered 1024 or more, which a
        # worker whose handlers keep many files or sockets open reaches.
        waits_on = select.poll()
        waits_on.register(conn.fileno(), select.POLLIN)
        if self._stop_pipe is not None:
            waits_on.register(self._stop_pipe[0], select.POLLIN)
        while not self._stop.is_set():
            # What arrived, without waiting: also what came in during the ping's LISTEN (which
            # psycopg keeps aside, with the socket then read already).
            for notify in conn.notifies(timeout=0.0):
                self.dispatch(notify.payload)
            if time.monotonic() - last_ping >= PING_INTERVAL_S:
                # The ping is a LISTEN again (a no-op on a channel already listened on): a
                # round trip that also keeps pg_stat_activity showing what this backend is for.
                for channel in self.channels:
                    conn.execute(f"LISTEN {channel}")
                last_ping = time.monotonic()
                continue
            # Until a notification comes, a stop is asked for (the pipe), or the ping is due.
            waits_on.poll(STOP_CHECK_S * 1000)
