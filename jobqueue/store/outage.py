"""Internal: one mapping of a failed database to ``QueueUnavailable``, for every public function.

The failure is classified once (``failures.py``) and raised as the typed error of its kind: a
read-only database as ``DatabaseReadOnly``, a missing table as ``DatabaseNotMigrated``, a lost
connection as ``QueueUnavailable`` itself... (issue 32: ``enqueue`` on a read-only database
raised Django's raw ``InternalError``).

A serialization failure or deadlock (SQLSTATE class 40) is not an outage: the database asks the
caller to retry its transaction, and retry wrappers look for that very error (e.g. a dedupe key
committed by a competitor under REPEATABLE READ), so it passes through unchanged, as does an
error that says nothing about the database (an integrity or data error).

A lost connection is closed here, inside a block or not. Inside the caller's
``transaction.atomic()``: otherwise the block's exit tries to roll back and reconnect, fails, and
Django's own ``OperationalError`` replaces the ``QueueUnavailable`` raised here; marked closed
(``closed_in_transaction``), the block leaves the rollback to the server and lets this error out.
Outside a block: Django reconnects only at request boundaries (``close_if_unusable_or_obsolete``),
so a process without requests (a script, a consumer loop) would keep the dead connection and
fail every later call with "the connection is closed" after the database is back; closed, the
next call opens a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connections

from jobqueue.store.failures import raise_typed


@contextmanager
def writing(using: str | None) -> Iterator[None]:
    """Turn a failed database into the typed ``QueueUnavailable`` of its kind.

    Raises:
        QueueUnavailable: the database of ``using`` could not be reached or was lost, or a
            subclass naming why (``DatabaseReadOnly``, ``DatabaseNotMigrated``...).
        DatabaseError: unchanged for SQLSTATE class 40 and errors that are not the database's.
    """
    try:
        yield
    except DatabaseError as exc:
        _drop_if_lost(using)
        raise_typed(exc, using)


def _drop_if_lost(using: str | None) -> None:
    """Close the connection of ``using`` if the driver says it is gone; the next call reconnects."""
    connection = connections[using or "default"]
    raw = connection.connection
    # psycopg 3 says "broken", psycopg 2 "closed" (non-zero); a live connection whose statement
    # timed out is neither, and stays open for the caller to roll back.
    lost = raw is None or getattr(raw, "broken", False) or bool(getattr(raw, "closed", False))
    if lost:
        try:
            connection.close()
        except DatabaseError:
            pass
