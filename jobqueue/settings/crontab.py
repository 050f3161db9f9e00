"""Internal: cron expressions and time zones, as pure functions of aware datetimes.

A schedule is a list of wall-clock times in its zone (the cron fields are read in that zone).
Each wall-clock time is turned into one UTC instant:

* a local time that does not exist (the clocks spring forward over it) fires at the first
  instant after the gap: ``30 2 * * *`` in Europe/Berlin fires at 03:00 CEST on the day the
  clocks go from 02:00 to 03:00;
* a local time that happens twice (the clocks fall back) depends on the entry. An entry whose
  minute or hour field is ``*`` or ``*/n`` runs on elapsed time: each pass of the repeated hour
  fires, at its own UTC instant (``* * * * *`` in America/Los_Angeles fires every minute of both
  01:00-01:59 passes, 120 fires). An entry with a fixed minute and hour (numbers, lists, ranges)
  fires once, at the first occurrence: ``30 2 * * *`` in Europe/Berlin fires at 02:30 CEST, not
  again at 02:30 CET. (FIELD-CASES 35: "Cron through a fold".)

Several wall-clock times that map to one instant (every minute of a spring-forward gap) fire once.
croniter only ever sees naive wall-clock times, so its own DST handling plays no part; instants
come from zoneinfo per wall-clock time, never by adding whole hours, so zones 30 or 45 minutes off
the hour (Asia/Kathmandu, Australia/Lord_Howe's half-hour shift) need nothing special.

Expressions have 5 fields (minute hour day-of-month month day-of-week) or 6 with a *leading*
seconds field (``*/10 * * * * *`` is every ten seconds), as in Quartz, Spring and robfig/cron.
The ``@hourly``, ``@daily``, ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly`` and
``@annually`` shorthands are accepted.
"""

from __future__ import annotations

import collections
import functools
import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter
from django.core.exceptions import ValidationError

from jobqueue.errors import InvalidCronExpression

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

__all__ = [
    "Schedule",
    "validate_cron_expression",
    "validate_timezone",
]

_ONE_MICROSECOND = timedelta(microseconds=1)
_ONE_DAY = timedelta(days=1)

#: Expressions the shorthands stand for; only their minute and hour fields matter here.
_ALIAS_FIELDS = {"@hourly": "0 * * * *"}

#: Shorthands croniter understands that make sense for a scheduler (@reboot does not).
_ALIASES = frozenset(
    {"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"}
)


class InvalidTimezone(ValueError):
    """The time zone name is not in the zone database."""


def zone(name: str) -> ZoneInfo:
    """Return the ``ZoneInfo`` named ``name``.

    Raises:
        InvalidTimezone: naming the value, when it is not a zone database key.
    """
    return _zone(name)


