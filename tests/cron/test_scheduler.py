"""The cron scheduler against the database, with the clock injected (``run_once(now=...)``).

``now`` stands for the database clock; nothing here sleeps. FIELD-CASES 6-12 each have a test
named after them. Real processes (failover by SIGKILL, delayed-job lateness) are in
test_process_scheduler.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from unittest import mock

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

import jobqueue
from jobqueue.cron.scheduler import Scheduler
from jobqueue.models import CronEntry, CronFire, Job, LeaderLease
from jobqueue.settings.crontab import Schedule
from jobqueue.states import JobState
from tests.conftest import ROOT, requires_postgres, subprocess_env

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

NOOP = "tests.testapp.jobs.noop"

# Most tests run in one transaction (the clock is injected, so now() pinned to the
# transaction's start does not matter); those with threads or processes commit for real.
pytestmark = pytest.mark.django_db
committing = pytest.mark.django_db(transaction=True)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def entry(name: str, cron_expr: str, *, start: datetime, **options) -> CronEntry:
    """Schedule an entry and make its first fire time the first one after ``start``.

    ``schedule()`` starts from the real database clock; the tests' clock is injected.
    """
    created = jobqueue.schedule(name, cron_expr, "q", NOOP, **options)
    first = Schedule(created.cron_expr, created.timezone).next_after(start)
    CronEntry.objects.filter(pk=created.pk).update(next_fire_at=first)
    created.refresh_from_db()
    return created


def scheduler(holder: str, **options) -> Scheduler:
    options.setdefault("reconcile", False)
    return Scheduler(holder=holder, **options)


def fire_times(name: str) -> list[datetime]:
    """Return the fire time of every job of entry ``name`` (from the job payloads), sorted."""
    jobs = Job.objects.filter(
        type=NOOP, id__in=CronFire.objects.filter(entry__name=name).values("job_id")
    )
    return sorted(
        datetime.fromisoformat(p["fire_time"]) for p in jobs.values_list("payload", flat=True)
    )


def run(schedulers: list[Scheduler], start: datetime, end: datetime, step: timedelta) -> None:
    t = start
    while t <= end:
        for s in schedulers:
            s.run_once(now=t)
        t += step


# -- the issue: two instances, 30 fire times, exactly one job each ---------------------------


class SplitBrain(Scheduler):
    """A second scheduler under its own lease name: it "leads" beside the real leader."""

    lease_name = "split-brain"


@committing
@pytest.mark.parametrize("prune", [False, True], ids=["kept", "pruned"])
def test_two_concurrent_schedulers_fire_each_of_30_fire_times_exactly_once(prune):
    start = utc(2030, 1, 1, 12, 0)
    entry("tick", "* * * * *", start=start - timedelta(seconds=1))
    # A and B contend for one lease (5 s; every tick is past it, so it changes hands); C leads
    # on a lease of its own, so two schedulers really fire at once each tick.
    schedulers = [
        scheduler("A", lease_s=5),
        scheduler("B", lease_s=5),
        SplitBrain(holder="C", reconcile=False, lease_s=5),
    ]
    ticks = [start + timedelta(seconds=20 * k) for k in range(90)]  # 30 minutes, 3 ticks each
    barrier = threading.Barrier(len(schedulers))
    errors: list[BaseException] = []

    def drive(s: Scheduler) -> None:
        try:
            for t in ticks:
                barrier.wait(timeout=30)
                s.run_once(now=t)
                barrier.wait(timeout=30)
                if prune and s.holder == "A":
                    # The pruner: every finished job goes at once (retention 0).
                    Job.objects.filter(type=NOOP).update(state=JobState.SUCCEEDED)
                    Job.objects.filter(state=JobState.SUCCEEDED).delete()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()
        finally:
            connections.close_all()

    if connections["default"].vendor == "postgresql":
        threads = [threading.Thread(target=drive, args=(s,)) for s in schedulers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
    else:
        # SQLite serializes writers (and its shared-cache test database refuses concurrent
        # ones outright): the three tick at the same instants, one after another.
        for t in ticks:
            for s in schedulers:
                s.run_once(now=t)
            if prune:
                Job.objects.filter(type=NOOP).update(state=JobState.SUCCEEDED)
                Job.objects.filter(state=JobState.SUCCEEDED).delete()
    expected = [start + timedelta(minutes=m) for m in range(30)]
    records = list(CronFire.objects.order_by("fire_time").values_list("fire_time", flat=True))
    assert records == expected
    if prune:
        assert Job.objects.count() == 0
    else:
        assert fire_times("tick") == expected
        assert Job.objects.count() == 30
    assert CronEntry.objects.get(name="tick").next_fire_at == start + timedelta(minutes=30)


# -- the issue: DST days fire once, at the instants stated ------------------------------------


@pytest.mark.parametrize(
    ("cron_expr", "zone", "day", "instant"),
    [
        ("30 2 * * *", "Europe/Berlin", utc(2027, 3, 28), utc(2027, 3, 28, 1, 0)),
        ("30 2 * * *", "Europe/Berlin", utc(2027, 10, 31), utc(2027, 10, 31, 0, 30)),
        ("0 1 * * *", "America/New_York", utc(2027, 3, 14), utc(2027, 3, 14, 6, 0)),
        ("0 1 * * *", "America/New_York", utc(2027, 11, 7), utc(2027, 11, 7, 5, 0)),
    ],
    ids=["berlin-spring", "berlin-fall", "new-york-spring", "new-york-fall"],
)
def test_dst_day_fires_once_at_the_stated_instant(cron_expr, zone, day, instant):
    entry("dst", cron_expr, start=day - timedelta(hours=1), timezone=zone)
    a, b = scheduler("A", lease_s=5), scheduler("B", lease_s=5)
    run([a, b], day - timedelta(hours=1), day + timedelta(hours=12), timedelta(minutes=5))
    assert fire_times("dst") == [instant]
    assert list(CronFire.objects.values_list("fire_time", flat=True)) == [instant]


# -- the issue: 4 days of downtime ------------------------------------------------------------


@pytest.mark.parametrize(
    ("missed", "cap", "expected"),
    [
        ("once", 10, [utc(2027, 1, 7, 9)]),
        ("skip", 10, []),
        (
            "all",
            10,
            [utc(2027, 1, 4, 9), utc(2027, 1, 5, 9), utc(2027, 1, 6, 9), utc(2027, 1, 7, 9)],
        ),
        ("all", 3, [utc(2027, 1, 5, 9), utc(2027, 1, 6, 9), utc(2027, 1, 7, 9)]),
    ],
    ids=["once", "skip", "all", "all-cap-3"],
)
def test_four_days_of_downtime_on_a_daily_entry(missed, cap, expected):
    # Down from Monday 2027-01-04 08:00 to Thursday 10:30: 09:00 Mon, Tue, Wed, Thu missed.
    entry("daily", "0 9 * * *", start=utc(2027, 1, 4, 8), missed=missed, missed_cap=cap)
    back = utc(2027, 1, 7, 10, 30)
    scheduler("A").run_once(now=back)
    assert fire_times("daily") == expected
    # Oldest first: job ids ascend with fire time.
    ids = list(CronFire.objects.order_by("fire_time").values_list("job_id", flat=True))
    assert ids == sorted(ids)
    daily = CronEntry.objects.get(name="daily")
    assert daily.skipped_fires == 4 - len(expected)
    assert daily.next_fire_at == utc(2027, 1, 8, 9)
    # Restarting (new scheduler processes) creates nothing new.
    scheduler("B").run_once(now=back + timedelta(minutes=1))
    scheduler("C").run_once(now=back + timedelta(minutes=2))
    assert fire_times("daily") == expected


# -- FIELD-CASE 6 ------------------------------------------------------------------------------


def test_field_case_6_cron_across_dst_with_two_contending_schedulers():
    ny = "America/New_York"
    for name, expr in (("noon", "0 12 * * *"), ("late", "30 1 * * *"), ("gap", "30 2 * * *")):
        entry(name, expr, start=utc(2025, 3, 8, 4), timezone=ny)
    schedulers = [scheduler("A", lease_s=5), scheduler("B", lease_s=5)]
    rng = random.Random(6)
    # 1-minute ticks (6,840 of them); on SQLite, slower per tick, 10-minute ones (every fire
    # time here is on a 10-minute boundary).
    step = timedelta(minutes=1 if connections["default"].vendor == "postgresql" else 10)

    def drive(start: datetime, end: datetime) -> None:
        # Each tick, one of the two (at random) gets there; the lease (5 s) changes hands.
        t = start
        while t <= end:
            rng.choice(schedulers).run_once(now=t)
            t += step

    drive(utc(2025, 3, 8, 5), utc(2025, 3, 10, 8))  # 2025-03-08 00:00 .. 03-10 04:00 local
    assert fire_times("gap") == [
        utc(2025, 3, 8, 7, 30),
        utc(2025, 3, 9, 7, 0),
        utc(2025, 3, 10, 6, 30),
    ]
    for cron_entry in CronEntry.objects.all():  # the clock jumps to November
        first = Schedule(cron_entry.cron_expr, ny).next_after(utc(2025, 11, 1, 4))
        CronEntry.objects.filter(pk=cron_entry.pk).update(next_fire_at=first)
    drive(utc(2025, 11, 1, 4), utc(2025, 11, 3, 18))  # 2025-11-01 00:00 .. 11-03 13:00 local
    noon = [t for t in fire_times("noon") if t.month == 11]
    assert noon == [utc(2025, 11, 1, 16), utc(2025, 11, 2, 17), utc(2025, 11, 3, 17)]
    late = [t for t in fire_times("late") if t.month == 11]
    assert late == [utc(2025, 11, 1, 5, 30), utc(2025, 11, 2, 5, 30), utc(2025, 11, 3, 6, 30)]
    # count(jobs) per (entry, local date) == 1.
    per_day = Counter(
        (name, t.astimezone(Schedule("* * * * *", ny).zone).date())
        for name in ("noon", "late", "gap")
        for t in fire_times(name)
    )
    assert set(per_day.values()) == {1}
    assert all(t.tzinfo == UTC for t in CronFire.objects.values_list("fire_time", flat=True))


# -- FIELD-CASE 7 (in process; the real-process version is in test_process_scheduler.py) ------


def test_field_case_7_a_paused_leader_fires_nothing_once_its_lease_was_taken(caplog):
    entry("tick", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    a, b = scheduler("A", lease_s=3), scheduler("B", lease_s=3)
    t0 = utc(2030, 1, 1, 12, 0, 1)
    assert [f.fire_time for f in a.run_once(now=t0).fired] == [utc(2030, 1, 1, 12, 0)]
    assert b.run_once(now=t0).leading is False
    # A stops (SIGSTOP) with the next minute's entry already read, past its lease.
    due = a.store.due_cron_entries(utc(2030, 1, 1, 12, 1, 1))
    tb = b.run_once(now=utc(2030, 1, 1, 12, 0, 5))  # lease lapsed at 12:00:04: B takes over
    assert (tb.leading, tb.token) == (True, 2)
    # It wakes up believing it still leads (no renewal yet) and fires what it had read.
    believed = dataclasses.replace(a.leadership, now=utc(2030, 1, 1, 12, 1, 0))
    with (
        mock.patch.object(a.store, "due_cron_entries", return_value=due),
        mock.patch.object(a.store, "elect_leader", return_value=believed),
        caplog.at_level(logging.WARNING, logger="jobqueue.scheduler"),
    ):
        ta = a.run_once(now=utc(2030, 1, 1, 12, 1, 0))
    assert (ta.leading, ta.fired) == (False, [])
    assert "lost the leader lease" in caplog.text
    assert [f.fire_time for f in b.run_once(now=utc(2030, 1, 1, 12, 1, 0)).fired] == [
        utc(2030, 1, 1, 12, 1)
    ]
    assert fire_times("tick") == [utc(2030, 1, 1, 12, 0), utc(2030, 1, 1, 12, 1)]
    assert LeaderLease.objects.get().holder == "B"


def test_a_stopped_leader_resigns_and_the_next_takes_over_at_its_next_tick():
    a, b = scheduler("A", lease_s=300), scheduler("B", lease_s=300)
    assert a.run_once().leading and not b.run_once().leading
    a.stop()
    assert a.run_once().leading is False  # stopped for good
    assert b.run_once().leading is True


def _asks(statements: list[dict]) -> int:
    return sum("INSERT INTO jobqueue_leaderlease" in q["sql"] for q in statements)


@requires_postgres()  # counts the statement; the gate is the same Python on SQLite
def test_a_follower_among_8_processes_asks_once_then_leaves_the_next_ticks_to_the_others():
    # Every tick of every process asked for the lease: most of what an idle fleet sent the
    # primary. A follower of 8 now waits 4-12 ticks between asks; the leader renews at each.
    a = scheduler("A", lease_s=300, sharing=8)
    b = scheduler("B", lease_s=300, sharing=8)
    with CaptureQueriesContext(connections["default"]) as seen:
        assert a.run_once().leading
        for _ in range(20):
            assert b.run_once().leading is False
            assert a.run_once().leading is True
    assert _asks(seen.captured_queries) == 21 + 1  # A's 21 ticks; B's first tick only
    # A stops: B takes over at the first ask its share of the ticks gives it.
    a.stop()
    b._ask_at = 0.0  # as when its turn comes, 4-12 s on
    assert b.run_once().leading is True


@requires_postgres()  # counts the statement; the gate is the same Python on SQLite
def test_a_lone_process_asks_at_every_tick():
    a, b = scheduler("A", lease_s=300), scheduler("B", lease_s=300)
    with CaptureQueriesContext(connections["default"]) as seen:
        assert a.run_once().leading
        for _ in range(5):
            assert b.run_once().leading is False
    assert _asks(seen.captured_queries) == 6


# -- FIELD-CASE 8 ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["pruner", "operator"])
def test_field_case_8_pruning_the_job_never_reopens_the_fire_time(how):
    fast = entry("fast", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    a, b = scheduler("A"), SplitBrain(holder="B", reconcile=False)
    # B read the entry at 12:00:00, before A fired; it is delayed 2 s before inserting.
    stale = b.store.due_cron_entries(utc(2030, 1, 1, 12, 0))
    [fired] = a.run_once(now=utc(2030, 1, 1, 12, 0)).fired
    [claimed] = jobqueue.claim("q", "w", 1)
    jobqueue.ack(claimed.id, claimed.lease_token)  # the job ran (one handler call) within 50 ms
    if how == "pruner":
        Job.objects.filter(state=JobState.SUCCEEDED).delete()
    else:
        Job.objects.filter(id=fired.job_id).delete()
    with mock.patch.object(b.store, "due_cron_entries", return_value=stale):
        tick = b.run_once(now=utc(2030, 1, 1, 12, 0, 2))
    assert tick.fired == []
    assert Job.objects.count() == 0
    assert jobqueue.claim("q", "w", 1) == []
    assert list(CronFire.objects.filter(entry=fast).values_list("fire_time", "job_id")) == [
        (utc(2030, 1, 1, 12, 0), fired.job_id)
    ]


# -- FIELD-CASE 9 ------------------------------------------------------------------------------


def test_field_case_9_a_crash_between_fire_record_and_commit_leaves_nothing_then_fires_once():
    entry("p", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    crashing = scheduler("A")

    def crash(*args, **kwargs):
        # The fire record and the job are written; the process dies before the commit.
        assert CronFire.objects.count() == 1
        raise SystemExit("killed")

    with mock.patch.object(crashing.store, "advance_cron", side_effect=crash):
        with pytest.raises(SystemExit):
            crashing.run_once(now=utc(2030, 1, 1, 12, 0))
    assert (CronFire.objects.count(), Job.objects.count()) == (0, 0)
    restarted = scheduler("B", lease_s=5)
    restarted.run_once(now=utc(2030, 1, 1, 12, 0, 10))  # A's lease (15 s) still holds
    assert fire_times("p") == []
    restarted.run_once(now=utc(2030, 1, 1, 12, 0, 15))
    assert fire_times("p") == [utc(2030, 1, 1, 12, 0)]
    # Variant: the 12:00 job succeeds and is pruned; a restart at 12:00:30 adds nothing.
    Job.objects.all().delete()
    scheduler("C").run_once(now=utc(2030, 1, 1, 12, 0, 30))
    assert Job.objects.count() == 0
    scheduler("C").run_once(now=utc(2030, 1, 1, 12, 1, 0))
    assert fire_times("p") == [utc(2030, 1, 1, 12, 1)]


CRASH_SCRIPT = """
import os, django
django.setup()
from datetime import datetime, timezone
UTC = timezone.utc
from jobqueue.cron.scheduler import Scheduler
from jobqueue.models import CronFire
s = Scheduler(holder="crasher", reconcile=False)
def crash(advance):
    assert CronFire.objects.count() == 1  # written, not committed
    os._exit(1)
