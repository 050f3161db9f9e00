"""Internal: the database clock, for ages the operator tools report."""

from __future__ import annotations

from datetime import datetime

from ..store.clock import statement_now


def db_now(using: str = "default") -> datetime:
    """Return the database's time at this statement: :func:`jobqueue.store.clock.statement_now`.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    return statement_now(using)
