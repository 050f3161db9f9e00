"""Internal: the PostgreSQL driver's executor, and the base every area of the driver shares.

:class:`Executor` runs the statements of ``store/sql/`` by name on one database alias; each
area (``jobs.py``, ``finishing.py``, ``cron.py``, ``flows.py``, ``limits.py``, ``operator.py``,
``metrics.py``, ``outbox.py``) receives it and reaches the database through it alone.

Also here, for the areas that insert jobs (``jobs.py``, ``flows.py``): a new job's statement
parameters, written once (:func:`enqueue_params`).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.utils import CursorWrapper

from jobqueue.store import bounded
from jobqueue.store.interface import NEW_JOB_COLUMNS, NewJob
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.sqltext import sql


class Executor:
    """Runs ``sql/<name>.sql`` with ``%(name)s`` parameters on database ``alias``."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def execute(self, name: str, params: dict[str, Any], *, callers: bool = False) -> CursorWrapper:
        """Execute statement ``name`` with ``params``; return the cursor, at its result.

        In autocommit the statement runs under jobqueue's transaction limits (``bounded.py``); in
        a transaction, as it is. An enqueue (``callers=True``) is the caller's statement even in
        autocommit: it may wait on a competitor's dedupe key as long as the caller's settings allow.
        """
        if callers:
            cursor = connections[self.alias].cursor()
            cursor.execute(sql(name), params)
            return cursor
        return bounded.execute(self.alias, sql(name), params)

    def execute_text(self, text: str, params: dict[str, Any]) -> CursorWrapper:
        """Execute ``text`` as :meth:`execute` runs a named statement.

        ``text`` is built from the ``sql/`` files (the claim's function call, routines.py).
        """
        return bounded.execute(self.alias, text, params)

    def fetch_rows(self, name: str, params: dict[str, Any], *, callers: bool = False) -> list[Any]:
        """Execute statement ``name``; return its rows as named tuples (``rows.fetchall``)."""
        with self.execute(name, params, callers=callers) as cursor:
            return fetchall(cursor)

    def fetch_one(self, name: str, params: dict[str, Any], *, callers: bool = False) -> Any:
        """Execute statement ``name``; return its first row as a named tuple, or None."""
        with self.execute(name, params, callers=callers) as cursor:
            return fetchone(cursor)


class PostgresArea:
    """One area of the PostgreSQL store: it reaches the database through ``db`` alone."""

    def __init__(self, db: Executor) -> None:
        self.db = db
        self.alias = db.alias


def enqueue_params(job: NewJob) -> dict[str, Any]:
    """Return ``job`` as the parameters of ``enqueue.sql``, one per :data:`NEW_JOB_COLUMNS`.

    ``enqueue_plain.sql``, ``enqueue_in_order.sql`` and ``enqueue_child.sql`` read a subset of
    them (``test_insert_columns.py`` checks each file's ``%(name)s`` against these keys).
    """
    return {name: getattr(job, attribute) for name, attribute, _ in NEW_JOB_COLUMNS}
