"""Internal: a job's timeline on its page: enqueued, each recorded run's end, start, finish.

What the row and its error history tell, in time order: ``created_at`` (enqueued), each entry
of the history (a failed run's end with its attempt, an expired lease, an operator's retry or
cancel), ``started_at`` (the start of the latest run: the store keeps no earlier start),
``finished_at`` with the state it ended in, or the due time of a job still waiting. Each moment
shows its time (:func:`~jobqueue.admin.display.format_time`) and the time since the one before;
above the table, the durations an operator asks for: waited for a worker, the latest run, and
enqueued to finished.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobqueue.admin.display import (
    duration_text,
    format_time,
    parse_history_time,
    short_error,
    state_badge,
)
from jobqueue.models import Job
from jobqueue.states import FAILED_RUN_KINDS, FINISHED, JobState

#: History kinds in words (``kind`` of an entry; "error" is a failed run).
KIND_WORDS = {
    "error": "run failed",
    "lease_expired": "lease expired",
    "operator_cancel": "cancelled by operator",
    "operator_retry": "retried by operator",
    "timeout": "run timed out",
    "process_died": "worker process died",
    "released": "released at shutdown",
    "operator_run_now": "run now by operator",
}
#: The kinds that end a run that failed (the rest are operator actions and hand-backs);
#: ``timeout`` as the timeline always read it (a timeout is written as an ``error`` entry now).
FAILED_KINDS = FAILED_RUN_KINDS | {"timeout"}


@dataclass(frozen=True, slots=True)
class Moment:
    """One row of the timeline: when, what (a short label), and the detail (safe HTML)."""

    at: datetime
    what: str
    detail: SafeString | str = ""
    outcome: str = ""


def moments(job: Job, secrets: Iterable[str] = ()) -> list[Moment]:
    """Return the job's moments in time order (a history entry without a time is left out).

    Args:
        job: the job, its ``errors`` read.
        secrets: masked values to hide in error messages (:func:`jobqueue.masking.secrets_of`).
    """
    secrets = list(secrets)
    found = [Moment(job.created_at, "enqueued", f"queue {job.queue}")]
    for entry in job.errors or []:
        at = parse_history_time(entry.get("at"))
        if at is None:
            continue
        kind = str(entry.get("kind") or "error")
        attempt = entry.get("attempt")
        what = KIND_WORDS.get(kind, kind.replace("_", " "))
        if attempt:
            what = f"attempt {attempt}: {what}"
        failed = kind in FAILED_KINDS
        detail = short_error(entry, secrets) if failed else ""
        if not detail and entry.get("by"):
            detail = f"by {entry['by']}"
        found.append(Moment(at, what, detail, "failed" if failed else ""))
    if job.started_at is not None:
        found.append(Moment(job.started_at, f"attempt {job.attempts}: started", job.leased_by))
    if job.finished_at is not None and job.state in FINISHED:
        found.append(Moment(job.finished_at, "finished", outcome=job.state))
    elif job.state in (JobState.SCHEDULED, JobState.READY) and job.run_at > job.created_at:
        found.append(Moment(job.run_at, "due", "claimable from this time"))
    # Stable: a failure and the finish at the same instant keep their order above.
    return sorted(found, key=lambda m: m.at)


def durations(job: Job) -> list[tuple[str, str]]:
    """Return ``(label, duration)`` pairs: waited for a worker, the latest run, in all."""
    shown = []
    if job.started_at is not None:
        shown.append(
            ("waited (due to started)", duration_text(_seconds(job.run_at, job.started_at)))
        )
    if job.started_at is not None and job.finished_at is not None:
        shown.append(("latest run", duration_text(_seconds(job.started_at, job.finished_at))))
    if job.finished_at is not None:
        total = _seconds(job.created_at, job.finished_at)
        shown.append(("enqueued to finished", duration_text(total)))
    return shown


def _seconds(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def timeline_table(job: Job, secrets: Iterable[str] = ()) -> SafeString:
    """Return the timeline as HTML: the durations line, then a table of :func:`moments`.

    Args:
        job: the job.
        secrets: masked values to hide in error messages.
    """
    rows = []
    previous: datetime | None = None
    for moment in moments(job, secrets):
        since = "" if previous is None else "+" + duration_text(_seconds(previous, moment.at))
        previous = moment.at
        rows.append(
            (
                moment.outcome or "event",
                format_time(moment.at),
                since,
                moment.what,
                state_badge(moment.outcome) if moment.outcome in JobState.values else "",
                moment.detail,
            )
        )
    summary = format_html_join(
        " · ", '<span class="jq-duration">{}: <strong>{}</strong></span>', durations(job)
    )
    body = format_html_join(
        "",
        '<tr class="jq-moment jq-moment-{}"><td class="jq-nowrap">{}</td>'
        '<td class="jq-num jq-nowrap">{}</td><td>{} {}</td><td>{}</td></tr>',
        rows,
    )
    return format_html(
        '<div class="jq-timeline"><p class="jq-durations">{}</p>'
        '<table><thead><tr><th scope="col">time</th><th scope="col">since previous</th>'
        '<th scope="col">what</th><th scope="col">detail</th></tr></thead>'
        "<tbody>{}</tbody></table></div>",
        summary,
        body,
    )
