"""Internal: plain-text tables and values for ``manage.py jobqueue`` in a terminal."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, time, timezone
from typing import Any, TextIO, cast

from django.core.management.base import OutputWrapper

from jobqueue.masking import escape_control
from jobqueue.ops.clock import humanize_seconds

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

#: The columns of ``manage.py jobqueue status`` (WAITING: jobs waiting for parent jobs).
STATUS = ["QUEUE", "READY", "SCHEDULED", "LEASED", "DEAD", "WAITING", "LAG", "OK/MIN", "WORKERS"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Return ``rows`` under ``headers`` as aligned columns (numbers right, text left).

    Args:
        headers: column titles.
        rows: one sequence of cells per row; None prints as ``-``.

    Returns:
        The table, lines joined by newlines, without a trailing newline.
    """
    cells = [[cell_text(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        bool(rows) and all(isinstance(row[i], int | float) or row[i] is None for row in rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(row) for row in cells)])


def cell_text(value: Any) -> str:
    """Return one cell: ``-`` for None, floats with one decimal, anything else as str.

    Text is one line with its control characters escaped (``jobqueue.masking.escape_control``):
    a job type, tenant or error message cannot break the table or command the terminal.
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return escape_control(str(value), one_line=True)


def duration(seconds: float | None) -> str:
    """Return ``seconds`` as the dashboard shows it: ``"850 ms"``, ``"12 min"``, ``"2 d 4 h"``.

    Args:
        seconds: a duration in seconds, or None (shown as ``"-"``).
    """
    # One wording for the admin and the CLI: the dashboard's.
    return humanize_seconds(seconds)


def _json_default(value: Any) -> str:
    """Return a value JSON has no type for as a string: datetimes in ISO 8601 (with its 'T')."""
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    return str(value)


def to_json(value: Any) -> str:
    """Return ``value`` as indented JSON (datetimes in ISO 8601, other objects as strings)."""
    return json.dumps(value, indent=2, default=_json_default, ensure_ascii=False)


def by_since(by: str | None, at: datetime) -> str:
    """Return ``"by alice since 2026-12-01 18:50:01 UTC"`` for a pause."""
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"by {by or 'unknown'} since {when}"


def queue_note(q: Any) -> str:
    """Return the last cell of a queue's status row: paused, or unserved, or nothing."""
    if q.paused:
        return f"paused {by_since(q.paused_by, q.paused_at)}"
    if q.unserved:
        return f"unserved, waiting {duration(q.lag_s)}"
    return ""


class SafeOutput(OutputWrapper):
    r"""A command's stdout or stderr that escapes control characters in everything written.

    Newlines and tabs pass (the command's own layout); ESC, BEL, CR and the rest are written as
    ``\\x1b``-style escapes, so no value read from the database (an error message, a pause
    reason) can retitle, clear or rewrite the operator's terminal (issue 32 item 6).

    Args:
        wrapped: the command's ``OutputWrapper``; its stream and style are kept.
    """

    def __init__(self, wrapped: OutputWrapper) -> None:
        super().__init__(cast(TextIO, wrapped._out), ending=wrapped.ending)
        self.style_func = wrapped.style_func

    def write(  # type: ignore[override]  # OutputWrapper's, not TextIOBase's
        self, msg: str = "", style_func: Any = None, ending: str | None = None
    ) -> None:
        """Write ``msg`` with its control characters escaped (see the class docstring)."""
        super().write(escape_control(msg), style_func, ending)
