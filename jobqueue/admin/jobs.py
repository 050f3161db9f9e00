"""Internal: the jobs page (every job, read-only, with cancel, retry and run now) and its URLs."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import path, reverse

from jobqueue.admin import dashboard
from jobqueue.admin.base import JobAdminBase
from jobqueue.admin.filters import (
    ConcurrencyKeyFilter,
    JobTypeFilter,
    QueueFilter,
    StateFilter,
    TenantFilter,
)
from jobqueue.admin.inputs import ReadOnlyMixin
from jobqueue.models import Job, QueueDashboard


@admin.register(Job)
class JobAdmin(JobAdminBase):
    """Every job. The list reads one page by primary key; filters never scan for choices."""

    list_display = (
        "id",
        "type_name",
        "queue",
        "state_label",
        "tenant_id",
        "priority",
        "attempts_label",
        "run_at_short",
        "finished_short",
        "last_error_short",
    )
    list_display_links = ("id", "type_name")
    list_filter = (
        StateFilter,
        QueueFilter,
        JobTypeFilter,
        TenantFilter,
        ConcurrencyKeyFilter,
        ("created_at", admin.DateFieldListFilter),
        ("finished_at", admin.DateFieldListFilter),
    )
    # Only the primary key: sorting a million rows by another column is a full sort.
    sortable_by = ("id",)
    ordering = ("-id",)

    def get_urls(self) -> list:
        """Add the queue dashboard at ``jobqueue/job/dashboard/``."""
        urls = [
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name="jobqueue_dashboard",
            ),
            path(
                "dashboard/pause/",
                self.admin_site.admin_view(self.dashboard_pause_view),
                name="jobqueue_dashboard_pause",
            ),
        ]
        return urls + super().get_urls()

    def dashboard_view(self, request: HttpRequest):
        """Render the queue dashboard (needs the view permission on jobs)."""
        return dashboard.render(self, request)

    def dashboard_pause_view(self, request: HttpRequest):
        """Pause or resume a queue from the dashboard (POST; the Pauses page's permissions)."""
        return dashboard.pause_or_resume(self, request)


@admin.register(QueueDashboard)
class QueueDashboardLink(ReadOnlyMixin, admin.ModelAdmin):
    """The "Queue dashboard" row of the site and app indexes: its list is the dashboard."""

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        """Allow whoever may view jobs (the dashboard's own rule)."""
        return request.user.has_perm("jobqueue.view_job")

    def has_module_permission(self, request: HttpRequest) -> bool:
        """Show the row to whoever may view jobs."""
        return self.has_view_permission(request)

    def changelist_view(self, request: HttpRequest, extra_context=None) -> HttpResponseRedirect:
        """Redirect to the queue dashboard."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:jobqueue_dashboard"))
