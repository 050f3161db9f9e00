"""Internal: the pauses page: pause a queue or job type (the add form), resume (an action).

Pauses are rows of each queue database: the list shows the selected one's (``?db=``) and resume acts
on the rows' own database; the add form pauses the queue on every database it lives on (a job type:
on every queue database). A pause is a write of queue state, so the page never saves a row itself:
the add form calls ``jobqueue.pause``/``pause_type`` and the resume action (and delete)
``resume``/``resume_type``, with the signed-in user as ``by``. Django's admin records each in its
LogEntry history.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import ngettext

from jobqueue import validation
from jobqueue.admin.databases import QueueDatabaseMixin
from jobqueue.admin.display import time_column
from jobqueue.admin.inputs import InputGuardMixin
from jobqueue.limits import pauses as pausing
from jobqueue.models import Pause, PauseKind
from jobqueue.routing import all_queue_aliases, queue_aliases


class PauseForm(forms.ModelForm):
    """What to pause and why; the name is checked by the rule of its kind."""

    class Meta:
        model = Pause
        fields = ("kind", "name", "reason")

    def clean(self) -> dict[str, Any]:
        """Return the cleaned data; a name that breaks its kind's rule is an error on it."""
        data = super().clean() or {}
        kind, name = data.get("kind"), data.get("name")
        if name is not None:
            rule = (
                validation.validate_queue_name
                if kind == PauseKind.QUEUE
                else validation.validate_type_name
            )
            try:
                rule(name)
            except ValueError as exc:
                self.add_error("name", str(exc))
        return data


def _lift(pause: Pause, using: str) -> bool:
    """Resume what ``pause`` names, through the API; True if it was still paused."""
    if pause.kind == PauseKind.QUEUE:
        return pausing.resume(pause.name, using=using)
    return pausing.resume_type(pause.name, using=using)


@admin.register(Pause)
class PauseAdmin(QueueDatabaseMixin, InputGuardMixin, admin.ModelAdmin):
    """Paused queues and job types, who paused them and since when."""

    form = PauseForm
    list_display = ("name", "kind", "paused_by", "paused_at_shown", "reason")
    paused_at_shown = time_column("paused_at", "paused since")
    list_filter = ("kind",)
    search_fields = ("name", "paused_by")
    actions = ["resume_selected"]
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("jobqueue/admin.css",)}

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        """Refuse: a pause is made or lifted, never edited (its by and since are the record)."""
        return False

    def save_model(self, request: HttpRequest, obj: Pause, form: Any, change: bool) -> None:
        """Pause through the API (the store writes the row); ``obj`` becomes that row.

        A queue is paused on every database it lives on, a job type on every queue database
        (``using=None``): pausing it on the selected database only would leave its jobs
        running from the others. The page goes on with the row on the first of them.
        """
        by = request.user.get_username()
        if obj.kind == PauseKind.QUEUE:
            pausing.pause(obj.name, by=by, reason=obj.reason)
            using = queue_aliases(obj.name)[0]
        else:
            pausing.pause_type(obj.name, by=by, reason=obj.reason)
            using = all_queue_aliases()[0]
        row = Pause.objects.using(using).get(kind=obj.kind, name=obj.name)
        # The page goes on with the stored row: its id for the LogEntry, its by and since.
        obj.pk, obj.paused_by, obj.paused_at = row.pk, row.paused_by, row.paused_at
        obj._state.adding, obj._state.db = False, using

    def delete_model(self, request: HttpRequest, obj: Pause) -> None:
        """Resume through the API instead of deleting the row here (delete is resume)."""
        _lift(obj, obj._state.db or "default")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> None:
        """Resume each through the API instead of deleting the rows here."""
        for pause in queryset:
            _lift(pause, queryset.db)

    @admin.action(description="Resume selected queues and job types", permissions=["delete"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Pause]) -> None:
        """Resume each selected pause (workers wake at once) and log it in the history."""
        resumed = [pause for pause in queryset if _lift(pause, queryset.db)]
        if resumed:
            # The rows are gone: log the instances (Django's own log_addition passes a list).
            self.log_deletions(request, resumed)  # type: ignore[arg-type]
        self.message_user(
            request,
            ngettext("Resumed %(n)d queue or type.", "Resumed %(n)d queues or types.", len(resumed))
            % {"n": len(resumed)},
            messages.SUCCESS,
        )
