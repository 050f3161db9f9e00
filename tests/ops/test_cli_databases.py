"""``manage.py jobqueue`` with queues on two databases (``default`` and ``queues2``).

The reports (status, jobs, health) cover every queue database unless ``--database`` names one,
each row naming its database; an unknown alias is bad usage naming the queue databases. Job ids
are per database: an id found on both is refused (exit 2, nothing done) until ``--database``
names one, and an id found on one is acted on there. ``prune`` prunes every queue database.
The command runs in this process (``call_command``): the queue databases are a setting this test
overrides.
"""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from jobqueue.models import Job, Pause, Worker
from jobqueue.states import JobState
from tests.conftest import subprocess_env
from tests.factories import make_job
from tests.jobqueue_cli import cli, shared_database

pytestmark = pytest.mark.django_db(databases=["default", "queues2"])

TWO = {"bulk": ["default", "queues2"]}


@pytest.fixture(autouse=True)
def two_databases():
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": TWO}):
        yield


def run(*args: str):
    return cli(*args, in_process=True)


def twins(state: str = JobState.DEAD) -> int:
    """Make a job with one id on each database (types ``on.default``, ``on.queues2``)."""
    first = make_job(state, type="on.default", queue="bulk")
    make_job(state, using="queues2", id=first.id, type="on.queues2", queue="bulk")
    return first.id


def worker_on(alias: str) -> None:
    Worker.objects.using(alias).create(
        worker_id=f"w-{alias}",
        host=socket.gethostname(),
        pid=1,
        queues=["bulk"],
        concurrency=1,
        heartbeat_interval_s=600,
    )


def test_status_reports_every_queue_database_with_its_own_workers():
    make_job(queue="bulk")
    make_job(queue="bulk", using="queues2")
    make_job(queue="bulk", using="queues2")
    worker_on("queues2")
    result = run("status", "--json")
    assert result.returncode == 1, result.stderr  # bulk's ready job on default has no worker
    report = result.json()
    assert report["databases"] == ["default", "queues2"]
    rows = {(q["database"], q["queue"]): q for q in report["queues"]}
    assert (rows["default", "bulk"]["ready"], rows["default", "bulk"]["unserved"]) == (1, True)
    assert (rows["queues2", "bulk"]["ready"], rows["queues2", "bulk"]["unserved"]) == (2, False)
    assert [w["database"] for w in report["workers"]] == ["queues2"]
    table = run("status")
    assert "DATABASE" in table.stdout and "Unserved: bulk on default" in table.stdout
    one = run("status", "--json", "--database", "queues2")
    assert one.returncode == 0
    assert [(q["database"], q["ready"]) for q in one.json()["queues"]] == [("queues2", 2)]


def test_an_unknown_database_is_bad_usage_naming_the_queue_databases():
    result = run("status", "--database", "nowhere")
    assert result.returncode == 2
    assert "'nowhere' is not a database alias (queue databases: default, queues2)" in result.stderr


def test_jobs_lists_every_queue_database():
    make_job(queue="bulk", type="on.default")
    make_job(queue="bulk", type="on.queues2", using="queues2")
    rows = run("jobs", "--json").json()
    assert sorted((r["database"], r["type"]) for r in rows) == [
        ("default", "on.default"),
        ("queues2", "on.queues2"),
    ]


def test_show_refuses_an_id_on_two_databases_until_one_is_named():
    job_id = twins()
    refused = run("show", str(job_id))
    assert refused.returncode == 2
    assert f"{job_id} on default, queues2" in refused.stderr and "--database" in refused.stderr
    shown = run("show", str(job_id), "--json", "--database", "queues2")
    assert shown.returncode == 0 and shown.json()["type"] == "on.queues2"


def test_show_finds_an_id_on_the_one_database_that_has_it():
    job = make_job(queue="bulk", using="queues2", type="only.here", id=987654)
    shown = run("show", str(job.id), "--json")
    assert shown.returncode == 0, shown.stderr
    assert (shown.json()["type"], shown.json()["database"]) == ("only.here", "queues2")
    missing = run("show", "987653")
    assert missing.returncode == 1 and "on default, queues2" in missing.stderr


