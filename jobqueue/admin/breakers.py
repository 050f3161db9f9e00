"""Internal: the dependency breakers page (open or close one, with confirmation) and retry budgets.

Breakers and budgets are per queue database (a worker keeps them where it claims): each page
lists the selected database's (``?db=``) and its actions act there. Rows are read-only: a breaker
moves only through ``jobqueue.limits.breakers.open_breaker`` and
``close_breaker`` (one fenced statement each), never through a form save, which could undo a
transition a worker made a moment before.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from jobqueue.admin.databases import QueueDatabaseMixin
from jobqueue.admin.display import time_column
from jobqueue.admin.inputs import InputGuardMixin, ReadOnlyMixin
from jobqueue.limits import breakers, budgets
from jobqueue.models import DependencyBreaker, RetryBudget
from jobqueue.settings.conf import get_settings


@admin.register(DependencyBreaker)
class DependencyBreakerAdmin(ReadOnlyMixin, QueueDatabaseMixin, InputGuardMixin, admin.ModelAdmin):
    """Circuit breakers as the workers left them; operators open and close them."""

    list_display = (
        "name",
        "state",
        "failures",
        "successes",
        "open_until_shown",
        "cooldown_s",
        "opened_count",
        "reason",
        "updated_at_shown",
    )
    open_until_shown = time_column("open_until", "open until")
    updated_at_shown = time_column("updated_at", "updated")
    window_started_at_shown = time_column("window_started_at", "window started at")
    probe_until_shown = time_column("probe_until", "probe until")
    last_opened_at_shown = time_column("last_opened_at", "last opened at")
    #: The (read-only) page of one breaker: its times to the second with their zone.
    fields = readonly_fields = (
        "name",
        "state",
        "window_started_at_shown",
        "failures",
        "successes",
        "open_until_shown",
        "cooldown_s",
        "probe_job_id",
        "probe_until_shown",
        "opened_count",
        "last_opened_at_shown",
        "reason",
        "updated_at_shown",
    )
    list_filter = ("state",)
    search_fields = ("name",)
    actions = ["open_selected", "close_selected"]
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("jobqueue/admin.css",)}

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Return True if the user may open or close breakers."""
        return request.user.has_perm("jobqueue.operate_dependencybreaker")

    def _confirm(self, request: HttpRequest, queryset, action: str, verb: str, explain: str):
        context = {
            **self.admin_site.each_context(request),
            "title": f"{verb.capitalize()} circuit breakers?",
            "opts": self.model._meta,
            "names": list(queryset.order_by("name").values_list("name", flat=True)),
            "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action": action,
            "verb": verb,
            "explain": explain,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/jobqueue/breaker_action_confirmation.html", context)

    @admin.action(
        description="Open selected breakers (hold their jobs back)", permissions=["operate"]
    )
    def open_selected(self, request: HttpRequest, queryset: QuerySet[DependencyBreaker]):
        """Open each breaker for the max cool-down; after a confirmation page."""
        seconds = get_settings().breaker.max_cooldown_seconds
        if request.POST.get("post") != "yes":
            return self._confirm(
                request,
                queryset,
                "open_selected",
                "open",
                f"Their jobs are held back for {seconds:g} s (the max cool-down); then one probe "
                "job runs, and its success closes the breaker.",
            )
        user = request.user.get_username()
        names = sorted(queryset.values_list("name", flat=True))
        for name in names:
            breakers.open_breaker(
                name, seconds, reason=f"opened by admin:{user}", using=queryset.db
            )
        self.message_user(
            request,
            ngettext(
                "Opened %(count)d breaker: %(names)s.",
                "Opened %(count)d breakers: %(names)s.",
                len(names),
            )
            % {"count": len(names), "names": ", ".join(names)},
            messages.SUCCESS,
        )
        return None

    @admin.action(
        description="Close selected breakers (run their jobs again)", permissions=["operate"]
    )
    def close_selected(self, request: HttpRequest, queryset: QuerySet[DependencyBreaker]):
        """Close each breaker now; after a confirmation page."""
        if request.POST.get("post") != "yes":
            return self._confirm(
                request,
                queryset,
                "close_selected",
                "close",
                "The jobs they held back run now; if the dependency is still down, the "
                "breaker opens again after enough failures.",
            )
        user = request.user.get_username()
        names = sorted(queryset.values_list("name", flat=True))
        for name in names:
            breakers.close_breaker(name, reason=f"closed by admin:{user}", using=queryset.db)
        self.message_user(
            request,
            ngettext(
                "Closed %(count)d breaker: %(names)s.",
                "Closed %(count)d breakers: %(names)s.",
                len(names),
            )
            % {"count": len(names), "names": ", ".join(names)},
            messages.SUCCESS,
        )
        return None


@admin.register(RetryBudget)
class RetryBudgetAdmin(QueueDatabaseMixin, InputGuardMixin, admin.ModelAdmin):
    """Retry token buckets per queue; read-only (negative tokens: retries are being delayed)."""

    list_display = ("queue", "tokens", "updated_at_shown")
    updated_at_shown = time_column("updated_at", "updated")
    fields = readonly_fields = ("queue", "tokens", "updated_at_shown")
    search_fields = ("queue",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Refuse: a bucket appears with its queue's first retry."""
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        """Refuse: workers keep the buckets (deleting one refills it)."""
        return False

    def delete_model(self, request: HttpRequest, obj: RetryBudget) -> None:
        """Delete through the store, on the bucket's database: it starts full again."""
        budgets.reset_budgets([obj.queue], using=obj._state.db)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RetryBudget]) -> None:
        """Delete the selected buckets through the store, on the queryset's database."""
        queues = list(queryset.values_list("queue", flat=True))
        budgets.reset_budgets(queues, using=queryset.db)
