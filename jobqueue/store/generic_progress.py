"""Internal: progress, checkpoints and waiters on the ORM.

A mixin of :class:`~jobqueue.store.generic.GenericStore`; the contract is
:class:`~jobqueue.store.interface.Store`. There is no notification here: ``jobqueue.wait``
polls on these databases, so :meth:`watch` only reads the state.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.errors import JobNotFound, LeaseLost
from jobqueue.models import Job
from jobqueue.states import JobState


class GenericProgressStore:
    """record_progress, save_checkpoint, read_checkpoint, watch; the host gives ``alias``."""

    alias: str

    def _held_row(self, job_id: int, lease_token: uuid.UUID) -> Any:
        return Job.objects.using(self.alias).filter(
            id=job_id, lease_token=lease_token, state=JobState.LEASED
        )

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        with transaction.atomic(using=self.alias):
            if not self._held_row(job_id, lease_token).update(
                progress_done=done, progress_total=total
            ):
                raise LeaseLost(job_id)

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        with transaction.atomic(using=self.alias):
            if not self._held_row(job_id, lease_token).update(
                checkpoint=json.loads(state_json), checkpoint_at=timezone.now()
            ):
                raise LeaseLost(job_id)

    def read_checkpoint(self, job_id: int) -> Any:
        rows = list(Job.objects.using(self.alias).filter(id=job_id).values_list("checkpoint"))
        if not rows:
            raise JobNotFound(job_id)
        return rows[0][0]

    def watch(self, job_id: int) -> str | None:
        return (
            Job.objects.using(self.alias).filter(id=job_id).values_list("state", flat=True).first()
        )