@functools.lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidTimezone(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidTimezone(
            f"unknown time zone {name!r} (use a zone database name such as 'Europe/Berlin')"
        ) from None


def validate_timezone(name: str) -> None:
    """Raise ``django.core.exceptions.ValidationError`` if ``name`` is not a known zone.

    A model-field validator, so the admin shows the message as a form error.
    """
    try:
        zone(name)
    except InvalidTimezone as exc:
        raise ValidationError(str(exc), code="invalid_timezone") from None


def _normalize(expr: str) -> tuple[str, bool]:
    """Return ``(expression, has_seconds)`` with whitespace collapsed, or raise."""
    if not isinstance(expr, str):
        raise InvalidCronExpression(f"invalid cron expression {expr!r}: must be a string")
    fields = expr.split()
    if len(fields) == 1 and fields[0].lower() in _ALIASES:
        return fields[0].lower(), False
    if len(fields) not in (5, 6):
        raise InvalidCronExpression(
            f"invalid cron expression {expr!r}: expected 5 fields (minute hour day month "
            f"weekday) or 6 with leading seconds, got {len(fields)}"
        )
    return " ".join(fields), len(fields) == 6


@functools.lru_cache(maxsize=512)
def _parse(expr: str) -> tuple[str, bool]:
    normalized, seconds = _normalize(expr)
    reference = datetime(2000, 1, 1)
    try:
        if not croniter.is_valid(normalized, second_at_beginning=seconds, strict=True):
            # strict refuses days that no month has (31 February); say which problem it is.
            croniter(normalized, reference, second_at_beginning=seconds)
            raise InvalidCronExpression(
                f"invalid cron expression {expr!r}: a day that never occurs in that month"
            )
        croniter(normalized, reference, second_at_beginning=seconds).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidCronExpression(
            f"invalid cron expression {expr!r}: it never fires (no date matches)"
        ) from None
    except CroniterError as exc:
        raise InvalidCronExpression(f"invalid cron expression {expr!r}: {exc}") from None
    return normalized, seconds


def has_seconds(expr: str) -> bool:
    """Return True if ``expr`` has a leading seconds field (6 fields); False if not, or invalid.

    Args:
        expr: a cron expression, as :func:`parse_cron_expression` takes.

    Returns:
        Whether its fire times fall on seconds, so that showing them to the minute would hide
        which fire is which (``*/10 * * * * *``).
    """
    try:
        return _parse(expr)[1]
    except InvalidCronExpression:
        return False


def parse_cron_expression(expr: str) -> str:
    """Return ``expr`` normalized (fields separated by one space).

    Raises:
        InvalidCronExpression: naming the expression and the problem: field count, a value
            out of range, a bad token, or a schedule that never fires.
    """
    return _parse(expr)[0]


def validate_cron_expression(expr: str) -> None:
    """Raise ``django.core.exceptions.ValidationError`` for a bad cron expression.

    A model-field validator, so the admin shows the message as a form error.
    """
    try:
        parse_cron_expression(expr)
    except InvalidCronExpression as exc:
        raise ValidationError(str(exc), code="invalid_cron") from None


def runs_on_elapsed_time(expr: str) -> bool:
    """Return whether ``expr`` (normalized) fires in both passes of a repeated hour.

    True when its minute or hour field is ``*`` or ``*/n`` (FIELD-CASES 35); a fixed minute and
    hour (numbers, lists, ranges, or a range with a step) fire each wall-clock time once.
    """
    fields = _ALIAS_FIELDS.get(expr, expr).split()
    if len(fields) == 1:
        return False  # @daily and longer: fixed minute and hour
    minute, hour = fields[-5], fields[-4]
    return any(f == "*" or f.startswith("*/") for f in (minute, hour))


def _second_pass(local: datetime, tz: tzinfo) -> datetime | None:
    """Return the second-pass UTC instant of a wall-clock time that happens twice, else None."""
    first = local.replace(tzinfo=tz, fold=0)
    second = local.replace(tzinfo=tz, fold=1)
    if first.utcoffset() == second.utcoffset():
        return None
    instant = second.astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) != local:
        return None  # in a gap, where fold=1 reads it with the later offset
    return instant


def _to_instant(local: datetime, tz: tzinfo) -> datetime:
    """Map a naive wall-clock time in ``tz`` to its one UTC instant (see the module docstring)."""
    first = local.replace(tzinfo=tz, fold=0)
    instant = first.astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == local:
        return instant  # exists; fold=0 is the first occurrence when it happens twice
    # In a gap. fold=0 reads it with the offset before the gap (a later instant), fold=1 with
    # the offset after it (an earlier one); the transition lies between. Find it to the second.
    low = local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    high = instant
    after = local.replace(tzinfo=tz, fold=1).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == after:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


