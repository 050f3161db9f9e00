"""The admin with queues on two databases (``default`` and ``queues2``): the ``?db=`` selector on
the job lists, each row's page and actions on its own database, the dashboard's sums.

Job ids are per database, so the tests give the same id to a job on each to tell them apart.
"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

from jobqueue.models import Job
from jobqueue.states import JobState

from .factories import make_job

pytestmark = pytest.mark.django_db(databases=["default", "queues2"])

JOBS = reverse("admin:jobqueue_job_changelist")
DASHBOARD = reverse("admin:jobqueue_dashboard")
TWO = {"bulk": ["default", "queues2"]}


@pytest.fixture
def admin(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def two_databases():
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": TWO}):
        yield


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def twins(state: str = JobState.DEAD) -> int:
    """Make a job with one id on each database (types ``on.default``, ``on.queues2``)."""
    first = make_job(state, type="on.default", queue="bulk")
    make_job(state, using="queues2", id=first.id, type="on.queues2", queue="bulk")
    return first.id


def test_with_one_queue_database_there_is_no_selector(admin):
    twins()
    page = text(admin.get(JOBS))
    assert "on.default" in page and "Queue database:" not in page


def test_the_selector_shows_each_databases_jobs(admin, two_databases):
    job_id = twins()
    first = text(admin.get(JOBS))
    assert "Queue database: <strong>default</strong> | " in first
    assert '<a href="?db=queues2">queues2</a>' in first
    assert "on.default" in first and "on.queues2" not in first
    second = text(admin.get(JOBS, {"db": "queues2"}))
    assert "on.queues2" in second and "on.default" not in second
    # A row links to its page on its own database.
    assert re.search(rf'href="[^"]*/jobqueue/job/{job_id}/change/\?[^"]*\bdb=queues2"', second)
    detail = text(admin.get(reverse("admin:jobqueue_job_change", args=[job_id]), {"db": "queues2"}))
    assert "on.queues2" in detail and "on.default" not in detail
    assert f'action="{JOBS}?db=queues2"' in detail  # its action buttons post to its database


def test_filters_keep_the_selected_database(admin, two_databases):
    twins()
    page = text(admin.get(JOBS, {"db": "queues2", "state": "dead"}))
    assert "on.queues2" in page and "on.default" not in page


def test_an_unknown_database_is_a_400_naming_the_ones_there_are(admin, two_databases):
    response = admin.get(JOBS, {"db": "nowhere"})
    assert response.status_code == 400


def test_a_retry_acts_on_the_jobs_own_database(admin, two_databases):
    job_id = twins()
    data = {"action": "retry_jobs", "post": "yes", "_selected_action": [str(job_id)]}
    response = admin.post(f"{JOBS}?db=queues2", data)
    assert response.status_code == 302
    assert Job.objects.using("queues2").get(id=job_id).state == JobState.READY
    assert Job.objects.using("default").get(id=job_id).state == JobState.DEAD


def test_a_cancel_from_the_detail_page_acts_on_its_database(admin, two_databases):
    job_id = twins(JobState.READY)
    detail = text(admin.get(reverse("admin:jobqueue_job_change", args=[job_id]), {"db": "queues2"}))
    action = re.search(r'<form method="post" action="([^"]+)" class="jq-inline-action">', detail)
    assert action is not None
    data = {
        "action": "cancel_jobs",
        "post": "yes",
        "index": "0",
        "_selected_action": [str(job_id)],
    }
    admin.post(action.group(1).replace("&amp;", "&"), data)
    assert Job.objects.using("queues2").get(id=job_id).state == JobState.CANCELLED
    assert Job.objects.using("default").get(id=job_id).state == JobState.READY


def test_the_dashboard_sums_every_queue_database(admin, two_databases):
    make_job(JobState.DEAD, queue="bulk")
    for _ in range(2):
        make_job(JobState.DEAD, using="queues2", queue="bulk")
    make_job(JobState.READY, using="queues2", queue="only2")
    page = text(admin.get(DASHBOARD, {"refresh": "0"}))
    bulk = re.search(r'data-queue="bulk".*?</tr>', page)
    assert bulk is not None, page[:2000]
    assert ">3<" in bulk.group(0)  # dead: 1 + 2
    assert 'data-queue="only2"' in page
