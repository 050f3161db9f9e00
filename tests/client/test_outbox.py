"""The transactional outbox (issue 16 part 3): enqueue inside a transaction on another database.

The queue lives on ``outbox_queue`` (a second PostgreSQL test database); the caller's transaction
is on ``default``. A job enqueued there goes to default's outbox and commits or rolls back with
the caller's rows; the relay moves it to the queue database once, however it is interrupted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings

import jobqueue
from jobqueue import metrics
from jobqueue.checks import check_outbox_databases
from jobqueue.errors import InvalidJobOption, JobQueueConfigurationError
from jobqueue.maintenance.relay import RELAY_BATCH, OutboxRelay, relay_batch
from jobqueue.models import Job, OutboxEntry
from jobqueue.ops.outbox import lag_check
from jobqueue.settings.conf import build_settings
from jobqueue.store import bounded, get_store
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    ROOT,
    database_url,
    record_lines,
    requires_postgres,
    subprocess_env,
    wait_for,
)

pytestmark = [
    requires_postgres(),
    pytest.mark.django_db(databases=["default", "outbox_queue"], transaction=True),
]

QUEUE_DB = "outbox_queue"
TYPE = "tests.testapp.jobs.record"


def queue_jobs():
    return Job.objects.using(QUEUE_DB)


def outbox_rows():
    return OutboxEntry.objects.using("default")


def relay_all() -> int:
    relayed = 0
    while count := relay_batch("default", QUEUE_DB)[0]:
        relayed += count
    return relayed


def env_for_subprocess(**jobqueue_settings: object) -> dict[str, str]:
    env = subprocess_env("default", **jobqueue_settings)
    env["JOBQUEUE_OUTBOX_QUEUE_URL"] = database_url(QUEUE_DB)
    return env


def test_rollback_leaves_no_job():
    with pytest.raises(RuntimeError), transaction.atomic():
        jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
        assert outbox_rows().count() == 1
        raise RuntimeError("the order fails")
    assert outbox_rows().count() == 0
    assert relay_all() == 0
    assert queue_jobs().count() == 0


def test_commit_leaves_an_outbox_row_that_the_relay_makes_the_job():
    with transaction.atomic():
        job_id = jobqueue.enqueue(
            "emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB, delay=3600, priority=5
        )
    # Not on the queue database yet: it waits in the caller's database.
    assert not queue_jobs().filter(id=job_id).exists()
    row = outbox_rows().get()
    assert (row.target, row.job_id) == (QUEUE_DB, job_id)

    assert relay_all() == 1
    job = queue_jobs().get(id=job_id)
    assert (job.queue, job.type, job.payload, job.priority) == (
        "emails",
        TYPE,
        {"path": "/dev/null"},
        5,
    )
    # The delay counts from the enqueue (the outbox row), not from the relay.
    assert job.state == "scheduled"
    assert abs(job.run_at - (row.created_at + timedelta(seconds=3600))) < timedelta(seconds=1)
    assert outbox_rows().count() == 0


def test_a_relayed_job_keeps_every_option_of_its_enqueue():
    """The relay writes what enqueue was given: tenant, keys and the concurrency limit too."""
    with transaction.atomic():
        job_id = jobqueue.enqueue(
            "emails",
            TYPE,
            {"path": "/dev/null"},
            using=QUEUE_DB,
            tenant_id="acme",
            ordering_key="order:7",
            concurrency_key="smtp",
            concurrency_limit=2,
            max_attempts=3,
            timeout_s=12,
        )
    assert relay_all() == 1
    job = queue_jobs().get(id=job_id)
    assert (job.tenant_id, job.ordering_key, job.concurrency_key, job.concurrency_limit) == (
        "acme",
        "order:7",
        "smtp",
        2,
    )
    assert (job.max_attempts, job.timeout_s) == (3, 12)


def test_outside_an_atomic_block_enqueue_writes_to_the_queue_database():
    job_id = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
    assert queue_jobs().filter(id=job_id).exists()
    assert outbox_rows().count() == 0


def test_a_block_open_on_the_queue_database_is_joined_directly():
    with transaction.atomic(), transaction.atomic(using=QUEUE_DB):
        job_id = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
    assert queue_jobs().filter(id=job_id).exists()
    assert outbox_rows().count() == 0


def test_the_queue_databases_setting_routes_a_queue_through_the_outbox():
    with override_settings(JOBQUEUE={"QUEUE_DATABASES": {"emails": QUEUE_DB}}):
        with transaction.atomic():
            job_id = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"})
            other = jobqueue.enqueue("other", TYPE, {"path": "/dev/null"})
    assert outbox_rows().get().job_id == job_id
    # "other" maps to default (no entry, no "*"), where the block is open: joined directly.
    assert Job.objects.using("default").filter(id=other).exists()


def test_an_alias_left_out_of_outbox_databases_enqueues_directly():
    with override_settings(JOBQUEUE={"OUTBOX_DATABASES": []}):
        with transaction.atomic():
            job_id = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
            # Written on the queue database in autocommit: not part of this transaction.
            assert queue_jobs().filter(id=job_id).exists()
    assert outbox_rows().count() == 0


def test_blocks_open_on_two_outbox_databases_are_refused():
    settings = {"OUTBOX_DATABASES": ["default", QUEUE_DB]}
    with (
        override_settings(JOBQUEUE=settings),
        transaction.atomic(),
        transaction.atomic(using=QUEUE_DB),
    ):
        with pytest.raises(InvalidJobOption, match="atomic blocks are open on default, outbox"):
            jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using="sqlite")
    assert outbox_rows().count() == 0


def test_a_held_dedupe_key_makes_the_relay_insert_nothing():
    held = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB, dedupe_key="k")
    with transaction.atomic():
        jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB, dedupe_key="k")
    assert relay_batch("default", QUEUE_DB) == (1, 0)
    assert list(queue_jobs().values_list("id", flat=True)) == [held]
    assert outbox_rows().count() == 0


def test_outbox_gauges_count_the_waiting_rows_and_the_oldest_age():
    with transaction.atomic():
        for _ in range(3):
            jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
    (gauge,) = get_store("default").outbox_gauges([QUEUE_DB], cap=2)
    assert (gauge.target, gauge.waiting) == (QUEUE_DB, 2)
    assert gauge.oldest_age_s is not None and gauge.oldest_age_s >= 0
    relay_all()
    (gauge,) = get_store("default").outbox_gauges([QUEUE_DB])
    assert (gauge.waiting, gauge.oldest_age_s) == (0, None)


def enqueue_many_through_the_outbox(n: int) -> list[int]:
    with transaction.atomic():
        return [
            jobqueue.enqueue("emails", TYPE, {"path": "/dev/null", "n": i}, using=QUEUE_DB)
            for i in range(n)
        ]


@pytest.mark.parametrize("point", ["relay_taken", "relay_inserted", "relay_deleted"])
def test_a_relay_that_fails_at_any_step_makes_each_job_once(point):
    ids = enqueue_many_through_the_outbox(RELAY_BATCH + 100)
    calls = []

    def crash(alias: str) -> None:
        calls.append(alias)
        raise RuntimeError(f"crash at {point}")

    bounded.HOOKS[point] = crash
    try:
        with pytest.raises(RuntimeError):
            relay_batch("default", QUEUE_DB)
    finally:
        del bounded.HOOKS[point]
    assert calls == ["default"]
    # The failed batch rolled back on the outbox side: every row is still there.
    assert outbox_rows().count() == len(ids)
    relay_all()
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(ids)
    assert outbox_rows().count() == 0


RELAY_SCRIPT = """
import os, signal, sys
import django
django.setup()
from jobqueue.maintenance.relay import relay_batch
from jobqueue.store import bounded
point, nth = sys.argv[1], int(sys.argv[2])
seen = []
def kill(alias):
    seen.append(alias)
    if len(seen) == nth:
        os.kill(os.getpid(), signal.SIGKILL)
