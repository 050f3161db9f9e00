"""Internal: operator writes and reads on the ORM: cancel, retry, run now, prune.

:class:`GenericOperator` is the operator area of :class:`~jobqueue.store.sqlite.GenericStore`,
with the worker rows (:class:`~jobqueue.store.shared.WorkerRegistry`). A cancel or retry of a
parent with children settles them in the same transaction
(:meth:`~jobqueue.store.sqlite.flows.GenericFlows.settle_children`). A prune deletes the parent
links of the jobs it deletes and then the batches left done with no member, as the PostgreSQL
store's ``prune.sql`` and ``prune_batches.sql`` do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from jobqueue.errors import DuplicateJob, JobNotFound
from jobqueue.models import Batch, JobParent
from jobqueue.states import CANCELLABLE, FINISHED, LIVE, RETRYABLE, JobState
from jobqueue.store.shared import WorkerRegistry
from jobqueue.store.sqlite.db import Executor, GenericArea, now_or
from jobqueue.store.sqlite.flows import GenericFlows

#: What each operator entry of a job's history says (as the PostgreSQL statements write it).
_MESSAGES = {
    "operator_retry": "retried by operator",
    "operator_run_now": "made ready now by operator",
}


def _entry(kind: str, now: datetime, previous_state: str, by: str) -> dict[str, Any]:
    """Return the history entry of an operator action (``by``: who)."""
    if kind == "operator_cancel":
        message = (
            "cancel requested by operator"
            if previous_state == JobState.LEASED
            else "cancelled by operator"
        )
    else:
        message = _MESSAGES[kind]
    return {
        "kind": kind,
        "at": now.isoformat(),
        "previous_state": previous_state,
        "message": message,
        "by": by,
    }


class GenericOperator(WorkerRegistry, GenericArea):
    """Operator writes and reads on the ORM: cancel, retry, run now, prune."""

    def __init__(self, db: Executor, flows: GenericFlows) -> None:
        super().__init__(db)
        self.flows = flows

    def wake_queues(self, queues: Sequence[str]) -> None:
        """Do nothing: on this driver workers poll (nothing listens)."""

    def cancel_or_request(self, job_id: int, by: str = "") -> str | None:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = (
                self._jobs.select_for_update()
                .filter(id=job_id)
                .values("state", "errors", "cancel_requested_at", "has_children")
                .first()
            )
            if row is not None and row["state"] in CANCELLABLE - {JobState.LEASED}:
                self._jobs.filter(id=job_id, state=row["state"]).update(
                    state=JobState.CANCELLED,
                    finished_at=now,
                    errors=[*row["errors"], _entry("operator_cancel", now, row["state"], by)],
                )
                if row["has_children"]:
                    self.flows.settle_children(job_id, row["state"], JobState.CANCELLED, now)
                return JobState.CANCELLED
            # A running job is asked to stop; its worker ends it cancelled.
            if (
                row is not None
                and row["state"] == JobState.LEASED
                and row["cancel_requested_at"] is None
            ):
                self._jobs.filter(id=job_id, state=JobState.LEASED).update(
                    cancel_requested_at=now,
                    errors=[*row["errors"], _entry("operator_cancel", now, JobState.LEASED, by)],
                )
                return JobState.LEASED
        if not self._jobs.filter(id=job_id).exists():
            raise JobNotFound(job_id)
        return None

    def retry(self, job_id: int, by: str = "") -> bool:
        now = timezone.now()
        try:
            with transaction.atomic(using=self.alias):
                row = (
                    self._jobs.filter(id=job_id, state__in=RETRYABLE)
                    .values("errors", "state", "queue", "dedupe_key", "has_children")
                    .first()
                )
                if row is None:
                    if not self._jobs.filter(id=job_id).exists():
                        raise JobNotFound(job_id)
                    return False
                entry = _entry("operator_retry", now, row["state"], by)
                updated = self._jobs.filter(id=job_id, state__in=RETRYABLE).update(
                    state=JobState.READY,
                    run_at=now,
                    attempts=0,
                    finished_at=None,
                    dead_reason="",
                    lease_token=None,
                    lease_until=None,
                    result=None,
                    cancel_requested_at=None,
                    errors=[*row["errors"], entry],
                )
                if updated and row["has_children"]:
                    self.flows.settle_children(job_id, row["state"], JobState.READY, now)
                return bool(updated)
        except IntegrityError:
            holder = (
                self._jobs.filter(queue=row["queue"], dedupe_key=row["dedupe_key"], state__in=LIVE)
                .values_list("id", flat=True)
                .first()
            )
            raise DuplicateJob(row["queue"], row["dedupe_key"] or "", holder) from None

    def cancel_many(self, job_ids: Sequence[int], by: str = "") -> dict[int, str]:
        done: dict[int, str] = {}
        # One transaction (SQLite: one commit), as retry_many.
        with transaction.atomic(using=self.alias):
            for job_id in sorted(set(job_ids)):
                try:
                    state = self.cancel_or_request(job_id, by)
                except JobNotFound:
                    continue
                if state is not None:
                    done[job_id] = state
        return done

    def retry_many(self, job_ids: Sequence[int], by: str = "") -> set[int]:
        retried: set[int] = set()
        # One transaction (SQLite: one commit); each retry() is its own savepoint inside it.
        with transaction.atomic(using=self.alias):
            for job_id in sorted(set(job_ids)):
                try:
                    if self.retry(job_id, by):
                        retried.add(job_id)
                except (DuplicateJob, JobNotFound):
                    continue
        return retried

    def run_now(self, job_id: int, by: str = "") -> bool:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = self._jobs.filter(id=job_id, state=JobState.SCHEDULED).values("errors").first()
            if row is not None and self._jobs.filter(id=job_id, state=JobState.SCHEDULED).update(
                state=JobState.READY,
                run_at=now,
                errors=[*row["errors"], _entry("operator_run_now", now, JobState.SCHEDULED, by)],
            ):
                return True
        if not self._jobs.filter(id=job_id).exists():
            raise JobNotFound(job_id)
        return False

    def _prunable(self, states: Sequence[str], older_than_s: float, now: datetime | None):
        cutoff = now_or(now) - timedelta(seconds=older_than_s)
        finished = [state for state in states if state in FINISHED]
        return self._jobs.filter(state__in=finished, finished_at__lt=cutoff)

    def prune(
        self,
        states: Sequence[str],
        older_than_s: float,
        limit: int,
        now: datetime | None = None,
    ) -> int:
        with transaction.atomic(using=self.alias):
            prunable = self._prunable(states, older_than_s, now)
            ids = list(prunable.values_list("id", flat=True)[:limit])
            if not ids:
                return 0
            # Re-check the condition in the DELETE: a row retried meanwhile is not deleted.
            doomed = prunable.filter(id__in=ids)
            gone = list(doomed.values_list("id", "batch_id"))
            deleted, _ = doomed.delete()
            # A link goes with its child, not its parent: see prune.sql.
            JobParent.objects.using(self.alias).filter(child_id__in=[i for i, _ in gone]).delete()
        batches = sorted({b for _, b in gone if b is not None})
        if batches:
            # After the commit above (see prune_batches.sql): the batches left done and empty.
            members = self._jobs.filter(batch_id=OuterRef("id"))
            Batch.objects.using(self.alias).filter(
                id__in=batches, pending=0, completions__gt=0
            ).exclude(Exists(members)).delete()
        return deleted

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        return self._prunable(states, older_than_s, now).count()
