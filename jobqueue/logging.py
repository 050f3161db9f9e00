"""Structured logs: the ``extra`` fields of every log line about a job, and a JSON formatter.

Every line the worker, executor, reaper and scheduler log about one job passes
``extra=job_extra(...)``, so a formatter that renders record attributes (ours below, or
python-json-logger) gets ``job_id``, ``job_type``, ``queue``, ``tenant_id``, ``attempt``,
``duration_s`` (where the run's length is known) and ``worker_id`` without parsing the message.
The message texts stay as they were: operators and tests grep them.

Both formatters here, :class:`PlainFormatter` (``runworkers``' own) and :class:`JSONFormatter`,
pass every line through ``jobqueue.masking``: values after a masked key name (``token=...``) are
``********``, and control characters (ESC, BEL, CR) are escaped, so a job's error message cannot
leak a secret into the log or rewrite the terminal reading it.

Part of the settings layer (it reads ``ADMIN_MASKED_KEYS``, through ``jobqueue.masking``), so
every module above it may use it (``import logging`` in here is the standard library's; absolute
imports).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from jobqueue.masking import mask_text, safe_text

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

__all__ = ["JOB_FIELDS", "PLAIN_FORMAT", "JSONFormatter", "PlainFormatter", "job_extra"]

#: The line format of :class:`PlainFormatter` (``runworkers`` without a ``LOGGING`` of its own).
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The ``extra`` fields a job's log lines may carry, in the order the formatter writes them.
JOB_FIELDS = ("job_id", "job_type", "queue", "tenant_id", "attempt", "duration_s", "worker_id")

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def job_extra(
    job: Any = None,
    *,
    job_id: int | None = None,
    worker_id: str | None = None,
    duration_s: float | None = None,
    job_type: str | None = None,
    queue: str | None = None,
) -> dict[str, Any]:
    """Return the ``extra`` dict of a log line about one job: the one place that builds it.

    Call it only where the line will be written (inside ``isEnabledFor`` on a hot path, or
    as the ``extra=`` argument of a WARNING or ERROR line, which is rare).

    Args:
        job: the job as claimed (a ``ClaimedJob``: ``id``, ``job_type``, ``queue``,
            ``tenant_id``, ``attempt``), or None when only some fields are known.
        job_id: the job's id, when ``job`` is None.
        worker_id: the worker running it, if a worker logs the line.
        duration_s: how long the handler ran, seconds, once it has returned.
        job_type: the type name, when ``job`` is None (a cron fire, a reaped lease).
        queue: the queue, when ``job`` is None.

    Returns:
        The known fields of :data:`JOB_FIELDS`; unknown ones are left out, not None.
    """
    extra: dict[str, Any] = {}
    if job is not None:
        extra["job_id"] = job.id
        extra["job_type"] = job.job_type
        extra["queue"] = job.queue
        extra["tenant_id"] = job.tenant_id
        extra["attempt"] = job.attempt
    else:
        for name, value in (("job_id", job_id), ("job_type", job_type), ("queue", queue)):
            if value is not None:
                extra[name] = value
    if duration_s is not None:
        extra["duration_s"] = round(duration_s, 6)
    if worker_id is not None:
        extra["worker_id"] = worker_id
    return extra


class PlainFormatter(logging.Formatter):
    r"""Format each record as a text line, masked, its control characters escaped.

    The message is one line (a newline in it is written ``\n``, so it cannot forge a line); a
    traceback keeps its lines. Use it in ``LOGGING``::

        "formatters": {"plain": {"()": "jobqueue.logging.PlainFormatter"}}

    Args:
        fmt: the line format (default :data:`PLAIN_FORMAT`).
        datefmt: as :class:`logging.Formatter`'s.
    """

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt or PLAIN_FORMAT, datefmt)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Return the line with the record's message masked and on one line."""
        record.message = safe_text(record.message, one_line=True)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        """Return the traceback masked, its control characters (but newlines) escaped."""
        return safe_text(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        """Return the stack masked, its control characters (but newlines) escaped."""
        return safe_text(super().formatStack(stack_info))


class JSONFormatter(logging.Formatter):
    """Format each record as one JSON object per line, with its ``extra`` fields.

    Keys: ``time`` (ISO 8601, UTC, from the record), ``level``, ``logger``, ``message``, then
    the job fields (:data:`JOB_FIELDS`) and any other ``extra`` the record carries, and
    ``exc_info`` (the formatted traceback) when there is one. A value JSON cannot hold is
    written as its ``str()``. Messages, tracebacks and string fields are masked
    (``jobqueue.masking``) and the text fields' control characters escaped. Use it in ``LOGGING``::

        "formatters": {"json": {"()": "jobqueue.logging.JSONFormatter"}}
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return ``record`` as one line of JSON (see the class docstring for the keys)."""
        entry: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": safe_text(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                entry[key] = mask_text(value) if isinstance(value, str) else value
        if record.exc_info:
            entry["exc_info"] = safe_text(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack_info"] = safe_text(self.formatStack(record.stack_info))
        return json.dumps(entry, default=str, ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """Return the record's creation time as ISO 8601 in UTC, to the millisecond."""
        if datefmt:
            return super().formatTime(record, datefmt)
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
