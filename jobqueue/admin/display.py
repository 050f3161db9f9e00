"""Internal: how the admin shows job data: masked and shortened JSON, state badges, errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, tzinfo
from datetime import timezone as dt_timezone
from typing import Any

from django.contrib import admin
from django.template.response import SimpleTemplateResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from jobqueue.masking import escape_control, escape_page, mask, safe_text

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = dt_timezone.utc

#: What a masked value is shown as, whatever its type.
MASK = "********"
#: Longest string shown whole on a page; longer ones are cut (the JSON view has them whole).
MAX_STRING_CHARS = 300
#: Most list items or dict keys shown on a page.
MAX_ITEMS = 100
#: Longest "last error" message in a changelist cell.
SHORT_ERROR_CHARS = 90

STATE_COLORS = {
    "ready": "#2b6cb0",
    "scheduled": "#6b46c1",
    "leased": "#b7791f",
    "succeeded": "#2f855a",
    "dead": "#c53030",
    "cancelled": "#718096",
    "waiting": "#2c7a7b",
}


def shorten(value: Any) -> tuple[Any, bool]:
    """Return ``value`` with long strings and long lists or dicts cut, and whether anything was."""
    cut = False

    def walk(node: Any) -> Any:
        nonlocal cut
        if isinstance(node, str) and len(node) > MAX_STRING_CHARS:
            cut = True
            return f"{node[:MAX_STRING_CHARS]}… ({len(node) - MAX_STRING_CHARS} more characters)"
        if isinstance(node, list):
            shown = [walk(item) for item in node[:MAX_ITEMS]]
            if len(node) > MAX_ITEMS:
                cut = True
                shown.append(f"… {len(node) - MAX_ITEMS} more items")
            return shown
        if isinstance(node, dict):
            items = list(node.items())
            shown_dict = {k: walk(v) for k, v in items[:MAX_ITEMS]}
            if len(items) > MAX_ITEMS:
                cut = True
                shown_dict["…"] = f"{len(items) - MAX_ITEMS} more keys"
            return shown_dict
        return node

    return walk(value), cut


def escaped_page(response: Any) -> Any:
    """Return ``response``; a template response gets its control characters escaped once rendered.

    Every jobqueue admin page passes through here (``QueueDatabaseMixin``, the dashboard), so a
    job type, tenant, key or message read from the database cannot carry raw ESC, BEL or a bidi
    override onto a page (issue 32 item 6), whatever field shows it.
    """
    if isinstance(response, SimpleTemplateResponse):
        response.add_post_render_callback(_escape_rendered)
    return response


def _escape_rendered(response: SimpleTemplateResponse) -> None:
    charset = response.charset or "utf-8"
    text = response.content.decode(charset)
    escaped = escape_page(text)
    if escaped != text:
        response.content = escaped.encode(charset)


def pretty_json(value: Any) -> str:
    """Return ``value`` as indented JSON text (non-ASCII kept readable)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_block(value: Any, *, whole_url: str | None = None) -> SafeString:
    """Return masked, shortened, pretty JSON in a ``<pre>``; link to the whole value if cut."""
    shown, cut = shorten(mask(value))
    block = format_html('<pre class="jq-json">{}</pre>', escape_control(pretty_json(shown)))
    if cut and whole_url:
        block += format_html(
            '<p class="jq-cut">Long values are cut here. <a href="{}">Show the whole value</a> '
            "(masked keys stay masked).</p>",
            whole_url,
        )
    return block


def state_badge(state: str, label: str | None = None) -> SafeString:
    """Return a coloured badge for a job state."""
    return format_html(
        '<span class="jq-state jq-state-{}" style="background:{}">{}</span>',
        state,
        STATE_COLORS.get(state, "#4a5568"),
        label or state,
    )


#: The one format of an instant in the admin: to the second, with the zone's abbreviation.
TIME_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
#: The same within the current year, for list columns: the list names the zone once above the
#: table (:func:`zone_name`), each cell's tooltip has the full form.
COMPACT_TIME_FORMAT = "%b %d %H:%M:%S"


def format_time(
    value: datetime | None, *, zone: tzinfo | None = None, compact: bool = False
) -> SafeString:
    """Return an instant as the admin shows it everywhere: ``2026-12-06 07:53:33 UTC``.

    The one formatting function of the admin's times (lists, job pages, cron entries, the
    dashboard), so a duration can be read off any two of them: seconds always, the zone's
    abbreviation always, in a ``<time>`` element whose ``datetime`` is the ISO instant and whose
    tooltip is the full form.

    Args:
        value: an aware instant, or None (shown as ``-``).
        zone: the zone to show it in (a cron entry's own); default Django's current time zone.
        compact: for a list column: ``Dec 06 07:53:33`` within the current year (the list
            names the zone above the table, :func:`zone_name`).

    Returns:
        Safe HTML.
    """
    if value is None:
        return format_html("{}", "-")
    moment = value.astimezone(zone) if zone is not None else timezone.localtime(value)
    full = moment.strftime(TIME_FORMAT)
    shown = full
    if compact and moment.year == timezone.localtime().year:
        shown = moment.strftime(COMPACT_TIME_FORMAT)
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(), full, shown)


