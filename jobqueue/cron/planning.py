"""Internal: which fire times one scheduler pass fires (a pure function of the clock and entry).

Time zones and DST are the :class:`~jobqueue.settings.crontab.Schedule`'s; this module decides
what is on time, what was missed and what the entry's missed-run policy keeps of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobqueue.settings.crontab import Schedule

#: Missed fire times counted one by one before the count is extrapolated (a per-second entry
#: down for days would otherwise take seconds to count).
MAX_COUNTED_MISSES = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What one scheduler pass does with one entry.

    Attributes:
        fire_times: the fire times to fire, oldest first.
        skipped: missed fire times the policy drops (estimated past ``MAX_COUNTED_MISSES``).
        skipped_from, skipped_to: the first and last missed fire time, when any were missed.
        next_fire_at: the first fire time after this pass.
    """

    fire_times: tuple[datetime, ...]
    skipped: int
    next_fire_at: datetime
    skipped_from: datetime | None = None
    skipped_to: datetime | None = None


def plan(
    schedule: Schedule,
    next_fire_at: datetime | None,
    *,
    missed: str,
    missed_cap: int,
    now: datetime,
    grace_s: float,
    lookahead_s: float = 0.0,
) -> Plan:
    """Decide which fire times to fire now (a pure function of the clock and the entry).

    Fire times from ``next_fire_at`` up to ``now + lookahead_s`` are due. Those later than
    ``now - grace_s`` are on time (a failover or a slow tick made them late, not missed) and
    always fire. Older ones are missed runs, handled by the policy: ``skip`` fires none;
    ``once`` fires the latest of them, unless an on-time fire is due anyway; ``all`` fires the
    latest ``missed_cap`` of them, oldest first.
    """
    horizon = now + timedelta(seconds=lookahead_s)
    if next_fire_at is None:
        return Plan(fire_times=(), skipped=0, next_fire_at=schedule.next_after(now))
    cutoff = now - timedelta(seconds=grace_s)
    tick = timedelta(microseconds=1)
    on_time: list[datetime] = []
    for current in schedule.iter_after(max(next_fire_at - tick, cutoff)):
        if current > horizon:
            following = current
            break
        on_time.append(current)
    first_missed = schedule.next_after(next_fire_at - tick)
    if first_missed > cutoff:
        return Plan(fire_times=tuple(on_time), skipped=0, next_fire_at=following)
    last_missed = schedule.previous_at_or_before(cutoff)
    count = _count(schedule, first_missed, last_missed)
    keep = {"skip": 0, "once": 0 if on_time else 1, "all": missed_cap}[missed]
    kept: list[datetime] = []
    current = last_missed
    while len(kept) < min(keep, count) and current >= first_missed:
        kept.append(current)
        current = schedule.previous_at_or_before(current - tick)
    skipped = count - len(kept)
    return Plan(
        fire_times=(*reversed(kept), *on_time),
        skipped=skipped,
        next_fire_at=following,
        skipped_from=first_missed if skipped else None,
        # The kept ones are the latest: what was dropped ends just before the oldest kept.
        skipped_to=(current if kept else last_missed) if skipped else None,
    )


def _count(schedule: Schedule, first: datetime, last: datetime) -> int:
    """Count fire times in ``[first, last]``; extrapolate past ``MAX_COUNTED_MISSES``."""
    count = 0
    for current in schedule.iter_after(first - timedelta(microseconds=1)):
        if current > last:
            break
        count += 1
        if count == MAX_COUNTED_MISSES:
            span = (current - first).total_seconds()
            if span <= 0:
                break
            return round((count - 1) * (last - first).total_seconds() / span) + 1
    return count
