"""Internal: the database clock, and the wording of durations, for the operator tools."""

from __future__ import annotations

from datetime import datetime

from jobqueue.store import statement_now


def db_now(using: str = "default") -> datetime:
    """Return the database's time at this statement: :func:`jobqueue.store.statement_now`.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    return statement_now(using)


def humanize_seconds(seconds: float | None) -> str:
    """Return ``seconds`` for people: ``"850 ms"``, ``"4.2 s"``, ``"12 min"``, ``"2 d 4 h"``.

    The dashboard and ``manage.py jobqueue`` both word durations with it.

    Args:
        seconds: a duration in seconds, or None (shown as ``"-"``).
    """
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
    return f"{seconds // 86400:.0f} d {seconds % 86400 // 3600:.0f} h"
