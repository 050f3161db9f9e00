"""Internal: the operator verbs of ``manage.py jobqueue`` for cron, workers, breakers, run-now.

``cron`` (``list``, ``enable NAME``, ``disable NAME``, ``run NAME``), ``workers``, ``breakers``
(``list``, ``close NAME``, ``open NAME``) and ``run-now ID...``. Each adds its parser with
:func:`add_verbs` and runs through :data:`VERBS`: ``(write, aliases, options) -> healthy``. They
call the same functions the admin's buttons do (``jobqueue.cron``, ``jobqueue.limits.breakers``,
``jobqueue.ops.repairs.run_now``); every refusal says what to do next.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from jobqueue.cron.entries import set_enabled
from jobqueue.cron.firing import run_now as fire_now
from jobqueue.errors import JobNotFound, JobQueueError
from jobqueue.limits.breakers import close_breaker, open_breaker
from jobqueue.management import render
from jobqueue.management.arguments import job_id_arg, seconds_arg, text_arg
from jobqueue.models import CronEntry, DependencyBreaker
from jobqueue.ops import audit
from jobqueue.ops.audit import operator_name
from jobqueue.ops.clock import db_now
from jobqueue.ops.queues import live_workers
from jobqueue.ops.repairs import run_now as job_run_now

__all__ = ["VERBS", "add_verbs"]

Write = Callable[[str], None]


def add_verbs(verbs: Any, common: argparse.ArgumentParser, reads: argparse.ArgumentParser) -> None:
    """Add the ``cron``, ``workers``, ``breakers`` and ``run-now`` parsers to ``verbs``.

    Args:
        verbs: the command's subparsers.
        common: the parent parser of every verb (Django's global options, ``--database``).
        reads: the parent parser of the read verbs (``common`` and ``--json``).
    """
    cron = verbs.add_parser(
        "cron", parents=[reads], help="cron entries: list, enable NAME, disable NAME, run NAME"
    )
    cron.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "enable", "disable", "run"),
        help="list (default), enable, disable, or run now (enqueue its job at once)",
    )
    cron.add_argument("name", nargs="?", type=text_arg, metavar="NAME", help="the entry's name")
    verbs.add_parser(
        "workers",
        parents=[reads],
        help="live worker processes: host, pid, queues, running jobs, heartbeat, LISTEN",
    )
    breakers = verbs.add_parser(
        "breakers", parents=[reads], help="dependency circuit breakers: list, open NAME, close NAME"
    )
    breakers.add_argument(
        "action", nargs="?", default="list", choices=("list", "open", "close"), help="list"
    )
    breakers.add_argument("name", nargs="?", type=text_arg, metavar="NAME", help="a dependency")
    breakers.add_argument(
        "--seconds",
        type=seconds_arg("--seconds"),
        default=None,
        help="open: how long (default the BREAKER max cool-down), 1..86400",
    )
    breakers.add_argument("--reason", type=text_arg, default="", help="why, for the record")
    run = verbs.add_parser(
        "run-now",
        parents=[reads],
        help="make scheduled (delayed or retrying) jobs ready now, by id",
    )
    run.add_argument("ids", nargs="+", type=job_id_arg, metavar="ID", help="job ids")


def _one_alias(aliases: tuple[str, ...], what: str) -> str:
    if len(aliases) > 1:
        raise CommandError(
            f"{what} lives on one database: name it with --database ({', '.join(aliases)})",
            returncode=2,
        )
    return aliases[0]


def _named(options: dict[str, Any], what: str) -> str:
    if not options["name"]:
        raise CommandError(
            f"{options['action']} needs the {what}'s name: manage.py jobqueue "
            f"{options['verb']} {options['action']} NAME ({options['verb']} lists them)",
            returncode=2,
        )
    return str(options["name"])


def cron(write: Write, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
    """List cron entries, or enable, disable or run one by name."""
    action = options["action"]
    if action == "list":
        rows = []
        for alias in aliases:
            for e in CronEntry.objects.using(alias).order_by("name"):
                rows.append(
                    {
                        "name": e.name,
                        "schedule": e.cron_expr,
                        "timezone": e.timezone,
                        "queue": e.queue,
                        "type": e.job_type,
                        "enabled": e.enabled,
                        "next_fire_at": e.next_fire_at,
                        "last_fired_at": e.last_fired_at,
                        **({"database": alias} if len(aliases) > 1 else {}),
                    }
                )
        if options["json"]:
            write(render.to_json(rows))
        elif not rows:
            write("No cron entries. Add them with JOBQUEUE['CRON'] or jobqueue.schedule().")
        else:
            write(
                render.table(
                    ["NAME", "SCHEDULE", "QUEUE", "TYPE", "ENABLED", "NEXT (UTC)", "LAST (UTC)"],
                    [
                        [
                            r["name"],
                            f"{r['schedule']} {r['timezone']}",
                            r["queue"],
                            r["type"],
                            r["enabled"],
                            _utc(r["next_fire_at"]),
                            _utc(r["last_fired_at"]) if r["last_fired_at"] else "never",
                        ]
                        for r in rows
                    ],
                )
            )
        return True
    name = _named(options, "entry")
    alias = _one_alias(aliases, "a cron entry")
    entry = CronEntry.objects.using(alias).filter(name=name).first()
    if entry is None:
        raise CommandError(
            f"no cron entry named {name!r} on database {alias!r}; manage.py jobqueue cron lists "
            "them"
        )
    if action == "run":
        job_id = fire_now(entry, fired_by=operator_name(), using=alias)
        write(f"Enqueued job {job_id} for cron entry {name} (its schedule is unchanged).")
        return True
    changed = set_enabled([entry.id], action == "enable", using=alias)
    past = "Enabled" if action == "enable" else "Disabled"
    if changed:
        write(f"{past} cron entry {name}.")
    else:
        write(f"Cron entry {name} was already {past.lower()}; unchanged.")
    return True


def workers(write: Write, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
    """List the live worker processes of every queue database."""
    rows: list[dict[str, Any]] = []
    for alias in aliases:
        now = db_now(alias)
        for w in live_workers(now, alias):
            rows.append(
                {
                    "worker_id": w.worker_id,
                    "host": w.host,
                    "pid": w.pid,
                    "queues": list(w.queues or []),
                    "concurrency": w.concurrency,
                    "running_jobs": w.running_jobs,
                    "status": w.status,
                    "listener_up": w.listener_up,
                    "last_seen_s": round((now - w.last_seen_at).total_seconds(), 1),
                    "started_at": w.started_at,
                    **({"database": alias} if len(aliases) > 1 else {}),
                }
            )
    if options["json"]:
        write(render.to_json(rows))
        return True
    if not rows:
        write("No live worker. Start them with manage.py runworkers (see --help).")
        return True
    write(
        render.table(
            ["WORKER", "HOST", "PID", "QUEUES", "RUNNING", "STATUS", "LISTEN", "SEEN"],
            [
                [
                    r["worker_id"],
                    r["host"],
                    r["pid"],
                    ",".join(map(str, r["queues"])),
                    f"{r['running_jobs']}/{r['concurrency']}",
                    r["status"],
                    "-" if r["listener_up"] is None else ("up" if r["listener_up"] else "DOWN"),
                    f"{r['last_seen_s']:.0f} s ago",
                ]
                for r in rows
            ],
        )
    )
    return True


def breakers(write: Write, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
    """List the dependency breakers, or open or close one by name."""
    action = options["action"]
    if action == "list":
        rows = []
        for alias in aliases:
            for b in DependencyBreaker.objects.using(alias).order_by("name"):
                rows.append(
                    {
                        "dependency": b.name,
                        "state": b.state,
                        "open_until": b.open_until,
                        "failures": b.failures,
                        "successes": b.successes,
                        "reason": b.reason,
                        **({"database": alias} if len(aliases) > 1 else {}),
                    }
                )
        if options["json"]:
            write(render.to_json(rows))
        elif not rows:
            write("No breaker has tripped: every dependency is closed (healthy).")
        else:
            write(
                render.table(
                    ["DEPENDENCY", "STATE", "OPEN UNTIL (UTC)", "FAILURES", "REASON"],
                    [
                        [
                            r["dependency"],
                            r["state"],
                            _utc(r["open_until"]),
                            r["failures"],
                            r["reason"],
                        ]
                        for r in rows
                    ],
                )
            )
        return True
    name = _named(options, "dependency")
    alias = _one_alias(aliases, "a breaker")
    try:
        if action == "open":
            reason = options["reason"] or f"opened by {operator_name()} (manage.py jobqueue)"
            until = open_breaker(name, options["seconds"], reason=reason, using=alias)
            write(f"Opened the breaker of {name} until {_utc(until)} UTC; its jobs are held back.")
        elif close_breaker(name, reason=options["reason"], using=alias):
            write(f"Closed the breaker of {name}; its held-back jobs are ready now.")
        else:
            write(f"{name} has no breaker row: it never tripped, so it is closed; unchanged.")
    except (ValueError, JobQueueError) as exc:
        raise CommandError(str(exc), returncode=2) from None
    return True


def run_now(write: Write, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
    """Make the named scheduled jobs ready now (``jobqueue.run_now``)."""
    alias = _one_alias(aliases, "a job id")
    by = audit.resolve(operator_name())
    done: list[int] = []
    skipped: list[int] = []
    missing: list[int] = []
    for job_id in options["ids"]:
        try:
            (done if job_run_now(job_id, by=by, using=alias) else skipped).append(job_id)
        except JobNotFound:
            missing.append(job_id)
    if options["json"]:
        write(render.to_json({"ready": done, "skipped": skipped, "missing": missing}))
    else:
        write(f"Made {len(done)} job(s) ready now.")
        for job_id in skipped:
            write(
                f"  skipped {job_id}: not scheduled (only a delayed or retrying job can run "
                f"now; manage.py jobqueue show {job_id} says its state)"
            )
        for job_id in missing:
            write(f"  not found: {job_id} (manage.py jobqueue jobs lists the jobs)")
    return not skipped and not missing


def _utc(value: Any) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


#: The verbs of this module, by name: ``(write, aliases, options) -> healthy``.
VERBS: dict[str, Callable[[Write, tuple[str, ...], dict[str, Any]], bool]] = {
    "cron": cron,
    "workers": workers,
    "breakers": breakers,
    "run-now": run_now,
}
