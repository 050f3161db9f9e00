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
  With ``prepared=True`` (the worker's hot ``finish_many`` and heartbeat) on psycopg 3 and an
  alias not behind a transaction pooler, both go instead as server-side prepared statements in
  one pipeline (still one round trip and one implicit transaction: the extended protocol runs
  everything before a Sync in one), so the server plans them once per connection, not per call.

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
from .pooler import is_pooled
from .sqltext import sql

try:
    import psycopg
except ImportError:  # pragma: no cover - psycopg2 only
    psycopg = None  # type: ignore[assignment]

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
    return psycopg is not None and isinstance(raw, psycopg.ClientCursor)


def _may_prepare(alias: str, connection: Any) -> bool:
    """Return whether ``alias`` may hold server-side prepared statements of ours.

    Not behind a transaction pooler (a statement prepared on one server connection would be run
    on another: ``is_pooled``), and only on psycopg 3 (psycopg2 never prepares).
    """
    if psycopg is None or connection.vendor != "postgresql" or is_pooled(alias):
        return False
    connection.ensure_connection()
    return isinstance(connection.connection, psycopg.Connection)


def _execute_prepared(connection: Any, text: str, params: dict[str, Any]) -> Any:
    """Run the limits and ``text`` as prepared statements in one pipeline; return the cursor.

    A server-side-binding cursor on the same psycopg connection, wrapped by Django (so
    ``execute_wrappers`` and the query log see the statement, once). psycopg prepares a
    statement on a connection whose ``prepare_threshold`` allows it: Django leaves it at None
    (never), so it is lowered to 0 (prepare at once) for these two statements only; the
    ORM's statements go through client-side-binding cursors, which never prepare anyway.
    """
    conn = connection.connection
    raw = psycopg.Cursor(conn)
    wrapped = (
        connection.make_debug_cursor(raw)
        if connection.queries_logged
        else connection.make_cursor(raw)
    )
    threshold = conn.prepare_threshold
    conn.prepare_threshold = 0
    try:
        # Errors surface at the pipeline's Sync, outside Django's cursor wrapper: translate them
        # to django.db errors the same way (a lost connection marks the wrapper unusable).
        with connection.wrap_database_errors, conn.pipeline():
            raw.execute(_limit_sql(), _limits(None))
            wrapped.execute(text, params)
    finally:
        conn.prepare_threshold = threshold
    return wrapped


def execute(alias: str, text: str, params: dict[str, Any], *, prepared: bool = False) -> Any:
    """Execute one statement of jobqueue's on ``alias`` and return the cursor, at its result.

    In autocommit the statement is its own transaction, and it runs under the transaction
    limits; inside a transaction (the caller's, or an :func:`own_transaction`) it runs as is.

    Args:
        alias: database alias.
        text: the statement, ``%(name)s`` placeholders.
        params: its parameters.
        prepared: in autocommit on PostgreSQL (psycopg 3, not behind a pooler), send it as a
            server-side prepared statement, planned once per connection. Only for statements
            whose generic plan is as good as a custom one (``finish_many``, heartbeat; not the
            claim: see docs/performance.md, "Prepared statements").

    Returns:
        The cursor, at the statement's result.

    Raises:
        django.db.DatabaseError: from the statement, or when a limit ends it.
    """
    connection = connections[alias]
    if prepared and connection.get_autocommit() and _may_prepare(alias, connection):
        return _execute_prepared(connection, text, params)
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
