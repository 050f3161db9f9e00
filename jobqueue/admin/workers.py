"""Internal: the workers page: one row per worker process, alive or not.

A worker process serves one queue database and registers there (``runworkers`` runs one per
alias), so the page lists the selected database's (``?db=``, :mod:`.databases`).
"""

from __future__ import annotations

from typing import cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from jobqueue.admin.databases import QueueDatabaseMixin
from jobqueue.admin.display import compact_time, time_column
from jobqueue.admin.inputs import InputGuardMixin, ReadOnlyMixin
from jobqueue.models import Worker
from jobqueue.models.workers import WorkerQuerySet


@admin.register(Worker)
class WorkerAdmin(ReadOnlyMixin, QueueDatabaseMixin, InputGuardMixin, admin.ModelAdmin):
    """Worker processes as they last reported (on the selected queue database); read-only."""

    list_display = (
        "worker_id",
        "host",
        "pid",
        "queue_names",
        "concurrency",
        "running_jobs",
        "reported_status",
        "started_label",
        "last_seen_label",
        "alive",
        "listener",
    )
    #: The (read-only) page of one worker: its times to the second with their zone.
    fields = readonly_fields = (
        "worker_id",
        "host",
        "pid",
        "queue_names",
        "concurrency",
        "running_jobs",
        "reported_status",
        "started_at_shown",
        "last_seen_at_shown",
        "heartbeat_interval_s",
        "alive",
        "listener",
    )
    started_at_shown = time_column("started_at", "started at")
    last_seen_at_shown = time_column("last_seen_at", "last seen at")
    list_filter = ("status", "host")
    search_fields = ("worker_id", "host")
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("jobqueue/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        """Read the rows with the database's time beside them: liveness on the database clock."""
        queryset = cast(WorkerQuerySet, super().get_queryset(request))
        return queryset.with_clock()

    @admin.display(description="queues")
    def queue_names(self, worker: Worker) -> str:
        """Show the queues as a comma-separated list."""
        return ", ".join(worker.queues or [])

    @admin.display(description="status", ordering="status")
    def reported_status(self, worker: Worker) -> str:
        """Show :attr:`Worker.reported_status`."""
        return worker.reported_status

    @admin.display(description="started", ordering="started_at")
    def started_label(self, worker: Worker) -> str:
        """Show when the process started, to the second."""
        return compact_time(worker.started_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen_label(self, worker: Worker) -> str:
        """Show its last heartbeat (database clock), to the second."""
        return compact_time(worker.last_seen_at)

    @admin.display(description="alive", boolean=True)
    def alive(self, worker: Worker) -> bool:
        """Show whether it heartbeated within three of its heartbeat intervals."""
        return worker.is_alive

    @admin.display(description="listening", boolean=True)
    def listener(self, worker: Worker) -> bool | None:
        """Show whether its LISTEN connection is up (unknown: it polls without LISTEN)."""
        return worker.listener_up
