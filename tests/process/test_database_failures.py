"""A database that fails jobqueue's statements in a named way is named (issue 32 items 2 and 3):
read-only (a failover to a replica, ``default_transaction_read_only``), not migrated, a revoked
privilege. The worker's log line, ``health``, ``status``, the metrics and the error the public
API raises all say which; and after an outage the claim loop resumes with the first statement
of the worker that works again, not at the end of its backoff pause.

Runs on a private cluster (tests/pgcluster.py): each test makes its own database on it. Before
issue 32 the worker logged "database unavailable while claiming" and nothing said "read-only",
``enqueue`` raised Django's ``InternalError``, ``health`` passed and ``status`` said nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import (
    FAST_WORKER_SETTINGS,
    ROOT,
    migrated_database,
    running_cluster,
    start_runworkers,
    subprocess_env,
    wait_for,
)

pytestmark = pytest.mark.slow

ENQUEUE = """
import django
django.setup()
import jobqueue
from jobqueue.errors import QueueUnavailable
try:
    for _ in range({n}):
        print("ENQUEUED", jobqueue.enqueue("{queue}", "tests.testapp.jobs.noop", {{}}))
except Exception as exc:
    kind = type(exc).__module__ + "." + type(exc).__qualname__
    print("RAISED", kind, isinstance(exc, QueueUnavailable), getattr(exc.failure, "kind", None))
    print("MESSAGE", exc)
"""

METRICS = """
import django
django.setup()
from jobqueue.metrics import collect
print(collect())
"""


@pytest.fixture(scope="module")
def cluster():
    with running_cluster() as found:
        yield found


def admin(cluster, *statements: str) -> None:
    """Run ``statements`` as the superuser on the cluster's maintenance database."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def python(env: dict[str, str], script: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    return result.stdout + result.stderr


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "django", "jobqueue", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def succeeded(url: str, queue: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobqueue_job WHERE queue = %s AND state = 'succeeded'", [queue]
        ).fetchone()
        return row[0] if row else 0


def test_a_read_only_database_is_named_by_the_worker_health_status_metrics_and_enqueue(
    cluster, tmp_path
):
    url, env = migrated_database(cluster, "jq_ro", **FAST_WORKER_SETTINGS)
    log = tmp_path / "worker.log"
    [worker] = start_runworkers(env, [log], "--queues", "ro")
    try:
        wait_for(lambda: "concurrency" in log.read_text(), timeout=60)
        # A failover: the sessions are cut, and the ones that come back are read-only.
        admin(
            cluster,
            "ALTER DATABASE jq_ro SET default_transaction_read_only = on",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = 'jq_ro' AND pid <> pg_backend_pid()",
        )
        line = re.compile(
            r"database 'default' is read-only \(failover\?\): cannot execute \w[\w ]* in a "
            r"read-only transaction; waiting, nothing claimed"
        )
        wait_for(lambda: line.search(log.read_text()), timeout=60)
        assert worker.poll() is None, log.read_text()

        out = python(env, ENQUEUE.format(n=1, queue="ro"))
        assert "RAISED jobqueue.errors.DatabaseReadOnly True read_only" in out, out
        assert "MESSAGE database 'default' is read-only (failover?): cannot execute" in out, out

        health = cli(env, "health", "--host", "nowhere")
        assert health.returncode == 1, health
        assert re.search(
            r"FAIL  database: reachable \(\d+ ms\) but read-only \(failover\?\): "
            r"transaction_read_only is on",
            health.stdout,
        ), health.stdout
        assert "Traceback" not in health.stderr, health.stderr

        status = cli(env, "status")
        assert status.returncode == 1, status
        assert (
            "database 'default' is read-only (failover?): transaction_read_only is on; "
            "workers wait, nothing is claimed" in status.stdout
        ), status.stdout

        metrics = python(env, METRICS)
        assert 'jobqueue_database_failure{kind="read_only"} 1' in metrics, metrics
        assert 'jobqueue_database_failure{kind="not_migrated"} 0' in metrics, metrics

        # Writable again: the worker's next session is; it claims and runs what comes.
        admin(cluster, "ALTER DATABASE jq_ro RESET default_transaction_read_only")
        out = python(env, ENQUEUE.format(n=20, queue="ro"))
        assert out.count("ENQUEUED") == 20, out
        wait_for(lambda: succeeded(url, "ro") == 20, timeout=120)
        assert "database is back after" in log.read_text()
        assert worker.poll() is None, log.read_text()
    finally:
        worker.kill()
        worker.wait()