def test_retry_refuses_an_ambiguous_id_and_does_nothing():
    job_id = twins()
    refused = run("retry", str(job_id))
    assert refused.returncode == 2 and "--database" in refused.stderr
    for alias in ("default", "queues2"):
        assert Job.objects.using(alias).get(id=job_id).state == JobState.DEAD
    done = run("retry", str(job_id), "--database", "queues2")
    assert done.returncode == 0 and "Retried 1 job(s)." in done.stdout
    assert Job.objects.using("queues2").get(id=job_id).state == JobState.READY
    assert Job.objects.using("default").get(id=job_id).state == JobState.DEAD


def test_cancel_by_id_acts_where_each_id_is():
    here = make_job(queue="bulk", using="queues2", id=876543)
    there = make_job(queue="bulk", id=876542)
    done = run("cancel", str(here.id), str(there.id))
    assert done.returncode == 0, done.stderr
    assert Job.objects.using("queues2").get(id=here.id).state == JobState.CANCELLED
    assert Job.objects.using("default").get(id=there.id).state == JobState.CANCELLED


def test_retry_by_filter_covers_every_queue_database():
    twins()
    asked = run("retry", "--queue", "bulk")
    assert asked.returncode == 1 and "2 jobs match" in asked.stderr
    done = run("retry", "--queue", "bulk", "--yes")
    assert done.returncode == 0 and "Retried 2 job(s)." in done.stdout
    for alias in ("default", "queues2"):
        assert list(Job.objects.using(alias).values_list("state", flat=True)) == [JobState.READY]


def test_health_checks_every_queue_database():
    worker_on("default")
    result = run("health", "--json")
    assert result.returncode == 1  # no live worker of this host on queues2
    checks = {(c["database"], c["name"]): c["ok"] for c in result.json()["checks"]}
    assert checks["default", "workers"] is True and checks["queues2", "workers"] is False
    assert checks["default", "database"] is True and checks["queues2", "database"] is True
    assert run("health", "--database", "default").returncode == 0


def test_pause_without_a_database_pauses_every_database_of_the_queue():
    assert run("pause", "bulk", "--as", "ops").returncode == 0
    for alias in ("default", "queues2"):
        assert Pause.objects.using(alias).filter(name="bulk").exists(), alias
    assert run("resume", "bulk", "--database", "queues2").returncode == 0
    assert not Pause.objects.using("queues2").filter(name="bulk").exists()
    assert Pause.objects.using("default").filter(name="bulk").exists()


def test_prune_covers_every_queue_database_unless_one_is_named():
    long_ago = timezone.now() - timedelta(days=30)
    for alias in ("default", "queues2"):
        make_job(JobState.SUCCEEDED, queue="bulk", using=alias, finished_at=long_ago)
    named = run("prune", "--older-than", "7d", "--database", "queues2")
    assert named.returncode == 0, named.stderr
    assert not Job.objects.using("queues2").exists()
    assert Job.objects.using("default").count() == 1
    make_job(JobState.SUCCEEDED, queue="bulk", using="queues2", finished_at=long_ago)
    every = run("prune", "--older-than", "7d")
    assert every.returncode == 0, every.stderr
    assert "Queue database default:" in every.stdout and "Queue database queues2:" in every.stdout
    for alias in ("default", "queues2"):
        assert not Job.objects.using(alias).exists(), alias


@pytest.mark.django_db(transaction=True, databases=["default", "queues2"])
def test_a_queue_database_that_does_not_answer_is_named():
    env = subprocess_env(QUEUE_DATABASES=TWO)
    env["JOBQUEUE_QUEUES2_URL"] = "postgres://postgres@127.0.0.1:1/nowhere"
    result = cli("status", env=env, in_process=False)
    assert result.returncode == 1, result
    assert "the queue database 'queues2' is unreachable" in result.stderr
    assert "Traceback" not in result.stderr
    if not shared_database():
        return  # SQLite: the subprocess cannot open this test's in-memory default database
    probe = cli("health", env=env, in_process=False)
    assert probe.returncode == 1, probe
    assert "FAIL  database (queues2): unreachable" in probe.stdout
