"""Real ``runworkers`` processes serving a queue sharded over two databases (``default`` and
``queues2``, ``JOBQUEUE["QUEUE_DATABASES"]``): one worker process per alias, each draining its
own; ``--database`` still serves one alias only.

Worker subprocesses read what the test commits: ``django_db(transaction=True)``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

import jobqueue
from jobqueue.models import CronEntry, CronFire, Job
from jobqueue.routing import queue_alias
from tests.conftest import (
    FAST_WORKER_SETTINGS,
    database_url,
    record_lines,
    requires_postgres,
    wait_for,
)

NOOP = "tests.testapp.jobs.noop"
RECORD = "tests.testapp.jobs.record"
RECORD_UNTIL_RELEASED = "tests.testapp.jobs.record_until_released"
ALIASES = ("default", "queues2")
PLACED = {"bulk": list(ALIASES)}
WORKER_SETTINGS = {**FAST_WORKER_SETTINGS, "QUEUE_DATABASES": PLACED}

pytestmark = [
    pytest.mark.slow,
    requires_postgres(),
    pytest.mark.django_db(databases=list(ALIASES), transaction=True),
]


@pytest.fixture
def queues2_url(monkeypatch) -> str:
    """Point worker subprocesses' ``queues2`` alias at this run's test database."""
    url = database_url("queues2")
    monkeypatch.setenv("JOBQUEUE_QUEUES2_URL", url)
    return url


def placed() -> override_settings:
    return override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": PLACED})


def enqueue_spread(count: int, tmp_path: Path) -> dict[str, list[int]]:
    """Enqueue ``count`` recording jobs of the sharded queue, one tenant each.

    Each job appends "id attempt pid" to ``<tmp_path>/<its alias>.log``.

    Returns:
        Job ids by alias.
    """
    with placed():
        for n in range(count):
            tenant = f"tenant-{n}"
            path = tmp_path / f"{queue_alias('bulk', tenant_id=tenant)}.log"
            jobqueue.enqueue("bulk", RECORD, {"path": str(path)}, tenant_id=tenant)
    ids = {alias: list(Job.objects.using(alias).values_list("id", flat=True)) for alias in ALIASES}
    assert all(ids.values()), f"both aliases hold jobs: {ids}"
    assert sum(map(len, ids.values())) == count
    return ids


def succeeded(alias: str) -> int:
    return Job.objects.using(alias).filter(state="succeeded").count()


def pids(path: Path) -> set[str]:
    return {pid for _, _, pid in record_lines(path)}


def test_one_runworkers_drains_a_sharded_queue_on_both_aliases(workers, queues2_url, tmp_path):
    ids = enqueue_spread(40, tmp_path)
    proc = workers.start("--queues", "bulk", "--concurrency", "2", settings=WORKER_SETTINGS)
    for alias in ALIASES:
        workers.wait_for_log(proc, f"serves database {alias!r}: queues bulk:1", timeout=60)
    wait_for(
        lambda: all(succeeded(alias) == len(ids[alias]) for alias in ALIASES),
        timeout=120,
    )
    for alias in ALIASES:
        assert sorted(int(i) for i, _, _ in record_lines(tmp_path / f"{alias}.log")) == sorted(
            ids[alias]
        )
    # Each alias's jobs ran in a worker process of its own (its claim loop, heartbeat, listener).
    assert pids(tmp_path / "default.log").isdisjoint(pids(tmp_path / "queues2.log"))
    os.killpg(proc.pid, signal.SIGTERM)
    assert workers.exit_code(proc, timeout=90) == 0, workers.log(proc)


def test_a_busy_alias_does_not_hold_up_the_other(workers, queues2_url, tmp_path):
    """With one slot, a job that runs until released on default does not delay queues2's."""
    release = tmp_path / "release"
    with placed():
        tenants = {queue_alias("bulk", tenant_id=f"t{n}"): f"t{n}" for n in range(10)}
        jobqueue.enqueue(
            "bulk",
            RECORD_UNTIL_RELEASED,
            {"path": str(tmp_path / "held.log"), "release": str(release)},
            tenant_id=tenants["default"],
        )
    proc = workers.start("--queues", "bulk", "--concurrency", "1", settings=WORKER_SETTINGS)
    wait_for(lambda: (tmp_path / "held.log").exists(), timeout=60)
    with placed():
        quick = jobqueue.enqueue("bulk", NOOP, tenant_id=tenants["queues2"])
    wait_for(lambda: Job.objects.using("queues2").get(id=quick).state == "succeeded", timeout=60)
    assert Job.objects.using("default").get().state == "leased"  # still held
    release.touch()
    wait_for(lambda: succeeded("default") == 1, timeout=60)
    os.killpg(proc.pid, signal.SIGTERM)
    assert workers.exit_code(proc, timeout=90) == 0, workers.log(proc)


def test_database_names_one_alias_and_serves_only_it(workers, queues2_url, tmp_path):
    ids = enqueue_spread(20, tmp_path)
    done = workers.run(
        "--queues", "bulk", "--burst", "--database", "queues2", settings=WORKER_SETTINGS
    )
    assert done.returncode == 0, done.stderr
    assert succeeded("queues2") == len(ids["queues2"])
    assert succeeded("default") == 0
    assert "serves database" not in done.stderr  # one alias: one worker in this process


def test_a_cron_entry_fires_once_per_fire_time_on_its_queues_alias(workers, queues2_url):
    """Two aliases, two schedulers (one leader each); the entry of "emails" lives on queues2."""
    cron = {"tick": {"cron_expr": "* * * * * *", "job_type": NOOP, "queue": "emails"}}
    cron_settings = {
        **FAST_WORKER_SETTINGS,
        "QUEUE_DATABASES": {"emails": "queues2"},
        "CRON": cron,
        "LEADER_LEASE_SECONDS": 2.0,
        "SCHEDULER_INTERVAL_SECONDS": 0.2,
        "CRON_GRACE_SECONDS": 10,
    }
    procs = [
        workers.start("--queues", "emails,default", settings=cron_settings, log_name=f"w{n}.log")
        for n in range(2)
    ]
    wait_for(lambda: CronFire.objects.using("queues2").count() >= 4, timeout=120)
    for proc in procs:
        os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        assert workers.exit_code(proc, timeout=90) == 0, workers.log(proc)
    fires = list(CronFire.objects.using("queues2").order_by("fire_time"))
    times = [f.fire_time for f in fires]
    assert len(set(times)) == len(times)  # each fire time once, though two processes lead there
    fired_jobs = Job.objects.using("queues2").filter(id__in=[f.job_id for f in fires])
    assert set(fired_jobs.values_list("queue", flat=True)) == {"emails"}
    assert fired_jobs.count() == len(fires)
    # Nothing of the entry on default: its scheduler there keeps no entry it does not hold.
    assert not CronEntry.objects.using("default").filter(name="tick").exists()
    assert not CronFire.objects.using("default").exists()
    assert not Job.objects.using("default").filter(queue="emails").exists()
