"""The admin with queues on two databases (``default`` and ``queues2``): the ``?db=`` selector on
the job lists, each row's page and actions on its own database, the dashboard's sums, its row
per database, its charts' database and its statements per database.

Job ids are per database, so the tests give the same id to a job on each to tell them apart.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobqueue.models import Job, Worker
from jobqueue.states import JobState
from jobqueue.store import get_store
from tests.factories import make_job

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


def test_the_dashboard_has_a_row_per_queue_database(admin, two_databases):
    make_job(JobState.DEAD, queue="bulk")
    for _ in range(2):
        make_job(JobState.DEAD, using="queues2", queue="bulk")
    make_job(JobState.READY, using="queues2", queue="only2")
    Worker.objects.using("queues2").create(worker_id="w2", host="h", pid=2, concurrency=1)
    page = text(admin.get(DASHBOARD, {"refresh": "0"}))
    rows = {
        name: re.search(rf'<tr data-database="{name}">(.*?)</tr>', page)
        for name in ("default", "queues2")
    }
    assert rows["default"] and rows["queues2"], page[:2000]
    default, queues2 = rows["default"].group(1), rows["queues2"].group(1)
    assert re.search(r'data-state="dead"><a [^>]*>1</a>', default)
    assert re.search(r'data-state="dead"><a [^>]*>2</a>', queues2)
    assert re.search(r'data-state="ready"><a [^>]*>1</a>', queues2)
    assert re.search(r'data-state="ready"><a [^>]*>0</a>', default)
    assert re.search(r"\?db=queues2\">1</a></td>", queues2)  # its live worker, linked
    # A queue whose jobs are on one database links to its jobs there.
    only2 = re.search(r'<tr data-queue="only2">(.*?)</tr>', page).group(1)
    assert f'href="{JOBS}?queue=only2&amp;db=queues2"' in only2


def test_with_one_queue_database_the_dashboard_has_no_database_rows(admin):
    make_job(JobState.READY, queue="bulk")
    page = text(admin.get(DASHBOARD, {"refresh": "0"}))
    assert "data-database=" not in page and 'id="jq-databases"' not in page


def test_the_charts_read_the_selected_queue_database(admin, two_databases):
    now = timezone.now()
    make_job(JobState.READY, using="queues2", queue="only2", run_at=now - timedelta(minutes=5))
    assert get_store("queues2").sample_depth(now=now - timedelta(minutes=1)) >= 1
    first = text(admin.get(DASHBOARD, {"refresh": "0"}))
    assert 'data-series="only2"' not in first
    assert '<a href="?refresh=0&amp;db=queues2">queues2</a>' in first
    second = text(admin.get(DASHBOARD, {"refresh": "0", "db": "queues2"}))
    assert 'data-series="only2"' in second
    assert "?span=24h&amp;refresh=0&amp;db=queues2" in second  # the span keeps the database


def test_the_dashboard_reads_a_handful_of_aggregates_per_queue_database(
    admin, two_databases, no_declared_limits
):
    for alias in ("default", "queues2"):
        for state in (JobState.READY, JobState.SUCCEEDED, JobState.DEAD):
            make_job(state, using=alias, queue="bulk")
    with (
        CaptureQueriesContext(connections["default"]) as on_default,
        CaptureQueriesContext(connections["queues2"]) as on_queues2,
    ):
        assert admin.get(DASHBOARD).status_code == 200
    for queries in (on_default, on_queues2):
        job_reads = [
            q["sql"]
            for q in queries
            if "jobqueue_job" in q["sql"] and not q["sql"].startswith("EXPLAIN")
        ]
        # As with one database (test_admin's test): six aggregates, the concurrency keys and
        # the waiting jobs per queue.
        assert 1 <= len(job_reads) <= 8, job_reads
        assert all("GROUP BY" in sql.upper() for sql in job_reads), job_reads
