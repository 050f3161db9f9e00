"""Internal: the store layer, the only code that writes queue state.

``get_store(using)`` picks the backend from the connection's vendor: PostgreSQL gets the SQL
store (SKIP LOCKED claims, database clock); anything else gets the ORM store.
``statement_now(using)`` reads the clock the same way, for the ages operator tools report.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connections
from django.utils import timezone

from jobqueue.store.interface import ClaimedJob, ExpiredLease, NewJob, ReapDecision, Store
from jobqueue.store.postgres import PostgresStore

# Both stores implement the whole seam (``interface.Store``).
from jobqueue.store.sqlite import GenericStore

__all__ = [
    "ClaimedJob",
    "ExpiredLease",
    "NewJob",
    "ReapDecision",
    "Store",
    "get_store",
    "statement_now",
]


def get_store(using: str | None = None) -> Store:
    """Return the store for database alias ``using`` (default ``"default"``).

    Typed as the whole seam, :class:`~jobqueue.store.interface.Store`: mypy checks here that
    both stores implement every member of it.

    Raises:
        django.utils.connection.ConnectionDoesNotExist: the alias is not in DATABASES.
    """
    alias = using or "default"
    vendor = connections[alias].vendor
    if vendor == "postgresql":
        return PostgresStore(alias)
    return GenericStore(alias)


def statement_now(using: str = "default") -> datetime:
    """Return the database's time at this statement (an aware datetime).

    On PostgreSQL this is ``statement_timestamp()``: inside a caller's transaction (an admin view
    under ``ATOMIC_REQUESTS``, a test) ``now()`` would be the transaction's start, and an age
    read late in it would come out short. Elsewhere (SQLite, whose jobs are written with this
    process's clock) it is this process's ``timezone.now()``.

    Args:
        using: database alias.

    Returns:
        The time, aware.

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