def zone_name() -> str:
    """Return the current time zone as lists name it above their times: ``UTC``, ``CET``."""
    return timezone.localtime().strftime("%Z") or str(timezone.get_current_timezone())


def compact_time(value: datetime | None) -> SafeString:
    """Return :func:`format_time` for a list column (``compact=True``)."""
    return format_time(value, compact=True)


def time_column(name: str, description: str) -> Any:
    """Return an admin display method showing model field ``name`` with :func:`format_time`.

    For the ``list_display`` and ``readonly_fields`` of the jobqueue admins: Django's own
    rendering of a datetime field is ``Dec. 6, 2026, 7:53 a.m.`` (no seconds, no zone).

    Args:
        name: a DateTimeField of the admin's model (also the column's sort order).
        description: the column's or field's label.
    """

    def shown(modeladmin: Any, obj: Any) -> SafeString:
        return format_time(getattr(obj, name))

    shown.__name__ = f"{name}_shown"
    shown.__doc__ = f"Show ``{name}`` to the second with its zone."
    return admin.display(description=description, ordering=name)(shown)


def duration_text(seconds: float | None) -> str:
    """Return a duration for comparing runs: ``"340 ms"``, ``"4.25 s"``, ``"2 min 5 s"``.

    Args:
        seconds: a duration in seconds, or None (shown as ``-``); a negative one (two clocks'
            times subtracted) is shown as it is, with its sign.
    """
    if seconds is None:
        return "-"
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{sign}{seconds:.2f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{sign}{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{sign}{whole // 3600} h {whole % 3600 // 60} min"
    return f"{sign}{whole // 86400} d {whole % 86400 // 3600} h"


def breakable(name: str) -> SafeString:
    """Return a dotted name (a job type, a queue) that may wrap after a dot or underscore only.

    ``shop.jobs.charge_card`` wraps as ``shop.jobs.`` / ``charge_card`` in a narrow column,
    never inside a word (``charg e_card``): a ``<wbr>`` after each ``.``, ``_``, ``-`` and
    ``:``, with the column's CSS breaking nowhere else.
    """
    parts = re.split(r"(?<=[._:-])", escape_control(str(name), one_line=True))
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts if part))


def parse_history_time(value: Any) -> datetime | None:
    """Return an error-history entry's ``at`` (ISO 8601 text) as an aware instant, or None."""
    try:
        # Django's parser, not datetime.fromisoformat: before Python 3.11 that refuses the 1-5
        # fractional digits PostgreSQL writes (``05:55:00.12345+00:00``).
        moment = parse_datetime(str(value or ""))
    except ValueError:
        return None
    if moment is not None and timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return moment


def history_time(value: Any) -> SafeString:
    """Return an error-history entry's ``at`` with :func:`format_time`, the stored text as tooltip.

    Text that is not an ISO time (an entry written by hand) is shown as it is.
    """
    text = str(value or "")
    moment = parse_history_time(text)
    if moment is None:
        return format_html("{}", text)
    shown = timezone.localtime(moment).strftime(TIME_FORMAT)
    return format_html('<time datetime="{}" title="{}">{}</time>', text, text, shown)


def short_error(entry: dict[str, Any] | None, secrets: Iterable[str] = ()) -> str:
    """Return ``Type: message`` of an error-history entry, masked, cut to a changelist cell."""
    if not entry:
        return ""
    message = safe_text(entry.get("message") or "", secrets, one_line=True)
    kind = escape_control(str(entry.get("type") or ""), one_line=True)
    text = ": ".join(part for part in (kind, message) if part)
    if len(text) > SHORT_ERROR_CHARS:
        return text[: SHORT_ERROR_CHARS - 1] + "…"
    return text


def error_history_table(
    errors: list[dict[str, Any]] | None, secrets: Iterable[str] = ()
) -> SafeString:
    """Return the whole error history as a table, tracebacks in ``<pre>``, messages masked.

    Args:
        errors: the job's error history.
        secrets: masked values to hide in messages and tracebacks (:func:`secrets_of`).
    """
    if not errors:
        return format_html("<p>{}</p>", "No errors recorded.")
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        '<td><div class="jq-message">{}</div>{}</td></tr>',
        (
            (
                entry.get("attempt", ""),
                history_time(entry.get("at")),
                entry.get("kind", "error"),
                escape_control(
                    str(entry.get("worker") or (f"by {entry['by']}" if entry.get("by") else "")),
                    one_line=True,
                ),
                escape_control(str(entry.get("type", "")), one_line=True),
                safe_text(entry.get("message") or "", secrets),
                format_html(
                    '<pre class="jq-traceback">{}</pre>', safe_text(entry["traceback"], secrets)
                )
                if entry.get("traceback")
                else "",
            )
            for entry in errors
        ),
    )
    return format_html(
        '<table class="jq-errors"><thead><tr><th>attempt</th><th>time</th><th>kind</th>'
        "<th>worker or by</th><th>exception</th><th>message and traceback</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        rows,
    )
