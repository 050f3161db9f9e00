"""Internal: the batches page: each batch's counts, its members, its callback jobs (read-only).

A batch's counts are written by the database as its members finish (migration 0016_batches), so
the page never writes: no add, change or delete. Whoever may view jobs may view batches. The
members link is the job list filtered on ``batch_id`` (the partial index ``jobqueue_job_batch``);
a member's job page links back here (``JobAdminBase.batch_link``). A batch lives on its members'
queue database: the page lists the selected one's (``?db=``) and its links keep it.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobqueue.admin.databases import QueueDatabaseMixin, with_db
from jobqueue.admin.display import json_block
from jobqueue.admin.inputs import ReadOnlyMixin
from jobqueue.models import Batch

__all__ = ["BatchAdmin", "batch_url"]


def batch_url(site_name: str, batch_id: int, alias: str = "default") -> str:
    """Return the admin URL of batch ``batch_id`` (on queue database ``alias``) on ``site_name``."""
    return with_db(reverse(f"{site_name}:jobqueue_batch_change", args=[batch_id]), alias)


@admin.register(Batch)
class BatchAdmin(ReadOnlyMixin, QueueDatabaseMixin, admin.ModelAdmin):
    """Batches newest first, with their counts by outcome and links to members and callbacks."""

    list_display = (
        "id",
        "created_at",
        "total",
        "pending",
        "succeeded",
        "dead",
        "cancelled",
        "completions",
        "completed_at",
        "members_link",
        "callbacks_link",
    )
    fields = (
        ("id", "created_at"),
        ("total", "pending"),
        ("succeeded", "dead", "cancelled"),
        ("completions", "completed_at"),
        "members_link",
        "callbacks_link",
        "payload_block",
        "callbacks_block",
    )
    readonly_fields = fields[0] + fields[1] + fields[2] + fields[3] + fields[4:]
    sortable_by = ("id",)
    ordering = ("-id",)
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50

    class Media:
        css = {"all": ("jobqueue/admin.css",)}

    def has_view_permission(self, request: HttpRequest, obj: Batch | None = None) -> bool:
        """Allow whoever may view jobs: a batch is a view of its jobs."""
        return request.user.has_perm("jobqueue.view_job")

    def has_module_permission(self, request: HttpRequest) -> bool:
        """Show the page to whoever may view jobs."""
        return request.user.has_perm("jobqueue.view_job")

    @admin.display(description="payload")
    def payload_block(self, batch: Batch) -> SafeString:
        """Show the batch payload as pretty JSON, masked (``ADMIN_MASKED_KEYS``)."""
        return json_block(batch.payload)

    @admin.display(description="callbacks")
    def callbacks_block(self, batch: Batch) -> SafeString:
        """Show the callbacks (types, payloads) as pretty JSON, masked."""
        return json_block(batch.callbacks)

    @admin.display(description="members")
    def members_link(self, batch: Batch) -> SafeString:
        """Link to the job list filtered on this batch."""
        url = with_db(
            f"{reverse(f'{self.admin_site.name}:jobqueue_job_changelist')}?batch_id={batch.id}",
            batch._state.db or "default",
        )
        return format_html('<a href="{}">{} members</a>', url, batch.total)

    @admin.display(description="callbacks")
    def callbacks_link(self, batch: Batch) -> SafeString | str:
        """Link to the callback jobs of the last completion, or say what is expected."""
        fired = [
            (kind, job_id)
            for kind, job_id in (
                ("on_success", batch.success_job_id),
                ("on_complete", batch.complete_job_id),
            )
            if job_id is not None
        ]
        if not fired:
            return "-" if batch.pending else "none fired"
        return format_html_join(
            " ",
            '<a href="{}">{} #{}</a>',
            (
                (
                    with_db(
                        reverse(f"{self.admin_site.name}:jobqueue_job_change", args=[job_id]),
                        batch._state.db or "default",
                    ),
                    kind,
                    job_id,
                )
                for kind, job_id in fired
            ),
        )
