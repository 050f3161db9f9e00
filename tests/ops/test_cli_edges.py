"""Issue 31 "The CLI": its rough edges, and the verbs for cron entries, workers, breakers, run-now.

Each test runs ``manage.py jobqueue`` as an operator would (a real process where the test
database can be shared, ``tests/jobqueue_cli.py``) and checks what it says and its exit status.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.conf import settings
from django.utils import timezone

import jobqueue
from jobqueue.errors import InvalidPayload
from jobqueue.limits.breakers import open_breaker
from jobqueue.models import CronEntry, DependencyBreaker, Job, Worker
from jobqueue.states import JobState
from tests.conftest import ROOT, requires_postgres, subprocess_env
from tests.factories import make_job, make_jobs
from tests.jobqueue_cli import cli
from tests.testapp import jobs

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.jobs.noop"


@requires_postgres()
def test_status_on_an_unmigrated_database_says_run_migrate():
    db = settings.DATABASES["default"]
    name = f"jq_unmigrated_{uuid.uuid4().hex[:8]}"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    admin_url = f"postgresql://{db.get('USER') or 'postgres'}@{host}:{port}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        env = subprocess_env()
        env["DATABASE_URL"] = f"postgres://{db.get('USER') or 'postgres'}@{host}:{port}/{name}"
        done = cli("--skip-checks", "status", env=env, in_process=False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert done.returncode == 1
    # The one classification of database failures names it (store/failures.py), as runworkers,
    # health and the raised DatabaseNotMigrated do.
    assert "is not migrated (run manage.py migrate)" in done.stderr
    assert "unreachable" not in done.stderr


def test_status_on_an_unmigrated_sqlite_database_says_run_migrate(tmp_path):
    # The demo's database: a newcomer who skipped migrate was told it was unreachable.
    env = subprocess_env()
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    done = cli("--skip-checks", "status", env=env, in_process=False)
    assert done.returncode == 1
    assert "is not migrated (run manage.py migrate)" in done.stderr
    assert "unreachable" not in done.stderr


def test_django_options_are_accepted_after_the_verb():
    done = cli("status", "--settings", "tests.settings", "--skip-checks", "-v", "0")
    assert done.returncode == 0, done.stderr
    assert "Workers alive" in done.stdout


@requires_postgres()
def test_output_cut_short_by_a_closed_pipe_ends_without_a_traceback():
    """``jobqueue status | head -3``: the reader stops; the command ends quietly (141)."""
    for n in range(300):
        make_job(queue=f"q{n:03d}")
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # smaller than the output: writes block
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "jobqueue", "status", "--all", "--skip-checks"],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=write,
        stderr=subprocess.PIPE,
    )
    os.close(write)
    with os.fdopen(read, "rb") as out:
        assert out.readline().startswith(b"QUEUE")
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_prune_help_names_the_command_typed():
    done = cli("prune", "--help", in_process=False)  # argparse prints help to sys.stdout
    assert done.returncode == 0
    assert "jobqueue prune [-h]" in done.stdout
    assert "prunejobs [-h]" not in done.stdout


def test_pause_help_says_nothing_about_job_ids():
    done = cli("pause", "--help", in_process=False)
    assert done.returncode == 0
    assert "job ids" not in done.stdout
    assert "every database the queue" in done.stdout


def test_an_unexpected_argument_is_named_beside_the_missing_one():
    with pytest.raises(InvalidPayload) as caught:
        jobs.add.enqueue(a=1, c=2)
    said = str(caught.value)
    assert "unexpected argument(s) 'c'" in said
    assert "missing required argument(s) 'b'" in said


def test_cron_verbs_list_disable_enable_and_run_now():
    jobqueue.schedule("nightly", "0 3 * * *", "q", NOOP, payload={})
    listed = cli("cron")
    assert listed.returncode == 0, listed.stderr
    assert "nightly" in listed.stdout and "never" in listed.stdout
    assert cli("cron", "disable", "nightly").returncode == 0
    assert not CronEntry.objects.get(name="nightly").enabled
    again = cli("cron", "disable", "nightly")
    assert "already disabled" in again.stdout
    assert cli("cron", "enable", "nightly").returncode == 0
    assert CronEntry.objects.get(name="nightly").enabled
    ran = cli("cron", "run", "nightly")
    assert ran.returncode == 0, ran.stderr
    assert Job.objects.filter(type=NOOP, queue="q").count() == 1
    assert [row["name"] for row in cli("cron", "--json").json()] == ["nightly"]
    missing = cli("cron", "run", "nope")
    assert missing.returncode == 1
    assert "manage.py jobqueue cron lists them" in missing.stderr
    unnamed = cli("cron", "enable")
    assert unnamed.returncode == 2 and "NAME" in unnamed.stderr


def test_workers_verb_lists_live_workers():
    Worker.objects.create(
        worker_id="w-cli", host="h1", pid=42, queues=["q"], concurrency=4, heartbeat_interval_s=600
    )
    Worker.objects.create(
        worker_id="w-gone",
        host="h1",
        pid=43,
        queues=["q"],
        concurrency=4,
        heartbeat_interval_s=1,
        last_seen_at=timezone.now() - timedelta(hours=1),
    )
    listed = cli("workers")
    assert listed.returncode == 0, listed.stderr
    assert "w-cli" in listed.stdout and "w-gone" not in listed.stdout
    assert [w["worker_id"] for w in cli("workers", "--json").json()] == ["w-cli"]


def test_breakers_verb_lists_opens_and_closes():
    open_breaker("partner", 60, reason="test")
    listed = cli("breakers")
    assert listed.returncode == 0, listed.stderr
    assert "partner" in listed.stdout and "open" in listed.stdout
    assert cli("breakers", "close", "partner").returncode == 0
    assert DependencyBreaker.objects.get(name="partner").state == "closed"
    assert cli("breakers", "open", "billing", "--seconds", "30").returncode == 0
    assert DependencyBreaker.objects.get(name="billing").state == "open"


def test_run_now_makes_a_delayed_job_ready_and_skips_the_rest():
    later = make_job(JobState.SCHEDULED, run_at=timezone.now() + timedelta(hours=1))
    [ready] = make_jobs(1)
    done = cli("run-now", str(later.id), str(ready.id), "999999")
    assert done.returncode == 1
    assert "Made 1 job(s) ready now." in done.stdout
    assert f"skipped {ready.id}" in done.stdout and "not found: 999999" in done.stdout
    later.refresh_from_db()
    assert later.run_at <= timezone.now()
