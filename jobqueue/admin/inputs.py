"""Internal: query strings and posted ids no row can match are refused before any SQL runs.

Shared by every jobqueue admin page (jobs, dead letters, workers, cron entries, breakers, retry
budgets), so a hand-edited URL or a tampered form gives a normal page, never a 500:

- A NUL character in any query-string key or value (a filter, the search box): PostgreSQL text
  cannot hold one and the query fails with ``DataError``. Refused for every filter at once, as
  Django refuses any lookup it cannot run (``IncorrectLookupParameters``): the changelist
  redirects to ``?e=1``. Refused on SQLite too, so both stores answer alike.
- A selected id (``_selected_action``) that is not an id of the page's model (``abc``, ``²``,
  a NUL, a number over bigint): Django's ``pk__in`` raises ``ValueError`` before the action
  runs. The action is not run at all, and the operator is told which value was refused.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponseRedirect

NUL = "\x00"


def nul_parameters(request: HttpRequest) -> list[str]:
    """Return the query-string keys whose key or value holds a NUL character."""
    return [
        repr(key)
        for key, values in request.GET.lists()
        if NUL in key or any(NUL in value for value in values)
    ]


def bad_ids(model: Any, values: list[str]) -> list[str]:
    """Return the values that cannot be a primary key of ``model`` (type and range checked)."""
    field = model._meta.pk
    bad = []
    for value in values:
        try:
            if NUL in value:
                raise ValidationError("NUL")
            field.clean(value, None)
        except ValidationError:
            bad.append(value)
    return bad


class ReadOnlyMixin:
    """A ModelAdmin mixin: no add, change or delete form.

    Its rows are written by code (an enqueue, a worker, the store), and change only through
    the page's actions.
    """

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Refuse: the rows are written by code, not typed in."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Refuse form edits: the page's actions are the only changes."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Refuse: a row goes when its owner removes it (pruning, the worker, the batch)."""
        return False


class InputGuardMixin:
    """A ModelAdmin mixin: refuse NUL in the query string and selected ids of the wrong kind."""

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """Raise ``IncorrectLookupParameters`` (the ``?e=1`` redirect) for a NUL in the URL."""
        bad = nul_parameters(request)
        if bad:
            raise IncorrectLookupParameters(f"NUL character in {', '.join(bad)}")
        return super().get_changelist_instance(request)  # type: ignore[misc]

    def response_action(self, request: HttpRequest, queryset: Any, *args: Any, **kwargs: Any):
        """Run the action only if every selected value is an id of this model; else say which."""
        model = self.model  # type: ignore[attr-defined]
        bad = bad_ids(model, request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
        if bad:
            shown = ", ".join(repr(value)[:60] for value in bad[:5])
            self.message_user(  # type: ignore[attr-defined]
                request,
                f"Nothing was changed: not an id of a {model._meta.verbose_name}: {shown}.",
                messages.ERROR,
            )
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset, *args, **kwargs)  # type: ignore[misc]
