"""Internal: the ``Batch`` model (a group of jobs with a callback), kept beside ``models.py``.

Import it from :mod:`jobqueue.models`. ``jobqueue.batch()`` writes the row and its members'
``Job.batch_id``; from then on the statements that move a member's state write it:
``store/sql/finish_many.sql`` for a run's outcome, the row trigger of migration 0016_batches for
the other transitions into or out of succeeded, dead or cancelled (on SQLite, all of them). The
update that brings ``pending`` to zero enqueues the callback jobs in the same statement
(docs/decisions.md, "Batches").
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

__all__ = ["Batch"]


class Batch(models.Model):
    """A group of jobs whose end enqueues a callback job, once per completion."""

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(default=timezone.now)
    payload = models.JSONField(default=dict, blank=True, help_text="Handed to the callbacks.")
    # [{"kind": "success"|"complete", "type", "queue", "priority", "max_attempts", "timeout_s"}]
    callbacks = models.JSONField(default=list, blank=True)
    total = models.PositiveIntegerField(default=0, help_text="Members.")
    pending = models.PositiveIntegerField(default=0, help_text="Members not finished.")
    succeeded = models.PositiveIntegerField(default=0)
    dead = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    completions = models.PositiveIntegerField(
        default=0, help_text="Times pending reached zero (a retried member reopens the batch)."
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    success_job_id = models.BigIntegerField(
        null=True, blank=True, help_text="The on_success callback of the last completion."
    )
    complete_job_id = models.BigIntegerField(
        null=True, blank=True, help_text="The on_complete callback of the last completion."
    )

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return f"batch {self.id}"

    @property
    def done(self) -> bool:
        """Whether every member is finished (succeeded, dead or cancelled)."""
        return self.pending == 0 and self.completions > 0
