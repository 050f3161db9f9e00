"""Internal: pause and resume on PostgreSQL (``pause.sql``, ``resume.sql``).

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`. ``claim.sql`` reads the rows.
"""

from __future__ import annotations

from typing import Any

from jobqueue.models import Pause
from jobqueue.store.interface import Paused
from jobqueue.store.rows import fetchone


class PostgresPauseStore:
    """pause, resume, paused on PostgreSQL; the host provides ``alias`` and ``_execute``."""

    alias: str
    _execute: Any

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        params = {"kind": kind, "name": name, "by": by, "reason": reason}
        # An empty answer: a concurrent pause committed after this statement's snapshot (its
        # insert won, ours did nothing, and our read could not see it yet). Once more sees it.
        for _ in range(3):
            with self._execute("pause", params) as cursor:
                row = fetchone(cursor)
            if row is not None:
                return Paused.of(row), row.created
        raise RuntimeError(f"pause of {kind} {name!r} neither inserted nor found")

    def resume(self, kind: str, name: str) -> Paused | None:
        with self._execute("resume", {"kind": kind, "name": name}) as cursor:
            row = fetchone(cursor)
        return None if row is None else Paused.of(row)

    def paused(self) -> list[Paused]:
        return [Paused.of(p) for p in Pause.objects.using(self.alias).order_by("kind", "name")]
