"""Internal: the PostgreSQL planner's row estimate for a queryset, read without reading rows."""

from __future__ import annotations

import json

from django.db import connections
from django.db.models import QuerySet


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
