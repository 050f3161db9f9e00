"""Internal: read a raw cursor's rows by column name, never by position.

A statement's columns are named in its ``RETURNING``/``SELECT`` list (``sql/*.sql``); the store
reads ``row.lease_token``, not ``row[6]``, so a column added to a statement cannot shift what
the Python side reads. Works on any DB-API cursor whose ``description`` items have ``name``
(psycopg 3 and psycopg 2), through Django's cursor wrappers, without a round trip: one named
tuple type per column list, made once and cached.
"""

from __future__ import annotations

import functools
import json
from collections import namedtuple
from typing import Any


@functools.cache
def _row_type(names: tuple[str, ...]) -> Any:
    # rename=True: a column we never read may have no usable name (``CASE ... END`` is "case",
    # a keyword); it gets a placeholder instead of failing the statement.
    return namedtuple("Row", names, rename=True)


def _make(cursor: Any) -> Any:
    return _row_type(tuple(column.name for column in cursor.description))._make


def fetchone(cursor: Any) -> Any:
    """Return the cursor's next row as a named tuple (fields: its column names), or None."""
    row = cursor.fetchone()
    return None if row is None else _make(cursor)(row)


def fetchall(cursor: Any) -> list[Any]:
    """Return the cursor's remaining rows as named tuples (fields: their column names)."""
    rows = cursor.fetchall()
    if not rows:
        return []
    make = _make(cursor)
    return [make(row) for row in rows]


def json_value(value: Any) -> Any:
    """Return a jsonb column's value decoded, whether the driver decoded it or not.

    Django registers a text loader for jsonb on psycopg 3 (JSONField decodes it); raw SQL
    decodes here.
    """
    return json.loads(value) if isinstance(value, str | bytes) else value
