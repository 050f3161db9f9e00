"""The cron entry admin, through Django's test client: the list, the form's errors, the actions
(enable, disable, run now) and each entry's recent fires with their jobs' states.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.contrib.messages.storage.cookie import CookieStorage
from django.urls import reverse

import jobqueue
from jobqueue import cron
from jobqueue.admin.cron import CronEntryAdmin
from jobqueue.models import CronEntry, CronFire, Job
from jobqueue.settings.crontab import Schedule

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

NOOP = "tests.testapp.jobs.noop"
CHANGELIST = "admin:jobqueue_cronentry_changelist"

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = User.objects.create(username="ops", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


def text(response) -> str:
    """Return the response's visible text, tags stripped and whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def form_data(**overrides) -> dict:
    data = {
        "name": "nightly",
        "cron_expr": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "queue": "reports",
        "job_type": NOOP,
        "payload": '{"day": "x"}',
        "priority": "0",
        "missed": "once",
        "missed_cap": "10",
        "enabled": "on",
    }
    data.update(overrides)
    return data


def test_list_shows_schedule_zone_next_five_fire_times_in_the_entry_zone_and_last_fired(
    admin_client,
):
    entry = jobqueue.schedule("berlin", "30 2 * * *", "q", NOOP, timezone="Europe/Berlin")
    CronEntry.objects.filter(pk=entry.pk).update(
        next_fire_at=datetime(2027, 3, 27, 1, 30, tzinfo=UTC),
        last_fired_at=datetime(2027, 3, 26, 1, 30, tzinfo=UTC),
    )
    jobqueue.schedule("off", "0 * * * *", "q", NOOP, enabled=False)
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    page = text(response)
    assert "<code>30 2 * * *</code>" in response.content.decode()
    assert "Europe/Berlin" in page
    # The spring-forward day shows 03:00 CEST: the first instant after the gap.
    assert (
        "2027-03-27 02:30:00 CET 2027-03-28 03:00:00 CEST 2027-03-29 02:30:00 CEST "
        "2027-03-30 02:30:00 CEST 2027-03-31 02:30:00 CEST"
    ) in page
    assert "2027-03-26 02:30:00 CET" in page  # last fired, in the entry's zone
    assert "disabled" in page
    for column in ("schedule", "time zone", "next 5 fire times", "last fired", "enabled"):
        assert column in page.lower()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cron_expr", "0 25 * * *", "invalid cron expression &#x27;0 25 * * *&#x27;"),
        ("cron_expr", "* * * *", "expected 5 fields"),
        ("timezone", "Europe/Berlim", "unknown time zone &#x27;Europe/Berlim&#x27;"),
        ("payload", '{"fire_time": 1}', "is reserved"),
        ("payload", "[1]", "must be a dict"),
        ("job_type", "tests.testapp.jobs.add", "does not accept a &#x27;fire_time&#x27;"),
        ("queue", "no spaces", "queue name must match"),
        ("priority", "500", "invalid priority: must be an integer in -100..100, got 500"),
    ],
)
def test_add_form_shows_bad_input_as_a_form_error_and_writes_nothing(
    admin_client, field, value, message
):
    response = admin_client.post(
        reverse("admin:jobqueue_cronentry_add"), form_data(**{field: value})
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert "errorlist" in response.content.decode()
    assert CronEntry.objects.count() == 0


def test_add_form_creates_an_admin_entry_with_its_next_fire_time(admin_client):
    response = admin_client.post(reverse("admin:jobqueue_cronentry_add"), form_data())
    assert response.status_code == 302, text(response)
    entry = CronEntry.objects.get()
    assert (entry.name, entry.cron_expr, entry.timezone, entry.source) == (
        "nightly",
        "0 3 * * *",
        "Europe/Berlin",
        "admin",
    )
    assert entry.payload == {"day": "x"}
    now = cron.cron_store().db_now()
    assert entry.next_fire_at == Schedule("0 3 * * *", "Europe/Berlin").next_after(now)


def test_editing_the_schedule_recomputes_the_next_fire_time(admin_client):
    entry = jobqueue.schedule("nightly", "0 3 * * *", "reports", NOOP, timezone="Europe/Berlin")
    CronEntry.objects.filter(pk=entry.pk).update(next_fire_at=datetime(2030, 1, 1, tzinfo=UTC))
    url = reverse("admin:jobqueue_cronentry_change", args=[entry.pk])
    response = admin_client.post(url, form_data(payload='{"day": "y"}'))
    assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.payload, entry.next_fire_at) == ({"day": "y"}, datetime(2030, 1, 1, tzinfo=UTC))
    assert entry.source == "code"  # edited, still owned by code
    response = admin_client.post(url, form_data(cron_expr="15 4 * * *"))
    assert response.status_code == 302
    entry.refresh_from_db()
    now = cron.cron_store().db_now()
    assert entry.next_fire_at == Schedule("15 4 * * *", "Europe/Berlin").next_after(now)


