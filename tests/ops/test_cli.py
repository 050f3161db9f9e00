"""``manage.py jobqueue``: status, jobs, show, retry, cancel, prune, as an operator runs them.

Each test builds known rows, runs the command as a real process against the test database and
asserts its exit status, its table or its JSON, and what changed in the database. On SQLite the
test database lives in memory, which no other process can open, so there the same tests run the
command in this process (``call_command``), with the same assertions; usage errors always run as
processes (they fail before touching the database).
"""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from jobqueue.models import Job, Worker
from jobqueue.states import JobState
from tests.conftest import requires_postgres
from tests.factories import make_job
from tests.jobqueue_cli import cli

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def ago(**kwargs: float):
    return timezone.now() - timedelta(**kwargs)


@pytest.fixture
def fleet():
    """Two queues: `emails`, served by a live worker, and `emial` (a typo) that nobody serves."""
    jobs = {
        "old": make_job(queue="emails", run_at=ago(minutes=10)),
        "new": make_job(queue="emails", run_at=ago(minutes=1), tenant_id="acme"),
        "later": make_job(JobState.SCHEDULED, queue="emails", run_at=ago(minutes=-60)),
        "running": make_job(JobState.LEASED, queue="emails"),
        "dead1": make_job(JobState.DEAD, queue="emails", type="shop.jobs.charge", attempts=2),
        "dead2": make_job(JobState.DEAD, queue="emails", type="shop.jobs.charge", attempts=1),
        "typo": make_job(queue="emial", run_at=ago(minutes=20)),
        "cancelled": make_job(JobState.CANCELLED, queue="emails"),
        # Waiting for parent jobs (after=[...]): counted, in their own column.
        "child": make_job(JobState.WAITING, queue="emails"),
        "report": make_job(JobState.WAITING, queue="reports"),
    }
    for minutes in (1, 2, 3):
        make_job(JobState.SUCCEEDED, queue="emails", finished_at=ago(minutes=minutes))
    make_job(JobState.SUCCEEDED, queue="emails", finished_at=ago(minutes=30))
    Worker.objects.create(
        worker_id="live",
        host=socket.gethostname(),
        pid=1,
        queues=["emails"],
        concurrency=4,
        heartbeat_interval_s=600,  # alive for 30 min: the CLI may take long to start here
    )
    # Its heartbeat stopped an hour ago: it serves nothing.
    Worker.objects.create(
        worker_id="gone",
        host="elsewhere",
        pid=2,
        queues=["emial"],
        concurrency=4,
        heartbeat_interval_s=600,
        last_seen_at=ago(hours=1),
    )
    return jobs


def test_status_json_counts_each_queue_and_flags_the_unserved_one(fleet):
    result = cli("status", "--json")
    assert result.returncode == 1, result  # a queue with ready jobs has no live worker
    data = result.json()
    queues = {q["queue"]: q for q in data["queues"]}
    emails, typo = queues["emails"], queues["emial"]
    assert (emails["ready"], emails["scheduled"], emails["leased"], emails["dead"]) == (2, 1, 1, 2)
    assert emails["waiting"] == 1
    # A queue holding only waiting jobs is listed; they are not ready, so it is not unserved.
    assert queues["reports"]["waiting"] == 1 and queues["reports"]["ready"] == 0
    assert queues["reports"]["unserved"] is False
    assert emails["succeeded_5m"] == 3
    assert emails["workers"] == 1 and emails["unserved"] is False
    # Lag: the oldest due job, 10 minutes; the job scheduled an hour ahead does not count.
    assert 600 <= emails["lag_seconds"] < 3600
    assert typo["ready"] == 1 and typo["workers"] == 0 and typo["unserved"] is True
    assert typo["waiting_seconds"] >= 1200
    assert data["unserved"] == ["emial"]
    assert data["workers_alive"] == 1
    assert data["breakers_open"] == []


def test_status_table_reads_in_a_terminal(fleet):
    result = cli("status")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "QUEUE",
        "READY",
        "SCHEDULED",
        "LEASED",
        "DEAD",
        "WAITING",
        "LAG",
        "OK/MIN",
        "WORKERS",
    ]
    emails = next(line for line in lines if line.startswith("emails"))
    assert emails.split()[:6] == ["emails", "2", "1", "1", "2", "1"]
    reports = next(line for line in lines if line.startswith("reports"))
    assert reports.split()[:6] == ["reports", "0", "0", "0", "0", "1"]
    typo = next(line for line in lines if line.startswith("emial"))
    assert "unserved, waiting" in typo and "min" in typo
    assert "Workers alive: 1" in result.stdout
    assert "Unserved: emial" in result.stdout


