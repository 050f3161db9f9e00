"""Internal: what the job and dead-letter pages share: read-only rows, columns, detail, actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from jobqueue.admin import actions as bulk
from jobqueue.admin.batches import batch_url
from jobqueue.admin.databases import DatabaseChangeList, QueueDatabaseMixin, with_db
from jobqueue.admin.display import (
    breakable,
    compact_time,
    error_history_table,
    format_time,
    json_block,
    short_error,
    state_badge,
)
from jobqueue.admin.family import FamilyMixin
from jobqueue.admin.inputs import InputGuardMixin, ReadOnlyMixin
from jobqueue.admin.paginator import EstimatedCountPaginator
from jobqueue.admin.timeline import timeline_table
from jobqueue.masking import mask, safe_text, secrets_of
from jobqueue.models import Job
from jobqueue.ops.jobs import progress_text
from jobqueue.states import JobState

if TYPE_CHECKING:
    from django_stubs_ext import FieldsetSpec  # type-checking only: no runtime dependency

DETAIL_FIELDSETS: FieldsetSpec = (
    (
        None,
        {
            "fields": (
                ("id", "state_label"),
                "timeline",
                ("type", "queue"),
                ("tenant_id", "priority"),
                ("attempts_label", "timeout_s"),
                ("dedupe_key", "ordering_key"),
                ("concurrency_key", "concurrency_limit"),
                ("reason_label", "cancel_requested_label"),
                ("parents_label", "children_label"),
                "batch_link",
            )
        },
    ),
    ("Payload", {"fields": ("payload_block",)}),
    ("Progress", {"fields": (("progress_label", "checkpoint_at_label"), "checkpoint_block")}),
    ("Error history", {"fields": ("error_history",)}),
    ("Lease", {"fields": (("leased_by", "lease_until_label"), "lease_token")}),
    ("Result", {"fields": ("result_block",)}),
)
#: Detail fields shown even when empty: what identifies a job and where it stands.
ALWAYS_SHOWN = frozenset({"id", "state_label", "timeline", "type", "queue", "attempts_label"})


class JobChangeList(DatabaseChangeList):
    """The job list, with each shown row's masked values at hand for its "last error" cell."""

    def get_results(self, request: HttpRequest) -> None:
        """Fetch the page, then the payload and result of its rows with errors, in one query.

        The list defers both columns; masking an error message needs the values under masked
        keys (docs/decisions.md, "Masking error messages"). The cost is one page of
        rows (``list_per_page``), not the table.
        """
        super().get_results(request)
        with_errors = [job.pk for job in self.result_list if job.errors]
        found = {
            pk: secrets_of(payload, result)
            for pk, payload, result in Job.objects.using(self.queryset.db)
            .filter(pk__in=with_errors)
            .values_list("pk", "payload", "result")
        }
        for job in self.result_list:
            job.admin_secrets = found.get(job.pk, set())