def test_a_settings_entry_is_read_only(admin_client, settings):
    settings.JOBQUEUE = {"CRON": {"from-settings": {"cron_expr": "0 3 * * *", "job_type": NOOP}}}
    cron.reconcile_settings()
    entry = CronEntry.objects.get()
    response = admin_client.get(reverse("admin:jobqueue_cronentry_change", args=[entry.pk]))
    assert response.status_code == 200
    assert 'name="cron_expr"' not in response.content.decode()
    assert 'name="_save"' not in response.content.decode()  # view-only: no save buttons
    assert "0 3 * * *" in text(response)


def test_enable_and_disable_skip_settings_entries_and_say_why(admin_client, settings):
    """The settings own a declared entry's 'enabled'; a change here would be undone at the next
    runworkers start, so the action refuses it instead of pretending."""
    settings.JOBQUEUE = {"CRON": {"from-settings": {"cron_expr": "0 3 * * *", "job_type": NOOP}}}
    cron.reconcile_settings()
    declared = CronEntry.objects.get(name="from-settings")
    mine = jobqueue.schedule("mine", "0 4 * * *", "q", NOOP)
    response = post_action(admin_client, "disable", declared, mine)
    assert "Disabled 1 cron entry." in text(response)
    page = text(response)
    assert "Skipped 1 entry declared in JOBQUEUE[" in page and "(from-settings)" in page
    assert CronEntry.objects.get(name="from-settings").enabled is True
    assert CronEntry.objects.get(name="mine").enabled is False


def post_action(client, action: str, *entries: CronEntry):
    return client.post(
        reverse(CHANGELIST),
        {"action": action, "_selected_action": [e.pk for e in entries]},
        follow=True,
    )


def test_disable_and_enable_actions(admin_client):
    a = jobqueue.schedule("a", "0 3 * * *", "q", NOOP)
    b = jobqueue.schedule("b", "0 4 * * *", "q", NOOP)
    response = post_action(admin_client, "disable", a, b)
    assert "Disabled 2 cron entries." in text(response)
    assert list(CronEntry.objects.values_list("enabled", "next_fire_at")) == [(False, None)] * 2
    response = post_action(admin_client, "enable", a)
    assert "Enabled 1 cron entry." in text(response)
    a.refresh_from_db()
    now = cron.cron_store().db_now()
    assert (a.enabled, a.next_fire_at) == (True, Schedule("0 3 * * *").next_after(now))
    assert CronEntry.objects.get(name="b").enabled is False


def test_run_now_action_enqueues_each_entrys_job_without_moving_its_schedule(admin_client):
    a = jobqueue.schedule("a", "0 3 * * *", "q", NOOP, {"k": 1})
    pending = a.next_fire_at
    response = post_action(admin_client, "run_now", a)
    job = Job.objects.get()
    assert f"Enqueued 1 job: a (job {job.id})." in text(response)
    assert (job.queue, job.type, job.payload["k"]) == ("q", NOOP, 1)
    record = CronFire.objects.get()
    assert (record.job_id, record.manual, record.fired_by) == (job.id, True, "admin:ops")
    a.refresh_from_db()
    assert a.next_fire_at == pending


def test_run_now_needs_its_own_permission(client):
    staff = User.objects.create(username="viewer", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_cronentry", "change_cronentry"])
    )
    client.force_login(staff)
    entry = jobqueue.schedule("a", "0 3 * * *", "q", NOOP)
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert 'value="disable"' in page
    assert 'value="run_now"' not in page
    post_action(client, "run_now", entry)
    assert Job.objects.count() == 0
    staff.user_permissions.add(Permission.objects.get(codename="run_cronentry"))
    staff = User.objects.get(pk=staff.pk)  # drop the permission cache
    client.force_login(staff)
    post_action(client, "run_now", entry)
    assert Job.objects.count() == 1


