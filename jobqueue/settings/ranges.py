"""Internal: the sane range of every duration, size and count setting and command flag.

One table (:data:`RANGES`), checked by the rule of ``validation.number``, used by
``conf.build_settings`` and the parsers of the nested settings (so ``manage.py check`` reports
jobqueue.E001 through it) and by the argparse types of ``runworkers`` and ``prunejobs``
(:data:`FLAGS`). A value outside its range is refused at start with an error naming the key or
flag; NaN, infinity, negatives and huge values never reach a timer, a ``timedelta`` or SQL.

The settings table of the docs (docs/settings.md) lists the same ranges. The sources of the
bounds are given per row; ``docs/decisions.md`` ("One table of ranges") says why the rest
were chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.validation import MAX_DELAY_SECONDS, describe_range, number

__all__ = ["FLAGS", "RANGES", "Range", "check", "section", "setting"]

HOUR = 3600
DAY = 24 * HOUR


@dataclass(frozen=True, slots=True)
class Range:
    """The values one setting or flag accepts: ``low <= value <= high``.

    Attributes:
        low: smallest value accepted.
        high: largest value accepted.
        unit: ``"seconds"``, ``"bytes"`` or ``""`` (a count).
        integer: whether only whole numbers are accepted.
    """

    low: float
    high: float
    unit: str = "seconds"
    integer: bool = False

    def describe(self) -> str:
        """Return the range as the docs and error messages write it, e.g. ``1..43200 seconds``."""
        return describe_range(self.low, self.high, self.unit)


def _seconds(low: float, high: float) -> Range:
    return Range(low, high)


def _count(low: int, high: int, unit: str = "") -> Range:
    return Range(low, high, unit=unit, integer=True)


#: Setting key (``JOBQUEUE[KEY]``, or ``KEY.field`` of a nested dict) -> its range.
RANGES: dict[str, Range] = {
    # 1 s .. 12 h, as SQS's visibility timeout; below 1 s a heartbeat (every third of it)
    # cannot keep up with one database round trip on a loaded host and jobs run twice.
    "LEASE_SECONDS": _seconds(1, 12 * HOUR),
    "TIMEOUT_SECONDS": _seconds(0.01, 7 * DAY),
    "MAX_ATTEMPTS": _count(1, 10_000),  # client.MAX_ATTEMPTS_LIMIT
    "POLL_INTERVAL_SECONDS": _seconds(0.01, HOUR),
    # 0: every scrape computes the gauges (tests; a single small site).
    "METRICS_INTERVAL_SECONDS": _seconds(0, HOUR),
    "GRACE_SECONDS": _seconds(0, DAY),
    "REAPER_INTERVAL_SECONDS": _seconds(0.01, HOUR),
    # jsonb values are at most 255 MiB (PostgreSQL's limit).
    "MAX_PAYLOAD_BYTES": _count(1, 255 * 1024 * 1024, "bytes"),
    "CHECKPOINT_MAX_BYTES": _count(1, 1024 * 1024, "bytes"),
    "CONCURRENCY": _count(1, 1000),
    # Coroutines, not threads: 10,000 awaiting jobs fit in one process; one claim takes them.
    "ASYNC_CONCURRENCY": _count(1, 10_000),
    "TENANT_MAX_RUNNING": _count(1, 1_000_000),
    "RETENTION": _seconds(0, MAX_DELAY_SECONDS),
    "LEADER_LEASE_SECONDS": _seconds(1, 12 * HOUR),
    "SCHEDULER_INTERVAL_SECONDS": _seconds(0.01, 10 * 60),
    # And at least LEADER_LEASE_SECONDS + SCHEDULER_INTERVAL_SECONDS (conf checks the sum).
    "CRON_GRACE_SECONDS": _seconds(1, 30 * DAY),
    "CRON_FIRE_RETENTION_SECONDS": _seconds(60, MAX_DELAY_SECONDS),
    # At least 1 h (the dashboard's short chart), at most 90 days (rows grow by queue x type).
    "ROLLUP_RETENTION_SECONDS": _seconds(HOUR, 90 * DAY),
    "BACKOFF.base_seconds": _seconds(0.001, MAX_DELAY_SECONDS),
    "BACKOFF.cap_seconds": _seconds(0.001, MAX_DELAY_SECONDS),
    "BREAKER.window_seconds": _seconds(0.01, DAY),
    "BREAKER.cooldown_seconds": _seconds(0.01, MAX_DELAY_SECONDS),
    "BREAKER.max_cooldown_seconds": _seconds(0.01, MAX_DELAY_SECONDS),
    # Zero would switch a PostgreSQL limit off (txlimits.py; docs/decisions.md, "Bounded
    # transactions").
    "TRANSACTION_LIMITS.lock_timeout_seconds": _seconds(0.1, 600),
    "TRANSACTION_LIMITS.statement_timeout_seconds": _seconds(0.1, HOUR),
    "TRANSACTION_LIMITS.idle_in_transaction_seconds": _seconds(0.1, 600),
    # The relay's poll: 10 ms (a busy outbox) to a minute (lag of half a minute at most).
    "OUTBOX_RELAY_INTERVAL_SECONDS": _seconds(0.01, 60),
    # Case 31: at most 10,000 rows per delete statement.
    "PRUNE_BATCH_SIZE": _count(1, 10_000, "rows"),
    "PROCESSES": _count(1, 256),
    # Rate limits (ratelimits.py): 0.0001/s (a job per 2.8 h; slower is a schedule, cron's job)
    # to a million per second (beyond what one PostgreSQL claims); bursts up to a million tokens.
    "RATE_LIMITS.rate": Range(0.0001, 1_000_000, unit="per second"),
    "RATE_LIMITS.burst": _count(1, 1_000_000, "tokens"),
    # runworkers --max-tasks (a flag only): a billion tasks is "never" for any process.
    "MAX_TASKS": _count(1, 1_000_000_000, "tasks"),
    # runworkers --max-memory-per-child (a flag only), MiB: below 32 MB no Django process
    # starts; 4 TiB is "never".
    "MAX_MEMORY_PER_CHILD": _count(32, 4 * 1024 * 1024, "MB"),
}

#: Command flag -> the key of its range (flags take the range of the setting they override).
FLAGS: dict[str, str] = {
    "--lease": "LEASE_SECONDS",
    "--poll-interval": "POLL_INTERVAL_SECONDS",
    "--grace": "GRACE_SECONDS",
    "--concurrency": "CONCURRENCY",
    "--async-concurrency": "ASYNC_CONCURRENCY",
    "--processes": "PROCESSES",
    "--max-tasks": "MAX_TASKS",
    "--max-memory-per-child": "MAX_MEMORY_PER_CHILD",
    "--older-than": "RETENTION",
    "--batch-size": "PRUNE_BATCH_SIZE",
}


def range_of(key: str) -> Range | None:
    """Return the range of ``key`` (``"LEASE_SECONDS"``, ``"BACKOFF.cap_seconds"``), if any.

    ``RETENTION.succeeded`` and the other states take the range of ``RETENTION``.
    """
    return RANGES.get(key) or RANGES.get(key.split(".", 1)[0])


def check(key: str, value: Any, name: str | None = None) -> float:
    """Return ``value`` if it is a number within the range of ``key``.

    Args:
        key: a key of :data:`RANGES` (or a ``RETENTION.<state>`` key).
        value: the value given (any type).
        name: how the error names the value (default: ``key``), e.g. ``JOBQUEUE['LEASE_SECONDS']``
            or ``--lease``.

    Returns:
        The value, as an ``int`` for whole-number ranges and a ``float`` otherwise.

    Raises:
        ValueError: not a number (bool, NaN, infinity included), not whole where a count is
            expected, or outside the range; the message names ``name``, the range and the value.
        KeyError: ``key`` has no range (a programming error).
    """
    limit = range_of(key)
    if limit is None:
        raise KeyError(key)
    return number(name or key, value, limit.low, limit.high, integer=limit.integer, unit=limit.unit)


def setting(key: str, value: Any, name: str) -> float:
    """Return ``value`` if it is within the range of ``key``, for a setting (as :func:`check`).

    Raises:
        JobQueueConfigurationError: :func:`check`'s message, naming ``name``.
    """
    try:
        return check(key, value, name)
    except ValueError as exc:
        raise JobQueueConfigurationError(str(exc)) from None


def section(value: Any, where: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``defaults`` updated with the dict ``value`` (a nested setting like ``BREAKER``).

    Raises:
        JobQueueConfigurationError: ``value`` is not a dict, or has a key ``defaults`` lacks;
            naming ``where`` and the known keys.
    """
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(f"{where} must be a dict, got {value!r}")
    unknown = sorted(map(str, set(value) - set(defaults)))
    if unknown:
        raise JobQueueConfigurationError(
            f"{where} has unknown keys: {', '.join(unknown)} (known: {', '.join(defaults)})"
        )
    return {**defaults, **value}
