"""Internal: a worker process's death on the ORM (contract: store/deaths.py).

A mixin of :class:`~jobqueue.store.generic.GenericStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.states import JobState
from jobqueue.store.finishing import (
    LEASE_COLUMNS,
    charge_expired,
    charged_outcome,
    died_entry,
    lease_of,
)
from jobqueue.store.interface import (
    ALONE_MESSAGE,
    COMPANY_MESSAGE,
    ExpiredLease,
    HandBack,
    ReapDecision,
)


class GenericDeathStore:
    """hand_back on the ORM; the host provides ``alias``, ``_jobs``, ``_finish``, ``finish_many``.

    A charged job is recorded by ``finish_many``, as the reaper's are.
    """

    alias: str
    _jobs: Any
    _finish: Any
    finish_many: Any

    def hand_back(
        self, worker_id: str, decide: Callable[[ExpiredLease], ReapDecision] | None = None
    ) -> HandBack:
        """Return a dead worker process's leases: see ``jobqueue/store/deaths.py``."""
        decide = decide or charge_expired
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            rows = (
                self._jobs.select_for_update()
                .filter(state=JobState.LEASED, leased_by=worker_id)
                .order_by("id")
                .values_list(*LEASE_COLUMNS, named=True)
            )
            leases = [lease_of(r) for r in rows]
            if len(leases) == 1:
                # Alone, its job is charged as an expired lease is: an outcome like any other.
                [lease] = leases
                entry = died_entry(lease, charged=True, message=ALONE_MESSAGE)
                recorded = self.finish_many([charged_outcome(lease, decide(lease), entry)], now)
                return HandBack.count(list(recorded.values()), company=False)
            message = COMPANY_MESSAGE.format(n=len(leases))
            states = []
            for lease in leases:
                entry = {
                    **died_entry(lease, charged=False, message=message),
                    "at": now.isoformat(),
                }
                fields = {
                    "state": JobState.READY,
                    "run_at": now,
                    "attempts": max(lease.attempts - 1, 0),
                    "suspect": True,
                    "finished_at": None,
                }
                states.append(self._finish(lease.id, lease.lease_token, entry, at=now, **fields))
        return HandBack.count(states, company=True)
