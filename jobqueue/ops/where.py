"""Internal: which queue databases an operator's read or action covers, and where a job id is.

With queues on several databases (``JOBQUEUE["QUEUE_DATABASES"]``) the reports (``status``,
``health``, the metrics) cover every queue database unless one is named; job ids are per
database (each has its own sequence), so an id given without a database is looked up on every
queue database and an id found on two of them is *ambiguous*: the caller must name one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import connections

from jobqueue.models import Job
from jobqueue.routing import all_queue_aliases

__all__ = ["Located", "UnknownDatabase", "locate", "report_aliases"]


class UnknownDatabase(ValueError):
    """An alias that is not in ``DATABASES``; the message names the queue databases."""


def report_aliases(database: str | None) -> tuple[str, ...]:
    """Return the aliases a report covers: ``database`` alone, else every queue database.

    Args:
        database: an alias of ``DATABASES`` (any: ``--database`` names one as before the
            setting existed), or None for every queue database
            (:func:`jobqueue.routing.all_queue_aliases`).

    Returns:
        One or more aliases, in the setting's order.

    Raises:
        UnknownDatabase: ``database`` is not in ``DATABASES``.
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    if database is None:
        return all_queue_aliases()
    if database not in connections:
        raise UnknownDatabase(
            f"{database!r} is not a database alias (queue databases: "
            f"{', '.join(all_queue_aliases())})"
        )
    return (database,)


@dataclass(kw_only=True)
class Located:
    """Where given job ids are: each found once, on two or more databases, or nowhere."""

    #: alias -> the ids found there only (in the order given).
    found: dict[str, list[int]] = field(default_factory=dict)
    #: id -> the aliases that each hold a job with this id.
    ambiguous: dict[int, list[str]] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)


def locate(ids: Sequence[int], aliases: Iterable[str]) -> Located:
    """Find on which of ``aliases`` each job id is: one indexed read per alias.

    Args:
        ids: job ids.
        aliases: the databases to look on (one: every id is taken as there, unread).

    Returns:
        A :class:`Located`; with one alias every id is "found" there (the action reports a
        missing one itself, as it did before queues could live on several databases).

    Raises:
        django.db.Error: a database cannot be reached.
    """
    aliases = list(aliases)
    if len(aliases) == 1:
        return Located(found={aliases[0]: list(ids)} if ids else {})
    where: dict[int, list[str]] = {}
    for alias in aliases:
        there = Job.objects.using(alias).filter(id__in=list(ids)).values_list("id", flat=True)
        for job_id in there:
            where.setdefault(job_id, []).append(alias)
    located = Located()
    for job_id in ids:
        held = where.get(job_id, [])
        if len(held) > 1:
            located.ambiguous[job_id] = held
        elif held:
            located.found.setdefault(held[0], []).append(job_id)
        else:
            located.missing.append(job_id)
    return located
