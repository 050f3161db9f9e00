"""The worker table: one row per running worker process (heartbeat, status, what it serves)."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone


class Worker(models.Model):
    """One running worker process, refreshed by its heartbeat and removed at clean exit."""

    worker_id = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    heartbeat_interval_s = models.FloatField(default=10.0)
    running_jobs = models.PositiveIntegerField(default=0, help_text="At its last heartbeat.")
    status = models.CharField(
        max_length=16,
        default="running",
        help_text="running, or draining (told to stop: claims nothing new).",
    )
    listener_up = models.BooleanField(
        null=True,
        blank=True,
        help_text="Its LISTEN connection is up (None: it polls, no LISTEN).",
    )

    class Meta:
        ordering = ["host", "pid"]

    def __str__(self) -> str:
        return self.worker_id

    @property
    def is_alive(self) -> bool:
        """Return True if the worker heartbeated within three of its heartbeat intervals."""
        silence = timedelta(seconds=3 * self.heartbeat_interval_s)
        return timezone.now() - self.last_seen_at <= silence

    @property
    def reported_status(self) -> str:
        """Return its status, or that it fell silent: a killed process never reports "stopped"."""
        if self.is_alive:
            return self.status
        return f"silent (last: {self.status})"


# -- cron ------------------------------------------------------------------------------------
