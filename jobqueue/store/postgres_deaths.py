"""Internal: the PostgreSQL statements of a worker process's death (contract: store/deaths.py).

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from jobqueue.store.finishing import charge_expired, charged_outcome, died_entry, lease_of
from jobqueue.store.interface import (
    ALONE_MESSAGE,
    COMPANY_MESSAGE,
    ExpiredLease,
    HandBack,
    ReapDecision,
)
from jobqueue.store.rows import fetchall


class PostgresDeathStore:
    """hand_back on PostgreSQL; the host class provides ``alias`` and ``_execute(name, params)``."""

    alias: str
    _execute: Any
    finish_many: Any

    def hand_back(
        self, worker_id: str, decide: Callable[[ExpiredLease], ReapDecision] | None = None
    ) -> HandBack:
        """Return a dead worker process's leases: see ``jobqueue/store/deaths.py``."""
        decide = decide or charge_expired
        with transaction.atomic(using=self.alias):
            with self._execute("dead_worker_leases", {"worker_id": worker_id}) as cursor:
                leases = [lease_of(r) for r in fetchall(cursor)]
            if not leases:
                return HandBack()
            if len(leases) == 1:
                # Alone, its job is charged as an expired lease is: an outcome like any other.
                [lease] = leases
                entry = died_entry(lease, charged=True, message=ALONE_MESSAGE)
                recorded = self.finish_many([charged_outcome(lease, decide(lease), entry)])
                return HandBack.count(list(recorded.values()), company=False)
            params = {
                "ids": [x.id for x in leases],
                "tokens": [x.lease_token for x in leases],
                "message": COMPANY_MESSAGE.format(n=len(leases)),
            }
            with self._execute("hand_back", params) as cursor:
                states = [r.state for r in fetchall(cursor)]
        return HandBack.count(states, company=True)
