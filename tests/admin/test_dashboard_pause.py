"""The dashboard's Pause and Resume buttons, one per queue: POST with CSRF, the Pauses page's
permissions, recorded with the signed-in user (the pause's ``paused_by`` and a ``LogEntry``).
"""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

import jobqueue
from jobqueue.models import Pause
from jobqueue.states import JobState
from tests.factories import make_job

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:jobqueue_dashboard"
PAUSE = "admin:jobqueue_dashboard_pause"


@pytest.fixture
def alice(client) -> Client:
    user = User.objects.create_user("alice", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


def queue_row(page: str, queue: str) -> str:
    match = re.search(rf'<tr data-queue="{queue}">(.*?)</tr>', page, re.S)
    assert match, queue
    return match.group(1)


def test_each_queue_row_has_pause_or_resume_by_its_state(alice):
    make_job(JobState.READY, queue="emails")
    make_job(JobState.READY, queue="reports")
    jobqueue.pause("reports", by="bob")
    page = alice.get(reverse(DASHBOARD) + "?refresh=0").content.decode()
    emails, reports = queue_row(page, "emails"), queue_row(page, "reports")
    assert 'name="op" value="pause"' in emails and ">Pause</button>" in emails
    assert 'name="op" value="resume"' in reports and ">Resume</button>" in reports
    assert "csrfmiddlewaretoken" in emails


def test_pause_then_resume_from_the_dashboard_records_who(alice):
    url = reverse(PAUSE)
    response = alice.post(url, {"queue": "emails", "op": "pause"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse(DASHBOARD)
    assert "Paused queue emails." in response.content.decode()
    pause = Pause.objects.get(kind="queue", name="emails")
    assert pause.paused_by == "alice"
    response = alice.post(url, {"queue": "emails", "op": "resume"}, follow=True)
    assert "Resumed queue emails." in response.content.decode()
    assert not Pause.objects.exists()
    assert list(
        LogEntry.objects.order_by("id").values_list("user__username", "action_flag", "object_id")
    ) == [("alice", ADDITION, str(pause.pk)), ("alice", DELETION, str(pause.pk))]


def test_a_bad_queue_name_changes_nothing_and_says_why(alice):
    response = alice.post(reverse(PAUSE), {"queue": "no spaces", "op": "pause"}, follow=True)
    assert "Nothing was changed" in response.content.decode()
    assert not Pause.objects.exists() and not LogEntry.objects.exists()
    assert alice.post(reverse(PAUSE), {"queue": "emails", "op": "drop"}).status_code == 400


def test_get_is_refused(alice):
    assert alice.get(reverse(PAUSE), {"queue": "emails", "op": "pause"}).status_code == 405
    assert not Pause.objects.exists()


def test_a_viewer_sees_no_buttons_and_cannot_pause(client):
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    make_job(JobState.READY, queue="emails")
    page = client.get(reverse(DASHBOARD) + "?refresh=0").content.decode()
    assert "jobqueue/job/dashboard/pause/" not in page
    assert client.post(reverse(PAUSE), {"queue": "emails", "op": "pause"}).status_code == 403
    assert not Pause.objects.exists()


def test_pausing_without_resume_permission_shows_no_resume(client):
    user = User.objects.create_user("pauser", is_staff=True)
    for codename in ("view_job", "add_pause"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    make_job(JobState.READY, queue="emails")
    jobqueue.pause("emails")
    assert ">Resume</button>" not in client.get(reverse(DASHBOARD)).content.decode()
    assert client.post(reverse(PAUSE), {"queue": "emails", "op": "resume"}).status_code == 403
    assert Pause.objects.filter(name="emails").exists()


def test_a_post_without_the_csrf_token_is_refused():
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_user("alice", is_staff=True, is_superuser=True))
    assert client.post(reverse(PAUSE), {"queue": "emails", "op": "pause"}).status_code == 403
    assert not Pause.objects.exists()
