"""Internal: the health check behind ``manage.py jobqueue health`` (Kubernetes exec probe, systemd).

Three bounded reads: the database answers; this host's workers are alive and making progress (a
heartbeat within their silence limit: the heartbeat runs beside the claim loop and stops with it)
and none has lost its LISTEN connection (FIELD-CASES 26; from the same rows); the scheduler fires
(no enabled cron entry is overdue by more than the limit, which catches both a missing leader and
a leader that holds the lease but fires nothing). The cron check passes when there are no
enabled entries. With queues on several databases each is checked (:func:`check_all`). The
outbox relay keeps up (no caller database's outbox holds a job for this
queue database older than a minute: ``jobqueue.ops.outbox``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connections

from jobqueue.models import CronEntry, LeaderLease, Worker
from jobqueue.ops.clock import db_now
from jobqueue.ops.outbox import lag_check as outbox_lag
from jobqueue.store.failures import Failure, classify, read_only_failure

#: Default for ``--cron-max-delay``: how late an enabled entry's next fire may be, seconds.
DEFAULT_CRON_MAX_DELAY_SECONDS = 120.0
#: Range of ``--cron-max-delay`` and ``--max-silence``, seconds.
THRESHOLD_RANGE_SECONDS = (1.0, 86400.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One check's verdict: ``ok``, and a sentence for people."""

    name: str
    ok: bool
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    #: The queue database it checked (set by :func:`check_all`).
    database: str = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """Every check; healthy when all passed."""

    checks: tuple[Check, ...]

    @property
    def healthy(self) -> bool:
        """Return True if every check passed."""
        return all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        """Return the verdict for ``--json``."""
        return {
            "healthy": self.healthy,
            "checks": [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "database": c.database, **c.data}
                for c in self.checks
            ],
        }


def check(
    *,
    using: str = "default",
    host: str | None = None,
    max_silence_s: float | None = None,
    cron_max_delay_s: float = DEFAULT_CRON_MAX_DELAY_SECONDS,
) -> Health:
    """Run the checks and return the verdict.

    Args:
        using: database alias of the queue.
        host: the host whose workers must be alive (default: this one, ``socket.gethostname()``,
            the name each worker records).
        max_silence_s: seconds without a heartbeat after which a worker counts as dead
            (default: three of the worker's own heartbeat intervals).
        cron_max_delay_s: seconds an enabled cron entry may be overdue.

    Returns:
        A :class:`Health`; an unreachable database is a failed check, not an exception.
    """
    host = host or socket.gethostname()
    started = time.perf_counter()
    try:
        connections[using].ensure_connection()
        now = db_now(using)
        read_only = read_only_failure(using)
    except DatabaseError as exc:
        return Health(checks=(_failed(classify(exc, using)),))
    elapsed_ms = (time.perf_counter() - started) * 1000
    if read_only is not None:
        # It answers reads, so the checks below still say what they can; workers wait.
        database = _failed(read_only, f"reachable ({elapsed_ms:.0f} ms) but ")
    else:
        database = Check(
            name="database",
            ok=True,
            detail=f"reachable ({elapsed_ms:.0f} ms)",
            data={"latency_ms": round(elapsed_ms, 1)},
        )
    try:
        workers = _workers(using, host, now, max_silence_s)
        ok, detail, data = outbox_lag(using)
        relay = Check(name="outbox", ok=ok, detail=detail, data=data)
        scheduler = _scheduler(using, now, cron_max_delay_s)
    except DatabaseError as exc:
        # Not migrated, a privilege revoked, a connection lost meanwhile: the one check says so.
        return Health(checks=(_failed(classify(exc, using)),))
    return Health(checks=(database, workers, _listeners(workers), scheduler, relay))


def _failed(failure: Failure, prefix: str = "") -> Check:
    """Return the failed database check naming ``failure``'s kind (``jobqueue.store.failures``)."""
    return Check(
        name="database",
        ok=False,
        detail=f"{prefix}{failure.short}: {failure.message}",
        data={"failure": failure.kind, "sqlstate": failure.sqlstate},
    )


def check_all(aliases: Sequence[str], **limits: Any) -> Health:
    """Run :func:`check` on each queue database; healthy when every check of every one passed.

    A worker process serves one database and heartbeats there, so each database's workers,
    listeners, scheduler and relay are checked on it.

    Args:
        aliases: the queue databases (``jobqueue.routing.all_queue_aliases``, or one).
        **limits: :func:`check`'s ``host``, ``max_silence_s`` and ``cron_max_delay_s``.

    Returns:
        Every database's checks, each naming its database (``Check.database``), in order.
    """
    checks = [
        replace(c, database=alias) for alias in aliases for c in check(using=alias, **limits).checks
    ]
    return Health(checks=tuple(checks))


def _workers(using: str, host: str, now: Any, max_silence_s: float | None) -> Check:
    rows = list(Worker.objects.using(using).filter(host=host).order_by("pid")[:1000])
    alive = []
    for worker in rows:
        limit = max_silence_s if max_silence_s is not None else 3 * worker.heartbeat_interval_s
        if (now - worker.last_seen_at).total_seconds() <= limit:
            alive.append(worker)
    data = {
        "host": host,
        "alive": len(alive),
        "silent": len(rows) - len(alive),
        "workers": [w.worker_id for w in alive],
        "listener_down": [w.worker_id for w in alive if w.listener_up is False],
    }
    if not alive:
        why = f"{len(rows)} silent" if rows else "none registered"
        return Check(
            name="workers", ok=False, detail=f"no live worker on {host} ({why})", data=data
        )
    silent = f", {len(rows) - len(alive)} silent" if len(rows) > len(alive) else ""
    return Check(name="workers", ok=True, detail=f"{len(alive)} alive on {host}{silent}", data=data)


def _listeners(workers: Check) -> Check:
    """Fail while a live worker of this host has lost its LISTEN connection (FIELD-CASES 26).

    Read from the rows ``_workers`` already read: no statement of its own.
    """
    down = workers.data.get("listener_down", [])
    if down:
        return Check(
            name="listener",
            ok=False,
            detail=f"listener down (polling every second) on {', '.join(down)}",
            data={"listener_down": down},
        )
    return Check(name="listener", ok=True, detail="up (or not used)", data={"listener_down": []})


def _scheduler(using: str, now: Any, max_delay_s: float) -> Check:
    entries = CronEntry.objects.using(using).filter(enabled=True)
    if not entries.exists():
        return Check(name="scheduler", ok=True, detail="no enabled cron entries")
    # The due index (next_fire_at WHERE enabled): the most overdue entry, if any.
    late = (
        entries.filter(next_fire_at__lt=now - timedelta(seconds=max_delay_s))
        .order_by("next_fire_at")
        .first()
    )
    lease = LeaderLease.objects.using(using).order_by("-expires_at").first()
    leader = lease.holder if lease is not None and lease.expires_at > now else None
    data: dict[str, Any] = {"leader": leader}
    if late is not None:
        overdue = (now - late.next_fire_at).total_seconds() if late.next_fire_at else 0.0
        data.update({"overdue_entry": late.name, "overdue_seconds": round(overdue, 1)})
        who = f"leader {leader}" if leader else "no leader"
        return Check(
            name="scheduler",
            ok=False,
            detail=f"cron entry {late.name!r} is {overdue:.0f} s overdue ({who})",
            data=data,
        )
    detail = f"leader {leader}, no entry overdue" if leader else "no entry overdue"
    return Check(name="scheduler", ok=True, detail=detail, data=data)
