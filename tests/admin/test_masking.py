"""Hardening item 6: ``ADMIN_MASKED_KEYS`` on every admin page that shows a payload, a result,
arguments, an error message or history, for a view-only staff user, with Django's test client.

The pages, enumerated from jobqueue/admin and jobqueue/templates/admin/jobqueue: the job list
(last error cell and its tooltip), a job's page (payload, result, error history with
messages and tracebacks), its whole-value JSON view, the dead-letter list and page, the cron
entry list, a cron entry's page (view-only, from the settings, and editable), its history page,
and the dashboard. Each is fetched and must contain no masked value anywhere in its HTML.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

import jobqueue
from jobqueue.masking import MASK
from jobqueue.models import CronEntry, CronSource, Job
from jobqueue.states import JobState
from tests.factories import make_job

pytestmark = pytest.mark.django_db

NOOP = "tests.testapp.jobs.noop"
TOKEN = "tok-Zq81Xr"
PASSWORD = "hunter2-Pw"
CARD = "4111111111111111"
SECRETS = (TOKEN, PASSWORD, CARD, "bearer-Kx9")
PAYLOAD = {"user": "bob", "api_token": TOKEN, "nested": {"Password": PASSWORD}}
RESULT = {"ok": True, "card_number": CARD}
ERRORS = [
    {
        "attempt": 1,
        "at": "2026-01-01T00:00:00+00:00",
        "kind": "error",
        "worker": "w1",
        "type": "ValueError",
        # The value of a masked key, bare; and a key=value the payload does not hold.
        "message": f"token {TOKEN} refused; Authorization: Bearer bearer-Kx9",
        "traceback": f'  File "x.py", line 1\n    login(password="{PASSWORD}")\nValueError',
    }
]


def view_only() -> Client:
    user = User.objects.create_user("viewer", is_staff=True)
    for codename in ("view_job", "view_cronentry"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client = Client()
    client.force_login(user)
    return client


def assert_masked(response) -> str:
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    for secret in SECRETS:
        assert secret not in html, secret
    return html


@pytest.fixture
def jobs() -> tuple[Job, Job]:
    dead = make_job(state=JobState.DEAD, payload=PAYLOAD, errors=ERRORS)
    done = make_job(state=JobState.SUCCEEDED, payload=PAYLOAD, result=RESULT, errors=ERRORS)
    return dead, done


def test_job_pages_mask_payload_result_and_error_messages_for_view_only_staff(jobs):
    client = view_only()
    dead, done = jobs
    html = assert_masked(client.get(reverse("admin:jobqueue_job_changelist")))
    assert "ValueError: token ******** refused" in html  # the last-error cell says what it can
    for job in (dead, done):
        html = assert_masked(client.get(reverse("admin:jobqueue_job_change", args=[job.pk])))
        assert MASK in html and "bob" in html  # unmasked keys still shown
        assert "login(password=********)" in html
        for field in ("payload", "result"):
            url = reverse("admin:jobqueue_job_json", args=[job.pk, field])
            assert_masked(client.get(url))
    assert_masked(client.get(reverse("admin:jobqueue_deadletter_changelist")))
    assert_masked(client.get(reverse("admin:jobqueue_deadletter_change", args=[dead.pk])))
    assert_masked(client.get(reverse("admin:jobqueue_dashboard")))


def test_cron_entry_pages_mask_the_payload_for_view_only_staff():
    entry = jobqueue.schedule("nightly", "0 3 * * *", "q", NOOP, payload=PAYLOAD)
    from_settings = jobqueue.schedule("settings", "0 4 * * *", "q", NOOP, payload=PAYLOAD)
    CronEntry.objects.filter(pk=from_settings.pk).update(source=CronSource.SETTINGS)
    client = view_only()
    assert_masked(client.get(reverse("admin:jobqueue_cronentry_changelist")))
    for pk in (entry.pk, from_settings.pk):
        html = assert_masked(client.get(reverse("admin:jobqueue_cronentry_change", args=[pk])))
        assert MASK in html and "bob" in html
        assert_masked(client.get(reverse("admin:jobqueue_cronentry_history", args=[pk])))
    assert_masked(client.get(reverse("admin:jobqueue_dashboard")))


def test_an_editor_sees_the_cron_payload_masked_and_saving_keeps_the_stored_secrets(admin_user):
    entry = jobqueue.schedule("nightly", "0 3 * * *", "q", NOOP, payload=PAYLOAD)
    client = Client()
    client.force_login(admin_user)
    url = reverse("admin:jobqueue_cronentry_change", args=[entry.pk])
    assert_masked(client.get(url))
    shown = {"user": "alice", "api_token": MASK, "nested": {"Password": MASK}}
    form = {
        "name": "nightly",
        "cron_expr": "0 3 * * *",
        "timezone": "UTC",
        "queue": "q",
        "job_type": NOOP,
        "payload": json.dumps(shown),
        "priority": "0",
        "missed": "once",
        "missed_cap": "10",
        "enabled": "on",
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry.refresh_from_db()
    # The edited key changed; the masked ones kept their stored values, not "********".
    assert entry.payload == {"user": "alice", "api_token": TOKEN, "nested": {"Password": PASSWORD}}
    assert_masked(client.get(reverse("admin:jobqueue_cronentry_history", args=[entry.pk])))
    # A new value typed in is saved as typed.
    form["payload"] = json.dumps({"api_token": "new-token-1"})
    assert client.post(url, form).status_code == 302
    entry.refresh_from_db()
    assert entry.payload == {"api_token": "new-token-1"}


def test_every_job_detail_field_that_renders_data_is_covered():
    """The enumeration above is complete: a new field rendering data fails here first."""
    from jobqueue.admin.base import DETAIL_FIELDSETS
    from jobqueue.admin.cron import CronEntryAdmin

    shown = {
        f
        for _, opts in DETAIL_FIELDSETS
        for row in opts["fields"]
        for f in (row if isinstance(row, tuple) else (row,))
    }
    renders_data = {"payload_block", "result_block", "error_history"}
    assert renders_data <= shown
    assert not {"payload", "result", "errors"} & shown  # never the raw columns
    cron_fields = {f for _, opts in CronEntryAdmin.fieldsets for f in opts["fields"]}
    assert "payload" in cron_fields  # swapped for payload_masked when read-only (tested above)
