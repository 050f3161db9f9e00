"""Internal: the one classification of a failed jobqueue statement (issue 32).

A statement of ours can fail because the connection was lost, the server is shutting down, the
database is read-only (a failover to a replica, ``default_transaction_read_only``), a statement
or lock timeout ended it, a serialization failure or deadlock asks for a retry, the disk is
full, there are too many connections, a privilege is missing, or the tables are not there (the
database is not migrated). :func:`classify` maps a psycopg or Django error to one
:class:`Failure` by its SQLSTATE (and, for errors without one, by the driver's word that the
connection is gone), and that failure is what every surface says: the worker's log line
(:meth:`Failure.describe`), ``health``, ``status``, the metrics (:attr:`Failure.kind`) and the
error the public API raises (:func:`raise_typed`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import NoReturn

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from jobqueue.errors import (
    DatabaseFull,
    DatabaseNotMigrated,
    DatabasePermissionDenied,
    DatabaseReadOnly,
    DatabaseTimeout,
    QueueUnavailable,
)

#: The kinds, each with the words every surface says after "database 'default' is".
KINDS: dict[str, str] = {
    "connection_lost": "unreachable (connection lost)",
    "shutting_down": "shutting down or starting up",
    "read_only": "read-only (failover?)",
    "timeout": "timing out statements (statement or lock timeout)",
    "serialization": "asking for retries (serialization failure or deadlock)",
    "disk_full": "out of disk space",
    "too_many_connections": "full (too many connections)",
    "permission_denied": "refusing a privilege jobqueue needs (permission denied)",
    "not_migrated": "not migrated (run manage.py migrate)",
    "other": "failing statements",
}

#: SQLSTATE codes (or their two-character classes) by kind.
_BY_SQLSTATE: dict[str, str] = {
    "08": "connection_lost",  # class 08: connection exception
    "57P01": "shutting_down",  # admin_shutdown
    "57P02": "shutting_down",  # crash_shutdown
    "57P03": "shutting_down",  # cannot_connect_now (starting up, shutting down, in recovery)
    "25006": "read_only",  # read_only_sql_transaction
    "57014": "timeout",  # query_canceled (statement_timeout)
    "55P03": "timeout",  # lock_not_available (lock_timeout)
    "25P03": "timeout",  # idle_in_transaction_session_timeout
    "40": "serialization",  # class 40: serialization_failure, deadlock_detected
    "53100": "disk_full",
    "53300": "too_many_connections",
    "53400": "too_many_connections",  # configuration_limit_exceeded
    "42501": "permission_denied",  # insufficient_privilege
    "28": "permission_denied",  # class 28: invalid authorization
    "42P01": "not_migrated",  # undefined_table
    "42703": "not_migrated",  # undefined_column: migrations behind the code
}

#: The typed error the public API raises for each kind (the others pass through unchanged:
#: a serialization failure is the caller's to retry, retry wrappers look for that very error).
_RAISED: dict[str, type[QueueUnavailable]] = {
    "connection_lost": QueueUnavailable,
    "shutting_down": QueueUnavailable,
    "too_many_connections": QueueUnavailable,
    "read_only": DatabaseReadOnly,
    "timeout": DatabaseTimeout,
    "disk_full": DatabaseFull,
    "permission_denied": DatabasePermissionDenied,
    "not_migrated": DatabaseNotMigrated,
}

#: What the driver says when a connection is gone without a SQLSTATE (psycopg 3 and 2).
_LOST_WORDS = (
    "server closed the connection",
    "connection is closed",
    "connection already closed",
    "connection refused",
    "consuming input failed",
    "terminating connection",
    "no connection to the server",
    "could not connect",
    "connection failed",
    "connection timeout expired",
    "ssl syscall",
    "eof detected",
)
_TOO_MANY_WORDS = ("too many clients", "too many connections", "remaining connection slots")

#: What SQLite says, by kind: its errors carry no SQLSTATE (their result codes name only broad
#: classes, ``SQLITE_ERROR`` for a missing table), so its words decide; checked only for an
#: error that came from ``sqlite3``. A lock wait that ran past the busy timeout is a timeout.
_SQLITE_WORDS = (
    ("no such table", "not_migrated"),
    ("no such column", "not_migrated"),
    ("database is locked", "timeout"),
    ("database table is locked", "timeout"),
    ("disk is full", "disk_full"),
    ("readonly database", "read_only"),
    ("unable to open database file", "connection_lost"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A classified failure of a jobqueue statement.

    Attributes:
        kind: one of :data:`KINDS` (``"read_only"``...), also the metrics' label.
        alias: the database alias.
        sqlstate: the server's SQLSTATE code, or "" when the driver had none.
        message: the server's (or driver's) first line.
    """

    kind: str
    alias: str
    sqlstate: str
    message: str

    @property
    def short(self) -> str:
        """Return the kind in words: ``read-only (failover?)``."""
        return KINDS[self.kind]

    @property
    def summary(self) -> str:
        """Return ``database 'default' is read-only (failover?)``: the words of every surface."""
        return f"database {self.alias!r} is {self.short}"

    def describe(self, doing: str = "") -> str:
        """Return the log line's text: the summary, the server's words, what the worker does.

        Args:
            doing: what follows, e.g. ``"waiting, nothing claimed"``; empty for none.
        """
        tail = f"; {doing}" if doing else ""
        return f"{self.summary}: {self.message}{tail}"


