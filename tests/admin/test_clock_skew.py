"""The admin judges time on the database clock, not its own host's (issue 32 item 4).

The rows are written by the store or with the database's ``now()`` (their times are the
database's); the admin process's clock is then moved ahead or behind with time-machine, as a web
host whose clock is off would be. Before, the worker page and the dashboard compared the rows
with this host's clock: ahead, every live worker showed dead; behind, a worker silent for
minutes showed alive. Then (the tests with ``SKEW_S``) the dashboard's "last seen ... ago", the
jobs list's "scheduled (due)", the charts' last minute and a cron entry's next fire times were
still this host's.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db.models.functions import Now
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import jobqueue
from jobqueue.models import CronEntry, Job, Rollup, Worker
from jobqueue.store import get_store, statement_now
from tests.conftest import requires_postgres

WORKERS = reverse("admin:jobqueue_worker_changelist")
DASHBOARD = reverse("admin:jobqueue_dashboard")
JOBS = reverse("admin:jobqueue_job_changelist")
#: How far off the web host's clock is, seconds (the issue's skew).
SKEW_S = 60.0
SKEWS = pytest.mark.parametrize("skew_s", [-SKEW_S, SKEW_S], ids=["behind", "ahead"])

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("skew_s", [-300.0, 300.0], ids=["behind", "ahead"])
def test_a_live_worker_shows_alive_however_far_off_the_admin_hosts_clock(admin, skew_s):
    get_store("default").register_worker("w-live", ["a"], 4, 10.0)
    with time_machine.travel(time.time() + skew_s, tick=True):
        page = admin.get(WORKERS).content.decode()
        dashboard = admin.get(DASHBOARD).content.decode()
    assert "w-live" in page
    assert page.count('alt="True"') == 1 and 'alt="False"' not in page.split("w-live", 1)[1]
    assert "Workers (1 alive of 1)" in dashboard, dashboard
    assert Worker.objects.with_clock().get(worker_id="w-live").is_alive


def row_of(page: str, marker: str) -> str:
    """Return the table row of ``page`` (HTML) holding ``marker``."""
    rows = [r for r in page.split("<tr") if marker in r]
    assert len(rows) == 1, (marker, len(rows))
    return rows[0]


@SKEWS
def test_the_dashboard_says_how_long_ago_a_worker_was_seen_by_the_database_clock(admin, skew_s):
    get_store("default").register_worker("w-quiet", ["a"], 4, 10.0)
    # Its last heartbeat two minutes ago, by the database's clock.
    Worker.objects.filter(worker_id="w-quiet").update(last_seen_at=Now() - timedelta(seconds=120))
    with time_machine.travel(time.time() + skew_s, tick=True):
        dashboard = admin.get(DASHBOARD).content.decode()
    row = row_of(dashboard, 'title="w-quiet"')
    # Before: Django's timesince against this host: "1 minute ago" behind, "3 minutes" ahead.
    assert "2 min ago" in row, row


@SKEWS
def test_a_scheduled_job_is_called_due_by_the_database_clock(admin, skew_s):
    due = jobqueue.enqueue("skew", "tests.testapp.jobs.noop", {})
    waiting = jobqueue.enqueue("skew", "tests.testapp.jobs.noop", {})
    # Half the skew either side of the database's now: the host's clock puts both on one side.
    half = timedelta(seconds=SKEW_S / 2)
    Job.objects.filter(id=due).update(state="scheduled", run_at=Now() - half)
    Job.objects.filter(id=waiting).update(state="scheduled", run_at=Now() + half)
    with time_machine.travel(time.time() + skew_s, tick=True):
        page = admin.get(JOBS).content.decode()
    assert "scheduled (due)" in row_of(page, f"/job/{due}/change/")
    assert "scheduled (due)" not in row_of(page, f"/job/{waiting}/change/")


def minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


@requires_postgres()
@SKEWS
def test_the_charts_end_at_the_database_clocks_minute(admin, skew_s):
    before = minute(statement_now())
    Rollup.objects.create(minute=before, queue="skew", type="t", succeeded=7)
    with time_machine.travel(time.time() + skew_s, tick=True):
        dashboard = admin.get(DASHBOARD).content.decode()
    after = minute(statement_now())
    chart = dashboard.split('id="jq-chart-throughput', 1)[1].split("</svg>", 1)[0]
    tips = re.findall(r'data-tip="(\d\d:\d\d:\d\d) UTC', chart)
    # The last point is the database's current minute (the one read just before or after).
    expected = {timezone.localtime(m).strftime("%H:%M:%S") for m in (before, after)}
    assert tips and tips[-1] in expected, (tips[-3:], expected)


@requires_postgres()
@SKEWS
def test_a_new_cron_entrys_next_fire_times_count_from_the_database_clock(admin, skew_s):
    entry = CronEntry.objects.create(
        name="skew-every-minute",
        cron_expr="* * * * *",
        queue="skew",
        job_type="tests.testapp.jobs.noop",
        next_fire_at=None,
    )
    before = minute(statement_now()) + timedelta(minutes=1)
    with time_machine.travel(time.time() + skew_s, tick=True):
        page = admin.get(reverse("admin:jobqueue_cronentry_change", args=[entry.pk]))
    after = minute(statement_now()) + timedelta(minutes=1)
    html = page.content.decode()
    first = re.search(r"class='jobqueue-fire-time'>(.*?)</div>", html)
    assert first is not None, html
    # The next minute after the database's now: a minute off either way before.
    shown = {timezone.localtime(m).strftime("%H:%M") for m in (before, after)}
    assert any(s in first.group(1) for s in shown), (first.group(1), shown)
