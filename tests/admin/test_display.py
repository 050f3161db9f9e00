"""What a new user hit in the admin, through Django's test client: times shown to the second
with their zone, the job-type filter offering every type in use, a settings cron entry that
cannot be deleted (no button, and a refused POST). The layout half is in test_admin_layout.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

import jobqueue
from jobqueue import cron
from jobqueue.models import CronEntry
from jobqueue.states import JobState
from tests.admin.test_cron import text  # admin_client: pytest-django's own (a superuser)
from tests.factories import error_entry, make_job

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

NOOP = "tests.testapp.jobs.noop"

pytestmark = pytest.mark.django_db


def test_error_times_are_shown_to_the_second_with_the_zone(admin_client, settings):
    settings.TIME_ZONE = "UTC"
    at = datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC)
    job = make_job(JobState.DEAD, errors=[error_entry(1, at=at)])
    response = admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id]))
    shown = text(response)
    assert "2026-03-04 05:06:07 UTC" in shown
    assert "891234" not in shown  # no raw ISO with microseconds on the page's text


def test_dashboard_cron_times_are_to_the_second_for_a_seconds_schedule_with_the_zone(
    admin_client,
):
    jobqueue.schedule("every-10s", "*/10 * * * * *", "q", NOOP, timezone="Europe/Berlin")
    jobqueue.schedule("nightly", "0 3 * * *", "q", NOOP, timezone="Europe/Berlin")
    entry = CronEntry.objects.get(name="every-10s")
    berlin = entry.next_fire_at.astimezone(ZoneInfo("Europe/Berlin"))
    response = admin_client.get(reverse("admin:jobqueue_dashboard") + "?refresh=0")
    shown = text(response)
    assert berlin.strftime("%Y-%m-%d %H:%M:%S %Z") in shown, shown
    # A minute schedule is shown to the second too (every admin time is), with its zone.
    nightly = CronEntry.objects.get(name="nightly").next_fire_at.astimezone(
        ZoneInfo("Europe/Berlin")
    )
    assert nightly.strftime("%Y-%m-%d %H:%M:00 %Z") in shown


def test_cron_list_shows_seconds_for_a_seconds_schedule_even_on_a_whole_minute(admin_client):
    entry = jobqueue.schedule("every-10s", "*/10 * * * * *", "q", NOOP)
    on_the_minute = entry.next_fire_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    CronEntry.objects.filter(pk=entry.pk).update(last_fired_at=on_the_minute)
    response = admin_client.get(reverse("admin:jobqueue_cronentry_changelist"))
    assert on_the_minute.strftime("%Y-%m-%d %H:%M:00 UTC") in text(response)


def test_job_type_filter_offers_types_in_use_that_this_process_never_registered(admin_client):
    # A django.tasks task whose module the web process never imported: not in the registry.
    make_job(JobState.READY, type="reports.background.send_weekly_report")
    response = admin_client.get(reverse("admin:jobqueue_job_changelist"))
    assert "?type=reports.background.send_weekly_report" in response.content.decode()


def settings_entry(settings) -> CronEntry:
    settings.JOBQUEUE = {"CRON": {"from-settings": {"cron_expr": "0 3 * * *", "job_type": NOOP}}}
    cron.reconcile_settings()
    return CronEntry.objects.get(name="from-settings")


def test_a_settings_cron_entry_has_no_delete_button_and_its_delete_is_refused(
    admin_client, settings
):
    entry = settings_entry(settings)
    change = admin_client.get(reverse("admin:jobqueue_cronentry_change", args=[entry.pk]))
    assert change.status_code == 200
    assert "deletelink" not in change.content.decode()
    delete_url = reverse("admin:jobqueue_cronentry_delete", args=[entry.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert CronEntry.objects.filter(pk=entry.pk).exists()


def test_bulk_delete_with_a_settings_cron_entry_is_refused(admin_client, settings):
    entry = settings_entry(settings)
    own = jobqueue.schedule("mine", "0 4 * * *", "q", NOOP)
    url = reverse("admin:jobqueue_cronentry_changelist")
    data = {"action": "delete_selected", "_selected_action": [entry.pk, own.pk]}
    confirm = admin_client.post(url, data)
    assert "JOBQUEUE[&#x27;CRON&#x27;] (from-settings)" in confirm.content.decode()
    response = admin_client.post(url, {**data, "post": "yes"})
    assert response.status_code == 403
    assert set(CronEntry.objects.values_list("name", flat=True)) == {"from-settings", "mine"}


def test_an_admin_cron_entry_can_still_be_deleted(admin_client):
    own = jobqueue.schedule("mine", "0 4 * * *", "q", NOOP)
    delete_url = reverse("admin:jobqueue_cronentry_delete", args=[own.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 302
    assert not CronEntry.objects.exists()
