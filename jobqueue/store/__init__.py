"""Internal: the store layer, the only code that writes queue state.

``get_store(using)`` picks the backend from the connection's vendor: PostgreSQL gets the SQL
store (SKIP LOCKED claims, database clock); anything else gets the ORM store.
"""

from __future__ import annotations

from django.db import connections

from jobqueue.store.interface import ClaimedJob, ExpiredLease, NewJob, ReapDecision, Store
from jobqueue.store.postgres import PostgresStore

# Both stores implement the whole seam (``interface.Store``).
from jobqueue.store.sqlite import GenericStore

__all__ = ["ClaimedJob", "ExpiredLease", "NewJob", "ReapDecision", "Store", "get_store"]


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
