"""``manage.py jobqueue health``: the probe an orchestrator runs (exit 0 healthy, 1 not).

The first test runs a real ``runworkers`` process on this host and probes it while it runs and
after it stopped; the others build Worker and CronEntry rows with known ages.
"""

from __future__ import annotations

import signal
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from jobqueue.models import CronEntry, Worker
from tests.conftest import subprocess_env, wait_for
from tests.jobqueue_cli import cli, shared_database

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOST = socket.gethostname()


def ago(**kwargs: float):
    return timezone.now() - timedelta(**kwargs)


def worker_row(worker_id: str = "w1", host: str = HOST, **fields) -> Worker:
    # Alive for three heartbeats of 10 minutes: a loaded machine may take longer than 30 s just
    # to start the `health` process, and a live row must not die of that. Tests of silence say
    # their interval.
    fields.setdefault("heartbeat_interval_s", 600)
    return Worker.objects.create(
        worker_id=worker_id, host=host, pid=1, queues=["default"], concurrency=1, **fields
    )


def cron_entry(name: str, next_fire_at, enabled: bool = True) -> CronEntry:
    return CronEntry.objects.create(
        name=name,
        cron_expr="* * * * *",
        job_type="tests.testapp.jobs.noop",
        enabled=enabled,
        next_fire_at=next_fire_at,
    )


def test_healthy_while_a_real_worker_runs_on_this_host_and_not_after_it_stops(workers):
    if not shared_database():
        pytest.skip("a worker process needs a database it can share (not SQLite in memory)")
    assert cli("health").returncode == 1  # nothing runs yet
    proc = workers.start("--queues", "default", "--concurrency", "1")
    wait_for(lambda: Worker.objects.filter(host=HOST).exists(), timeout=60)
    result = cli("health")
    assert result.returncode == 0, (result, workers.log(proc))
    assert "ok    database: reachable" in result.stdout
    assert f"ok    workers: 1 alive on {HOST}" in result.stdout
    assert "ok    scheduler: no enabled cron entries" in result.stdout
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=60) == 0
    result = cli("health", "--json")
    assert result.returncode == 1
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["workers"]["ok"] is False
    assert checks["workers"]["detail"] == f"no live worker on {HOST} (none registered)"
    assert checks["database"]["ok"] is True


def test_a_silent_worker_is_dead_unless_the_silence_limit_allows_it():
    worker_row(last_seen_at=ago(minutes=5), heartbeat_interval_s=10)  # dead after 30 s
    result = cli("health")
    assert result.returncode == 1
    assert f"FAIL  workers: no live worker on {HOST} (1 silent)" in result.stdout
    lenient = cli("health", "--max-silence", "3600", "--json")
    assert lenient.returncode == 0, lenient
    assert lenient.json()["healthy"] is True


def test_only_this_hosts_workers_count():
    worker_row(host="another-host")
    assert cli("health").returncode == 1
    other = cli("health", "--host", "another-host", "--json")
    assert other.returncode == 0, other
    workers = next(c for c in other.json()["checks"] if c["name"] == "workers")
    assert (workers["alive"], workers["workers"]) == (1, ["w1"])


def test_an_overdue_cron_entry_fails_the_scheduler_check():
    worker_row()
    cron_entry("nightly", next_fire_at=ago(minutes=-5))  # due in 5 minutes: fine
    cron_entry("off", next_fire_at=ago(hours=3), enabled=False)  # disabled: ignored
    assert cli("health").returncode == 0
    cron_entry("every-minute", next_fire_at=ago(minutes=10))
    result = cli("health", "--json")
    assert result.returncode == 1
    scheduler = next(c for c in result.json()["checks"] if c["name"] == "scheduler")
    assert scheduler["ok"] is False
    assert scheduler["overdue_entry"] == "every-minute"
    assert scheduler["overdue_seconds"] >= 600
    assert scheduler["leader"] is None
    assert "no leader" in scheduler["detail"]
    assert cli("health", "--cron-max-delay", "3600").returncode == 0


def test_an_unreachable_database_exits_1_naming_it():
    env = subprocess_env()
    env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:1/nowhere"
    result = cli("health", env=env, in_process=False)
    assert result.returncode == 1, result
    assert "FAIL  database: unreachable" in result.stdout
    assert "Traceback" not in result.stderr


def test_other_verbs_say_the_database_is_unreachable_without_a_traceback():
    env = subprocess_env()
    env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:1/nowhere"
    result = cli("status", env=env, in_process=False)
    assert result.returncode == 1, result
    assert "the queue database 'default' is unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_live_worker_whose_listener_is_down_makes_this_host_unhealthy():
    """FIELD-CASES 26/30: the probe reports a lost LISTEN connection, from the worker's row."""
    worker_row("deaf", listener_up=False)
    worker_row("fine", listener_up=True)
    worker_row("polls", listener_up=None)  # LISTEN_NOTIFY off: nothing to report
    result = cli("health", "--json")
    assert result.returncode == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["workers"]["ok"] is True
    assert checks["listener"]["ok"] is False
    assert checks["listener"]["listener_down"] == ["deaf"]
    Worker.objects.filter(worker_id="deaf").update(listener_up=True)
    result = cli("health")
    assert result.returncode == 0, result
    assert "ok    listener: up (or not used)" in result.stdout
