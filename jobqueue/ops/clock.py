"""Internal: the database clock, for ages the operator tools report."""

from __future__ import annotations

from datetime import datetime

from ..store import get_store


def db_now(using: str = "default") -> datetime:
    """Return the queue's clock for ``using`` (an aware datetime): the store's ``db_now``.

    On PostgreSQL that is the database's ``now()`` (in autocommit, the statement's start), the
    clock every due, lease and fire time is compared with; elsewhere (SQLite, whose jobs are
    written with this process's clock) it is this process's ``timezone.now()``.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    return get_store(using).db_now()
