"""Internal: the ``Pause`` model (a paused queue or job type), kept beside ``models.py``.

Import it from :mod:`jobqueue.models`. A row means "claim nothing of this queue (or type)":
every claim reads the table (a few rows at most), so a pause binds every worker on every host
from the next claim on, and the row's removal (resume) frees them. Only the store writes rows.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class PauseKind(models.TextChoices):
    """What a :class:`Pause` names."""

    QUEUE = "queue", "queue"
    TYPE = "type", "job type"


class Pause(models.Model):
    """A paused queue or job type: who paused it, when, and why. Enqueue keeps working."""

    kind = models.CharField(max_length=8, choices=PauseKind.choices, default=PauseKind.QUEUE)
    name = models.CharField(max_length=200, help_text="The queue name, or the job type name.")
    paused_by = models.CharField(max_length=200, blank=True, default="")
    paused_at = models.DateTimeField("paused since", default=timezone.now)
    reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["kind", "name"]
        verbose_name = "pause"
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="jobqueue_pause_kind_name"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name}"