def test_an_unmigrated_database_is_named_by_the_worker_health_status_and_enqueue(cluster, tmp_path):
    cluster.create_database("jq_bare")  # never migrated
    env = subprocess_env(**FAST_WORKER_SETTINGS)
    env["DATABASE_URL"] = cluster.url("jq_bare")
    log = tmp_path / "worker.log"
    [worker] = start_runworkers(env, [log], "--queues", "bare")
    try:
        # The worker refuses to start (it did before too), naming the cause.
        assert worker.wait(timeout=60) != 0
        assert "are not up to date" in log.read_text(), log.read_text()
        assert "run `python manage.py migrate` first" in log.read_text()

        out = python(env, ENQUEUE.format(n=1, queue="bare"))
        assert "RAISED jobqueue.errors.DatabaseNotMigrated True not_migrated" in out, out

        health = cli(env, "health")
        assert health.returncode == 1, health
        assert re.search(
            r"FAIL  database: not migrated \(run manage.py migrate\): relation \"jobqueue_\w+\" "
            r"does not exist",
            health.stdout,
        ), health.stdout
        assert "Traceback" not in health.stderr, health.stderr

        status = cli(env, "status")
        assert status.returncode == 1, status
        assert (
            "the queue database 'default' is not migrated (run manage.py migrate)" in status.stderr
        ), status.stderr
        assert "Traceback" not in status.stderr, status.stderr
    finally:
        worker.kill()
        worker.wait()


def test_a_revoked_privilege_is_named_by_the_worker_and_enqueue(cluster, tmp_path):
    url, env = migrated_database(cluster, "jq_grants", **FAST_WORKER_SETTINGS)
    admin(cluster, "DROP ROLE IF EXISTS jq_app", "CREATE ROLE jq_app LOGIN")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO jq_app")
        conn.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO jq_app")
        conn.execute("REVOKE INSERT, UPDATE ON jobqueue_job FROM jq_app")
    env["DATABASE_URL"] = url.replace("postgres://postgres@", "postgres://jq_app@")
    log = tmp_path / "worker.log"
    [worker] = start_runworkers(env, [log], "--queues", "grants")
    try:
        line = re.compile(
            r"database 'default' is refusing a privilege jobqueue needs \(permission denied\): "
            r"permission denied for table jobqueue_job; waiting, nothing claimed"
        )
        wait_for(lambda: line.search(log.read_text()), timeout=60)
        assert worker.poll() is None, log.read_text()
        out = python(env, ENQUEUE.format(n=1, queue="grants"))
        assert "RAISED jobqueue.errors.DatabasePermissionDenied True permission_denied" in out
    finally:
        worker.kill()
        worker.wait()


def _last_failure_count(text: str) -> int:
    """Return how many claims in a row failed, from the claim loop's lines (debug level)."""
    claims = re.findall(r"waiting, nothing claimed \((\d+) failures\)", text)
    # The wording before issue 32, so that this test can run (and fail) there too.
    claims += re.findall(r"^database still unavailable \((\d+)\)", text, flags=re.M)
    return max((int(n) for n in claims), default=0)


def test_after_an_outage_the_claim_loop_resumes_with_the_first_statement_that_works(
    cluster, tmp_path: Path
):
    """Stop the server until the claim loop's pause has grown to its 10 s cap, start it again
    just as such a pause begins, and enqueue J: J starts well within that pause (the heartbeat's
    first round that works wakes the claim loop). Before, the loop slept out its pause.
    """
    url, env = migrated_database(cluster, "jq_resume", **FAST_WORKER_SETTINGS)
    env["JOBQUEUE_LOG_LEVEL"] = "DEBUG"
    log = tmp_path / "worker.log"
    [worker] = start_runworkers(env, [log], "--queues", "resume")
    try:
        wait_for(lambda: "concurrency" in log.read_text(), timeout=60)
        cluster.stop()
        # The pause after the 6th failure is 10 s (0.5, 1, 2, 4, 8, then the 10 s cap).
        wait_for(lambda: _last_failure_count(log.read_text()) >= 6, timeout=120)
        cluster.start()
        with psycopg.connect(url) as conn:
            back = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
        out = python(env, ENQUEUE.format(n=1, queue="resume"))
        assert "ENQUEUED" in out, out
        wait_for(lambda: succeeded(url, "resume") == 1, timeout=60)
        with psycopg.connect(url) as conn:
            started = conn.execute(
                "SELECT started_at FROM jobqueue_job WHERE queue = 'resume'"
            ).fetchone()[0]
        resumed_s = (started - back).total_seconds()
        print(f"claim loop resumed {resumed_s:.1f} s after the server started")
        # Half the pause the loop was in: it slept it out before (about 9 s after the start).
        assert resumed_s < 5.0, log.read_text()
    finally:
        worker.kill()
        worker.wait()
