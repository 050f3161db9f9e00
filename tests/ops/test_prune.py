"""Pruning: ``manage.py prunejobs``, ``prune_jobs`` and the ``Pruner`` service."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from jobqueue.maintenance.pruning import Pruner, count_prunable, prune_jobs
from jobqueue.models import Job
from jobqueue.states import JobState
from tests.conftest import ROOT, requires_postgres, subprocess_env
from tests.factories import make_job, make_jobs

DAY = timedelta(days=1)


def finished(state: str, age: timedelta, count: int = 1) -> list[int]:
    when = timezone.now() - age
    return [job.id for job in make_jobs(count, state, finished_at=when)]


def remaining() -> set[int]:
    return set(Job.objects.values_list("id", flat=True))


def prune(*args: str) -> str:
    out = StringIO()
    call_command("prunejobs", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def history():
    """Finished jobs of every kind, old and young, and live jobs that are old too."""
    return {
        "old_ok": finished(JobState.SUCCEEDED, 8 * DAY, 3),
        "young_ok": finished(JobState.SUCCEEDED, 6 * DAY),
        "old_cancelled": finished(JobState.CANCELLED, 8 * DAY),
        "old_dead": finished(JobState.DEAD, 8 * DAY),
        "ancient_dead": finished(JobState.DEAD, 31 * DAY),
        "live": [
            make_job(s, created_at=timezone.now() - 60 * DAY).id
            for s in (JobState.READY, JobState.SCHEDULED, JobState.LEASED)
        ],
    }


# -- the command -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_older_than_deletes_succeeded_and_cancelled_by_default(history):
    out = prune("--older-than", "7d")
    assert "Deleted 4 succeeded/cancelled job(s) finished more than 1w ago." in out
    gone = set(history["old_ok"] + history["old_cancelled"])
    assert remaining() & gone == set()
    kept = history["young_ok"] + history["old_dead"] + history["ancient_dead"] + history["live"]
    assert set(kept) <= remaining()


@pytest.mark.django_db
def test_state_option_picks_the_states(history):
    out = prune("--older-than", "1d12h", "--state", "dead")
    assert "Deleted 2 dead job(s) finished more than 36h ago." in out
    assert remaining() & set(history["old_dead"] + history["ancient_dead"]) == set()
    assert set(history["old_ok"]) <= remaining()


@pytest.mark.django_db
def test_dry_run_counts_and_deletes_nothing(history):
    before = remaining()
    out = prune("--older-than", "7d", "--state", "succeeded,dead", "--dry-run")
    assert "Would delete 5 succeeded/dead job(s) finished more than 1w ago." in out
    assert remaining() == before


@pytest.mark.django_db
def test_without_older_than_each_state_keeps_its_retention(history):
    out = prune()
    # Defaults: succeeded and cancelled 7 days, dead 30 days.
    assert "Deleted 3 succeeded job(s) finished more than 1w ago." in out
    assert "Deleted 1 cancelled job(s)" in out
    assert "Deleted 1 dead job(s) finished more than 30d ago." in out
    assert "Deleted 5 job(s) in all." in out
    assert set(history["old_dead"] + history["young_ok"] + history["live"]) <= remaining()
    with override_settings(JOBQUEUE={"RETENTION": {"dead": 0, "succeeded": None}}):
        out = prune("--state", "succeeded,dead")
    assert "succeeded" not in out
    assert "Deleted 1 dead job(s) finished more than 0s ago." in out
    assert set(history["young_ok"]) <= remaining()


@pytest.mark.django_db
def test_deletes_in_bounded_batches(history):
    out = StringIO()
    call_command("prunejobs", "--older-than", "0s", "--batch-size", "2", "-v", "2", stdout=out)
    batches = [line for line in out.getvalue().splitlines() if "batch:" in line]
    assert batches == ["  batch: 2 deleted", "  batch: 2 deleted", "  batch: 1 deleted"]
    assert remaining() == set(history["old_dead"] + history["ancient_dead"] + history["live"])


BAD_ARGS = [
    (["--older-than", "abc"], "expected a duration like 7d, 12h, 30m, 90s or 1d12h, got 'abc'"),
    (["--older-than", "7"], "got '7'"),
    (["--older-than=-1d"], "got '-1d'"),
    (["--older-than", "7x"], "got '7x'"),
    (["--older-than", ""], "got ''"),
    (["--older-than", "1d-2h"], "got '1d-2h'"),
    (["--older-than", "600w"], "expected 0..315360000 seconds, got '600w'"),
    (["--state", "ready"], "can prune only succeeded, cancelled, dead jobs, got 'ready'"),
    (["--state", "succeeded,,dead"], "got 'succeeded,,dead'"),
    (["--batch-size", "0"], "expected 1..10000 rows (the range of PRUNE_BATCH_SIZE), got '0'"),
    (["--batch-size", "10001"], "got '10001'"),
]


@pytest.mark.parametrize(("argv", "words"), BAD_ARGS)
def test_bad_arguments_are_a_usage_error_naming_the_value(argv, words):
    with pytest.raises(CommandError) as excinfo:
        call_command("prunejobs", *argv)
    assert words in str(excinfo.value)


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize(("argv", "words"), BAD_ARGS[:2] + BAD_ARGS[7:8])
def test_bad_arguments_exit_2_from_the_shell(argv, words):
    proc = subprocess.run(
        [sys.executable, "-m", "django", "prunejobs", *argv],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the functions and the service -----------------------------------------------------------


@pytest.mark.django_db
def test_prune_jobs_refuses_live_states_and_bad_numbers():
    with pytest.raises(ValueError, match="can prune only finished states"):
        prune_jobs(["succeeded", "ready"], 0)
    with pytest.raises(ValueError, match="can prune only finished states"):
        count_prunable([], 0)
    with pytest.raises(ValueError, match="older_than_s must be >= 0"):
        prune_jobs(["succeeded"], -1)
    with pytest.raises(ValueError, match=r"batch_size must be an integer in 1\.\.10000 rows"):
        prune_jobs(["succeeded"], 0, batch_size=0)
    with pytest.raises(ValueError, match="got 10001"):
        prune_jobs(["succeeded"], 0, batch_size=10_001)


@pytest.mark.django_db
def test_pruner_is_a_worker_service_that_applies_retention(history):
    pruner = Pruner(interval_s=30, batch_size=2, max_batches=1)
    assert (pruner.name, pruner.interval_s) == ("pruner", 30)
    assert callable(pruner.run_once)
    # One batch of two per state per run: a backlog is worked off over several runs.
    assert pruner.run_once() == {"succeeded": 2, "cancelled": 1, "dead": 1}
    assert pruner.run_once() == {"succeeded": 1, "cancelled": 0, "dead": 0}
    assert pruner.run_once() == {"succeeded": 0, "cancelled": 0, "dead": 0}
    assert set(history["young_ok"] + history["old_dead"] + history["live"]) <= remaining()
    with override_settings(JOBQUEUE={"RETENTION": {"succeeded": 0, "cancelled": None}}):
        assert Pruner().run_once() == {"succeeded": 1, "dead": 0}
    assert Pruner(retention={"dead": 0}).run_once() == {"dead": 1}


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_several_pruners_at_once_share_the_rows_without_waiting():
    ids = finished(JobState.SUCCEEDED, 2 * DAY, 2000)
    totals: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            totals.append(prune_jobs(["succeeded"], 86400, batch_size=50))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sum(totals) == len(ids)
    assert not Job.objects.exists()


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_a_row_locked_by_someone_else_is_skipped_not_waited_on():
    from tests.client.test_enqueue import InThread

    locked, *_ = finished(JobState.SUCCEEDED, 2 * DAY, 5)
    with transaction.atomic():
        Job.objects.select_for_update().get(id=locked)
        pruner = InThread(lambda: prune_jobs(["succeeded"], 86400, batch_size=2))
        assert pruner.join(timeout=60) == 4
    assert remaining() == {locked}


# -- FIELD-CASE 31: a backlog, pruned by two pruners at once ---------------------------------

EXPIRED, YOUNG, OLD_DEAD = 20_000, 5_000, 200  # the case's 100,000 / 25,000 / 2,000, sized down
CASE_31_RETENTION = {"succeeded": 3600, "cancelled": 3600, "dead": 30 * 86400}


def insert_finished(n: int, state: str, age: timedelta, tag: str) -> None:
    """Insert ``n`` finished rows in one statement, each with ~2 KB of incompressible result text
    and, for a fifth of them, a dedupe key (``<tag>:<i>``)."""
    template = make_job(state, finished_at=timezone.now() - age, dedupe_key=f"{tag}:template")
    columns = [
        f.column
        for f in Job._meta.concrete_fields
        if f.column not in ("id", "result", "dedupe_key")
    ]
    listed = ", ".join(columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO jobqueue_job ({listed}, result, dedupe_key) "
            # g makes the subquery run per row (random text, incompressible).
            f"SELECT {listed}, jsonb_build_object('blob', (SELECT string_agg(md5(random()::text "
            "|| i || g), '') FROM generate_series(1, 64) AS i)), "
            "CASE WHEN g %% 5 = 0 THEN %s || ':' || g END "
            "FROM jobqueue_job, generate_series(1, %s) AS g WHERE id = %s",
            [tag, n - 1, template.id],
        )


@requires_postgres()
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_field_case_31_a_backlog_pruned_by_the_worker_pruner_and_prunejobs_at_once():
    import tracemalloc

    from jobqueue.store.sqltext import sql

    insert_finished(EXPIRED, JobState.SUCCEEDED, timedelta(hours=2), "old")
    insert_finished(YOUNG, JobState.SUCCEEDED, timedelta(minutes=10), "young")
    insert_finished(OLD_DEAD, JobState.DEAD, 10 * DAY, "dead")
    live = [make_job(s).id for s in (JobState.READY, JobState.SCHEDULED, JobState.LEASED)]
    kept = set(
        Job.objects.exclude(
            state=JobState.SUCCEEDED, finished_at__lt=timezone.now() - timedelta(hours=1)
        ).values_list("id", flat=True)
    )
    assert len(kept) == YOUNG + OLD_DEAD + len(live)
    # A finished job holds no dedupe key: an enqueue with an expired row's key makes a new job.
    import jobqueue

    before = jobqueue.enqueue("default", "tests.testapp.jobs.noop", dedupe_key="old:5")
    assert Job.objects.filter(dedupe_key="old:5").count() == 2
    kept.add(before)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        params = {"states": ["succeeded"], "older_than_s": 3600.0, "limit": 1000, "now": None}
        cursor.execute("EXPLAIN " + sql("prune"), params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan
    assert "jobqueue_job_finished" in plan, plan
    # --dry-run reports and deletes nothing.
    out = prune("--dry-run", "--older-than", "1h", "--state", "succeeded")
    assert f"Would delete {EXPIRED} succeeded job(s)" in out
    assert Job.objects.count() == EXPIRED + len(kept)

    command = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "django",
            "prunejobs",
            "--older-than",
            "1h",
            "--state",
            "succeeded",
            "--batch-size",
            "500",
        ],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pruner = Pruner(retention=CASE_31_RETENTION, batch_size=500, max_batches=4)
    by_worker = 0
    tracemalloc.start()
    try:
        while True:
            deleted = pruner.run_once()
            assert deleted["dead"] == 0
            by_worker += deleted["succeeded"]
            if deleted["succeeded"] == 0 and command.poll() is not None:
                break
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = command.communicate(timeout=300)
    assert command.returncode == 0, err
    assert "deadlock" not in err.lower()
    by_command = int(re.search(r"Deleted (\d+) succeeded", out).group(1))
    # Exactly the expired rows went, each once, shared between the two.
    assert by_worker + by_command == EXPIRED, (by_worker, by_command)
    assert set(Job.objects.values_list("id", flat=True)) == kept
    # No rows became model instances: 500-row batches of 2 KB results would be megabytes.
    assert peak < 2 * 1024 * 1024, peak
    after = jobqueue.enqueue("default", "tests.testapp.jobs.noop", dedupe_key="old:10")
    assert after not in kept and Job.objects.filter(dedupe_key="old:10").count() == 1
