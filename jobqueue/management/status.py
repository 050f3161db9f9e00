"""Internal: ``manage.py jobqueue status``: per queue and queue database, workers, breakers.

Every queue database is reported (``JOBQUEUE["QUEUE_DATABASES"]``) unless ``--database`` names
one. A queue on several databases has a row per database: its ready jobs there wait for workers
there (a worker process serves one database and registers on it), so "unserved" is decided per
database. With one database the output is as it always was; with several, each row, worker and
breaker names its database (a ``DATABASE`` column; ``"database"`` in ``--json``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jobqueue.management import render
from jobqueue.ops.clock import db_now
from jobqueue.ops.queues import (
    OTHER_QUEUES_LABEL,
    QueueStatus,
    live_workers,
    open_breakers,
    paused_types,
    queue_status,
    top_queues,
)
from jobqueue.store.failures import read_only_failure

__all__ = ["status"]


#: How many unserved queues the closing "Unserved:" line names before it counts the rest.
UNSERVED_NAMED = 20


def status(
    aliases: Sequence[str],
    as_json: bool,
    write: Callable[[str], Any],
    *,
    every_queue: bool = False,
) -> bool:
    """Print the status of the queues on ``aliases``; return False if a queue is unserved.

    Past :data:`~jobqueue.ops.queues.TOP_QUEUES` queues on a database, the table lists the
    deepest, the oldest and every unserved queue one by one and sums the rest in one row
    (``_other (N queues)``), as the dashboard and the metrics do (issue 33: a site with a queue
    per customer has thousands); ``every_queue`` lists them all. JSON always lists every queue.

    Args:
        aliases: the queue databases to report, in order.
        as_json: print one JSON document instead of tables.
        write: prints one block of text (the command's ``stdout.write``).
        every_queue: a row for every queue, however many (``--all``).

    Returns:
        True when no queue with ready jobs lacks a live worker (on its database) and no
        database is read-only (a failover: the first lines name it).

    Raises:
        django.db.Error: a database cannot be reached.
    """
    several = len(aliases) > 1
    queues, workers, breakers, types = [], [], [], []
    # A database that turned read-only still answers these reads: say so (issue 32).
    failures = []
    for alias in aliases:
        now = db_now(alias)
        failure = read_only_failure(alias)
        if failure is not None:
            failures.append(failure)
        alive = live_workers(now, alias)
        queues += [(alias, q) for q in queue_status(now, alias, alive)]
        workers += [(alias, w) for w in alive]
        breakers += [(alias, b) for b in open_breakers(alias)]
        types += [(alias, p) for p in paused_types(alias)]
    unserved = [(alias, q) for alias, q in queues if q.unserved]
    if as_json:
        write(
            render.to_json(
                {
                    "databases": list(aliases),
                    "database_failures": [
                        {"database": f.alias, "failure": f.kind, "detail": f.describe()}
                        for f in failures
                    ],
                    "queues": [{**q.as_dict(), "database": a} for a, q in queues],
                    "workers_alive": len(workers),
                    "workers": [
                        {
                            "worker_id": w.worker_id,
                            "host": w.host,
                            "queues": w.queues,
                            "status": w.status,
                            "running_jobs": w.running_jobs,
                            "listener_up": w.listener_up,
                            "database": a,
                        }
                        for a, w in workers
                    ],
                    "breakers_open": [
                        {
                            "dependency": b.name,
                            "state": b.state,
                            "open_until": b.open_until,
                            "database": a,
                        }
                        for a, b in breakers
                    ],
                    "unserved": sorted({q.name for _, q in unserved}),
                    "paused_types": [
                        {
                            "type": p.name,
                            "paused_by": p.paused_by,
                            "paused_at": p.paused_at,
                            "database": a,
                        }
                        for a, p in types
                    ],
                }
            )
        )
        return not unserved and not failures
    for failure in failures:
        write(f"{failure.describe('workers wait, nothing is claimed')}\n")
    rows = [
        [
            *([alias] if several else []),
            q.name,
            q.ready,
            q.scheduled,
            q.leased,
            q.dead,
            q.waiting,
            render.duration(q.lag_s),
            q.succeeded_per_min,
            q.workers,
            render.queue_note(q),
        ]
        for alias, q in (queues if every_queue else _summarised(aliases, queues))
    ]
    headers = [*render.STATUS, ""]  # the last column: paused or unserved
    if several:
        headers.insert(0, "DATABASE")
    write(render.table(headers, rows) if rows else "No queues with jobs.")
    hosts: dict[str, int] = {}
    for alias, w in workers:
        where = f"{w.host} on {alias}" if several else w.host
        hosts[where] = hosts.get(where, 0) + 1
    listed = ", ".join(f"{h}: {n}" for h, n in sorted(hosts.items()))
    write(f"\nWorkers alive: {len(workers)}" + (f" ({listed})" if listed else ""))
    deaf = [w.worker_id for _, w in workers if w.listener_up is False]
    if deaf:
        write(f"Listener down (polling every second): {', '.join(deaf)}")
    names = ", ".join(_on(f"{b.name} ({b.state})", a, several) for a, b in breakers) or "none"
    write(f"Breakers open: {names}")
    for alias, p in types:
        write(
            f"Paused type {_on(p.name, alias, several)}: "
            f"{render.by_since(p.paused_by, p.paused_at)}"
        )
    if unserved:
        named = ", ".join(_on(q.name, a, several) for a, q in unserved[:UNSERVED_NAMED])
        if len(unserved) > UNSERVED_NAMED:
            named += f" and {len(unserved) - UNSERVED_NAMED} more"
        write(
            f"Unserved: {named}: ready jobs "
            "that no live worker serves (start runworkers with --queues naming them)."
        )
    return not unserved and not failures


def _summarised(
    aliases: Sequence[str], queues: list[tuple[str, QueueStatus]]
) -> list[tuple[str, QueueStatus]]:
    """Return the rows to print: per database, the top queues and unserved ones, the rest summed.

    The summed row adds the counts and the rate; its lag is the oldest of the queues it sums;
    its workers column is the most any of them has (a count of workers cannot be added).
    """
    out: list[tuple[str, QueueStatus]] = []
    for alias in aliases:
        mine = [q for a, q in queues if a == alias]
        depth = {q.name: q.ready + q.scheduled + q.leased for q in mine}
        age = {q.name: q.lag_s for q in mine if q.lag_s is not None}
        shown, _ = top_queues(depth, depth, age)
        keep = set(shown) | {q.name for q in mine if q.unserved}
        out += [(alias, q) for q in mine if q.name in keep]
        summed = [q for q in mine if q.name not in keep]
        if summed:
            lags = [q.lag_s for q in summed if q.lag_s is not None]
            out.append(
                (
                    alias,
                    QueueStatus(
                        name=f"{OTHER_QUEUES_LABEL} ({len(summed)} queues)",
                        ready=sum(q.ready for q in summed),
                        scheduled=sum(q.scheduled for q in summed),
                        leased=sum(q.leased for q in summed),
                        dead=sum(q.dead for q in summed),
                        waiting=sum(q.waiting for q in summed),
                        lag_s=max(lags) if lags else None,
                        succeeded_recent=sum(q.succeeded_recent for q in summed),
                        workers=max(q.workers for q in summed),
                    ),
                )
            )
    return out


def _on(text: str, alias: str, several: bool) -> str:
    """Return ``text``, naming ``alias`` when there are several databases."""
    return f"{text} on {alias}" if several else text
