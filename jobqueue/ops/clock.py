"""Internal: the database clock, for ages the operator tools report."""

from __future__ import annotations

from datetime import datetime

from django.db import connections
from django.utils import timezone


def db_now(using: str = "default") -> datetime:
    """Return the database's current time (an aware datetime).

    On PostgreSQL this is ``statement_timestamp()``, the clock every due, lease and fire time is
    compared with; elsewhere (SQLite, whose jobs are written with this process's clock) it is
    this process's ``timezone.now()``.

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