class Schedule:
    """A cron expression read in a time zone: fire times as aware UTC instants.

    Args:
        expr: the cron expression (see the module docstring).
        timezone: a zone database name; the cron fields are wall-clock time there.

    Raises:
        InvalidCronExpression: the expression is invalid.
        InvalidTimezone: the zone is unknown.
    """

    def __init__(self, expr: str, timezone: str = "UTC") -> None:
        self.expr, self._seconds = _parse(expr)
        self.timezone = timezone
        self.zone = zone(timezone)
        self.elapsed = runs_on_elapsed_time(self.expr)

    def __repr__(self) -> str:
        return f"Schedule({self.expr!r}, {self.timezone!r})"

    def _iter(self, start: datetime, *, backwards: bool = False) -> croniter:
        return croniter(self.expr, start, second_at_beginning=self._seconds, is_prev=backwards)

    def _local(self, instant: datetime) -> datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        """Yield the fire times strictly after ``after`` (aware), oldest first, as UTC instants.

        Each one is what :meth:`next_after` gives for the one before: a fire time comes from
        the previous fire time, never from "now".
        """
        _require_aware(after)
        local = self._local(after)
        if not self.elapsed:
            candidates: Iterator[datetime] = (
                _to_instant(wall, self.zone) for wall in self._walls(local)
            )
        else:
            # When `after` is in a first pass, wall times before it have second-pass instants
            # after it: start back by the fold's length.
            candidates = self._both_passes(local - self._fold_ahead(after))
        last = after
        for candidate in candidates:
            # Wall times of a fold's second pass map to the first pass (earlier), and the
            # minutes of a gap all map to its end: step past anything not after the last.
            if candidate > last:
                last = candidate
                yield candidate

    def _both_passes(self, start: datetime) -> Iterator[datetime]:
        """Yield the instants of each wall time after ``start``, both passes of a fold, in order."""
        # Second-pass instants come after every first-pass one of their fold and before the
        # first wall time after it, so hold them back until a later first instant comes.
        pending: collections.deque[datetime] = collections.deque()
        for wall in self._walls(start):
            first = _to_instant(wall, self.zone)
            while pending and pending[0] < first:
                yield pending.popleft()
            yield first
            second = _second_pass(wall, self.zone)
            if second is not None:
                pending.append(second)

    def _walls(self, start: datetime) -> Iterator[datetime]:
        it = self._iter(start)
        while True:
            yield it.get_next(datetime)

    def _fold_ahead(self, after: datetime) -> timedelta:
        """Return the length of a fold starting within that length after ``after``, else 0."""
        now = after.astimezone(self.zone).utcoffset()
        later = (after + _ONE_DAY).astimezone(self.zone).utcoffset()
        assert now is not None and later is not None
        if later >= now:
            return timedelta(0)
        shift = now - later
        soon = (after + shift).astimezone(self.zone).utcoffset()
        return shift if soon is not None and soon < now else timedelta(0)

    def next_after(self, after: datetime) -> datetime:
        """Return the first fire time strictly after ``after`` (aware), as an aware UTC instant.

        Calling it with the last fire time gives the next one: a slow loop or a clock that
        wakes a few milliseconds early can neither skip nor repeat a time.
        """
        return next(self.iter_after(after))

    def previous_at_or_before(self, at: datetime) -> datetime:
        """Return the last fire time at or before ``at`` (aware), as an aware UTC instant."""
        _require_aware(at)
        local = self._local(at)
        # While `at` is in the second pass of a fold, the later wall-clock times of the fold
        # map to first-pass instants that are still <= `at`: search back from where the first
        # pass's offset puts `at` (an hour later on the wall clock, for a one-hour fold).
        offset = at.astimezone(self.zone).utcoffset()
        first_pass = local.replace(tzinfo=self.zone, fold=0).utcoffset()
        assert offset is not None and first_pass is not None
        start = local + (first_pass - offset)
        it = self._iter(start + _ONE_MICROSECOND, backwards=True)
        best: datetime | None = None
        while True:
            wall = it.get_prev(datetime)
            candidate = _to_instant(wall, self.zone)
            second = _second_pass(wall, self.zone) if self.elapsed else None
            if second is not None and second <= at:
                # Every earlier wall time maps to instants at or before this one.
                return max(second, best) if best is not None else second
            if candidate <= at:
                if second is None:
                    return max(candidate, best) if best is not None else candidate
                best = max(candidate, best) if best is not None else candidate

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Yield the fire times ``t`` with ``start <= t <= end``, oldest first."""
        for current in self.iter_after(start - _ONE_MICROSECOND):
            if current > end:
                return
            yield current

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """Return the next ``count`` fire times strictly after ``after``."""
        return list(itertools.islice(self.iter_after(after), count))


def _require_aware(value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got naive {value.isoformat()}")
