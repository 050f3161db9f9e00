"""Internal: the one place that bounds the transactions jobqueue opens itself.

Every transaction jobqueue opens for its own work (claims, heartbeats, acks and nacks, the reaper,
the cron leader, the pruner, breakers, budgets) gets transaction-local ``lock_timeout``,
``statement_timeout`` and ``idle_in_transaction_session_timeout`` (``JOBQUEUE
["TRANSACTION_LIMITS"]``), set with ``set_config(..., true)`` so they end with the transaction.
A frozen or cut-off process then holds its locks for at most the idle limit (the server ends its
session), and a live one waits for a lock for at most the lock limit.

A caller's transaction is never touched: when a statement runs while the connection is already
in a transaction (the caller's ``atomic()``, or a connection with autocommit off), it runs as it
is. Two shapes, one mechanism:

* :func:`own_transaction` for multi-statement transactions (capped claim, reaper, cron fire,
  pruner batch): opens ``atomic()`` and, if that started a transaction, runs
  ``limit_transaction.sql`` first;
* :func:`execute` for one statement in autocommit (heartbeat, ack and nack batches, the uncapped
  claim, the leader election, breakers, budgets): with a client-side-binding cursor the limits
  and the statement go in one query string, so the server runs them in one implicit
  transaction (one round trip); otherwise the statement is wrapped in :func:`own_transaction`.

On databases other than PostgreSQL (SQLite: transactions cannot outlive their process) nothing
is set.

:data:`HOOKS` lets tests stall a process at a named point inside one of these transactions
(``claim``: after the capped claim's turn is taken; ``reaper``: after the expired leases are
locked; ``pruner``: after a batch is deleted). Production code never sets it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction

from ..conf import get_settings
from ..txlimits import TransactionLimits
from .sqltext import sql

__all__ = ["HOOKS", "checkpoint", "execute", "own_transaction", "timed_out"]

#: Tests only: point name -> callable(alias), run at :func:`checkpoint` inside the transaction.
HOOKS: dict[str, Callable[[str], None]] = {}

#: SQLSTATEs of a statement a limit ended while the session (and the server) stayed up. The
#: idle limit (25P03) ends the session itself: to its process that is a lost connection.
TIMEOUTS = {
    "55P03": "lock timeout",  # lock_not_available
    "57014": "statement timeout",  # query_canceled
}


def _limit_sql() -> str:
    return sql("limit_transaction")


def _limits(limits: TransactionLimits | None) -> dict[str, str]:
    return (limits or get_settings().transaction_limits).as_params()


def checkpoint(name: str, alias: str) -> None:
    """Run the test hook registered for ``name``, if any (see :data:`HOOKS`)."""
    hook = HOOKS.get(name)
    if hook is not None:
        hook(alias)


@contextmanager
def own_transaction(alias: str, limits: TransactionLimits | None = None) -> Iterator[None]:
    """Run the block in a transaction of jobqueue's own, bounded by the transaction limits.

    Inside a transaction the caller opened, this is a savepoint and sets nothing: the caller's
    transaction keeps its own settings.

    Args:
        alias: database alias.
        limits: override of ``JOBQUEUE["TRANSACTION_LIMITS"]`` (tests).

    Raises:
        django.db.DatabaseError: from the block, or when a limit ends the transaction
            (see :func:`timed_out`).
    """
    connection = connections[alias]
    ours = connection.get_autocommit() and not connection.in_atomic_block
    with transaction.atomic(using=alias):
        if ours and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_limit_sql(), _limits(limits))
        yield


def _one_query_string(cursor: Any) -> bool:
    """Return whether ``cursor`` binds parameters client-side.

    Then several statements may go in one query string: psycopg 3's ``ClientCursor`` (Django's
    default) and psycopg2 cursors do.
    """
    raw = getattr(cursor, "cursor", cursor)
    module = type(raw).__module__
    if module.startswith("psycopg2"):
        return True
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg2 only
        return False
    return isinstance(raw, psycopg.ClientCursor)


def execute(alias: str, text: str, params: dict[str, Any]) -> Any:
    """Execute one statement of jobqueue's on ``alias`` and return the cursor, at its result.

    In autocommit the statement is its own transaction, and it runs under the transaction
    limits; inside a transaction (the caller's, or an :func:`own_transaction`) it runs as is.
    """
    connection = connections[alias]
    cursor = connection.cursor()
    if connection.vendor != "postgresql" or not connection.get_autocommit():
        cursor.execute(text, params)
    elif _one_query_string(cursor):
        # One simple query, so one implicit transaction: set_config(..., true) in the first
        # statement holds for the second (each statement's timeout starts with it) and ends
        # with both.
        cursor.execute(f"{_limit_sql()};\n{text}", {**params, **_limits(None)})
        cursor.nextset()
    else:
        with own_transaction(alias):
            cursor.execute(text, params)
    return cursor


def timed_out(exc: BaseException) -> str | None:
    """Return which limit ended a statement (``"lock timeout"``, ...), or None for other errors.

    A timed-out statement means the database is up and something held us up: the caller logs
    it and carries on on the same connection, unlike an outage.
    """
    cause = exc.__cause__ or exc
    sqlstate = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    return TIMEOUTS.get(sqlstate or "")
