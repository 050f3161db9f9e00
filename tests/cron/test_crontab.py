"""Cron expressions, time zones and DST, and the missed-run planner: pure functions, no database.

Every instant below is written out in UTC: the schedule is wall-clock time in its zone, a local
time the clocks skip fires at the first instant after the gap; one that happens twice fires in
both passes for a `*` or `*/n` minute or hour field, else once, at its first occurrence.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from jobqueue.cron import MAX_COUNTED_MISSES, plan
from jobqueue.errors import InvalidCronExpression
from jobqueue.settings.crontab import InvalidTimezone, Schedule, parse_cron_expression

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def fires(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    return list(Schedule(expr, zone).between(start, end))


# -- the DST days ----------------------------------------------------------------------


def test_berlin_spring_forward_0230_fires_once_at_the_end_of_the_gap():
    # 2027-03-28: 02:00 CET -> 03:00 CEST (01:00 UTC); 02:30 does not exist that day.
    assert fires("30 2 * * *", "Europe/Berlin", utc(2027, 3, 26), utc(2027, 3, 30)) == [
        utc(2027, 3, 26, 1, 30),  # 02:30 CET
        utc(2027, 3, 27, 1, 30),  # 02:30 CET
        utc(2027, 3, 28, 1, 0),  # 03:00 CEST, the first instant after the gap
        utc(2027, 3, 29, 0, 30),  # 02:30 CEST
    ]


def test_berlin_fall_back_0230_fires_once_at_its_first_occurrence():
    # 2027-10-31: 03:00 CEST -> 02:00 CET (01:00 UTC); 02:30 happens at 00:30 and 01:30 UTC.
    assert fires("30 2 * * *", "Europe/Berlin", utc(2027, 10, 30), utc(2027, 11, 2)) == [
        utc(2027, 10, 30, 0, 30),  # 02:30 CEST
        utc(2027, 10, 31, 0, 30),  # 02:30 CEST, the first of the two
        utc(2027, 11, 1, 1, 30),  # 02:30 CET
    ]


def test_new_york_spring_forward_0100_fires_once():
    # 2027-03-14: 02:00 EST -> 03:00 EDT (07:00 UTC); 01:00 exists (EST), once.
    assert fires("0 1 * * *", "America/New_York", utc(2027, 3, 13), utc(2027, 3, 16)) == [
        utc(2027, 3, 13, 6, 0),  # 01:00 EST
        utc(2027, 3, 14, 6, 0),  # 01:00 EST
        utc(2027, 3, 15, 5, 0),  # 01:00 EDT
    ]


def test_new_york_fall_back_0100_fires_once_at_its_first_occurrence():
    # 2027-11-07: 02:00 EDT -> 01:00 EST (06:00 UTC); 01:00 happens at 05:00 and 06:00 UTC.
    assert fires("0 1 * * *", "America/New_York", utc(2027, 11, 6), utc(2027, 11, 9)) == [
        utc(2027, 11, 6, 5, 0),  # 01:00 EDT
        utc(2027, 11, 7, 5, 0),  # 01:00 EDT, not again at 06:00 UTC (01:00 EST)
        utc(2027, 11, 8, 6, 0),  # 01:00 EST
    ]


def test_every_minute_of_a_gap_fires_once_at_its_end_and_a_fold_hour_runs_twice():
    # Berlin 2027-03-28: the local minutes 02:00..02:59 all map to 01:00 UTC: one fire.
    assert fires("* * * * *", "Europe/Berlin", utc(2027, 3, 28, 0, 58), utc(2027, 3, 28, 1, 2)) == [
        utc(2027, 3, 28, 0, 58),
        utc(2027, 3, 28, 0, 59),
        utc(2027, 3, 28, 1, 0),
        utc(2027, 3, 28, 1, 1),
        utc(2027, 3, 28, 1, 2),
    ]
    # New York 2027-11-07: the wall clock runs 01:00..01:59 twice; a */20 minute field runs on
    # elapsed time, so both passes fire (FIELD-CASES 35).
    got = fires(
        "*/20 * * * *", "America/New_York", utc(2027, 11, 7, 4, 30), utc(2027, 11, 7, 7, 30)
    )
    assert got == [
        utc(2027, 11, 7, 4, 40),  # 00:40 EDT
        utc(2027, 11, 7, 5, 0),  # 01:00 EDT
        utc(2027, 11, 7, 5, 20),
        utc(2027, 11, 7, 5, 40),  # 01:40 EDT
        utc(2027, 11, 7, 6, 0),  # 01:00 EST, the second pass
        utc(2027, 11, 7, 6, 20),
        utc(2027, 11, 7, 6, 40),
        utc(2027, 11, 7, 7, 0),  # 02:00 EST
        utc(2027, 11, 7, 7, 20),
    ]


# -- FIELD-CASE 35: cron through a fold; zones 30 or 45 minutes off the hour ------------------

LA, LORD_HOWE, KATHMANDU = "America/Los_Angeles", "Australia/Lord_Howe", "Asia/Kathmandu"


def window(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Fire times ``t`` with ``start <= t < end``."""
    return [t for t in fires(expr, zone, start, end) if t < end]


