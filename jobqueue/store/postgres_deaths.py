"""Internal: the PostgreSQL statements of a worker process's death (contract: store/deaths.py).

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from .base import ExpiredLease, ReapDecision
from .deaths import ALONE_MESSAGE, COMPANY_MESSAGE, HandBack
from .rows import fetchall


class PostgresDeathStore:
    """hand_back on PostgreSQL; the host class provides ``alias`` and ``_execute(name, params)``."""

    alias: str
    _execute: Any

    def hand_back(self, worker_id: str, decide: Callable[[ExpiredLease], ReapDecision]) -> HandBack:
        """Return a dead worker process's leases: see ``jobqueue/store/deaths.py``."""
        with transaction.atomic(using=self.alias):
            with self._execute("dead_worker_leases", {"worker_id": worker_id}) as cursor:
                leases = [ExpiredLease.of(r) for r in fetchall(cursor)]
            if not leases:
                return HandBack()
            company = len(leases) > 1
            if company:
                decisions = [
                    ReapDecision(id=x.id, lease_token=x.lease_token, dead=False, delay_s=0.0)
                    for x in leases
                ]
                message = COMPANY_MESSAGE.format(n=len(leases))
            else:
                decisions = [decide(leases[0])]
                message = ALONE_MESSAGE
            params = {
                "ids": [d.id for d in decisions],
                "tokens": [d.lease_token for d in decisions],
                "dead": [d.dead for d in decisions],
                "delays": [d.delay_s for d in decisions],
                "company": company,
                "message": message,
            }
            with self._execute("hand_back", params) as cursor:
                states = [r.state for r in fetchall(cursor)]
        return HandBack.count(states, company=company)
