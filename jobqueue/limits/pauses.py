"""Pause and resume a queue or a job type: ``jobqueue.pause("emails", by="ops")``.

A pause stops every claim, on every worker and host, from taking jobs of the queue (or type):
the claim itself reads the pauses, so the next claim after the pause commits honours it. Jobs
already running finish; enqueue keeps working, and the jobs wait, ready, for the resume.
Resume wakes idle workers at once (PostgreSQL: a NOTIFY at commit; other databases: their
next poll). Each call is one write of the store, on database ``using``, recorded with ``by``:
a Django user (then also a ``LogEntry``, :mod:`jobqueue.ops.audit`) or a name.
"""

from __future__ import annotations

from typing import Any

from jobqueue import arguments
from jobqueue.models.limits import Pause, PauseKind
from jobqueue.ops import audit
from jobqueue.registry import JobType
from jobqueue.routing import all_queue_aliases, queue_aliases
from jobqueue.store import get_store
from jobqueue.store.interface import Paused

__all__ = ["Paused", "pause", "pause_type", "paused", "resume", "resume_type"]


def _type_name(job_type: Any) -> str:
    name = job_type.name if isinstance(job_type, JobType) else job_type
    return arguments.type_name(name)


def pause(queue: str, *, by: Any = "", reason: str = "", using: str | None = None) -> bool:
    """Pause queue ``queue``: no worker claims its jobs until :func:`resume`.

    Args:
        queue: the queue name (``[A-Za-z0-9_.:-]{1,100}``, as enqueue's).
        by: who pauses it (a Django user or a name), recorded and shown by the admin and
            ``status``; a user also gets a ``LogEntry``.
        reason: why, recorded (at most 200 characters).
        using: database alias of the queue (default: every alias the queue lives on,
            ``JOBQUEUE["QUEUE_DATABASES"]``; ``"default"`` without the setting).

    Returns:
        True if this call paused it (on any of its aliases); False if it was paused already
        (the first pause's ``by``, time and reason stand).

    Raises:
        InvalidJobOption: a bad queue name, ``by``, ``reason`` or alias.
    """
    name = arguments.queue_name(queue)
    return _pause(PauseKind.QUEUE, name, by, reason, using)


def pause_type(
    job_type: str | JobType, *, by: Any = "", reason: str = "", using: str | None = None
) -> bool:
    """Pause job type ``job_type`` in every queue; as :func:`pause` otherwise.

    Args:
        job_type: a type name, or the object ``@job`` returned.
        by: who pauses it, recorded.
        reason: why, recorded (at most 200 characters).
        using: database alias (default: every queue database).

    Returns:
        True if this call paused it; False if it was paused already.

    Raises:
        InvalidJobOption: a bad type name, ``by``, ``reason`` or alias.
    """
    return _pause(PauseKind.TYPE, _type_name(job_type), by, reason, using)


def resume(queue: str, *, by: Any = None, using: str | None = None) -> bool:
    """Resume queue ``queue`` and wake idle workers for it.

    ``by``: who resumes it (a Django user, logged in ``LogEntry``, or a name, which nothing
    records: the pause row, with its ``paused_by``, is gone).

    Returns:
        True if it was paused; False if it was not (nothing changes).

    Raises:
        InvalidJobOption: a bad queue name or alias.
    """
    return _resume(PauseKind.QUEUE, arguments.queue_name(queue), by, using)


def resume_type(job_type: str | JobType, *, by: Any = None, using: str | None = None) -> bool:
    """Resume job type ``job_type`` and wake idle workers of the queues holding its jobs.

    ``by`` as :func:`resume`'s.

    Returns:
        True if it was paused; False if it was not (nothing changes).

    Raises:
        InvalidJobOption: a bad type name or alias.
    """
    return _resume(PauseKind.TYPE, _type_name(job_type), by, using)


def paused(using: str | None = None) -> list[Paused]:
    """Return every pause in force (kind ``"queue"`` or ``"type"``, name, by, since, reason)."""
    return get_store(arguments.alias(using)).paused()


def _aliases(kind: str, name: str, using: str | None) -> tuple[str, ...]:
    """Return the aliases a pause or resume writes to: ``using``, else all the name's.

    A queue's are the aliases it lives on (``JOBQUEUE["QUEUE_DATABASES"]``), a type's every
    queue database: each database's claims read only its own pauses.
    """
    if using is not None:
        return (arguments.alias(using),)
    return queue_aliases(name) if kind == PauseKind.QUEUE else all_queue_aliases()


def _pause(kind: str, name: str, by: Any, reason: Any, using: str | None) -> bool:
    who = audit.actor_name(by)
    why = arguments.text("reason", reason, 200) or ""
    paused_now = False
    for alias in _aliases(kind, name, using):
        _, created = get_store(alias).pause(kind, name, who, why)
        if created:
            _log(by, kind, name, alias, audit.ADDITION, f"Paused {kind} {name}.")
        paused_now |= created
    return paused_now


def _resume(kind: str, name: str, by: Any, using: str | None) -> bool:
    audit.actor_name(by)  # a bad ``by`` is refused before anything changes
    resumed = False
    for alias in _aliases(kind, name, using):
        row: int | None = None
        if audit.is_user(by):  # read first: the resume deletes the row the log names
            rows = Pause.objects.using(alias).filter(kind=kind, name=name)
            row = rows.values_list("pk", flat=True).first()
        lifted = get_store(alias).resume(kind, name) is not None
        if lifted:
            _log(by, kind, name, alias, audit.DELETION, f"Resumed {kind} {name}.", row)
        resumed |= lifted
    return resumed


def _log(
    by: Any, kind: str, name: str, alias: str, flag: int, message: str, pk: Any = None
) -> None:
    """Record a pause or resume in Django's admin history (a user's only)."""
    if not audit.is_user(by):
        return
    if pk is None:
        found = Pause.objects.using(alias).filter(kind=kind, name=name).values_list("pk", flat=True)
        pk = found.first()
    audit.log(by, Pause, [(pk, f"{kind} {name}")], flag, message)