def every(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Return ``start``, ``start + step``, ... before ``end``."""
    return [start + i * step for i in range(math.ceil((end - start) / step))]


def test_field_case_35_wildcard_and_step_entries_fire_on_elapsed_time_through_a_fold():
    start, end = utc(2025, 11, 2, 7), utc(2025, 11, 2, 11)  # LA falls back at 09:00Z
    assert window("* * * * *", LA, start, end) == every(start, end, timedelta(minutes=1))
    assert window("0 * * * *", LA, start, end) == [
        utc(2025, 11, 2, 7),  # 00:00 PDT
        utc(2025, 11, 2, 8),  # 01:00 PDT
        utc(2025, 11, 2, 9),  # 01:00 PST
        utc(2025, 11, 2, 10),  # 02:00 PST
    ]
    assert window("@hourly", LA, start, end) == window("0 * * * *", LA, start, end)
    # A fixed minute and hour fires once, at the first occurrence.
    assert window("30 1 * * *", LA, utc(2025, 11, 2), utc(2025, 11, 3)) == [utc(2025, 11, 2, 8, 30)]
    # A fixed minute with a stepped hour runs on elapsed time too (the hour field is */n).
    assert window("30 */1 * * *", LA, start, end) == [
        utc(2025, 11, 2, 7, 30),
        utc(2025, 11, 2, 8, 30),
        utc(2025, 11, 2, 9, 30),
        utc(2025, 11, 2, 10, 30),
    ]
    # A six-field (seconds) expression: its minute and hour are the second and third fields.
    seconds = window("0 * * * * *", LA, utc(2025, 11, 2, 8, 59), utc(2025, 11, 2, 9, 2))
    assert seconds == every(utc(2025, 11, 2, 8, 59), utc(2025, 11, 2, 9, 2), timedelta(minutes=1))


def test_field_case_35_lord_howe_half_hour_fold_and_kathmandu_quarter_hour_offset():
    start, end = utc(2025, 4, 5, 12), utc(2025, 4, 6)  # Lord Howe: 02:00 +11 -> 01:30 +10:30
    lh = window("*/15 * * * *", LORD_HOWE, start, end)
    assert lh == every(start, end, timedelta(minutes=15))
    assert len(lh) == 48 and utc(2025, 4, 5, 14, 30) in lh and utc(2025, 4, 5, 15) in lh
    start, end = utc(2025, 4, 5), utc(2025, 4, 8)
    assert window("0 9 * * *", KATHMANDU, start, end) == [
        utc(2025, 4, 5, 3, 15),
        utc(2025, 4, 6, 3, 15),
        utc(2025, 4, 7, 3, 15),
    ]
    kh = window("0 * * * *", KATHMANDU, start, end)
    assert kh == every(utc(2025, 4, 5, 0, 15), end, timedelta(hours=1))
    assert len(kh) == 72


def test_field_case_35_next_and_previous_agree_with_the_fire_times_through_a_fold():
    s = Schedule("* * * * *", LA)
    times = window("* * * * *", LA, utc(2025, 11, 2, 8), utc(2025, 11, 2, 10, 5))
    for before, after in itertools.pairwise(times):
        assert s.next_after(before) == after
        assert s.next_after(after - timedelta(seconds=30)) == after
        assert s.previous_at_or_before(after - timedelta(microseconds=1)) == before
        assert s.previous_at_or_before(after) == after


def test_previous_fire_time_inside_the_second_pass_of_a_fold():
    s = Schedule("50 1 * * *", "America/New_York")
    # 06:40 UTC is 01:40 EST, the second pass: today's 01:50 EDT (05:50 UTC) is already past.
    assert s.previous_at_or_before(utc(2027, 11, 7, 6, 40)) == utc(2027, 11, 7, 5, 50)
    assert s.previous_at_or_before(utc(2027, 11, 7, 5, 49)) == utc(2027, 11, 6, 5, 50)
    gap = Schedule("30 2 * * *", "Europe/Berlin")
    assert gap.previous_at_or_before(utc(2027, 3, 28, 1, 0)) == utc(2027, 3, 28, 1, 0)
    assert gap.previous_at_or_before(utc(2027, 3, 28, 0, 59)) == utc(2027, 3, 27, 1, 30)


# -- FIELD-CASES 6 and 11: the fields are read in the entry's zone, UTC by default ----------


def test_field_case_6_new_york_noon_late_and_gap_entries_fire_once_per_local_day():
    noon = fires("0 12 * * *", "America/New_York", utc(2025, 11, 1, 4), utc(2025, 11, 3, 18))
    assert noon == [utc(2025, 11, 1, 16), utc(2025, 11, 2, 17), utc(2025, 11, 3, 17)]
    late = fires("30 1 * * *", "America/New_York", utc(2025, 11, 2, 4), utc(2025, 11, 3, 4))
    assert late == [utc(2025, 11, 2, 5, 30)]  # not also 06:30 UTC
    gap = fires("30 2 * * *", "America/New_York", utc(2025, 3, 8, 5), utc(2025, 3, 10, 8))
    assert gap == [utc(2025, 3, 8, 7, 30), utc(2025, 3, 9, 7, 0), utc(2025, 3, 10, 6, 30)]


def test_field_case_11_no_zone_means_utc_whatever_the_host_zone(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        window = (utc(2025, 1, 14, 22), utc(2025, 1, 16, 0, 30))
        assert fires("0 0 * * *", "Europe/Berlin", *window) == [
            utc(2025, 1, 14, 23),
            utc(2025, 1, 15, 23),
        ]
        assert fires("0 0 * * *", "UTC", *window) == [utc(2025, 1, 15), utc(2025, 1, 16)]
        assert Schedule("0 0 * * *").timezone == "UTC"
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


# -- clock discipline (FIELD-CASE 12) -------------------------------------------------------


def test_next_fire_time_is_strictly_after_the_last_and_an_early_wake_finds_the_same_slot():
    s = Schedule("* * * * *")
    slot = utc(2030, 1, 1, 12, 0)
    assert s.next_after(slot) == utc(2030, 1, 1, 12, 1)
    assert s.next_after(slot - timedelta(milliseconds=5)) == slot
    assert s.next_after(slot - timedelta(microseconds=1)) == slot
    with pytest.raises(ValueError, match="aware"):
        s.next_after(datetime(2030, 1, 1))


# -- expressions -----------------------------------------------------------------------------


def test_six_fields_put_seconds_first_and_shorthands_work():
    assert fires("*/20 * * * * *", "UTC", utc(2030, 1, 1), utc(2030, 1, 1, 0, 1)) == [
        utc(2030, 1, 1, 0, 0, 0),
        utc(2030, 1, 1, 0, 0, 20),
        utc(2030, 1, 1, 0, 0, 40),
        utc(2030, 1, 1, 0, 1, 0),
    ]
    assert fires("30 0 9 * * *", "UTC", utc(2030, 1, 1), utc(2030, 1, 2)) == [
        utc(2030, 1, 1, 9, 0, 30)
    ]
    assert fires("@daily", "UTC", utc(2030, 1, 1, 1), utc(2030, 1, 3)) == [
        utc(2030, 1, 2),
        utc(2030, 1, 3),
    ]
    assert parse_cron_expression("  0   9 * *  mon-fri ") == "0 9 * * mon-fri"


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("", "expected 5 fields"),
        ("* * * *", "got 4"),
        ("* * * * * * 2027", "got 7"),
        ("61 * * * *", "out of range"),
        ("0 24 * * *", "out of range"),
        ("0 0 0 * *", "out of range"),
        ("a b c d e", "is not acceptable"),
        ("0 0 31 2 *", "a day that never occurs"),
        ("@reboot", "got 1"),
        ("H * * * *", "Hashed definitions"),
        (None, "must be a string"),
    ],
)
def test_bad_expressions_raise_naming_the_expression(expr, problem):
    with pytest.raises(InvalidCronExpression, match=problem) as caught:
        parse_cron_expression(expr)
    assert f"invalid cron expression {expr!r}" in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "utc ", "../etc/passwd", "Europe/"])
def test_unknown_zones_are_refused_naming_them(name):
    with pytest.raises(InvalidTimezone, match=f"unknown time zone {name!r}"):
        Schedule("* * * * *", name)


# -- missed runs (FIELD-CASE 10, the 4-day downtime) --------------------------------

DAILY = Schedule("0 9 * * *")
MONDAY_9 = utc(2025, 1, 6, 9)  # next_fire_at when everything stopped (Monday 08:00)
THURSDAY_1030 = utc(2025, 1, 9, 10, 30)


def plan_daily(missed: str, missed_cap: int = 10, now: datetime = THURSDAY_1030):
    return plan(DAILY, MONDAY_9, missed=missed, missed_cap=missed_cap, now=now, grace_s=60)


def test_four_days_down_once_fires_the_latest_missed_time():
    p = plan_daily("once")
    assert p.fire_times == (utc(2025, 1, 9, 9),)
    assert (p.skipped, p.skipped_from, p.skipped_to) == (3, MONDAY_9, utc(2025, 1, 8, 9))
    assert p.next_fire_at == utc(2025, 1, 10, 9)


def test_four_days_down_skip_fires_none_and_resumes_at_the_next():
    p = plan_daily("skip")
    assert (p.fire_times, p.skipped, p.next_fire_at) == ((), 4, utc(2025, 1, 10, 9))


def test_four_days_down_all_fires_each_missed_time_oldest_first_within_the_cap():
    p = plan_daily("all")
    assert p.fire_times == (
        utc(2025, 1, 6, 9),
        utc(2025, 1, 7, 9),
        utc(2025, 1, 8, 9),
        utc(2025, 1, 9, 9),
    )
    assert (p.skipped, p.next_fire_at) == (0, utc(2025, 1, 10, 9))
    capped = plan_daily("all", missed_cap=3)
    assert capped.fire_times == (utc(2025, 1, 7, 9), utc(2025, 1, 8, 9), utc(2025, 1, 9, 9))
    assert (capped.skipped, capped.skipped_from, capped.skipped_to) == (1, MONDAY_9, MONDAY_9)


def test_minutely_after_days_down_once_is_one_job_not_thousands():
    minutely = Schedule("* * * * *")
    p = plan(
        minutely, utc(2025, 1, 6, 8, 0), missed="once", missed_cap=10, now=THURSDAY_1030, grace_s=60
    )
    # 10:30 is on time (within the grace), so the 4,470 missed minutes add no second job.
    assert p.fire_times == (utc(2025, 1, 9, 10, 30),)
    assert p.skipped == 3 * 24 * 60 + 2 * 60 + 30  # Monday 08:00 .. Thursday 10:29
    assert p.next_fire_at == utc(2025, 1, 9, 10, 31)
    for late_s, fired in ((59, utc(2025, 1, 9, 10, 30)), (61, utc(2025, 1, 9, 10, 31))):
        now = THURSDAY_1030 + timedelta(seconds=late_s)
        p = plan(minutely, utc(2025, 1, 6, 8), missed="once", missed_cap=10, now=now, grace_s=60)
        assert p.fire_times == (fired,)


def test_late_but_within_the_grace_fires_whatever_the_policy():
    every_10s = Schedule("*/10 * * * * *")
    for missed in ("skip", "once", "all"):
        p = plan(
            every_10s,
            utc(2030, 1, 1, 12, 0, 0),
            missed=missed,
            missed_cap=1,
            now=utc(2030, 1, 1, 12, 0, 35),
            grace_s=60,
        )
        assert p.fire_times == tuple(utc(2030, 1, 1, 12, 0, s) for s in (0, 10, 20, 30)), missed
        assert p.skipped == 0


def test_lookahead_fires_a_time_just_ahead_and_unset_starts_after_now():
    s = Schedule("* * * * *")
    p = plan(
        s,
        utc(2030, 1, 1, 12, 1),
        missed="once",
        missed_cap=10,
        now=utc(2030, 1, 1, 12, 0, 59, 500000),
        grace_s=60,
        lookahead_s=1,
    )
    assert (p.fire_times, p.next_fire_at) == ((utc(2030, 1, 1, 12, 1),), utc(2030, 1, 1, 12, 2))
    unset = plan(s, None, missed="once", missed_cap=10, now=utc(2030, 1, 1, 12, 0, 30), grace_s=60)
    assert (unset.fire_times, unset.next_fire_at) == ((), utc(2030, 1, 1, 12, 1))


class CountingSchedule(Schedule):
    """A real Schedule that counts the fire times it steps through (the work a plan does)."""

    steps = 0

    def iter_after(self, after):
        for fire_time in super().iter_after(after):
            self.steps += 1
            yield fire_time


def test_a_huge_miss_count_is_estimated_not_walked():
    # The work is counted in fire times stepped through, not timed: a plan that walked all
    # 345,541 missed seconds would pass a time limit on a fast machine and fail one on a
    # loaded one; stepping is what makes it slow.
    every_second = CountingSchedule("* * * * * *")
    p = plan(
        every_second, utc(2030, 1, 1), missed="skip", missed_cap=10, now=utc(2030, 1, 5), grace_s=60
    )
    assert every_second.steps <= MAX_COUNTED_MISSES + 100, every_second.steps
    # 00:00:00 .. 23:59:00 on the last day are missed; the last minute is within the grace.
    assert p.skipped == 4 * 86400 - 60 + 1
