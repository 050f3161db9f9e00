"""Internal: a worker process's death on the ORM (contract: store/deaths.py).

A mixin of :class:`~jobqueue.store.generic.GenericStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..states import JobState
from .base import ExpiredLease, ReapDecision
from .deaths import ALONE_MESSAGE, COMPANY_MESSAGE, HandBack


class GenericDeathStore:
    """hand_back on the ORM; the host class provides ``alias``, ``_jobs`` and ``_finish``."""

    alias: str
    _jobs: Any
    _finish: Any

    def hand_back(self, worker_id: str, decide: Callable[[ExpiredLease], ReapDecision]) -> HandBack:
        """Return a dead worker process's leases: see ``jobqueue/store/deaths.py``."""
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            rows = (
                self._jobs.select_for_update()
                .filter(state=JobState.LEASED, leased_by=worker_id)
                .order_by("id")
                .values_list("id", "lease_token", "type", "attempts", "max_attempts", named=True)
            )
            leases = [ExpiredLease.of(r) for r in rows]
            company = len(leases) > 1
            states = []
            for lease in leases:
                entry = {
                    "kind": "process_died",
                    "attempt": lease.attempts,
                    "at": now.isoformat(),
                    "worker": worker_id,
                    "type": "ProcessDied",
                    "charged": not company,
                    "message": COMPANY_MESSAGE.format(n=len(leases)) if company else ALONE_MESSAGE,
                }
                if company:
                    fields = {
                        "state": JobState.READY,
                        "run_at": now,
                        "attempts": max(lease.attempts - 1, 0),
                        "suspect": True,
                        "finished_at": None,
                    }
                else:
                    decision = decide(lease)
                    if decision.dead:
                        fields = {
                            "state": JobState.DEAD,
                            "dead_reason": "attempts_exhausted",
                            "finished_at": now,
                        }
                    else:
                        fields = {
                            "state": JobState.SCHEDULED,
                            "run_at": now + timedelta(seconds=decision.delay_s),
                        }
                states.append(self._finish(lease.id, lease.lease_token, entry, **fields))
        return HandBack.count(states, company=company)
