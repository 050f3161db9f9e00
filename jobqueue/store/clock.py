"""Internal: the database clock at this statement, for the ages operator tools report."""

from __future__ import annotations

from datetime import datetime

from django.db import connections
from django.utils import timezone


def statement_now(using: str = "default") -> datetime:
    """Return the database's time at this statement (an aware datetime).

    On PostgreSQL this is ``statement_timestamp()``: inside a caller's transaction (an admin view
    under ``ATOMIC_REQUESTS``, a test) ``now()`` would be the transaction's start, and an age
    read late in it would come out short. Elsewhere (SQLite, whose jobs are written with this
    process's clock) it is this process's ``timezone.now()``.

    Args:
        using: database alias.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        value: datetime = cursor.fetchone()[0]
    return value