def test_status_exits_0_when_every_queue_with_ready_jobs_is_served(fleet):
    Worker.objects.filter(worker_id="gone").update(last_seen_at=timezone.now())
    result = cli("status", "--json")
    assert result.returncode == 0, result
    assert result.json()["unserved"] == []


def test_jobs_filters_and_limits(fleet):
    result = cli("jobs", "--queue", "emails", "--state", "ready", "--json")
    assert result.returncode == 0, result
    assert [r["id"] for r in result.json()] == [fleet["new"].id, fleet["old"].id]
    dead = cli("jobs", "--type", "shop.jobs.charge", "--limit", "1", "--json").json()
    assert [r["id"] for r in dead] == [fleet["dead2"].id]
    assert dead[0]["state"] == "dead" and dead[0]["last_error"] == "ConnectionError: boom"
    tenant = cli("jobs", "--tenant", "acme", "--json").json()
    assert [r["id"] for r in tenant] == [fleet["new"].id]
    scheduled = cli("jobs", "--state", "scheduled", "--json").json()
    assert [r["id"] for r in scheduled] == [fleet["later"].id]


def test_jobs_table_and_empty_result(fleet):
    result = cli("jobs", "--queue", "emial")
    assert result.returncode == 0
    header, row = result.stdout.splitlines()
    assert header.split()[:5] == ["ID", "QUEUE", "TYPE", "STATE", "TENANT"]
    assert row.split()[:4] == [str(fleet["typo"].id), "emial", "tests.testapp.jobs.noop", "ready"]
    assert cli("jobs", "--queue", "nothing-here").stdout.strip() == "No jobs match."


def test_show_prints_the_error_history(fleet):
    dead = fleet["dead1"]
    result = cli("show", str(dead.id))
    assert result.returncode == 0, result
    assert "id" in result.stdout and str(dead.id) in result.stdout
    assert "History (2 entries):" in result.stdout
    assert result.stdout.count("ConnectionError: boom") >= 2
    data = cli("show", str(dead.id), "--json").json()
    assert data["state"] == "dead" and data["dead_reason"] == "attempts_exhausted"
    assert [e["attempt"] for e in data["errors"]] == [1, 2]


def test_show_of_a_missing_job_exits_1(fleet):
    result = cli("show", "999999999")
    assert result.returncode == 1
    assert "No job with id 999999999" in result.stderr


def test_retry_by_id_prints_the_count_and_reports_the_rest(fleet):
    dead = fleet["dead1"]
    result = cli("retry", str(dead.id), str(fleet["old"].id))
    assert result.returncode == 0, result
    assert "Retried 1 job(s)." in result.stdout
    assert f"skipped {fleet['old'].id}: ready" in result.stdout
    dead.refresh_from_db()
    assert (dead.state, dead.attempts) == (JobState.READY, 0)
    missing = cli("retry", "999999999")
    assert missing.returncode == 1 and "not found: 999999999" in missing.stdout


def test_retry_by_filter_needs_yes_for_more_than_one(fleet):
    refused = cli("retry", "--type", "shop.jobs.charge")
    assert refused.returncode == 1
    assert "2 jobs match; nothing done. Add --yes" in refused.stderr
    assert Job.objects.filter(state=JobState.DEAD).count() == 2
    result = cli("retry", "--type", "shop.jobs.charge", "--yes", "--json")
    assert result.returncode == 0, result
    assert result.json()["done"] == 2
    assert Job.objects.filter(state=JobState.DEAD).count() == 0


def test_cancel_by_filter_and_by_id(fleet):
    # One match: no --yes needed.
    result = cli("cancel", "--queue", "emial")
    assert result.returncode == 0, result
    assert "Cancelled 1 job(s)." in result.stdout
    assert Job.objects.get(id=fleet["typo"].id).state == JobState.CANCELLED
    # A running job gets a cancel request; a finished one is skipped.
    result = cli("cancel", str(fleet["running"].id), str(fleet["cancelled"].id))
    assert result.returncode == 0, result
    assert "Cancelled 1 job(s)." in result.stdout
    assert f"skipped {fleet['cancelled'].id}" in result.stdout
    assert Job.objects.get(id=fleet["running"].id).cancel_requested_at is not None


