"""The one classification of a failed statement (``jobqueue/store/failures.py``) on SQLite.

SQLite's errors carry no SQLSTATE, so its words decide; before, every one of them read as
"unreachable (connection lost)", and a newcomer on the demo's SQLite database who had not run
``migrate`` was told the database was unreachable (a trial found it).
"""

from __future__ import annotations

import sqlite3

import pytest
from django.db import OperationalError, connections

from jobqueue.errors import DatabaseNotMigrated, DatabaseTimeout
from jobqueue.store.failures import classify, raise_typed


@pytest.mark.django_db(databases=["sqlite"])
def test_a_missing_table_on_sqlite_is_not_migrated_through_django_and_alone():
    with pytest.raises(OperationalError) as caught:
        with connections["sqlite"].cursor() as cursor:
            cursor.execute("SELECT * FROM jobqueue_no_such_table")
    failure = classify(caught.value, "sqlite")
    assert failure.kind == "not_migrated"
    assert "not migrated (run manage.py migrate)" in failure.describe()
    with pytest.raises(DatabaseNotMigrated):
        raise_typed(caught.value, "sqlite")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("no such table: jobqueue_job", "not_migrated"),
        ("no such column: lease_token", "not_migrated"),
        ("database is locked", "timeout"),
        ("database or disk is full", "disk_full"),
        ("attempt to write a readonly database", "read_only"),
        ("unable to open database file", "connection_lost"),
    ],
)
def test_sqlites_own_errors_are_named_by_their_words(message, kind):
    assert classify(_wrapped(sqlite3.OperationalError(message))).kind == kind


def test_a_busy_sqlite_database_raises_a_timeout_naming_it():
    with pytest.raises(DatabaseTimeout, match="timing out statements"):
        raise_typed(_wrapped(sqlite3.OperationalError("database is locked")), "sqlite")


def test_a_driver_error_that_is_not_sqlites_keeps_its_old_reading():
    # The words decide only for an error that came from sqlite3: a PostgreSQL driver's own
    # error without a SQLSTATE still reads as a lost connection.
    assert classify(OperationalError("no such table: x")).kind == "connection_lost"


def _wrapped(exc: sqlite3.Error) -> OperationalError:
    """Django's wrapping of a driver error (its cause is the driver's)."""
    error = OperationalError(str(exc))
    error.__cause__ = exc
    return error
