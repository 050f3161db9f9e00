"""Internal: the dead-letter page: jobs that went dead, why, and retry or cancel (discard)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from jobqueue.admin.base import JobAdminBase
from jobqueue.admin.display import compact_time
from jobqueue.admin.filters import (
    DeadLetterQueueFilter,
    DeadLetterTypeFilter,
    DeadReasonFilter,
    TenantFilter,
)
from jobqueue.models import DeadLetter, Job


class DeadAtFilter(admin.DateFieldListFilter):
    """The date filter on ``finished_at``, named for what it means here."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "dead at"
        # Every dead job has a finished_at: drop "No date" and "Has date".
        self.links = self.links[:5]


@admin.register(DeadLetter)
class DeadLetterAdmin(JobAdminBase):
    """Dead jobs, newest first (served by the partial index on finished jobs)."""

    list_display = (
        "id",
        "type_name",
        "queue",
        "reason_label",
        "last_error_short",
        "attempts_label",
        "dead_at",
        "tenant_id",
    )
    list_display_links = ("id", "type_name")
    list_filter = (
        DeadReasonFilter,
        DeadLetterQueueFilter,
        DeadLetterTypeFilter,
        TenantFilter,
        ("finished_at", DeadAtFilter),
    )
    sortable_by = ("id", "dead_at")
    ordering = ("-finished_at", "-id")
    actions = ("retry_jobs", "cancel_jobs")

    @admin.display(description="dead at", ordering="finished_at")
    def dead_at(self, job: Job) -> str:
        """Show when the job went dead."""
        return compact_time(job.finished_at)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        """Allow users who may view jobs: dead letters are jobs."""
        return super().has_view_permission(request, obj) or request.user.has_perm(
            "jobqueue.view_job"
        )