def test_prune_delegates_to_prunejobs(fleet):
    Job.objects.filter(state=JobState.SUCCEEDED).update(finished_at=ago(days=30))
    dry = cli("prune", "--older-than", "7d", "--dry-run")
    assert dry.returncode == 0, dry
    assert "Would delete 4 succeeded/cancelled job(s) finished more than 1w ago." in dry.stdout
    assert Job.objects.filter(state=JobState.SUCCEEDED).count() == 4
    done = cli("prune", "--older-than", "7d", "--state", "succeeded")
    assert "Deleted 4 succeeded job(s)" in done.stdout
    assert Job.objects.filter(state=JobState.SUCCEEDED).count() == 0


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["jobs", "--state", "done"], ["argument --state", "'done'", "succeeded"]),
        (["jobs", "--limit", "-1"], ["argument --limit", "'-1'"]),
        (["jobs", "--limit", "x"], ["argument --limit", "'x'"]),
        (["show", "abc"], ["argument id", "'abc'"]),
        (["show", "0"], ["argument id", "'0'"]),
        (["retry", "1x"], ["argument ID", "'1x'"]),
        (["retry", "--state", "ready"], ["argument --state", "dead", "cancelled"]),
        (["health", "--max-silence", "0"], ["argument --max-silence", "'0'"]),
        (["health", "--cron-max-delay", "nan"], ["argument --cron-max-delay", "'nan'"]),
        (["frobnicate"], ["invalid choice", "'frobnicate'"]),
        # Bytes that are not UTF-8 (the shell's $'\xff') reach Python as a lone surrogate: a
        # usage error naming the value, for every flag taking text (issue 33: a traceback).
        (["jobs", "--queue", "\udcff"], ["argument --queue", "'\\udcff'"]),
        (["jobs", "--type", "a\udcffb"], ["argument --type", "'a\\udcffb'"]),
        (["status", "--database", "\udcff"], ["argument --database", "'\\udcff'"]),
        (["cancel", "--tenant", "\udcff"], ["argument --tenant", "'\\udcff'"]),
        (["pause", "\udcff"], ["argument QUEUE", "'\\udcff'"]),
        (["retry", "1", "--as", "\udcff"], ["argument --as", "'\\udcff'"]),
        (["health", "--host", "\udcff"], ["argument --host", "'\\udcff'"]),
        ([], ["VERB"]),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, list) and v and isinstance(v[0], str) else None,
)
def test_bad_usage_exits_2_naming_the_flag(argv, words):
    result = cli(*argv, in_process=False)
    assert result.returncode == 2, result
    for word in words:
        assert word in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_retry_without_ids_or_filters_is_bad_usage():
    result = cli("retry", "--json", in_process=False)
    assert result.returncode == 2
    assert "name the jobs to retry" in result.stderr
    both = cli("cancel", "5", "--queue", "x", in_process=False)
    assert both.returncode == 2 and "not both" in both.stderr


def test_status_shows_a_worker_whose_listener_is_down(fleet):
    Worker.objects.filter(worker_id="live").update(listener_up=False)
    result = cli("status")
    assert "Listener down (polling every second): live" in result.stdout
    data = cli("status", "--json").json()
    assert [w["listener_up"] for w in data["workers"]] == [False]


@requires_postgres()  # the ORM store cancels row by row, in one transaction
def test_cancel_of_many_jobs_takes_a_bounded_number_of_statements():
    """``jobqueue cancel`` goes a thousand ids per statement, as retry does (issue 33).

    20,000 cancels took 21 s, one statement each, where retry of 20,000 took 2 s.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobqueue.ops import actions

    ids = [make_job(queue="bulk").id for _ in range(30)]
    running = make_job(JobState.LEASED, queue="bulk").id
    done = make_job(JobState.SUCCEEDED, queue="bulk").id
    few = [*ids[:2], running, done, 10**12]
    with CaptureQueriesContext(connection) as small:
        outcome = actions.cancel(few)
    assert sorted(outcome.done) == sorted([*ids[:2], running])
    assert list(outcome.skipped) == [done] and outcome.missing == [10**12]
    with CaptureQueriesContext(connection) as large:
        outcome = actions.cancel(ids[2:])
    assert sorted(outcome.done) == sorted(ids[2:])
    # One statement per thousand ids, and one look-up of the ids it left: not one per job.
    assert len(small.captured_queries) == 2
    assert len(large.captured_queries) <= 2
    assert Job.objects.filter(id__in=ids, state=JobState.CANCELLED).count() == 30
    assert Job.objects.get(id=running).cancel_requested_at is not None
    assert [e["kind"] for e in Job.objects.get(id=ids[5]).errors] == ["operator_cancel"]
