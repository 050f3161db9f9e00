"""Internal: one mapping of a lost database to ``QueueUnavailable``, for every public function.

A serialization failure or deadlock (SQLSTATE class 40) is not an outage: the database asks the
caller to retry its transaction, and retry wrappers look for that very error (e.g. a dedupe key
committed by a competitor under REPEATABLE READ), so it passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError

from .errors import QueueUnavailable


@contextmanager
def writing(using: str | None) -> Iterator[None]:
    """Turn a lost database into ``QueueUnavailable``; let SQLSTATE class 40 through.

    Raises:
        QueueUnavailable: the database of ``using`` could not be reached or was lost.
    """
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        if (getattr(exc.__cause__, "sqlstate", None) or "").startswith("40"):
            raise
        raise QueueUnavailable(
            f"queue database {using or 'default'!r} is unavailable: {exc}"
        ) from exc
