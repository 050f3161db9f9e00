"""``jobqueue.schedule``, ``JOBQUEUE["CRON"]`` (validation, system checks, reconciliation at
runworkers start) and "run now". Bad input raises a clear error and writes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections

import jobqueue
from jobqueue import checks, cron
from jobqueue.client import job
from jobqueue.cron.scheduler import Scheduler
from jobqueue.errors import (
    CronConfigurationError,
    InvalidCronExpression,
    InvalidJobOption,
    InvalidPayload,
    JobQueueConfigurationError,
)
from jobqueue.models import CronEntry, CronFire, Job
from jobqueue.settings.conf import CronSpec, build_settings
from jobqueue.settings.crontab import Schedule
from tests.testapp.limited_jobs import per_account

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

NOOP = "tests.testapp.jobs.noop"
ADD = "tests.testapp.jobs.add"  # add(a, b): no fire_time parameter

pytestmark = pytest.mark.django_db


@job(name="tests.cron.report")
def report(day, fire_time):
    return day, fire_time


def db_now() -> datetime:
    return cron.cron_store().db_now()


# -- schedule() -----------------------------------------------------------------------------


def test_schedule_creates_an_entry_from_code_with_its_next_fire_time():
    before = db_now()
    entry = jobqueue.schedule(
        "nightly",
        "0  3 * * *",
        "reports",
        report,
        {"day": "today"},
        timezone="Europe/Berlin",
        priority=5,
    )
    assert entry == CronEntry.objects.get(name="nightly")
    assert (entry.cron_expr, entry.timezone, entry.queue, entry.job_type) == (
        "0 3 * * *",
        "Europe/Berlin",
        "reports",
        "tests.cron.report",
    )
    assert (entry.payload, entry.priority, entry.missed, entry.missed_cap) == (
        {"day": "today"},
        5,
        "once",
        10,
    )
    assert (entry.enabled, entry.source, entry.last_fired_at, entry.skipped_fires) == (
        True,
        "code",
        None,
        0,
    )
    assert entry.next_fire_at == Schedule("0 3 * * *", "Europe/Berlin").next_after(before)
    assert entry.next_fire_at.tzinfo is not None


def test_schedule_updates_by_name_and_recomputes_only_when_the_schedule_changes():
    first = jobqueue.schedule("e", "0 3 * * *", "q", NOOP)
    CronEntry.objects.filter(pk=first.pk).update(next_fire_at=datetime(2030, 1, 1, 3, tzinfo=UTC))
    same_time = jobqueue.schedule("e", "0 3 * * *", "q", NOOP, {"x": 1}, priority=7)
    assert same_time.pk == first.pk
    assert (same_time.payload, same_time.priority) == ({"x": 1}, 7)
    assert same_time.next_fire_at == datetime(2030, 1, 1, 3, tzinfo=UTC)  # pending time kept
    moved = jobqueue.schedule("e", "0 4 * * *", "q", NOOP)
    assert moved.next_fire_at == Schedule("0 4 * * *").next_after(db_now())
    off = jobqueue.schedule("e", "0 4 * * *", "q", NOOP, enabled=False)
    assert (off.enabled, off.next_fire_at) == (False, None)
    on = jobqueue.schedule("e", "0 4 * * *", "q", NOOP)
    assert on.next_fire_at == Schedule("0 4 * * *").next_after(db_now())
    assert CronEntry.objects.count() == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"cron_expr": "61 * * * *"},
            InvalidCronExpression,
            "invalid cron expression '61 * * * *'",
        ),
        ({"cron_expr": "0 0 30 2 *"}, InvalidCronExpression, "never occurs"),
        ({"timezone": "Mars/Base"}, InvalidJobOption, "unknown time zone 'Mars/Base'"),
        ({"timezone": None}, InvalidJobOption, "unknown time zone None"),
        ({"queue": "bad queue"}, InvalidJobOption, "invalid queue"),
        ({"priority": 101}, InvalidJobOption, "invalid priority"),
        ({"missed": "twice"}, InvalidJobOption, "invalid missed: must be one of once, skip, all"),
        ({"missed_cap": 0}, InvalidJobOption, "invalid missed_cap"),
        ({"enabled": "yes"}, InvalidJobOption, "invalid enabled"),
        ({"name": ""}, InvalidJobOption, "invalid name"),
        ({"job_type": ""}, InvalidJobOption, "invalid job_type"),
        ({"job_type": ADD}, InvalidJobOption, "does not accept a 'fire_time' keyword argument"),
        ({"payload": {"fire_time": "x"}}, InvalidPayload, "payload['fire_time']: is reserved"),
        ({"payload": {"when": datetime(2030, 1, 1)}}, InvalidPayload, "payload['when']"),
        ({"payload": ["x"]}, InvalidJobOption, "must be a dict"),
    ],
)
def test_bad_input_raises_naming_it_and_writes_nothing(kwargs, error, message):
    args = {"name": "bad", "cron_expr": "* * * * *", "queue": "q", "job_type": NOOP}
    args.update(kwargs)
    with pytest.raises(
        error, match=message.replace("(", r"\(").replace("*", r"\*").replace("[", r"\[")
    ):
        jobqueue.schedule(**args)
    assert CronEntry.objects.count() == 0
    assert issubclass(error, ValueError)


def test_schedule_is_a_lazy_public_export():
    assert "schedule" in jobqueue.__all__
    assert jobqueue.schedule is cron.schedule


# -- run now ---------------------------------------------------------------------------------


def test_run_now_enqueues_through_the_firing_path_without_moving_the_schedule():
    entry = jobqueue.schedule("nightly", "0 3 * * *", "reports", report, {"day": "d"})
    pending = entry.next_fire_at
    before = db_now()
    job_id = cron.run_now("nightly", fired_by="admin:ops")
    job = Job.objects.get(id=job_id)
    assert (job.queue, job.type, job.state) == ("reports", "tests.cron.report", "ready")
    fire_time = datetime.fromisoformat(job.payload["fire_time"])
    assert job.payload == {"day": "d", "fire_time": fire_time.isoformat()}
    assert fire_time >= before - timedelta(seconds=1)
    record = CronFire.objects.get()
    assert (record.job_id, record.manual, record.fired_by, record.fire_time) == (
        job_id,
        True,
        "admin:ops",
        fire_time,
    )
    entry.refresh_from_db()
    assert (entry.next_fire_at, entry.last_fired_at) == (pending, None)
    # Twice in a row is two jobs (each run now is its own fire).
    assert cron.run_now(entry) != job_id
    assert Job.objects.count() == 2


def test_a_fired_job_takes_its_types_concurrency_key_as_any_enqueue_does():
    # One options object for every enqueue path (issue 28): a cron fire of a type declared
    # with @job(concurrency_key=..., concurrency_limit=2) is keyed as enqueue() would key it
    # (before, fired jobs had no key and ran past the type's limit).
    jobqueue.schedule("per-account", "0 3 * * *", "default", per_account, {"account_id": 7})
    job = Job.objects.get(id=cron.run_now("per-account"))
    assert (job.concurrency_key, job.concurrency_limit) == ("acct:7", 2)
    enqueued = Job.objects.get(id=per_account.enqueue(account_id=7))
    assert (enqueued.concurrency_key, enqueued.concurrency_limit) == ("acct:7", 2)


# -- JOBQUEUE["CRON"] --------------------------------------------------------------------------


def test_cron_setting_is_validated_into_specs_sorted_by_name():
    built = build_settings(
        {
            "CRON": {
                "b": {"cron_expr": "*/5 * * * *", "job_type": NOOP},
                "a": {
                    "cron_expr": "0 3 * * *",
                    "job_type": "tests.cron.report",
                    "queue": "reports",
                    "payload": {"day": "x"},
                    "timezone": "Europe/Berlin",
                    "priority": -2,
                    "missed": "all",
                    "missed_cap": 3,
                    "enabled": False,
                },
            }
        }
    )
    assert built.cron == (
        CronSpec(
            name="a",
            cron_expr="0 3 * * *",
            job_type="tests.cron.report",
            queue="reports",
            payload={"day": "x"},
            timezone="Europe/Berlin",
            priority=-2,
            missed="all",
            missed_cap=3,
            enabled=False,
        ),
        CronSpec(name="b", cron_expr="*/5 * * * *", job_type=NOOP),
    )
    assert build_settings({}).cron == ()
    assert (built.leader_lease_seconds, built.scheduler_interval_seconds) == (15.0, 1.0)
    assert (built.cron_grace_seconds, built.cron_fire_retention_seconds) == (60.0, 30 * 86400.0)


@pytest.mark.parametrize(
    ("cron_setting", "message"),
    [
        ([], "JOBQUEUE['CRON'] must be a dict of entry name -> entry dict"),
        ({"x": "* * * * *"}, "JOBQUEUE['CRON']['x'] must be a dict"),
        ({"x": {"cron_expr": "* * * * *"}}, "JOBQUEUE['CRON']['x'] needs job_type"),
        (
            {"x": {"job_type": NOOP, "cron": "* * * * *"}},
            "has unknown keys: cron (known: cron_expr",
        ),
        (
            {"x": {"cron_expr": "* * * *", "job_type": NOOP}},
            "JOBQUEUE['CRON']['x']: invalid cron expression '* * * *'",
        ),
        (
            {"x": {"cron_expr": "* * * * *", "job_type": NOOP, "timezone": "Europe/Berlim"}},
            "unknown time zone 'Europe/Berlim'",
        ),
        ({"x": {"cron_expr": "* * * * *", "job_type": NOOP, "missed": "never"}}, "invalid missed"),
    ],
)
def test_bad_cron_setting_names_the_entry_and_the_problem(cron_setting, message):
    with pytest.raises(CronConfigurationError) as caught:
        build_settings({"CRON": cron_setting})
    assert message in str(caught.value)
    assert isinstance(caught.value, JobQueueConfigurationError)


def test_scheduler_settings_are_validated():
    with pytest.raises(JobQueueConfigurationError, match="LEADER_LEASE_SECONDS"):
        build_settings({"LEADER_LEASE_SECONDS": 0})
    with pytest.raises(JobQueueConfigurationError, match="must be at least LEADER_LEASE_SECONDS"):
        build_settings({"LEADER_LEASE_SECONDS": 60, "CRON_GRACE_SECONDS": 30})
    # Left at its default, the grace grows to cover a failover instead.
    assert build_settings({"LEADER_LEASE_SECONDS": 120}).cron_grace_seconds == 121.0
    with pytest.raises(JobQueueConfigurationError, match="unknown keys: CRON_GRACE"):
        build_settings({"CRON_GRACE": 5})


@pytest.mark.django_db(databases=["default", "sqlite"])
def test_manage_check_reports_each_bad_cron_entry_as_e002(settings):
    settings.JOBQUEUE = {
        "CRON": {
            "ok": {"cron_expr": "0 3 * * *", "job_type": NOOP},
            "bad-expr": {"cron_expr": "0 25 * * *", "job_type": NOOP},
            "bad-zone": {"cron_expr": "0 3 * * *", "job_type": NOOP, "timezone": "Nowhere/Town"},
            "no-fire-time": {"cron_expr": "0 3 * * *", "job_type": ADD},
        }
    }
    found = checks.check_cron_settings()
    assert [(m.id, m.msg.split(":")[0]) for m in found] == [
        ("jobqueue.E005", "JOBQUEUE['CRON']['bad-expr']"),
        ("jobqueue.E005", "JOBQUEUE['CRON']['bad-zone']"),
        ("jobqueue.W003", "JOBQUEUE['CRON']['no-fire-time']"),
    ]
    assert "invalid cron expression '0 25 * * *'" in found[0].msg
    assert "unknown time zone 'Nowhere/Town'" in found[1].msg
    assert checks.check_settings() == []  # not reported twice as E001
    with pytest.raises(SystemCheckError, match=r"jobqueue\.E005"):
        call_command("check", verbosity=0)


@pytest.mark.django_db(databases=["default", "sqlite"])
def test_manage_check_is_clean_for_good_cron_settings(settings):
    settings.JOBQUEUE = {
        "CRON": {"ok": {"cron_expr": "0 3 * * *", "job_type": "tests.cron.report"}}
    }
    assert checks.check_cron_settings() == []
    call_command("check", verbosity=0)


# -- reconciliation at runworkers start ------------------------------------------------------


def spec(cron_expr: str = "0 3 * * *", **extra):
    return {"cron_expr": cron_expr, "job_type": NOOP, **extra}


def test_runworkers_start_reconciles_settings_entries_and_never_touches_code_or_admin_ones(
    settings,
):
    code = jobqueue.schedule("from-code", "0 1 * * *", "q", NOOP)
    admin = CronEntry.objects.create(
        name="from-admin", cron_expr="0 2 * * *", job_type=NOOP, source="admin"
    )
    settings.JOBQUEUE = {
        "CRON": {"keep": spec(), "change": spec(), "drop": spec(), "from-code": spec("0 9 * * *")}
    }
    first = cron.reconcile_settings()
    assert first["created"] == ["change", "drop", "keep"]
    assert first["conflict"] == ["from-code"]
    assert {e.name: e.source for e in CronEntry.objects.all()} == {
        "change": "settings",
        "drop": "settings",
        "keep": "settings",
        "from-code": "code",
        "from-admin": "admin",
    }
    settings.JOBQUEUE = {"CRON": {"keep": spec(), "change": spec("30 3 * * *", queue="other")}}
    # The scheduler runs it once, at its first tick (runworkers start).
    Scheduler(holder="w1").run_once()
    entries = {e.name: e for e in CronEntry.objects.all()}
    assert (entries["change"].cron_expr, entries["change"].queue) == ("30 3 * * *", "other")
    assert entries["change"].next_fire_at == Schedule("30 3 * * *").next_after(db_now())
    assert (entries["drop"].enabled, entries["drop"].next_fire_at) == (False, None)
    assert entries["keep"].enabled is True
    assert entries["from-code"].cron_expr == code.cron_expr == "0 1 * * *"
    assert entries["from-admin"].cron_expr == admin.cron_expr
    again = cron.reconcile_settings()
    assert (again["unchanged"], again["updated"], again["disabled"]) == (["change", "keep"], [], [])


def test_a_disabled_settings_entry_comes_back_when_named_again(settings):
    settings.JOBQUEUE = {"CRON": {"e": spec()}}
    cron.reconcile_settings()
    settings.JOBQUEUE = {"CRON": {}}
    assert cron.reconcile_settings()["disabled"] == ["e"]
    settings.JOBQUEUE = {"CRON": {"e": spec()}}
    assert cron.reconcile_settings()["updated"] == ["e"]
    entry = CronEntry.objects.get(name="e")
    assert entry.enabled and entry.next_fire_at is not None


def test_scheduler_uses_the_queue_databases_clock_and_alias():
    assert connections["default"].vendor in ("postgresql", "sqlite")
    s = Scheduler(holder="w1", reconcile=False)
    assert (s.name, s.interval_s, s.lease_s, s.grace_s, s.lookahead_s) == (
        "scheduler",
        1.0,
        15.0,
        60.0,
        1.0,
    )
