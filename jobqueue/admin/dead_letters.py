"""Internal: the dead-letter page: jobs that went dead, why, and retry or cancel (discard)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import urlencode

from jobqueue.admin.base import JobAdminBase
from jobqueue.admin.databases import selected_alias, with_db
from jobqueue.admin.display import compact_time, format_time
from jobqueue.admin.filters import (
    DeadLetterQueueFilter,
    DeadLetterTypeFilter,
    DeadReasonFilter,
    ErrorGroupFilter,
    TenantFilter,
)
from jobqueue.models import DeadLetter, Job
from jobqueue.ops.dead_letters import error_groups

#: Error groups listed above the dead letters (the largest).
ERROR_GROUPS = 20


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
        ErrorGroupFilter,
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

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        """Add the dead letters grouped by error above the list, each linking to its jobs."""
        alias = selected_alias(request)
        groups = error_groups(alias, ERROR_GROUPS + 1)
        url = with_db(reverse(f"{self.admin_site.name}:jobqueue_deadletter_changelist"), alias)
        shown = []
        for group in groups[:ERROR_GROUPS]:
            query = urlencode({"error_type": group.error_type, "error": group.digest})
            shown.append(
                {
                    "error_type": group.error_type,
                    "shown_message": group.shown_message,
                    "count": group.count,
                    "first_seen_label": format_time(group.first_seen),
                    "last_seen_label": format_time(group.last_seen),
                    "url": f"{url}{'&' if '?' in url else '?'}{query}",
                }
            )
        extra_context = {
            **(extra_context or {}),
            "error_groups": shown,
            "error_groups_more": len(groups) > ERROR_GROUPS,
        }
        return super().changelist_view(request, extra_context)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        """Allow users who may view jobs: dead letters are jobs."""
        return super().has_view_permission(request, obj) or request.user.has_perm(
            "jobqueue.view_job"
        )
