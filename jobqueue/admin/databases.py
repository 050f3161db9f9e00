"""Internal: which queue database the job pages show (``?db=<alias>``) and its selector.

With queues on several databases (``JOBQUEUE["QUEUE_DATABASES"]``) the job and dead-letter
lists read one alias at a time: job ids are per database (each has its own sequence), so a list
merged across them would show two jobs #12. The alias travels in the ``db`` query parameter: on
the list, in a row's link, on the detail page's action buttons; an action runs on the alias of
the rows it was given (``queryset.db``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpRequest, QueryDict
from django.utils.http import urlencode

from ..routing import all_queue_aliases

__all__ = ["DB_PARAM", "selected_alias", "selector", "with_db"]

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
