"""Internal: a job's parents and children on its admin page (``enqueue(..., after=[...])``).

Two read-only fields: the jobs this one runs after, and the jobs that run after it, each a link
to its page with its state. Read from ``JobParent`` by the indexes both ways; at most
:data:`SHOWN` of each (a fan-out of 10,000 children shows the first ones and a count).
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from jobqueue.admin.display import state_badge
from jobqueue.models import Job, JobParent

#: Most parents or children listed on one job's page.
SHOWN = 50


def _links(alias: str, ids: list[int], total: int) -> str:
    if not ids:
        return "-"
    found = dict(Job.objects.using(alias).filter(id__in=ids).values_list("id", "state"))
    shown = format_html_join(
        " ",
        '<a href="{}">#{}</a> {}',
        (
            (reverse("admin:jobqueue_job_change", args=[i]), i, state_badge(found[i]))
            if i in found
            else ("#", i, "pruned")
            for i in ids
        ),
    )
    if total > len(ids):
        return format_html("{} and {} more", shown, total - len(ids))
    return shown


class FamilyMixin:
    """``parents_label`` and ``children_label`` for the job detail page."""

    @admin.display(description="runs after")
    def parents_label(self, job: Job) -> str:
        """Link the jobs this one waits for (``after=``), with their states."""
        edges = JobParent.objects.using(job._state.db).filter(child_id=job.id).order_by("id")
        ids = list(edges.values_list("parent_id", flat=True)[:SHOWN])
        return _links(
            job._state.db or "default", ids, edges.count() if len(ids) == SHOWN else len(ids)
        )

    @admin.display(description="runs before")
    def children_label(self, job: Job) -> str:
        """Link the jobs that run after this one, with their states."""
        if not job.has_children:
            return "-"
        edges = JobParent.objects.using(job._state.db).filter(parent_id=job.id).order_by("child_id")
        ids = list(edges.values_list("child_id", flat=True)[:SHOWN])
        return _links(
            job._state.db or "default", ids, edges.count() if len(ids) == SHOWN else len(ids)
        )