class JobAdminBase(
    ReadOnlyMixin, QueueDatabaseMixin, FamilyMixin, InputGuardMixin, admin.ModelAdmin
):
    """Read-only job rows with the operator actions; subclasses choose columns and filters."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    list_max_show_all = 200
    search_help_text = (
        "A number finds that job id; other text finds job types containing it, "
        "or an exact dedupe key."
    )
    search_fields = ("type",)  # the search box; the lookup itself is get_search_results
    fieldsets = DETAIL_FIELDSETS
    readonly_fields = (
        "id",
        "state_label",
        "type",
        "queue",
        "tenant_id",
        "priority",
        "attempts_label",
        "timeout_s",
        "dedupe_key",
        "ordering_key",
        "concurrency_key",
        "concurrency_limit",
        "reason_label",
        "cancel_requested_label",
        "parents_label",
        "children_label",
        "batch_link",
        "payload_block",
        "progress_label",
        "checkpoint_at_label",
        "checkpoint_block",
        "error_history",
        "leased_by",
        "lease_until_label",
        "lease_token",
        "result_block",
        "timeline",
        "type_name",
    )
    actions: tuple[str, ...] = ("cancel_jobs", "retry_jobs", "run_jobs_now")

    class Media:
        css = {"all": ("jobqueue/admin.css",)}

    # -- permissions: rows change only through the actions ---------------------------------

    def has_retry_permission(self, request: HttpRequest) -> bool:
        """Return True if the user may retry jobs and run scheduled jobs now."""
        return request.user.has_perm("jobqueue.retry_job")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Return True if the user may cancel jobs."""
        return request.user.has_perm("jobqueue.cancel_job")

    # -- reading ---------------------------------------------------------------------------

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        """Return the list that masks error messages (:class:`JobChangeList`)."""
        return JobChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        """Read the selected queue database (``?db=``), without payload, result, checkpoint.

        Those columns (up to 1 MiB each) stay out of the list's query. Each row carries
        ``jq_due``: its ``run_at`` has come by the database's clock, which wrote it (issue 32:
        this host's clock may be off by a minute either way).
        """
        queryset = super().get_queryset(request).defer("payload", "result", "checkpoint")
        return queryset.annotate(
            jq_due=ExpressionWrapper(Q(run_at__lte=Now()), output_field=BooleanField())
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Search a job id (a number, optionally ``#123``), else a type fragment or dedupe key."""
        term = search_term.strip()
        if not term:
            return queryset, False
        number = term.removeprefix("#")
        if number.isdigit():
            return queryset.filter(id=int(number)), False
        return queryset.filter(Q(type__icontains=term) | Q(dedupe_key=term)), False

    # -- columns and detail ----------------------------------------------------------------

    @admin.display(description="state", ordering="state")
    def state_label(self, job: Job) -> str:
        """Show the state as a coloured badge; a retry waiting its turn says so."""
        label = job.state
        # jq_due: judged by the database (get_queryset); a row read elsewhere is not called due.
        if job.state == JobState.SCHEDULED and getattr(job, "jq_due", False):
            label = "scheduled (due)"
        elif job.state == JobState.SCHEDULED and job.attempts:
            label = "scheduled (retry)"
        elif job.state == JobState.LEASED and job.cancel_requested_at:
            label = "leased (cancel requested)"
        return state_badge(job.state, label)

    @admin.display(description="job type", ordering="type")
    def type_name(self, job: Job) -> str:
        """Show the job type, wrapping after its dots and underscores only."""
        return breakable(job.type)

    @admin.display(description="attempts")
    def attempts_label(self, job: Job) -> str:
        """Show ``attempts/max_attempts``."""
        return f"{job.attempts}/{job.max_attempts}"

    @admin.display(description="run at")
    def run_at_short(self, job: Job) -> str:
        """Show ``run_at`` compactly."""
        return compact_time(job.run_at)

    @admin.display(description="created")
    def created_short(self, job: Job) -> str:
        """Show ``created_at`` compactly."""
        return compact_time(job.created_at)

    @admin.display(description="finished")
    def finished_short(self, job: Job) -> str:
        """Show ``finished_at`` compactly."""
        return compact_time(job.finished_at)

    @admin.display(description="last error")
    def last_error_short(self, job: Job) -> str:
        """Show the newest failure, cut to fit; the whole message is in the tooltip."""
        entry = job.last_error
        if not entry:
            return ""
        secrets = getattr(job, "admin_secrets", None)
        if secrets is None:  # outside the list: read the values (two deferred columns)
            secrets = secrets_of(job.payload, job.result)
        message = safe_text(entry.get("message") or "", secrets, one_line=True)
        return format_html(
            '<span title="{}">{}</span>',
            f"{entry.get('type', '')}: {message}",
            short_error(entry, secrets),
        )

    @admin.display(description="reason")
    def reason_label(self, job: Job) -> str:
        """Show why a job died; an expired last lease is named as such."""
        if not job.dead_reason:
            return ""
        label = job.get_dead_reason_display()
        last = (job.errors or [])[-1:] or [{}]
        if last[0].get("kind") == "lease_expired":
            label = f"{label} (lease expired)"
        return label

    def _json_url(self, job: Job, field: str) -> str:
        opts = self.model._meta
        url = reverse(
            f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_json",
            args=[job.pk, field],
        )
        return with_db(url, job._state.db or "default")

    @admin.display(description="payload")
    def payload_block(self, job: Job) -> str:
        """Show the payload as pretty JSON, masked, long values cut (with a link to all of it)."""
        return json_block(job.payload, whole_url=self._json_url(job, "payload"))

    @admin.display(description="result")
    def result_block(self, job: Job) -> str:
        """Show the result like the payload."""
        if job.result is None:
            return "-"
        return json_block(job.result, whole_url=self._json_url(job, "result"))

    @admin.display(description="batch")
    def batch_link(self, job: Job) -> str:
        """Link to the job's batch (``jobqueue.batch``), or ``-``."""
        if job.batch_id is None:
            return "-"
        url = batch_url(self.admin_site.name, job.batch_id, job._state.db or "default")
        return format_html('<a href="{}">batch {}</a>', url, job.batch_id)

    @admin.display(description="progress")
    def progress_label(self, job: Job) -> str:
        """Show the handler's last progress report (``3 of 10 (30%)``), or ``-``."""
        return progress_text(job) or "-"

    @admin.display(description="checkpoint")
    def checkpoint_block(self, job: Job) -> str:
        """Show the last checkpoint (masked, shortened): the next attempt resumes from it."""
        if job.checkpoint is None:
            return "-"
        return json_block(job.checkpoint)

    @admin.display(description="lease until")
    def lease_until_label(self, job: Job) -> str:
        """Show when the lease runs out (database clock), to the second with its zone."""
        return format_time(job.lease_until) if job.lease_until else ""

    @admin.display(description="cancel requested at")
    def cancel_requested_label(self, job: Job) -> str:
        """Show when a running job was asked to cancel."""
        return format_time(job.cancel_requested_at) if job.cancel_requested_at else ""

    @admin.display(description="checkpoint at")
    def checkpoint_at_label(self, job: Job) -> str:
        """Show when the handler last saved a checkpoint."""
        return format_time(job.checkpoint_at) if job.checkpoint_at else ""

    @admin.display(description="timeline")
    def timeline(self, job: Job) -> str:
        """Show the job's life in order, each moment with its time and the time since the last.

        Enqueued, every recorded failure (its attempt, kind and error), the last run's start,
        the end (or the next due time), and the durations: waited, last run, total
        (:func:`jobqueue.admin.timeline.timeline_table`).
        """
        return timeline_table(job, secrets_of(job.payload, job.result))

    @admin.display(description="errors")
    def error_history(self, job: Job) -> str:
        """Show every history entry: attempt, time, worker, exception, message, traceback."""
        return error_history_table(job.errors, secrets_of(job.payload, job.result))

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """Return the detail's fieldsets without the fields that are empty for this job.

        A job page listed ~30 fields, most of them ``-`` (no dedupe key, no batch, no lease, no
        result): a field with no value is left out, and a section with none left goes too. The
        fields of :data:`ALWAYS_SHOWN` stay.
        """
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        kept = []
        for title, options in fieldsets:
            rows = []
            for row in options["fields"]:
                names = row if isinstance(row, (list, tuple)) else (row,)
                shown = tuple(n for n in names if n in ALWAYS_SHOWN or self._has_value(obj, n))
                if shown:
                    rows.append(shown if len(shown) > 1 else shown[0])
            if rows:
                kept.append((title, {**options, "fields": tuple(rows)}))
        return kept

    def _has_value(self, job: Job, name: str) -> bool:
        method = getattr(self, name, None)
        value = method(job) if callable(method) else getattr(job, name, None)
        return value not in (None, "", "-", [], {})

    # -- extra views -----------------------------------------------------------------------

    def get_urls(self) -> list:
        """Add ``<id>/json/<payload|result>/``: the whole masked value as JSON."""
        opts = self.model._meta
        extra = [
            path(
                "<int:object_id>/json/<str:field>/",
                self.admin_site.admin_view(self.json_view),
                name=f"{opts.app_label}_{opts.model_name}_json",
            ),
        ]
        return extra + super().get_urls()

    def json_view(self, request: HttpRequest, object_id: int, field: str) -> JsonResponse:
        """Return a job's whole payload or result, masked, as JSON (view permission needed)."""
        if field not in ("payload", "result"):
            raise Http404("no such field")
        job = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, job):
            raise PermissionDenied
        return JsonResponse(mask(getattr(job, field)), safe=False, json_dumps_params={"indent": 2})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None
    ):
        """Add buttons for the actions this user may take on this job in its state."""
        extra_context = dict(extra_context or {})
        job = self.get_object(request, object_id)
        if job is not None:
            available = self.get_actions(request)
            buttons = []
            for action in (bulk.RETRY, bulk.RUN_NOW, bulk.CANCEL):
                if action.name in available and job.state in action.eligible:
                    buttons.append(action)
            opts = self.model._meta
            extra_context["job_actions"] = buttons
            extra_context["job_actions_url"] = with_db(
                reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist"),
                job._state.db or "default",
            )
        return super().change_view(request, object_id, form_url, extra_context)

    # -- actions ---------------------------------------------------------------------------

    def _run(self, request: HttpRequest, queryset: QuerySet, action: bulk.BulkAction):
        response = bulk.run_bulk_action(self, request, queryset, action)
        if response is not None:
            return response
        back = request.POST.get("next")
        if back and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return HttpResponseRedirect(back)
        return None

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet):
        """Cancel ready, scheduled, running (a cancel request) and dead jobs."""
        return self._run(request, queryset, bulk.CANCEL)

    @admin.action(description="Retry selected jobs now (dead or cancelled)", permissions=["retry"])
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet):
        """Send dead and cancelled jobs back to ready with a fresh attempt budget."""
        return self._run(request, queryset, bulk.RETRY)

    @admin.action(description="Run selected scheduled jobs now", permissions=["retry"])
    def run_jobs_now(self, request: HttpRequest, queryset: QuerySet):
        """Make scheduled jobs ready now."""
        return self._run(request, queryset, bulk.RUN_NOW)
