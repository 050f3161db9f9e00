"""Pause and resume (issue 17), in process, on both stores; the API; the admin.

A pause is a write of queue state (the store); every claim reads it: a paused queue or job type
gives nothing to any claim, other queues and types are still claimed, enqueue keeps working,
and resume makes the jobs claimable again. The real-process half is in test_process_pause.py.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse

import jobqueue
from jobqueue.models import Job, Pause
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import claim_bitmaps, claim_params, make_job, make_jobs
from tests.store.contract_pauses import NOOP, OTHER


@pytest.mark.slow  # a load: 20,000 rows, then the planner
@requires_postgres()
@pytest.mark.django_db
def test_the_claim_with_pauses_still_reads_the_claim_index():
    make_jobs(10000, JobState.READY, queue="q")
    make_jobs(10000, JobState.READY, queue="other", type=OTHER)
    jobqueue.pause("paused-queue", by="ops")
    jobqueue.pause_type(NOOP, by="ops")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        # As sent without rate limits (their CTEs are left out then: store/sqltext.py).
        cursor.execute("EXPLAIN " + sql("claim~rates"), claim_params(["q", "other"], max_jobs=10))
        plan = "\n".join(r[0] for r in cursor.fetchall())
    assert "Index Scan using jobqueue_job_claim" in plan, plan
    assert "Seq Scan on jobqueue_job " not in plan, plan
    assert claim_bitmaps(plan) == set(), plan


# -- the admin -----------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, db):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_admin_pauses_a_queue_through_the_store_and_logs_it(admin_client):
    job_id = make_job(JobState.READY, queue="mail").id
    response = admin_client.post(
        reverse("admin:jobqueue_pause_add"),
        {"kind": "queue", "name": "mail", "reason": "smtp down"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    pause = Pause.objects.get()
    assert (pause.kind, pause.name, pause.paused_by, pause.reason) == (
        "queue",
        "mail",
        "root",
        "smtp down",
    )
    assert get_store().claim(["mail"], "w1", 10, 30.0) == []
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id, entry.user.username) == (
        ADDITION,
        str(pause.pk),
        "root",
    )
    assert Job.objects.get(id=job_id).state == JobState.READY


@pytest.mark.django_db
def test_the_admin_refuses_a_bad_queue_name(admin_client):
    response = admin_client.post(
        reverse("admin:jobqueue_pause_add"), {"kind": "queue", "name": "no spaces", "reason": ""}
    )
    assert response.status_code == 200
    assert "queue name must match" in response.content.decode()
    assert not Pause.objects.exists()
    assert not LogEntry.objects.exists()


@pytest.mark.django_db
def test_the_admin_resume_action_resumes_through_the_store_and_logs_it(admin_client):
    jobqueue.pause("mail", by="ops")
    jobqueue.pause_type(NOOP, by="ops")
    pause = Pause.objects.get(kind="queue")
    response = admin_client.post(
        reverse("admin:jobqueue_pause_changelist"),
        {"action": "resume_selected", "_selected_action": [str(pause.pk)]},
    )
    assert response.status_code == 302
    assert [(p.kind, p.name) for p in Pause.objects.all()] == [("type", NOOP)]
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id, entry.user.username) == (
        DELETION,
        str(pause.pk),
        "root",
    )


@pytest.mark.django_db
def test_the_admin_lists_pauses_with_who_and_since_and_the_dashboard_shows_them(admin_client):
    jobqueue.pause("mail", by="ops", reason="smtp down")
    page = admin_client.get(reverse("admin:jobqueue_pause_changelist")).content.decode()
    assert "mail" in page and "ops" in page and "smtp down" in page
    dashboard = admin_client.get(reverse("admin:jobqueue_dashboard")).content.decode()
    assert "Paused" in dashboard and "mail" in dashboard and "ops" in dashboard


# -- the CLI (subprocesses where the database can be shared) --------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_pause_resume_and_status_of_a_type_with_exit_codes():
    from tests.jobqueue_cli import cli

    paused = cli("pause", "--type", NOOP, "--by", "ops", "--reason", "bad deploy")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"Paused type {NOOP} (by ops since ")
    again = cli("pause", "--type", NOOP, "--by", "someone-else")
    assert again.returncode == 0
    assert again.stdout.startswith(f"Type {NOOP} was already paused (by ops since ")
    status = cli("status")
    assert f"Paused type {NOOP}: by ops since" in status.stdout
    assert cli("status", "--json").json()["paused_types"][0]["paused_by"] == "ops"

    resumed = cli("resume", "--type", NOOP)
    assert (resumed.returncode, resumed.stdout.strip()) == (
        0,
        f"Resumed type {NOOP}; workers claim its jobs again.",
    )
    not_paused = cli("resume", "--type", NOOP)
    assert (not_paused.returncode, not_paused.stdout.strip()) == (
        0,
        f"Type {NOOP} is not paused; nothing to resume.",
    )
    assert not Pause.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_pause_without_by_records_the_os_user_and_resume_of_a_free_queue_says_so():
    from jobqueue.ops.audit import operator_name
    from tests.jobqueue_cli import cli

    assert cli("pause", "mail").returncode == 0
    assert Pause.objects.get().paused_by == operator_name() != ""
    assert cli("resume", "mail").returncode == 0
    free = cli("resume", "mail")
    assert (free.returncode, free.stdout.strip()) == (
        0,
        "Queue mail is not paused; nothing to resume.",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, message",
    [
        (["pause", "no spaces"], "queue name must match"),
        (["pause"], "name a QUEUE, or a job type with --type"),
        (["pause", "mail", "--type", NOOP], "name a QUEUE, or a job type with --type"),
        (["resume", "bad/name"], "queue name must match"),
    ],
)
def test_cli_refuses_bad_usage_with_exit_2(argv, message):
    from tests.jobqueue_cli import cli

    result = cli(*argv, in_process=False)
    assert result.returncode == 2
    assert message in result.stderr
