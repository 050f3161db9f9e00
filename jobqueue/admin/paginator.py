"""Internal: a changelist paginator that does not COUNT a million rows on every page view."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import QuerySet

#: Below this many rows (by the planner's estimate) the changelist counts exactly.
EXACT_COUNT_BELOW = 10_000


class EstimatedCountPaginator(Paginator):
    """Count exactly when the result is small; on PostgreSQL use the planner's estimate when big.

    With an estimate the page count is approximate, so every page number >= 1 is served (a page
    past the real end is empty rather than an error). ``estimated`` says which count is shown.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimated = False

    @cached_property
    def count(self) -> int:
        """Return the exact count, or the planner's estimate when it is at least 10,000."""
        if isinstance(self.object_list, QuerySet):
            estimate = planner_rows(self.object_list)
            if estimate is not None and estimate >= EXACT_COUNT_BELOW:
                self.estimated = True
                return estimate
        return super().count

    def validate_number(self, number: Any) -> int:
        """Accept any page number >= 1 when the count is an estimate."""
        if not self.count or not self.estimated:
            return super().validate_number(number)
        try:
            value = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if value < 1:
            raise EmptyPage("That page number is less than 1")
        return value

    def page(self, number: Any) -> Page:
        """Return a page; with an estimate, slice without clamping to the (estimated) count."""
        number = self.validate_number(number)
        if not self.estimated:
            return super().page(number)
        bottom = (number - 1) * self.per_page
        # Paginator._get_page is Django's documented hook for the Page class; django-stubs omits it.
        return self._get_page(self.object_list[bottom : bottom + self.per_page], number, self)  # type: ignore[attr-defined]


def planner_rows(queryset: QuerySet) -> int | None:
    """Return PostgreSQL's estimate of how many rows ``queryset`` yields, or None elsewhere.

    Reads the top plan node of ``EXPLAIN (FORMAT JSON)``: no rows are read. A queryset Django
    knows to be empty (``none()``, ``id__in=[]``, an id over bigint from the search box) is never
    sent, and its ``explain()`` is the empty string: 0 rows.
    """
    if connections[queryset.db].vendor != "postgresql":
        return None
    text = queryset.order_by().explain(format="json")
    if not text:
        return 0
    plan = json.loads(text)
    return int(plan[0]["Plan"]["Plan Rows"])
