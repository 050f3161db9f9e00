"""Internal: the operator's writes on the ORM: cancel, retry, run now, prune.

A mixin of :class:`~jobqueue.store.generic.GenericStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..errors import DuplicateJob, JobNotFound
from ..states import CANCELLABLE, FINISHED, LIVE, RETRYABLE, JobState


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


class GenericOperatorStore:
    """cancel, retry, run_now and prune on the ORM; the host class provides ``alias``, ``_jobs``."""

    alias: str
    _jobs: Any

    def cancel_or_request(self, job_id: int) -> str | None:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            if self._jobs.filter(id=job_id, state__in=CANCELLABLE - {JobState.LEASED}).update(
                state=JobState.CANCELLED, finished_at=now
            ):
                return JobState.CANCELLED
            # A running job is asked to stop; its worker ends it cancelled.
            if self._jobs.filter(
                id=job_id, state=JobState.LEASED, cancel_requested_at__isnull=True
            ).update(cancel_requested_at=now):
                return JobState.LEASED
        if not self._jobs.filter(id=job_id).exists():
            raise JobNotFound(job_id)
        return None

    def retry(self, job_id: int) -> bool:
        now = timezone.now()
        try:
            with transaction.atomic(using=self.alias):
                row = (
                    self._jobs.filter(id=job_id, state__in=RETRYABLE)
                    .values("errors", "state", "queue", "dedupe_key")
                    .first()
                )
                if row is None:
                    if not self._jobs.filter(id=job_id).exists():
                        raise JobNotFound(job_id)
                    return False
                entry = {
                    "kind": "operator_retry",
                    "at": now.isoformat(),
                    "previous_state": row["state"],
                    "message": "retried by operator",
                }
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
                return bool(updated)
        except IntegrityError:
            holder = (
                self._jobs.filter(queue=row["queue"], dedupe_key=row["dedupe_key"], state__in=LIVE)
                .values_list("id", flat=True)
                .first()
            )
            raise DuplicateJob(row["queue"], row["dedupe_key"] or "", holder) from None

    def retry_many(self, job_ids: Sequence[int]) -> set[int]:
        retried: set[int] = set()
        # One transaction (SQLite: one commit); each retry() is its own savepoint inside it.
        with transaction.atomic(using=self.alias):
            for job_id in sorted(set(job_ids)):
                try:
                    if self.retry(job_id):
                        retried.add(job_id)
                except (DuplicateJob, JobNotFound):
                    continue
        return retried

    def run_now(self, job_id: int) -> bool:
        updated = self._jobs.filter(id=job_id, state=JobState.SCHEDULED).update(
            state=JobState.READY, run_at=timezone.now()
        )
        if updated:
            return True
        if not self._jobs.filter(id=job_id).exists():
            raise JobNotFound(job_id)
        return False

    def _prunable(self, states: Sequence[str], older_than_s: float, now: datetime | None):
        cutoff = _now(now) - timedelta(seconds=older_than_s)
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
            deleted, _ = prunable.filter(id__in=ids).delete()
            return deleted

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        return self._prunable(states, older_than_s, now).count()
