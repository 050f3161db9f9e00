"""Internal: heartbeats, outcomes, releases, reaping and dead workers' jobs on the ORM.

:class:`GenericFinishing` is the area of :class:`~jobqueue.store.sqlite.GenericStore` that writes
a held job's end: heartbeats, outcomes (``finish_many``, which also feeds the rollup), give-backs,
the reaper's expired leases and a worker process's death (contract: ``Store.hand_back``). Each
end of a held job goes through :meth:`~GenericFinishing._finish`, the ORM twin of
``finish_many.sql``'s cancel-requested ``CASE``; a parent with children settles them in the same
transaction (:meth:`~jobqueue.store.sqlite.flows.GenericFlows.settle_children`). Time is this
process's clock, as everywhere in this driver (:mod:`jobqueue.store.sqlite`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.errors import LeaseLost
from jobqueue.models.metrics import EXPIRED_KIND
from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store.finishing import (
    LEASE_COLUMNS,
    charge_expired,
    charged_outcome,
    died_entry,
    died_words,
    expired_entry,
    lease_of,
    target_fields,
)
from jobqueue.store.interface import (
    ALONE_MESSAGE,
    COMPANY_MESSAGE,
    RELEASED_MESSAGE,
    ExpiredLease,
    HandBack,
    HeldLease,
    ReapDecision,
)
from jobqueue.store.sqlite.db import Executor, GenericArea, now_or
from jobqueue.store.sqlite.flows import GenericFlows
from jobqueue.store.sqlite.metrics import GenericMetrics


class GenericFinishing(GenericArea):
    """Heartbeats, outcomes, releases, reaping and dead workers' jobs on the ORM."""

    def __init__(self, db: Executor, flows: GenericFlows, metrics: GenericMetrics) -> None:
        super().__init__(db)
        self.flows = flows
        self.metrics = metrics

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        until = timezone.now() + timedelta(seconds=lease_s)
        kept: dict[int, HeldLease] = {}
        with transaction.atomic(using=self.alias):
            for job_id, token in sorted(leases):
                if self._held(job_id, token).update(lease_until=until):
                    cancel = self._jobs.filter(
                        id=job_id, cancel_requested_at__isnull=False
                    ).exists()
                    kept[job_id] = HeldLease(lease_until=until, cancel_requested=cancel)
        return kept

    def _finish(
        self,
        job_id: int,
        lease_token: uuid.UUID,
        entry: dict[str, Any] | None,
        *,
        at: datetime | None = None,
        **fields: Any,
    ) -> str:
        """Apply ``fields`` to a held job, or end it cancelled if a cancel was requested.

        This is the ORM twin of the cancel-requested ``CASE`` of finish_many.sql (and of the
        give-backs: release.sql, hand_back.sql, defer_many.sql). ``at`` stands for the clock.
        """
        now = at or timezone.now()
        with transaction.atomic(using=self.alias):
            row = (
                self._held(job_id, lease_token)
                .values("errors", "cancel_requested_at", "attempts", "leased_by", "has_children")
                .first()
            )
            if row is None:
                raise LeaseLost(job_id)
            errors = list(row["errors"])
            if entry is not None:
                errors.append(entry)
            if row["cancel_requested_at"] is not None:
                if entry is None:
                    errors.append(
                        {
                            "kind": "cancelled",
                            "attempt": row["attempts"],
                            "at": now.isoformat(),
                            "worker": row["leased_by"],
                            "message": "cancel requested while running; "
                            "the handler completed anyway",
                        }
                    )
                keep = {k: v for k, v in fields.items() if k in {"result", "attempts"}}
                fields = {
                    **keep,
                    "state": JobState.CANCELLED,
                    "finished_at": now,
                    "dead_reason": "",
                }
            updated = self._held(job_id, lease_token).update(
                errors=errors, lease_token=None, lease_until=None, **fields
            )
            if not updated:
                raise LeaseLost(job_id)
            if row["has_children"]:
                self.flows.settle_children(job_id, JobState.LEASED, fields["state"], now)
            return fields["state"]

    def finish_many(
        self, outcomes: Sequence[RunOutcome], now: datetime | None = None
    ) -> dict[int, str]:
        recorded: dict[int, str] = {}
        now = now_or(now)
        with transaction.atomic(using=self.alias):
            before = self.metrics.before(o.job_id for o in outcomes)
            for o in sorted(outcomes, key=lambda o: o.job_id):
                entry = None if o.error is None else {**o.error, "at": now.isoformat()}
                fields = target_fields(
                    o.state,
                    now,
                    dead_reason=o.dead_reason,
                    retry_at=o.retry_at,
                    delay_s=o.delay_s,
                    result_json=o.result_json,
                )
                try:
                    recorded[o.job_id] = self._finish(
                        o.job_id, o.lease_token, entry, at=now, **fields
                    )
                except LeaseLost:
                    continue
            expired = {
                o.job_id for o in outcomes if o.error and o.error.get("kind") == EXPIRED_KIND
            }
            self.metrics.roll_up(before, recorded, now, expired)
        return recorded

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = self._held(job_id, lease_token).values("attempts", "leased_by").first()
            if row is None:
                raise LeaseLost(job_id)
            entry = {
                "kind": "released",
                "attempt": row["attempts"],
                "at": now.isoformat(),
                "worker": row["leased_by"],
                "message": message,
            }
            return self._finish(
                job_id,
                lease_token,
                entry,
                state=JobState.READY,
                run_at=now,
                attempts=max(row["attempts"] - 1, 0),
                finished_at=None,
            )

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        row = (
            self._held(job_id, lease_token)
            .values_list("id", "lease_token", "type", "attempts", "max_attempts", named=True)
            .first()
        )
        if row is None:
            raise LeaseLost(job_id)
        return ExpiredLease.of(row)

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        rows = self._jobs.filter(state=JobState.LEASED, lease_until__lt=now_or(now)).order_by("id")
        return [lease_of(r) for r in rows.values_list(*LEASE_COLUMNS, named=True)[:limit]]

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        decide = decide or charge_expired
        now = now_or(now)
        with transaction.atomic(using=self.alias):
            expired = self.expired_leases(limit, now)
            outcomes = [charged_outcome(x, decide(x), expired_entry(x)) for x in expired]
            states = list(self.finish_many(outcomes, now=now).values())
        return states.count(JobState.SCHEDULED), states.count(JobState.DEAD)

    def hand_back(
        self,
        worker_id: str,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        *,
        cause: str = "",
    ) -> HandBack:
        """Return a dead worker process's leases: ``Store.hand_back``."""
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
                message = ALONE_MESSAGE.format(died=died_words(cause))
                entry = died_entry(lease, charged=True, message=message)
                recorded = self.finish_many([charged_outcome(lease, decide(lease), entry)], now)
                return HandBack.count(list(recorded.values()), company=False)
            message = COMPANY_MESSAGE.format(died=died_words(cause), n=len(leases))
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
