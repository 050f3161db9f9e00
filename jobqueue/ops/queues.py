"""Internal: per-queue status for the CLI and metrics: depth, lag, throughput, who serves it.

"Ready" counts the jobs claimable now (state ready, or scheduled with ``run_at`` come: storage
skips that promotion) and "scheduled" those whose ``run_at`` is still ahead, as the dashboard
does; both come from one index-only pass over the claim index. Lag is the age of the oldest
claimable job by its ``run_at``, so a job delayed into the future never looks like a backlog, and
it is None (not a stale age) when nothing is claimable.

A queue is *unserved* when it has ready jobs and no live, running (not draining) worker lists it
among its queues (or serves every queue, ``*``, without excluding it): the jobs wait for a worker
that does not exist, and ``waiting_s`` says for how long (the lag). A *paused* queue's jobs wait on
purpose: it is never unserved, and its row says who paused it and since when.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q

from jobqueue.limits.fairness import rate_limits
from jobqueue.models import CronEntry, DependencyBreaker, Job, Pause, Worker
from jobqueue.registry import registry
from jobqueue.routing import queue_aliases
from jobqueue.settings.conf import get_settings
from jobqueue.settings.queues import EVERY_QUEUE, serves
from jobqueue.states import CLAIMABLE, JobState
from jobqueue.store import get_store
from jobqueue.store.plan import ConcurrencyLimits

#: The window of the succeeded rate, seconds.
RATE_WINDOW_SECONDS = 300
#: Queues shown one by one by the dashboard, the metrics and ``jobqueue status`` (without
#: ``--all``): the TOP_QUEUES deepest and the TOP_QUEUES with the oldest claimable job (so at most
#: twice as many); the rest are summed into one row ("N other queues", ``queue="_other"``).
#: Queue names come from enqueue, so a site deriving them from its data reaches thousands (issue
#: 33: 10,000 queues made the dashboard 17 MB and the metrics 90,019 samples). Tests lower it.
TOP_QUEUES = 50
#: The ``queue`` label of the metrics' row summing the queues not shown one by one.
OTHER_QUEUES_LABEL = "_other"


def top_queues(
    names: Iterable[str],
    depth: Mapping[str, float],
    age: Mapping[str, float],
    top: int | None = None,
) -> tuple[list[str], list[str]]:
    """Split queues into those shown one by one and the rest (issue 33).

    Args:
        names: every queue.
        depth: jobs per queue (missing: 0); the ``top`` deepest are shown.
        age: age of each queue's oldest claimable job, seconds (missing: none); the ``top``
            oldest are shown too.
        top: how many of each (default :data:`TOP_QUEUES`, read at call time).

    Returns:
        ``(shown, rest)``, each sorted by name; ``rest`` is empty when there are at most
        ``top`` queues.
    """
    top = TOP_QUEUES if top is None else top
    every = sorted(set(names))
    if len(every) <= top:
        return every, []
    deepest = sorted(every, key=lambda q: (-depth.get(q, 0), q))[:top]
    oldest = sorted((q for q in every if q in age), key=lambda q: (-age[q], q))[:top]
    shown = set(deepest) | set(oldest)
    return sorted(shown), [q for q in every if q not in shown]


@dataclass(kw_only=True)
class QueueStatus:
    """One queue as the operator tools show it. Counts are exact; ages are seconds."""

    name: str
    ready: int = 0
    scheduled: int = 0
    leased: int = 0
    dead: int = 0
    #: Jobs waiting for parent jobs (``after=``): not claimable until those succeed.
    waiting: int = 0
    #: Age of the oldest claimable job (run_at come), None when nothing is claimable.
    lag_s: float | None = None
    #: Jobs of this queue that succeeded in the last RATE_WINDOW_SECONDS.
    succeeded_recent: int = 0
    #: Live running workers that list this queue.
    workers: int = 0
    #: Who paused the queue and when (aware), both None when it is not paused.
    paused_by: str | None = None
    paused_at: datetime | None = None

    @property
    def paused(self) -> bool:
        """Return True if the queue is paused (workers claim none of its jobs)."""
        return self.paused_at is not None

    @property
    def unserved(self) -> bool:
        """Return True if ready jobs wait, the queue is not paused, and no live worker serves it."""
        return self.ready > 0 and self.workers == 0 and not self.paused

    @property
    def succeeded_per_min(self) -> float:
        """Return the succeeded rate over the last RATE_WINDOW_SECONDS, per minute."""
        return self.succeeded_recent * 60 / RATE_WINDOW_SECONDS

    def as_dict(self) -> dict[str, Any]:
        """Return the row for ``--json``."""
        return {
            "queue": self.name,
            "ready": self.ready,
            "scheduled": self.scheduled,
            "leased": self.leased,
            "dead": self.dead,
            "waiting": self.waiting,
            "lag_seconds": self.lag_s,
            "succeeded_5m": self.succeeded_recent,
            "succeeded_per_min": self.succeeded_per_min,
            "workers": self.workers,
            "paused": self.paused,
            "paused_by": self.paused_by,
            "paused_at": self.paused_at,
            "unserved": self.unserved,
            "waiting_seconds": self.lag_s if self.unserved else None,
        }


def live_workers(now: datetime, using: str = "default") -> list[Worker]:
    """Return the workers that heartbeated within three of their intervals of ``now``.

    The Worker table holds one row per process (stale rows are pruned), so this reads a few
    rows; liveness is decided here, against ``now``, as ``Worker.is_alive`` decides it.
    """
    rows = Worker.objects.using(using).order_by("host", "pid")
    return [
        w for w in rows if now - w.last_seen_at <= timedelta(seconds=3 * w.heartbeat_interval_s)
    ]


def served_queues(workers: list[Worker], names: Iterable[str] = ()) -> dict[str, int]:
    """Return queue name -> how many of ``workers`` claim from it (draining ones do not).

    Args:
        workers: Worker rows.
        names: queues to count a ``*`` worker for (it serves every queue but the excluded).

    Returns:
        The queues the workers name, and those of ``names`` some ``*`` worker serves.
    """
    served: dict[str, int] = {}
    for worker in workers:
        if worker.status != "running":
            continue
        listed = [name for name in worker.queues or [] if isinstance(name, str)]
        named = {name for name in listed if name != EVERY_QUEUE and not name.startswith("!")}
        for name in named | {name for name in names if serves(listed, name)}:
            served[name] = served.get(name, 0) + 1
    return served


#: Most cron entries whose queues :func:`declared_queues` reads (the table is small).
MAX_CRON_QUEUES = 1000


def declared_queues(using: str = "default") -> set[str]:
    """Return the queues declared to live on ``using``, jobs or not.

    A queue is declared by ``JOBQUEUE["QUEUES"]`` (the queues workers serve by default), by a
    job type registered in this process (its ``@job(queue=)``), or by a cron entry on
    ``using``. The metrics report such a queue (0 when it holds no jobs) so its series does not
    vanish when it goes idle; only those that ``JOBQUEUE["QUEUE_DATABASES"]`` routes to
    ``using`` (a cron entry's row is there already).

    Args:
        using: database alias of the queue.

    Returns:
        The queue names.
    """
    named = set(get_settings().queues) | {t.queue for t in registry().values()}
    routed = {name for name in named if using in queue_aliases(name)}
    entries = CronEntry.objects.using(using).order_by().values_list("queue", flat=True)
    return routed | set(entries.distinct()[:MAX_CRON_QUEUES])


def paused_types(using: str = "default") -> list[Pause]:
    """Return the paused job types, by name (a handful of rows)."""
    return list(Pause.objects.using(using).filter(kind="type").order_by("name"))


def open_breakers(using: str = "default") -> list[DependencyBreaker]:
    """Return the breakers that are open or half-open, by name (bounded: at most 200)."""
    rows = DependencyBreaker.objects.using(using).exclude(state="closed").order_by("name")
    return list(rows[:200])


def queue_status(
    now: datetime, using: str = "default", workers: list[Worker] | None = None
) -> list[QueueStatus]:
    """Return one :class:`QueueStatus` per queue with live, waiting or dead jobs or a live worker.

    Args:
        now: the instant ages and the rate window are measured from (the database clock).
        using: database alias of the queue.
        workers: :func:`live_workers` output, if the caller has it already.

    Returns:
        The queues sorted by name.
    """
    if workers is None:
        workers = live_workers(now, using)
    jobs = Job.objects.using(using)
    queues: dict[str, QueueStatus] = {}

    def row(name: str) -> QueueStatus:
        if name not in queues:
            queues[name] = QueueStatus(name=name)
        return queues[name]

    due = Q(run_at__lte=now)
    r: Mapping[str, Any]
    # Every column here is in the claim index: an index-only scan of the claimable rows.
    for r in (
        jobs.filter(state__in=sorted(CLAIMABLE))
        .values("queue")
        .annotate(n=Count("id"), due=Count("id", filter=due), oldest=Min("run_at", filter=due))
        .order_by()
    ):
        status = row(r["queue"])
        status.ready, status.scheduled = r["due"], r["n"] - r["due"]
        if r["oldest"] is not None:
            status.lag_s = max((now - r["oldest"]).total_seconds(), 0.0)
    # Leased rows only (the running index); as many as the workers' slots.
    for r in jobs.filter(state=JobState.LEASED).values("queue").annotate(n=Count("id")).order_by():
        row(r["queue"]).leased = r["n"]
    # The dead index (type, queue): index-only.
    for r in jobs.filter(state=JobState.DEAD).values("queue").annotate(n=Count("*")).order_by():
        row(r["queue"]).dead = r["n"]
    # The waiting index (queue): index-only.
    for r in jobs.filter(state=JobState.WAITING).values("queue").annotate(n=Count("*")).order_by():
        row(r["queue"]).waiting = r["n"]
    # A range of the finished index: the last five minutes of successes.
    since = now - timedelta(seconds=RATE_WINDOW_SECONDS)
    for r in (
        jobs.filter(state=JobState.SUCCEEDED, finished_at__gte=since)
        .values("queue")
        .annotate(n=Count("id"))
        .order_by()
    ):
        row(r["queue"]).succeeded_recent = r["n"]
    for name, count in served_queues(workers, list(queues)).items():
        row(name).workers = count
    for pause in Pause.objects.using(using).filter(kind="queue"):
        status = row(pause.name)
        status.paused_by, status.paused_at = pause.paused_by, pause.paused_at
    return sorted(queues.values(), key=lambda s: s.name)


def concurrency_rows(using: str, limit: int) -> list[tuple[str, int, int | None]]:
    """Return ``(key, running, limit)`` of the concurrency keys running the most.

    ``limit`` is the setting's (``JOBQUEUE["CONCURRENCY_LIMITS"]``), else the one the key's
    running jobs were enqueued with. One read of the leased rows (a partial index).

    Args:
        using: database alias of the queue.
        limit: most keys returned.

    Returns:
        ``(key, running jobs, limit or None)`` per key, the busiest first.
    """
    limits = ConcurrencyLimits(overrides=get_settings().concurrency_limits)
    keys = get_store(using).concurrency_gauges(limit)
    return [(key, n, limits.limit_of(key, stored)) for key, n, stored in keys]


def rate_limit_rows(using: str) -> list[Any]:
    """Return the rate limiters in force on ``using`` and their buckets' state now.

    Args:
        using: database alias of the queue.

    Returns:
        The store's ``rate_limit_rows`` for this process's rate limits (settings and ``@job``).
    """
    return list(get_store(using).rate_limit_rows(rate_limits()))
