"""Internal: which queue database an admin page shows (``?db=<alias>``) and its selector.

With queues on several databases (``JOBQUEUE["QUEUE_DATABASES"]``) the job, dead-letter,
worker, cron, pause, breaker and retry-budget lists read one alias at a time: ids are per
database (each has its own sequence), so a list merged across them would show two jobs #12.
The alias travels in the ``db`` query parameter: on the list, in a row's link, on the detail
page's action buttons; an action runs on the alias of the rows it was given (``queryset.db``).
:class:`QueueDatabaseMixin` gives a ModelAdmin all of that.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import BadRequest
from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict
from django.utils.http import urlencode

from jobqueue.admin.display import escaped_page, zone_name
from jobqueue.routing import all_queue_aliases

__all__ = [
    "DB_PARAM",
    "DatabaseChangeList",
    "QueueDatabaseMixin",
    "selected_alias",
    "selector",
    "with_db",
]

#: The query parameter naming the queue database a job page shows.
DB_PARAM = "db"


def selected_alias(request: HttpRequest) -> str:
    """Return the queue database the request shows: ``?db=``, else the first queue alias.

    A detail page reached from a list reads it from the list's preserved filters too.

    Raises:
        BadRequest: ``db`` names no queue database (400, naming the ones there are).
    """
    aliases = all_queue_aliases()
    value = request.GET.get(DB_PARAM)
    if value is None and "_changelist_filters" in request.GET:
        value = QueryDict(request.GET["_changelist_filters"]).get(DB_PARAM)
    if value is None:
        return aliases[0]
    if value not in aliases:
        raise BadRequest(
            f"?{DB_PARAM}={value!r} is not a queue database (there are: {', '.join(aliases)})"
        )
    return value


def with_db(url: str, alias: str) -> str:
    """Return ``url`` naming ``alias`` in ``?db=``, when there is more than one queue database."""
    if len(all_queue_aliases()) < 2:
        return url
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}{urlencode({DB_PARAM: alias})}"


def selector(alias: str) -> list[dict[str, Any]]:
    """Return the selector's links (``alias``, ``url``, ``selected``); none with one database."""
    aliases = all_queue_aliases()
    if len(aliases) < 2:
        return []
    return [
        {"alias": a, "url": "?" + urlencode({DB_PARAM: a}), "selected": a == alias} for a in aliases
    ]


class DatabaseChangeList(ChangeList):
    """A list on the selected queue database: ``?db=`` is no filter, rows link to their alias."""

    def get_filters_params(self, params: Any = None) -> dict[str, Any]:
        """Leave ``?db=`` (the queue database, not a field lookup) out of the filters."""
        lookup_params = super().get_filters_params(params)
        lookup_params.pop(DB_PARAM, None)
        return lookup_params

    def url_for_result(self, result: Any) -> str:
        """Link a row to its detail page on the row's own queue database."""
        return with_db(super().url_for_result(result), result._state.db)


class QueueDatabaseMixin:
    """A ModelAdmin mixin: the list and detail pages read the selected queue database.

    The rows, their filters' choices and the objects of a detail page come from
    :func:`selected_alias`; the list shows the selector (with more than one queue database);
    actions get a queryset on that alias, so each acts on the rows' own database.
    """

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        """Return the model's rows on the selected queue database (``?db=``).

        Raises:
            BadRequest: ``?db=`` names no queue database (400).
        """
        rows: QuerySet = super().get_queryset(request)  # type: ignore[misc]
        return rows.using(selected_alias(request))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        """Return the list that keeps ``?db=`` out of its filters (:class:`DatabaseChangeList`)."""
        return DatabaseChangeList

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        """Add the queue database selector (shown with more than one queue database)."""
        extra_context = {
            **(extra_context or {}),
            "jobqueue_databases": selector(selected_alias(request)),
            # The lists' times are compact (display.format_time): the zone is named once.
            "jobqueue_zone": zone_name(),
        }
        return escaped_page(super().changelist_view(request, extra_context))  # type: ignore[misc]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        """Show the detail page, its control characters escaped (``display.escaped_page``)."""
        view = super().change_view  # type: ignore[misc]
        return escaped_page(view(request, object_id, form_url, extra_context))

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        """Show the history page, its control characters escaped (``display.escaped_page``)."""
        view = super().history_view  # type: ignore[misc]
        return escaped_page(view(request, object_id, extra_context))