bounded.HOOKS[point] = kill
while relay_batch("default", "outbox_queue")[0]:
    pass
print("relayed all")
"""


def test_a_relay_sigkilled_at_every_step_of_a_thousand_jobs_makes_each_job_once():
    ids = enqueue_many_through_the_outbox(1000)
    env = env_for_subprocess()
    kills = 0
    for nth in (1, 2):
        for point in ("relay_taken", "relay_inserted", "relay_deleted"):
            done = subprocess.run(
                [sys.executable, "-c", RELAY_SCRIPT, point, str(nth)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if done.returncode == -signal.SIGKILL:
                kills += 1
            else:
                # Nothing left for an nth batch: this relay finished the outbox.
                assert done.returncode == 0, done.stderr
            assert queue_jobs().count() == len(set(queue_jobs().values_list("id", flat=True)))
    assert kills >= 4
    relay_all()
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(ids)
    assert outbox_rows().count() == 0


WEB_SCRIPT = """
import sys, time
import django
django.setup()
from django.db import transaction
import jobqueue
from jobqueue import metrics
with transaction.atomic():
    job_id = jobqueue.enqueue(
        "emails", "tests.testapp.jobs.record", {"path": sys.argv[1]}, using="outbox_queue"
    )
print(job_id, flush=True)
time.sleep(600)
"""


def test_a_web_process_killed_after_its_commit_leaves_a_job_that_runs_once(
    workers, tmp_path, monkeypatch
):
    path = tmp_path / "runs.txt"
    web = subprocess.Popen(
        [sys.executable, "-c", WEB_SCRIPT, str(path)],
        cwd=ROOT,
        env=env_for_subprocess(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        job_id = int(web.stdout.readline())
    finally:
        web.send_signal(signal.SIGKILL)
        web.wait(timeout=30)
    assert outbox_rows().filter(job_id=job_id).exists()

    monkeypatch.setenv("JOBQUEUE_OUTBOX_QUEUE_URL", database_url(QUEUE_DB))
    settings = {**FAST_WORKER_SETTINGS, "OUTBOX_RELAY_INTERVAL_SECONDS": 0.05}
    workers.start("--database", QUEUE_DB, "--queues", "emails", settings=settings)
    wait_for(lambda: queue_jobs().filter(id=job_id, state="succeeded").exists(), timeout=60)
    assert [line[0] for line in record_lines(path)] == [str(job_id)]
    assert outbox_rows().count() == 0
    assert queue_jobs().count() == 1


def test_the_relay_service_relays_from_every_other_outbox_database():
    relay = OutboxRelay(using=QUEUE_DB)
    assert relay.sources == ("default",)
    assert OutboxRelay(using="default").sources == ()
    ids = enqueue_many_through_the_outbox(3)
    assert relay.run_once() == 3
    assert sorted(queue_jobs().values_list("id", flat=True)) == sorted(ids)


def test_metrics_and_health_show_what_waits_for_the_queue_database():
    enqueue_many_through_the_outbox(3)
    text = metrics.compute(QUEUE_DB)
    assert 'jobqueue_outbox_rows{outbox_database="default"} 3' in text
    assert 'jobqueue_outbox_up{outbox_database="default"} 1' in text
    ok, detail, data = lag_check(QUEUE_DB)
    assert ok, detail
    assert data["outbox_waiting"] == {"default": 3}
    # A limit the oldest row has outgrown: the relay is behind.
    wait_for(lambda: not lag_check(QUEUE_DB, max_lag_s=0.001)[0])
    assert "default: oldest waits" in lag_check(QUEUE_DB, max_lag_s=0.001)[1]
    relay_all()
    assert 'jobqueue_outbox_rows{outbox_database="default"} 0' in metrics.compute(QUEUE_DB)
    assert lag_check(QUEUE_DB, max_lag_s=0.001)[0]
    # The default queue database has no outbox relaying to it (default is the only outbox).
    assert lag_check("default") == (
        True,
        "no outbox relays to this database",
        {"outbox_waiting": {}, "outbox_down": []},
    )


def test_check_names_an_outbox_alias_missing_from_databases():
    with override_settings(JOBQUEUE={"OUTBOX_DATABASES": ["default", "nowhere"]}):
        errors = check_outbox_databases()
    assert [(e.id, "'nowhere'" in e.msg) for e in errors] == [("jobqueue.E030", True)]
    assert check_outbox_databases() == []


def test_bad_outbox_settings_name_the_key():
    for bad in ({"OUTBOX_DATABASES": [""]}, {"OUTBOX_DATABASES": 3}):
        with pytest.raises(JobQueueConfigurationError, match="OUTBOX_DATABASES"):
            build_settings(bad)
    with pytest.raises(JobQueueConfigurationError, match="OUTBOX_RELAY_INTERVAL_SECONDS"):
        build_settings({"OUTBOX_RELAY_INTERVAL_SECONDS": 0})
    assert build_settings({"OUTBOX_DATABASES": []}).outbox_databases == ()
