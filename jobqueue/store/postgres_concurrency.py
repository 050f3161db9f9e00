"""Internal: a claim that did not take turns, checked against concurrency limits (issue 18).

A worker that knows of no concurrency limit (none declared in its settings or job types) claims
without the claim turn; the limit of a job enqueued with ``concurrency_limit=`` alone is learned
from the first keyed job such a claim returns. That claim is checked here before its jobs run,
under the turn, and what passes a key's limit is given back unspent (``claim_recount.sql``,
``unclaim.sql``); docs/decisions.md, "Enqueue-only concurrency limits are exact". A mixin of
:class:`~jobqueue.store.postgres.PostgresStore`.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError

from jobqueue.store import bounded
from jobqueue.store.plan import ConcurrencyLimits
from jobqueue.store.rows import fetchall

#: Databases on which this process claimed a job with a concurrency key: its claims there take
#: turns from then on even when its settings and job types declare no limit (the job was
#: enqueued by another service with its own limit). Only ever grows; a set of aliases.
_KEYED_SEEN: set[str] = set()


class PostgresConcurrencyCheck:
    """_within_limits, _unclaim; the host class gives ``alias`` and ``_execute``."""

    alias: str
    _execute: Any

    def _within_limits(self, rows: list[Any], limits: ConcurrencyLimits) -> list[Any]:
        """Return ``rows`` less the jobs that put a concurrency key over its limit, given back.

        ``rows`` came from a claim that did not take turns (this process knew of no limit), so
        a claim running beside it may have read the same free slots. Before any of them runs,
        this takes the claim's turn and counts each returned key's leased jobs afresh; a key
        over its limit (the setting's, else the lowest stored on these jobs: ``limit_of``) gets
        back the excess of this claim's jobs of it, the last served first, unspent
        (``unclaim.sql``). Why this is exact: docs/decisions.md, "Enqueue-only concurrency
        limits are exact".

        Args:
            rows: the claim's rows (``claim.sql``'s RETURNING), in serve order.
            limits: the claim's concurrency limits' settings (overrides).

        Returns:
            The rows kept, in the same order.
        """
        keyed = [r for r in rows if r.concurrency_key is not None]
        params = {
            "keys": sorted({r.concurrency_key for r in keyed}),
            "ids": [r.id for r in keyed],
        }
        with bounded.own_transaction(self.alias):
            with self._execute("claim_turn", {}) as cursor:
                cursor.fetchone()
            with self._execute("claim_recount", params) as cursor:
                counts = fetchall(cursor)
            excess: list[Any] = []
            for count in counts:
                limit = limits.limit_of(count.key, count.stored)
                if limit is None or count.leased <= limit:
                    continue
                mine = [r for r in keyed if r.concurrency_key == count.key]
                excess += mine[max(len(mine) - (count.leased - limit), 0) :]
            if excess:
                self._unclaim(excess, strict=True)
        gone = {r.id for r in excess}
        return [r for r in rows if r.id not in gone]

    def _unclaim(self, rows: list[Any], *, strict: bool = False) -> None:
        """Give back claimed, unstarted jobs unspent, in their place (``unclaim.sql``).

        Args:
            rows: the claim's rows to give back (``id``, ``lease_token``).
            strict: raise a database error (else swallow it: the leases expire, are reaped).
        """
        ordered = sorted(rows, key=lambda r: r.id)
        back = {"ids": [r.id for r in ordered], "tokens": [r.lease_token for r in ordered]}
        try:
            with self._execute("unclaim", back) as cursor:
                cursor.fetchall()
        except DatabaseError:
            if strict:
                raise
