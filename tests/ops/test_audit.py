"""Who did an operator action, recorded in the job's history and in Django's LogEntry.

Every path: the Python API with a user (``by=user``) or a name, the admin's actions (the
signed-in user), ``manage.py jobqueue`` (``--as USER``, default the OS user, resolved to the
Django user of that user name when there is one), and pause and resume.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job, Pause
from jobqueue.ops.audit import operator_name
from jobqueue.states import JobState
from tests.factories import make_job
from tests.jobqueue_cli import cli


def entries(job_id: int) -> list[tuple[int, str, int, str]]:
    """Return the job's LogEntry rows: (user id, object id, flag, message)."""
    kind = ContentType.objects.get_for_model(Job)
    return list(
        LogEntry.objects.filter(content_type=kind, object_id=str(job_id))
        .order_by("id")
        .values_list("user_id", "object_id", "action_flag", "change_message")
    )


def history(job_id: int) -> list[tuple[str, str]]:
    """Return the operator entries of the job's history: (kind, by)."""
    errors = Job.objects.get(id=job_id).errors
    return [(e["kind"], e.get("by")) for e in errors if e["kind"].startswith("operator_")]


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", is_staff=True, is_superuser=True)


@pytest.mark.django_db
def test_the_api_with_a_user_records_the_history_and_a_log_entry(alice):
    dead = make_job(JobState.DEAD).id
    ready = make_job(JobState.READY).id
    scheduled = make_job(JobState.SCHEDULED).id
    assert jobqueue.retry(dead, by=alice)
    assert jobqueue.cancel(ready, by=alice)
    assert jobqueue.run_now(scheduled, by=alice)
    assert history(dead) == [("operator_retry", "alice")]
    assert history(ready) == [("operator_cancel", "alice")]
    assert history(scheduled) == [("operator_run_now", "alice")]
    assert entries(dead) == [(alice.pk, str(dead), CHANGE, "Retried by operator.")]
    assert entries(ready) == [(alice.pk, str(ready), CHANGE, "Cancelled by operator.")]
    assert entries(scheduled) == [(alice.pk, str(scheduled), CHANGE, "Made ready now by operator.")]


@pytest.mark.django_db
def test_retry_many_logs_each_retried_job_and_nothing_for_the_rest(alice):
    dead = [make_job(JobState.DEAD).id for _ in range(3)]
    ready = make_job(JobState.READY).id
    result = jobqueue.retry_many([*dead, ready], by=alice)
    assert set(result.retried) == set(dead)
    for job_id in dead:
        assert entries(job_id) == [(alice.pk, str(job_id), CHANGE, "Retried by operator.")]
        assert history(job_id) == [("operator_retry", "alice")]
    assert entries(ready) == [] and history(ready) == []


@pytest.mark.django_db
def test_a_name_is_recorded_in_the_history_only_and_a_refused_action_records_nothing(alice):
    job = make_job(JobState.DEAD).id
    assert jobqueue.retry(job, by="nightly-script")
    assert history(job) == [("operator_retry", "nightly-script")]
    assert LogEntry.objects.count() == 0
    # Not dead or cancelled any more: refused, nothing recorded.
    assert not jobqueue.retry(job, by=alice)
    assert entries(job) == [] and len(history(job)) == 1


@pytest.mark.django_db
def test_a_bad_by_is_refused_before_anything_changes():
    job = make_job(JobState.DEAD).id
    with pytest.raises(InvalidJobOption, match="by"):
        jobqueue.retry(job, by=42)
    with pytest.raises(InvalidJobOption, match="by"):
        jobqueue.resume("emails", by=object())
    assert Job.objects.get(id=job).state == JobState.DEAD
    assert history(job) == []


@pytest.mark.django_db
def test_pause_and_resume_with_a_user_are_logged(alice):
    assert jobqueue.pause("emails", by=alice, reason="smtp down")
    pause = Pause.objects.get(kind="queue", name="emails")
    assert pause.paused_by == "alice"
    assert jobqueue.resume("emails", by=alice)
    kind = ContentType.objects.get_for_model(Pause)
    assert list(
        LogEntry.objects.filter(content_type=kind)
        .order_by("id")
        .values_list("user_id", "object_id", "action_flag", "change_message")
    ) == [
        (alice.pk, str(pause.pk), ADDITION, "Paused queue emails."),
        (alice.pk, str(pause.pk), DELETION, "Resumed queue emails."),
    ]


@pytest.mark.django_db
def test_an_admin_action_records_the_signed_in_user(client, alice):
    client.force_login(alice)
    dead = make_job(JobState.DEAD).id
    response = client.post(
        reverse("admin:jobqueue_job_changelist"),
        {"action": "retry_jobs", "_selected_action": [dead], "post": "yes", "index": 0},
    )
    assert response.status_code == 302
    assert history(dead) == [("operator_retry", "alice")]
    assert entries(dead) == [(alice.pk, str(dead), CHANGE, "Retried by operator.")]
    # The job's History page shows it.
    page = client.get(reverse("admin:jobqueue_job_history", args=[dead])).content.decode()
    assert "Retried by operator." in page
    change = client.get(reverse("admin:jobqueue_job_change", args=[dead])).content.decode()
    assert "by alice" in change  # the history table names who


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_cli_acts_as_the_django_user_named_by_as_or_as_the_os_user(alice):
    named, unknown, default = (make_job(JobState.DEAD).id for _ in range(3))
    assert cli("retry", str(named), "--as", "alice").returncode == 0
    assert history(named) == [("operator_retry", "alice")]
    assert entries(named) == [(alice.pk, str(named), CHANGE, "Retried by operator.")]
    shown = cli("show", str(named)).stdout
    [line] = [x for x in shown.splitlines() if "operator_retry" in x]
    assert "by alice: " in line and ": :" not in line, line  # no empty "type" cell
    # No Django user of that name: the history names them, no LogEntry.
    assert cli("cancel", str(unknown), "--as", "nobody-here").returncode == 0
    assert history(unknown) == [("operator_cancel", "nobody-here")]
    assert entries(unknown) == []
    # No --as: the OS user running the command.
    assert cli("retry", str(default)).returncode == 0
    assert history(default) == [("operator_retry", operator_name())]
    assert cli("pause", "emails", "--as", "alice").returncode == 0
    assert Pause.objects.get(name="emails").paused_by == "alice"
    assert cli("resume", "emails", "--as", "alice").returncode == 0
    kind = ContentType.objects.get_for_model(Pause)
    flags = LogEntry.objects.filter(content_type=kind, user=alice).order_by("id")
    assert list(flags.values_list("action_flag", flat=True)) == [ADDITION, DELETION]
