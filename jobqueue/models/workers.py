"""The worker table: one row per running worker process (heartbeat, status, what it serves)."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


class WorkerQuerySet(models.QuerySet):
    """Worker rows, read with the database's clock beside them."""

    def with_clock(self) -> WorkerQuerySet:
        """Annotate each row with ``db_now``, the database's time: :attr:`Worker.is_alive` uses it.

        A row's ``last_seen_at`` is the database's time of its last heartbeat; comparing it
        with this host's clock would call a live worker dead, or a killed one alive, as far as
        the clocks differ (issue 32).
        """
        return self.annotate(db_now=Now())


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

    objects = WorkerQuerySet.as_manager()

    class Meta:
        ordering = ["host", "pid"]

    def __str__(self) -> str:
        return self.worker_id

    @property
    def is_alive(self) -> bool:
        """Return True if the worker heartbeated within three of its heartbeat intervals.

        Judged on the database clock when the row was read with
        :meth:`WorkerQuerySet.with_clock` (the admin and the dashboard do), else on this
        process's clock.
        """
        silence = timedelta(seconds=3 * self.heartbeat_interval_s)
        now = getattr(self, "db_now", None) or timezone.now()
        return now - self.last_seen_at <= silence

    @property
    def reported_status(self) -> str:
        """Return its status, or that it fell silent: a killed process never reports "stopped"."""
        if self.is_alive:
            return self.status
        return f"silent (last: {self.status})"


# -- cron ------------------------------------------------------------------------------------