def _sqlstate(exc: BaseException) -> str:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if code:
            return str(code)
        current = current.__cause__ or current.__context__
    return ""


def _from_sqlite(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, sqlite3.Error):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def classify(exc: BaseException, alias: str | None = None) -> Failure:
    """Return the one classification of ``exc``, a failed statement on ``alias``.

    Args:
        exc: the error (Django's wrapper or psycopg's own).
        alias: the database alias (default ``"default"``).
    """
    code = _sqlstate(exc)
    kind = (_BY_SQLSTATE.get(code) or _BY_SQLSTATE.get(code[:2])) if code else None
    message = _first_line(exc)
    if kind is None and _from_sqlite(exc):
        lowered = message.lower()
        kind = next((k for words, k in _SQLITE_WORDS if words in lowered), None)
    if kind is None:
        lowered = message.lower()
        if any(word in lowered for word in _TOO_MANY_WORDS):
            kind = "too_many_connections"
        elif isinstance(exc, InterfaceError) or any(word in lowered for word in _LOST_WORDS):
            kind = "connection_lost"
        elif isinstance(exc, OperationalError) and not code:
            kind = "connection_lost"  # the driver's own (no server answer): not reached
        else:
            kind = "other"
    return Failure(kind=kind, alias=alias or "default", sqlstate=code, message=message)


def raise_typed(exc: DatabaseError, alias: str | None = None) -> NoReturn:
    """Raise the typed jobqueue error for ``exc``, or ``exc`` itself if its kind has none.

    Raises:
        QueueUnavailable: or its subclass naming the kind (``DatabaseReadOnly``...), carrying
            the :class:`Failure` as ``failure``, from ``exc``.
        DatabaseError: ``exc`` unchanged: a serialization failure or deadlock (the caller's to
            retry), or an error that says nothing about the database (an integrity error...).
    """
    failure = classify(exc, alias)
    error = _RAISED.get(failure.kind)
    if error is None and failure.kind == "other" and isinstance(exc, OperationalError):
        error = QueueUnavailable  # the database failed us in a way not named above
    if error is None:
        raise exc
    raised = error(failure.describe("nothing was written"))
    raised.failure = failure
    raise raised from exc


def read_only_failure(alias: str = "default") -> Failure | None:
    """Return the read-only failure of ``alias`` if its sessions are read-only, else None.

    A database that turned read-only (a failover to a replica, ``default_transaction_read_only``)
    still answers reads: ``health``, ``status`` and the metrics ask it (one ``current_setting``
    read) so that they can name it. Other databases than PostgreSQL: always None.

    Args:
        alias: database alias.

    Raises:
        django.db.DatabaseError: the database cannot be reached.
    """
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('transaction_read_only'), pg_is_in_recovery()")
        read_only, recovery = cursor.fetchone()
    if read_only != "on" and not recovery:
        return None
    why = "the server is a standby (in recovery)" if recovery else "transaction_read_only is on"
    return Failure(kind="read_only", alias=alias, sqlstate="25006", message=why)