s.store.advance_cron = crash
s.run_once(now=datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
"""


@pytest.mark.slow
@requires_postgres()
@committing
def test_field_case_9_the_scheduler_process_killed_mid_fire_then_restarted():
    entry("p", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    result = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    assert result.returncode == 1, result.stderr
    assert (CronFire.objects.count(), Job.objects.count()) == (0, 0)
    scheduler("B", lease_s=5).run_once(now=utc(2030, 1, 1, 12, 0, 10))
    scheduler("B", lease_s=5).run_once(now=utc(2030, 1, 1, 12, 0, 15))
    assert fire_times("p") == [utc(2030, 1, 1, 12, 0)]


# -- FIELD-CASE 10 -----------------------------------------------------------------------------


def test_field_case_10_downtime_catch_up_is_one_job_by_default_and_counted(caplog):
    monday_8 = utc(2025, 1, 6, 8)
    entry("daily", "0 9 * * *", start=monday_8)
    entry("minutely", "* * * * *", start=monday_8)
    entry("daily-3", "0 9 * * *", start=monday_8, missed="all", missed_cap=3)
    back = utc(2025, 1, 9, 10, 30)
    with caplog.at_level(logging.WARNING, logger="jobqueue.scheduler"):
        tick = scheduler("A").run_once(now=back)
    assert fire_times("daily") == [utc(2025, 1, 9, 9)]
    assert fire_times("minutely") == [utc(2025, 1, 9, 10, 30)]
    assert fire_times("daily-3") == [utc(2025, 1, 7, 9), utc(2025, 1, 8, 9), utc(2025, 1, 9, 9)]
    assert len(set(CronFire.objects.values_list("entry_id", "fire_time"))) == 5
    # Logged and exported per entry.
    assert tick.skipped == {"daily": 3, "minutely": 4469, "daily-3": 1}
    skipped = dict(CronEntry.objects.values_list("name", "skipped_fires"))
    assert skipped == {"daily": 3, "minutely": 4469, "daily-3": 1}
    assert (
        "cron entry 'minutely': 4469 missed fire time(s) from 2025-01-06T08:01:00+00:00"
        in caplog.text
    )
    for holder in ("B", "C"):
        scheduler(holder).run_once(now=back + timedelta(seconds=20))
    assert Job.objects.count() == 5


# -- FIELD-CASE 11 -----------------------------------------------------------------------------


def test_field_case_11_the_zone_of_the_entry_decides_not_time_zone_nor_the_host(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        start = utc(2025, 1, 14, 22)
        entry("mid-berlin", "0 0 * * *", start=start, timezone="Europe/Berlin")
        entry("mid-default", "0 0 * * *", start=start)
        run([scheduler("A")], start, utc(2025, 1, 16, 0, 30), timedelta(minutes=10))
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
    assert fire_times("mid-berlin") == [utc(2025, 1, 14, 23), utc(2025, 1, 15, 23)]
    assert fire_times("mid-default") == [utc(2025, 1, 15), utc(2025, 1, 16)]
    assert CronEntry.objects.get(name="mid-default").timezone == "UTC"
    stored = CronFire.objects.filter(entry__name="mid-berlin").order_by("fire_time")
    assert [f.fire_time for f in stored] == [utc(2025, 1, 14, 23), utc(2025, 1, 15, 23)]
    payloads = Job.objects.filter(id__in=stored.values("job_id")).values_list("payload", flat=True)
    assert sorted(p["fire_time"] for p in payloads) == [
        "2025-01-14T23:00:00+00:00",
        "2025-01-15T23:00:00+00:00",
    ]


# -- FIELD-CASE 12 -----------------------------------------------------------------------------


@requires_postgres()
def test_field_case_12_worker_clocks_90_s_off_decide_nothing(caplog):
    from django.utils import timezone as django_timezone

    real_now = django_timezone.now

    def skewed(seconds: float):
        return mock.patch(
            "django.utils.timezone.now", lambda: real_now() + timedelta(seconds=seconds)
        )

    # J: due at database now() + 60 s; W1's clock runs 90 s ahead, and does not make J due.
    j = jobqueue.enqueue("skew", NOOP, {}, delay=60)
    with skewed(+90):
        assert jobqueue.claim("skew", "W1", 10) == []
    # K: W2 (90 s behind) claims it; W1 cannot take it before K's database-time lease_until.
    k = jobqueue.enqueue("skew", NOOP, {})
    with skewed(-90):
        [claimed] = jobqueue.claim("skew", "W2", 10)
    assert claimed.id == k
    with skewed(+90):
        assert jobqueue.claim("skew", "W1", 10) == []
    with skewed(-90):
        jobqueue.ack(k, claimed.lease_token)
    assert Job.objects.get(id=k).state == JobState.SUCCEEDED
    assert Job.objects.get(id=j).state == JobState.SCHEDULED

    # The scheduler: both workers are candidates; ten minutes of database time, each minute
    # reached by a tick that wakes 5 ms early and by ticks just after.
    start = utc(2030, 1, 1, 12, 0)
    entry("m", "* * * * *", start=start - timedelta(seconds=1))
    w1, w2 = scheduler("W1", lease_s=30), scheduler("W2", lease_s=30)
    with caplog.at_level(logging.INFO):
        for minute in range(10):
            slot = start + timedelta(minutes=minute)
            for offset in (-0.005, 0.0, 0.2, 1.0, 30.0):
                with skewed(+90):
                    w1.run_once(now=slot + timedelta(seconds=offset))
                with skewed(-90):
                    w2.run_once(now=slot + timedelta(seconds=offset))
    times = fire_times("m")
    assert times == [start + timedelta(minutes=m) for m in range(10)]
    assert all(later > earlier for earlier, later in itertools.pairwise(times))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "duplicate key" not in caplog.text


# -- leader lease ------------------------------------------------------------------------------


def test_only_the_leader_fires_and_a_dead_leaders_lease_is_taken_within_one_lease_period():
    entry("tick", "*/10 * * * * *", start=utc(2030, 1, 1, 11, 59, 59))
    a, b = scheduler("A", lease_s=5), scheduler("B", lease_s=5)
    t = utc(2030, 1, 1, 12, 0, 0)
    assert a.run_once(now=t).leading and not b.run_once(now=t).leading
    # A dies after its tick at 12:00:00. B tries every second; the lease lapses at 12:00:05.
    for s in range(1, 5):
        assert b.run_once(now=t + timedelta(seconds=s)).leading is False
    tick = b.run_once(now=t + timedelta(seconds=5))
    assert tick.leading is True
    # Late by the failover, 12:00:10 is fired when B next ticks; nothing is missed or doubled.
    b.run_once(now=t + timedelta(seconds=20))
    assert fire_times("tick") == [t, t + timedelta(seconds=10), t + timedelta(seconds=20)]
    by = dict(CronFire.objects.values_list("fire_time", "fired_by"))
    assert by == {t: "A", t + timedelta(seconds=10): "B", t + timedelta(seconds=20): "B"}


def test_a_fire_time_within_the_next_tick_is_enqueued_early_to_start_on_time():
    entry("tick", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    [fired] = scheduler("A").run_once(now=utc(2030, 1, 1, 11, 59, 59, 500000)).fired
    assert fired.fire_time == utc(2030, 1, 1, 12, 0)
    job = Job.objects.get(id=fired.job_id)
    if connections["default"].vendor == "postgresql":
        # run_at is the fire time (the injected clock is in the future of the real one).
        assert (job.state, job.run_at) == (JobState.SCHEDULED, utc(2030, 1, 1, 12, 0))
    assert CronEntry.objects.get(name="tick").next_fire_at == utc(2030, 1, 1, 12, 1)


def test_an_entry_disabled_or_edited_between_read_and_fire_is_left_alone():
    tick_entry = entry("tick", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    a = scheduler("A")
    stale = a.store.due_cron_entries(utc(2030, 1, 1, 12, 0))
    jobqueue.schedule("tick", "* * * * *", "q", NOOP, enabled=False)
    with mock.patch.object(a.store, "due_cron_entries", return_value=stale):
        assert a.run_once(now=utc(2030, 1, 1, 12, 0)).fired == []
    assert Job.objects.count() == 0
    assert CronEntry.objects.get(pk=tick_entry.pk).next_fire_at is None


@committing
def test_an_entry_deleted_between_read_and_fire_is_skipped_quietly(caplog):
    entry("tick", "* * * * *", start=utc(2030, 1, 1, 11, 59, 30))
    a = scheduler("A")
    stale = a.store.due_cron_entries(utc(2030, 1, 1, 12, 0))
    CronEntry.objects.all().delete()  # an operator deletes it in the admin meanwhile
    with (
        mock.patch.object(a.store, "due_cron_entries", return_value=stale),
        caplog.at_level(logging.INFO, logger="jobqueue"),
    ):
        tick = a.run_once(now=utc(2030, 1, 1, 12, 0))
    assert (tick.leading, tick.fired) == (True, [])
    assert (Job.objects.count(), CronFire.objects.count()) == (0, 0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_fire_records_past_retention_are_pruned_but_each_entrys_latest(settings):
    settings.JOBQUEUE = {"CRON_FIRE_RETENTION_SECONDS": 3600}
    entry("tick", "*/20 * * * *", start=utc(2030, 1, 1, 9, 59))
    a = scheduler("A")
    run([a], utc(2030, 1, 1, 10, 0), utc(2030, 1, 1, 12, 0), timedelta(minutes=20))
    assert CronFire.objects.count() == 7
    assert a.prune(utc(2030, 1, 1, 12, 30)) == 5
    left = sorted(CronFire.objects.values_list("fire_time", flat=True))
    assert left == [utc(2030, 1, 1, 11, 40), utc(2030, 1, 1, 12, 0)]
    assert a.prune(utc(2030, 1, 2)) == 1
    assert list(CronFire.objects.values_list("fire_time", flat=True)) == [utc(2030, 1, 1, 12, 0)]


# -- FIELD-CASE 35: cron through a fold, and zones 30 or 45 minutes off the hour ---------------


def _drive_35(
    schedulers: list[Scheduler], start: datetime, end: datetime, step: timedelta
) -> list[int]:
    """Tick every scheduler from ``start`` to before ``end``.

    Returns:
        Per tick, the statements it ran beyond 20 per fire (the ORM store's fire on SQLite
        takes about 17; PostgreSQL's fewer).
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    statements = []
    t = start
    while t < end:
        for s in schedulers:
            with CaptureQueriesContext(connection) as queries:
                tick = s.run_once(now=t)
            statements.append(len(queries) - 20 * len(tick.fired))
            connection.queries_log.clear()
            per_entry = Counter(f.entry for f in tick.fired)
            assert all(n == 1 for n in per_entry.values()), (t, per_entry)  # never two at once
        t += step
    return statements


def _in(name: str, start: datetime, end: datetime) -> list[datetime]:
    return [t for t in fire_times(name) if start <= t < end]


@pytest.mark.parametrize("takeover", [False, True], ids=["one-leader", "leader-dies-at-0920"])
def test_field_case_35_every_minute_and_hourly_entries_fire_through_the_repeated_hour(takeover):
    la = "America/Los_Angeles"
    start, end = utc(2025, 11, 2, 7), utc(2025, 11, 2, 11)  # falls back at 09:00Z
    entry("m", "* * * * *", start=start - timedelta(seconds=1), timezone=la)
    entry("h", "0 * * * *", start=start - timedelta(seconds=1), timezone=la)
    entry("c", "30 1 * * *", start=start - timedelta(seconds=1), timezone=la)
    a, b = scheduler("A", lease_s=5), scheduler("B", lease_s=5)
    step = timedelta(seconds=10)
    if takeover:
        stop = utc(2025, 11, 2, 9, 20)
        _drive_35([a, b], start, stop, step)
        assert a.is_leader
        _drive_35([b], stop, end, step)  # A is gone without resigning; B takes over
        assert b.is_leader
    else:
        statements = _drive_35([a, b], start, end, step)
        # Bounded per tick, no busy loop: a tick that fires nothing runs a handful.
        assert max(statements[1:]) <= 6, sorted(Counter(statements).items())
    minutes = [start + timedelta(minutes=i) for i in range(240)]
    assert _in("m", start, end) == minutes  # one per UTC minute, the repeated hour included
    assert _in("h", start, end) == [utc(2025, 11, 2, hour) for hour in (7, 8, 9, 10)]
    assert _in("c", start, end) == [utc(2025, 11, 2, 8, 30)]  # not again at 09:30Z
    for name in ("m", "h", "c"):
        fired = list(CronFire.objects.filter(entry__name=name).values_list("fire_time", flat=True))
        assert len(fired) == len(set(fired)) == len(fire_times(name))
        last = max(fired)
        assert CronEntry.objects.get(name=name).next_fire_at > last  # never at or before it


def test_field_case_35_lord_howe_half_hour_fold():
    start, end = utc(2025, 4, 5, 12), utc(2025, 4, 6)  # 15:00Z: 02:00 +11 -> 01:30 +10:30
    entry("lh", "*/15 * * * *", start=start - timedelta(seconds=1), timezone="Australia/Lord_Howe")
    # 10 s ticks in the case; every fire time here is on a minute, so 1-minute ticks see the same.
    _drive_35(
        [scheduler("A", lease_s=5), scheduler("B", lease_s=5)], start, end, timedelta(minutes=1)
    )
    quarters = [start + timedelta(minutes=15 * i) for i in range(48)]
    assert _in("lh", start, end) == quarters  # 14:30Z and 15:00Z (both 01:30 local) included


def test_field_case_35_kathmandu_entries_fire_at_a_quarter_past_the_utc_hour():
    start, end = utc(2025, 4, 5), utc(2025, 4, 8)
    kathmandu = "Asia/Kathmandu"  # UTC+05:45
    entry("k", "0 9 * * *", start=start - timedelta(seconds=1), timezone=kathmandu)
    entry("kh", "0 * * * *", start=start - timedelta(seconds=1), timezone=kathmandu)
    # 1-minute ticks in the case (4,320 per candidate, 20 s here); every fire time is at :15,
    # so 5-minute ticks reach each one, late by the same 0..4 minutes as the case's would not.
    step = timedelta(minutes=5)
    _drive_35([scheduler("A", lease_s=90), scheduler("B", lease_s=90)], start, end, step)
    assert _in("k", start, end) == [utc(2025, 4, day, 3, 15) for day in (5, 6, 7)]
    kh = _in("kh", start, end)
    assert len(kh) == 72 and {(t.minute, t.second) for t in kh} == {(15, 0)}
    assert Job.objects.count() == 3 + 72  # nothing else fired, on no tick


def test_field_case_35_a_next_fire_time_at_or_before_the_last_fire_is_stepped_past(caplog):
    from jobqueue.cron import plan as real_plan
    from jobqueue.cron import scheduler as scheduler_module

    start = utc(2025, 11, 2, 9, 0)
    entry("m", "* * * * *", start=start - timedelta(seconds=1), timezone="America/Los_Angeles")

    def broken_plan(*args, **kwargs):
        steps = real_plan(*args, **kwargs)
        if steps.fire_times:  # as if the next fire time came out equal to the one fired
            return dataclasses.replace(steps, next_fire_at=steps.fire_times[-1])
        return steps

    a = scheduler("A", lease_s=5)
    with mock.patch.object(scheduler_module, "plan", broken_plan), caplog.at_level(logging.ERROR):
        for minute in range(3):
            a.run_once(now=start + timedelta(minutes=minute, seconds=1))
    assert fire_times("m") == [start + timedelta(minutes=i) for i in range(3)]  # none twice
    m = CronEntry.objects.get(name="m")
    assert m.next_fire_at == start + timedelta(minutes=3)
    errors = [r for r in caplog.records if "at or before its last fire" in r.getMessage()]
    assert len(errors) == 1  # once, not per tick


@requires_postgres()
@committing
def test_a_followers_ask_while_the_lease_runs_writes_nothing():
    # Each ask locked the lease row (ON CONFLICT DO UPDATE locks before its WHERE): a
    # transaction id, a dirtied page and WAL per ask, from every host about once a second.
    a, b = scheduler("A", lease_s=300), scheduler("B", lease_s=300)
    assert a.run_once().leading
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT xmax::text FROM jobqueue_leaderlease")
        [(before,)] = cursor.fetchall()
        assert not b.run_once().leading
        cursor.execute("SELECT xmax::text FROM jobqueue_leaderlease")
        [(after,)] = cursor.fetchall()
    assert after == before == "0"
    assert a.run_once().leading  # the leader still renews