def test_change_page_lists_recent_fires_with_their_jobs_states(admin_client):
    entry = jobqueue.schedule("a", "0 3 * * *", "q", NOOP, timezone="Europe/Berlin")
    store = cron.cron_store()
    fired = []
    for hour in (1, 2, 3):
        fire_time = datetime(2020, 1, 1, hour, tzinfo=UTC)
        fired.append(
            store.fire_cron(
                cron.Fire(
                    entry_id=entry.id,
                    fire_time=fire_time,
                    job=cron.build_job(entry, fire_time, fire_time),
                    fired_by="w1",
                )
            ).job_id
        )
    Job.objects.filter(id=fired[0]).delete()  # pruned
    Job.objects.filter(id=fired[1]).update(state="succeeded")
    manual = cron.run_now(entry, fired_by="admin:ops")
    response = admin_client.get(reverse("admin:jobqueue_cronentry_change", args=[entry.pk]))
    rows = [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()
        for row in re.findall(
            r"<tr class=.jobqueue-fire.>(.*?)</tr>", response.content.decode(), re.S
        )
    ]
    assert len(rows) == 4
    assert rows[0].startswith("20") and f"run now #{manual} ready" in rows[0]
    assert rows[1].startswith("2020-01-01 04:00:00 CET scheduled")
    assert f"#{fired[2]} ready" in rows[1]
    assert rows[2].startswith("2020-01-01 03:00:00 CET scheduled")
    assert f"#{fired[1]} succeeded" in rows[2]
    assert rows[3].startswith("2020-01-01 02:00:00 CET scheduled")
    assert f"#{fired[0]} pruned" in rows[3]
    assert rows[3].endswith("w1")


@pytest.mark.django_db(databases=["default", "sqlite"])
def test_actions_act_on_the_database_of_their_queryset(rf):
    entry = cron.schedule("elsewhere", "0 3 * * *", "q", NOOP, using="sqlite")
    request = rf.post("/")
    request.user = User(username="ops")
    request._messages = CookieStorage(request)
    model_admin = CronEntryAdmin(CronEntry, admin.site)
    queryset = CronEntry.objects.using("sqlite").filter(pk=entry.pk)

    model_admin.disable(request, queryset)
    assert CronEntry.objects.using("sqlite").values_list("enabled", "next_fire_at").get() == (
        False,
        None,
    )
    model_admin.enable(request, queryset)
    assert CronEntry.objects.using("sqlite").get().next_fire_at is not None
    model_admin.run_now(request, queryset)
    record = CronFire.objects.using("sqlite").get()
    job = Job.objects.using("sqlite").get()
    assert (record.job_id, record.manual, record.fired_by) == (job.id, True, "admin:ops")
    assert not CronEntry.objects.using("default").exists()
    assert not Job.objects.using("default").exists()


def test_deleting_an_entry_deletes_its_fire_records_and_keeps_its_jobs(admin_client):
    """Pins what held before deletes went through the store (``cron.delete_entries``)."""
    entry = cron.schedule("gone", "0 3 * * *", "q", NOOP)
    kept = cron.schedule("kept", "0 4 * * *", "q", NOOP)
    job_id = cron.run_now(entry, fired_by="t")
    url = reverse("admin:jobqueue_cronentry_delete", args=[entry.pk])

    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert list(CronEntry.objects.values_list("name", flat=True)) == ["kept"]
    assert not CronFire.objects.exists()
    assert Job.objects.filter(id=job_id).exists()

    response = admin_client.post(
        reverse(CHANGELIST),
        {"action": "delete_selected", "_selected_action": [kept.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not CronEntry.objects.exists()


@pytest.mark.django_db(databases=["default", "sqlite"])
def test_delete_acts_on_the_database_of_the_entry_and_of_the_queryset(rf):
    here = cron.schedule("here", "0 3 * * *", "q", NOOP)
    first = cron.schedule("first", "0 3 * * *", "q", NOOP, using="sqlite")
    second = cron.schedule("second", "0 3 * * *", "q", NOOP, using="sqlite")
    request = rf.post("/")
    request.user = User(username="ops")
    model_admin = CronEntryAdmin(CronEntry, admin.site)

    model_admin.delete_model(request, CronEntry.objects.using("sqlite").get(pk=first.pk))
    assert list(CronEntry.objects.using("sqlite").values_list("name", flat=True)) == ["second"]
    model_admin.delete_queryset(request, CronEntry.objects.using("sqlite").filter(pk=second.pk))
    assert not CronEntry.objects.using("sqlite").exists()
    assert list(CronEntry.objects.values_list("pk", flat=True)) == [here.pk]
