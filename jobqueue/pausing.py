"""Pause and resume a queue or a job type: ``jobqueue.pause("emails", by="ops")``.

A pause stops every claim, on every worker and host, from taking jobs of the queue (or type):
the claim itself reads the pauses, so the next claim after the pause commits honours it. Jobs
already running finish; enqueue keeps working, and the jobs wait, ready, for the resume.
Resume wakes idle workers at once (PostgreSQL: a NOTIFY at commit; other databases: their
next poll). Each call is one write of the store, on database ``using``, recorded with ``by``.
"""

from __future__ import annotations

from typing import Any

from . import arguments
from .jobtypes import JobType
from .pause_model import PauseKind
from .store import get_store
from .store.pauses import Paused

__all__ = ["Paused", "pause", "pause_type", "paused", "resume", "resume_type"]


def _who(by: Any) -> str:
    return arguments.text("by", by, 200) or ""


def _type_name(job_type: Any) -> str:
    name = job_type.name if isinstance(job_type, JobType) else job_type
    return arguments.type_name(name)


def pause(queue: str, *, by: str = "", reason: str = "", using: str | None = None) -> bool:
    """Pause queue ``queue``: no worker claims its jobs until :func:`resume`.

    Args:
        queue: the queue name (``[A-Za-z0-9_.:-]{1,100}``, as enqueue's).
        by: who pauses it (a user name), recorded and shown by the admin and ``status``.
        reason: why, recorded (at most 200 characters).
        using: database alias of the queue (default ``"default"``).

    Returns:
        True if this call paused it; False if it was paused already (the first pause's ``by``,
        time and reason stand).

    Raises:
        InvalidJobOption: a bad queue name, ``by``, ``reason`` or alias.
    """
    name = arguments.queue_name(queue)
    return _pause(PauseKind.QUEUE, name, by, reason, using)


def pause_type(
    job_type: str | JobType, *, by: str = "", reason: str = "", using: str | None = None
) -> bool:
    """Pause job type ``job_type`` in every queue; as :func:`pause` otherwise.

    Args:
        job_type: a type name, or the object ``@job`` returned.
        by: who pauses it, recorded.
        reason: why, recorded (at most 200 characters).
        using: database alias of the queue (default ``"default"``).

    Returns:
        True if this call paused it; False if it was paused already.

    Raises:
        InvalidJobOption: a bad type name, ``by``, ``reason`` or alias.
    """
    return _pause(PauseKind.TYPE, _type_name(job_type), by, reason, using)


def resume(queue: str, *, using: str | None = None) -> bool:
    """Resume queue ``queue`` and wake idle workers for it.

    Returns:
        True if it was paused; False if it was not (nothing changes).

    Raises:
        InvalidJobOption: a bad queue name or alias.
    """
    name = arguments.queue_name(queue)
    return get_store(arguments.alias(using)).resume(PauseKind.QUEUE, name) is not None


def resume_type(job_type: str | JobType, *, using: str | None = None) -> bool:
    """Resume job type ``job_type`` and wake idle workers of the queues holding its jobs.

    Returns:
        True if it was paused; False if it was not (nothing changes).

    Raises:
        InvalidJobOption: a bad type name or alias.
    """
    name = _type_name(job_type)
    return get_store(arguments.alias(using)).resume(PauseKind.TYPE, name) is not None


def paused(using: str | None = None) -> list[Paused]:
    """Return every pause in force (kind ``"queue"`` or ``"type"``, name, by, since, reason)."""
    return get_store(arguments.alias(using)).paused()


def _pause(kind: str, name: str, by: Any, reason: Any, using: str | None) -> bool:
    who = _who(by)
    why = arguments.text("reason", reason, 200) or ""
    _, created = get_store(arguments.alias(using)).pause(kind, name, who, why)
    return created
