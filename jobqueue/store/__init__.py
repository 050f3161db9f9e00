"""Internal: the store layer, the only code that writes queue state.

``get_store(using)`` picks the backend from the connection's vendor: PostgreSQL gets the SQL
store (SKIP LOCKED claims, database clock); anything else gets the ORM store.
"""

from __future__ import annotations

from django.db import connections

from .base import ClaimedJob, ExpiredLease, Nack, NewJob, ReapDecision, Store

# Both stores implement Store plus the cron, breaker and worker-row interfaces beside it.
from .generic import GenericStore
from .postgres import PostgresStore

__all__ = ["ClaimedJob", "ExpiredLease", "Nack", "NewJob", "ReapDecision", "Store", "get_store"]


def get_store(using: str | None = None) -> PostgresStore | GenericStore:
    """Return the store for database alias ``using`` (default ``"default"``).

    Raises:
        django.utils.connection.ConnectionDoesNotExist: the alias is not in DATABASES.
    """
    alias = using or "default"
    vendor = connections[alias].vendor
    if vendor == "postgresql":
        return PostgresStore(alias)
    return GenericStore(alias)
