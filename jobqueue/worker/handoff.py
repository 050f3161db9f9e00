"""Internal: one listening connection per supervisor, its wake-ups handed to the worker processes.

Under ``runworkers --processes N`` each worker process used to LISTEN on a connection of its own
and poll every ``POLL_INTERVAL_SECONDS``: an idle host cost the primary N listening backends and
N claims a second. Instead the supervisor forks one more process, the *relay*
(:func:`run_relay`), which LISTENs once per database (``store/notify.py``) and writes every
notification to a pipe per worker process; each worker reads its pipe (:class:`HandedListener`,
in place of its own listener) and wakes its claim loop exactly as its own listener would. The
supervisor itself still touches no database.

The pipe carries lines: a notification's payload (``<queue>`` or ``<queue> <seconds>``), or
``+up`` / ``+down``, the relay's listening state, which it repeats every :data:`SAY_UP_EVERY_S`.
A worker that has heard no ``+up`` for :data:`STALE_AFTER_S` (the relay died, or its connection
is lost) counts its listener as down: it polls every second meanwhile (``listening.py``), as a
worker whose own listener is down does, until the relay (restarted by the supervisor) says
``+up`` again; then it claims once, for what was enqueued meanwhile.

While the relay is up, an idle worker process polls every ``POLL_INTERVAL_SECONDS`` times the
number of processes sharing the relay (with jitter, so they do not poll together): the host as
a whole polls about as often as one process did (``ListenerHealth.idle_wait_s``). Polling
is only the safety net there (retries falling due, reaped leases: changes nobody notifies).

A relay write never blocks: a worker that does not read (busy, or being restarted) has a full
pipe, and a line that does not fit is dropped; the lines already in the pipe wake it anyway.

Where nobody can LISTEN (a database behind a transaction pooler without a ``LISTEN_DATABASE``, or
``LISTEN_NOTIFY`` off) the relay polls for the host instead (:class:`Poller`): once per
``POLL_INTERVAL_SECONDS`` it asks whether the workers' queues hold a job (``Store.has_work``, one
index probe per queue) and, when they do, writes a queue's name as a notification would. It
wakes every process when work appears, and one at a time, in turn, while it stays (a job
scheduled for later is work too, and waking every process each second for it would cost the
claims the probe saves). Its ``+up`` means its last probe succeeded. The host then polls once per
interval, not once per process (docs/decisions.md, "One of a host's processes at a time").
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from django.db import DatabaseError, connections

from jobqueue.store import get_store
from jobqueue.store.notify import ReadyListener, wake_for

logger = logging.getLogger("jobqueue.worker")

#: How often the relay repeats its listening state on every pipe, seconds.
SAY_UP_EVERY_S = 1.0
#: How long a worker process trusts the last ``+up`` it read, seconds.
STALE_AFTER_S = 3.5
#: The pipe's lines: the relay's state (a queue name never starts with ``+``).
UP, DOWN = b"+up", b"+down"


class _Forwarder(ReadyListener):
    """A listener whose every notification goes, as a line, to each of ``fds`` (the relay's)."""

    def __init__(self, alias: str, fds: Sequence[int], name: str) -> None:
        super().__init__(alias, lambda queue: True, lambda delay_s: None, name)
        self.fds = list(fds)

    def dispatch(self, payload: str) -> None:
        write_all(self.fds, payload.encode() + b"\n")


def write_all(fds: Sequence[int], line: bytes) -> None:
    """Write ``line`` to each pipe of ``fds`` without blocking; drop it where a pipe is full."""
    for fd in fds:
        try:
            os.write(fd, line)
        except BlockingIOError:
            pass  # that worker has unread lines: they wake it
        except OSError as exc:
            logger.debug("relay: could not write to pipe %d: %s", fd, exc)


class Poller:
    """Where nobody LISTENs: ask once per interval whether ``queues`` hold work; wake ``fds``.

    The same face as :class:`_Forwarder` for :func:`run_relay` (``start``, ``stop``,
    ``connected``, ``fds``); ``connected`` is set while the probes succeed.

    Args:
        alias: the queues' database alias (a pooled one is fine: one short statement a probe).
        fds: the write ends of the pipes of the worker processes it wakes.
        queues: the queues those processes serve (no ``"*"``: it cannot be probed).
        interval_s: seconds between probes (``POLL_INTERVAL_SECONDS``).
        name: the probing thread's name.
    """

    def __init__(
        self, alias: str, fds: Sequence[int], queues: Sequence[str], interval_s: float, name: str
    ) -> None:
        self.alias = alias
        self.fds = list(fds)
        self.queues = list(queues)
        self.interval_s = interval_s
        self.connected = threading.Event()
        self._line = queues[0].encode() + b"\n"  # a queue every one of those processes serves
        self._had_work = False
        self._turn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start probing on a daemon thread."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop probing and wait up to ``timeout`` seconds for the thread to end."""
        self._stop.set()
        self._thread.join(timeout)

    def probe(self) -> None:
        """Ask once; wake the processes as the module says. A database error marks it down."""
        try:
            has_work = get_store(self.alias).has_work(self.queues)
        except DatabaseError as exc:
            if self.connected.is_set():
                logger.warning("relay: cannot poll %r for work: %s", self.alias, exc)
            self.connected.clear()
            # A lost connection is opened afresh at the next probe.
            connections[self.alias].close_if_unusable_or_obsolete()
            return
        self.connected.set()
        if has_work and not self._had_work:
            write_all(self.fds, self._line)  # work appeared: every process claims
        elif has_work:
            write_all([self.fds[self._turn % len(self.fds)]], self._line)
            self._turn += 1
        self._had_work = has_work

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.probe()
                self._stop.wait(self.interval_s)
        finally:
            connections.close_all()


def run_relay(
    fds_by_alias: Mapping[str, Sequence[int]],
    name: str,
    polled: Sequence[tuple[str, Sequence[int], Sequence[str]]] = (),
    poll_interval_s: float = 1.0,
) -> int:
    """Run the relay process: LISTEN on each alias, hand every notification to its pipes.

    Runs until SIGTERM or SIGINT (the supervisor's) or until its parent dies. Call it in the
    forked relay process only.

    Args:
        fds_by_alias: database alias to LISTEN on (PostgreSQL, never through a pooler) ->
            the write ends of the pipes of the worker processes it wakes.
        name: the listening connections' ``application_name`` prefix.
        polled: ``(alias, write ends, queues)`` of the processes whose alias nobody can LISTEN
            on: the relay polls for them (:class:`Poller`).
        poll_interval_s: seconds between two polls of one alias.

    Returns:
        The process exit status, 0.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    listeners: list[_Forwarder | Poller] = [
        _Forwarder(alias, fds, f"{name} {alias}") for alias, fds in fds_by_alias.items()
    ]
    listeners += [
        Poller(alias, fds, queues, poll_interval_s, f"{name} poll {alias}")
        for alias, fds, queues in polled
    ]
    for listener in listeners:
        for fd in listener.fds:
            os.set_blocking(fd, False)
    for listener in listeners:
        listener.start()
    parent = os.getppid()
    try:
        while not stop.is_set() and os.getppid() == parent:
            for listener in listeners:
                write_all(listener.fds, (UP if listener.connected.is_set() else DOWN) + b"\n")
            stop.wait(SAY_UP_EVERY_S)
    finally:
        for listener in listeners:
            listener.stop()
    return 0


class HandedListener:
    """A worker process's listener that reads the relay's pipe instead of LISTENing itself.

    The same face as :class:`~jobqueue.store.notify.ReadyListener` (``start``, ``stop``,
    ``connected``), for ``listening.py``.

    Args:
        fd: the read end of this process's pipe.
        serves: ``serves(queue)``: whether the worker claims from ``queue``.
        wake: the claim loop's ``wake(delay_s)``, called on this listener's thread.
        on_state: ``on_state(up)``, called when the relay's state as heard here changes.
    """

    def __init__(
        self,
        fd: int,
        serves: Callable[[str], bool],
        wake: Callable[[float], None],
        on_state: Callable[[bool], None],
    ) -> None:
        self.fd = fd
        self.serves = serves
        self.wake = wake
        self.on_state = on_state
        self.connected = threading.Event()
        self._heard_at = 0.0
        self._stop = threading.Event()
        self._stop_pipe: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start reading the pipe on a daemon thread."""
        self._stop_pipe = os.pipe()
        self._thread = threading.Thread(target=self._run, name="jobqueue-handoff", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reading and wait up to ``timeout`` seconds for the thread to end."""
        self._stop.set()
        pipe = self._stop_pipe
        if pipe is not None:
            os.write(pipe[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return
        if pipe is not None:
            self._stop_pipe = None
            os.close(pipe[0])
            os.close(pipe[1])

    def _run(self) -> None:
        waits_on = select.poll()
        waits_on.register(self.fd, select.POLLIN)
        if self._stop_pipe is not None:
            waits_on.register(self._stop_pipe[0], select.POLLIN)
        partial = b""
        while not self._stop.is_set():
            ready = waits_on.poll(SAY_UP_EVERY_S * 1000)
            if any(fd == self.fd for fd, _ in ready):
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    chunk = b""
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    self._line(line)
            if self.connected.is_set() and time.monotonic() - self._heard_at > STALE_AFTER_S:
                logger.warning(
                    "the supervisor's listener has been silent for %.1f s; polling every "
                    "second until it is back",
                    STALE_AFTER_S,
                )
                self._set(False)

    def _line(self, line: bytes) -> None:
        if line == UP:
            self._heard_at = time.monotonic()
            if not self.connected.is_set():
                self._set(True)
                # Jobs enqueued while nobody listened sent notifications nobody heard.
                self.wake(0.0)
        elif line == DOWN:
            if self.connected.is_set():
                self._set(False)
        elif line:
            wake_for(line.decode(errors="replace"), self.serves, self.wake)

    def _set(self, up: bool) -> None:
        if up:
            self.connected.set()
        else:
            self.connected.clear()
        try:
            self.on_state(up)
        except Exception:
            logger.exception("hand-off: reporting its state failed")
