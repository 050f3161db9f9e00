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
  transaction (one round trip); otherwise the statement is wrapped in :func:`own_transaction`;
* :func:`execute_each` for several such statements, each its own transaction, sent in one
  round trip (a worker records its outcomes and claims its next jobs so).

On databases other than PostgreSQL (SQLite: transactions cannot outlive their process) nothing
is set.

Asynchronous commit (``JOBQUEUE["ASYNCHRONOUS_COMMIT"]``): inside :func:`asynchronous_commit`
(a worker's own claim, heartbeat and ack) the transactions opened here also get
``synchronous_commit = off``; :func:`synchronous_commit` inside it takes that back for a write
that must be flushed before it is answered (an ack that may complete a batch). Everywhere else
(an enqueue, the outbox relay, a cron fire, the reaper, an operator's repair) the session's own
``synchronous_commit`` holds. The scope is per thread (a context variable): a worker's handler
threads never inherit it.

:data:`HOOKS` lets tests stall a process at a named point inside one of these transactions
(``claim``: after the capped claim's turn is taken; ``reaper``: after the expired leases are
locked; ``pruner``: after a batch is deleted). Production code never sets it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from django.db import DatabaseError, connections, transaction

from jobqueue.settings.conf import get_settings
from jobqueue.settings.transactions import TransactionLimits
from jobqueue.store.pooler import is_pooled
from jobqueue.store.sqltext import sql

__all__ = [
    "HOOKS",
    "asynchronous_commit",
    "checkpoint",
    "execute",
    "execute_each",
    "own_transaction",
    "pipelines",
    "synchronous_commit",
    "timed_out",
]

#: Tests only: point name -> callable(alias), run at :func:`checkpoint` inside the transaction.
HOOKS: dict[str, Callable[[str], None]] = {}

#: SQLSTATEs of a statement a limit ended while the session (and the server) stayed up. The
#: idle limit (25P03) ends the session itself: to its process that is a lost connection.
TIMEOUTS = {
    "55P03": "lock timeout",  # lock_not_available
    "57014": "statement timeout",  # query_canceled
}


#: psycopg's ``prepare_threshold`` on a connection where :func:`execute_each` prepares: no
#: statement is prepared for being run often, only one sent with ``prepare=True``.
ONLY_WHEN_ASKED = 2**31 - 1


def _limit_sql() -> str:
    return sql("limit_transaction")


#: Whether the transactions this thread opens now may commit asynchronously (see the module's
#: docstring); the setting decides whether they do.
_ASYNCHRONOUS: ContextVar[bool] = ContextVar("jobqueue_asynchronous_commit", default=False)


@contextmanager
def asynchronous_commit() -> Iterator[None]:
    """Let the transactions opened here in the block commit with ``synchronous_commit = off``.

    For a worker's own claim, heartbeat and ack only: a server crash may forget the last
    fraction of a second of them, and each job they concerned runs again (at-least-once). Off
    when ``JOBQUEUE["ASYNCHRONOUS_COMMIT"]`` is False; a caller's transaction is never changed.
    """
    token = _ASYNCHRONOUS.set(True)
    try:
        yield
    finally:
        _ASYNCHRONOUS.reset(token)


@contextmanager
def synchronous_commit() -> Iterator[None]:
    """Commit the transactions opened here in the block synchronously, even when asynchronous.

    Inside :func:`asynchronous_commit`, for a write whose loss could break a promise: an ack
    that may complete a batch and enqueue its callbacks, promised once per completion.
    """
    token = _ASYNCHRONOUS.set(False)
    try:
        yield
    finally:
        _ASYNCHRONOUS.reset(token)


def _limits(
    limits: TransactionLimits | None, *, durable: bool = False, generic: bool = False
) -> dict[str, list[str]]:
    """Return ``limit_transaction.sql``'s parameters.

    ``durable``: never asynchronous; ``generic``: a prepared statement runs its generic plan
    (planned once per session).
    """
    settings = get_settings()
    values = dict((limits or settings.transaction_limits).as_params())
    # JIT off: jobqueue's statements are short, and the planner's estimate of a LIMIT taken
    # from a row (the claim's lane allotments) could otherwise switch on compilation costing
    # seconds (docs/decisions.md, "The claim in two levels").
    values["jit"] = "off"
    if not durable and _ASYNCHRONOUS.get() and settings.asynchronous_commit:
        values["synchronous_commit"] = "off"
    if generic:
        # Else the server plans a prepared statement afresh at each call for as long as its
        # generic plan's estimate is dearer than the custom plans' (the ack's always was: an
        # array parameter of unknown length), which is what preparing it was to save. The one
        # plan is made at the session's first call, on the tables' sizes then: a session begun
        # on an empty table planned the ack as a scan of the whole jobs table (13 ms at 5,000
        # rows), as the claim function did before it set the same (routines.py).
        values["plan_cache_mode"] = "force_generic_plan"
        values["enable_seqscan"] = "off"
    return {"jq_names": list(values), "jq_values": list(values.values())}


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


#: What :func:`execute_each` returns: the cursors of the statements that committed, in order,
#: and the error that stopped the rest (None when every statement committed).
Each = tuple[list[Any], DatabaseError | None]


def pipelines(alias: str) -> bool:
    """Return whether :func:`execute_each` may send its statements in one round trip on ``alias``.

    Only on a direct PostgreSQL connection through psycopg 3 with client-side binding (no
    statement is ever prepared), in autocommit: a caller's transaction is never split, and an
    alias behind a transaction pooler keeps one statement per round trip (``pooler.py``).
    """
    connection = connections[alias]
    return (
        connection.vendor == "postgresql"
        and getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"
        and not connection.settings_dict.get("OPTIONS", {}).get("server_side_binding")
        and connection.get_autocommit()
        and not connection.in_atomic_block
        and not is_pooled(alias)
    )


def execute_each(
    alias: str,
    statements: Sequence[tuple[str, dict[str, Any]]],
    *,
    durable: Collection[int] = (),
    prepared: Collection[int] = (),
) -> Each:
    """Execute each statement in a bounded transaction of its own; all in one round trip.

    Each statement commits on its own (its own ``BEGIN``, limits and ``COMMIT``), in order, in
    one psycopg pipeline with one Sync at its end: the server still flushes one commit per
    statement, but the client waits once. A statement that fails rolls its own transaction
    back and the ones after it do not run (the pipeline is aborted up to its Sync), so what
    committed is always a prefix. By default nothing is prepared: the client-side-binding
    cursor sends each statement unnamed (a claim must never get a generic plan,
    docs/performance.md); the statements named in ``prepared`` are sent with server-side
    binding as prepared statements of this connection (psycopg keeps them per connection), so
    the server parses and plans them once per session, not once per call (their transaction
    runs with ``plan_cache_mode = force_generic_plan`` and ``enable_seqscan = off``). Only for
    statements whose plan does not depend on their parameters (the ack's: one primary-key
    probe per outcome). There is no pooler here (:func:`pipelines`), so a prepared statement
    stays on its server session.

    Call only where :func:`pipelines` says so.

    Args:
        alias: database alias.
        statements: ``(text, params)`` pairs, each one statement of ``sql/``.
        durable: indexes in ``statements`` of those that commit synchronously even inside
            :func:`asynchronous_commit`.
        prepared: indexes in ``statements`` of those sent as prepared statements.

    Returns:
        :data:`Each`: a cursor at its result for each statement that committed, in order, and
        the ``django.db.DatabaseError`` that stopped the others. A statement whose commit is
        not known (the connection broke) counts as not committed.
    """
    connection = connections[alias]
    blocks: list[tuple[Any, Any]] = []
    error: Exception | None = None
    try:
        with connection.wrap_database_errors:
            connection.ensure_connection()
            raw = connection.connection
            if prepared and raw.prepare_threshold is None:
                # Django turns psycopg's preparing off (prepare_threshold None), which also
                # refuses prepare=True. Its own cursors bind on the client and never prepare;
                # with this threshold only a statement asked to be prepared is.
                raw.prepare_threshold = ONLY_WHEN_ASKED
            try:
                with raw.pipeline():
                    # Errors while queueing are kept, not raised through the pipeline's exit
                    # (which would log them again): the exit's Sync still runs.
                    try:
                        for index, (text, params) in enumerate(statements):
                            limits = _limits(
                                None, durable=index in durable, generic=index in prepared
                            )
                            raw.cursor().execute("BEGIN")
                            raw.cursor().execute(_limit_sql(), limits)
                            if index in prepared:
                                cursor = psycopg.Cursor(raw)
                                cursor.execute(text, params, prepare=True)
                            else:
                                cursor = raw.cursor()
                                cursor.execute(text, params)
                            commit = raw.cursor()
                            commit.execute("COMMIT")
                            blocks.append((cursor, commit))
                    except Exception as exc:  # noqa: BLE001 - any psycopg error, wrapped below
                        error = exc
            except Exception as exc:  # noqa: BLE001 - the exit's Sync failed: wrapped below
                error = error or exc
            if error is not None and raw.info.transaction_status.name == "INERROR":
                # The failed block stays open (aborted) past the Sync: end it here, so the
                # connection is usable (a timeout is not an outage: the loop carries on on it).
                raw.execute("ROLLBACK")
            if error is not None:
                raise error
    except DatabaseError as wrapped:
        error = wrapped
    committed = []
    for cursor, commit in blocks:
        if commit.statusmessage != "COMMIT":
            break
        committed.append(cursor)
    return committed, error
