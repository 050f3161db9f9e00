"""A database that fails jobqueue's statements in a named way is named (issue 32 items 2 and 3):
read-only (a failover to a replica, ``default_transaction_read_only``, a standby until it is
promoted), not migrated, a revoked privilege, every connection slot taken. The worker's log
line, ``health``, ``status``, the metrics and the error the public API raises all say which;
nothing is lost once the database serves again; and after an outage the claim loop resumes with
the first statement of the worker that works again, not at the end of its backoff pause.

Runs on private clusters (tests/pgcluster.py): each test makes its own database on the module's
cluster, or its own cluster when it changes the server (``max_connections``, a standby). Before
issue 32 the worker logged "database unavailable while claiming" and nothing said "read-only",
``enqueue`` raised Django's ``InternalError``, ``health`` passed and ``status`` said nothing.
"""

from __future__ import annotations

import re
import shutil
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
from tests.pgcluster import PrivateCluster

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


def jobs_by_state(url: str, queue: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM jobqueue_job WHERE queue = %s GROUP BY state", [queue]
        ).fetchall()
    return {state: n for state, n in rows}


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
    just as such a pause begins, and enqueue J: the heartbeat's first round that works cuts the
    claim loop's pause short (its log line says so) and J runs. Before, the loop slept out its
    pause and no such line was written. (No wall-clock bound: on a loaded machine the heartbeat
    itself may take seconds to come round.)
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
        out = python(env, ENQUEUE.format(n=1, queue="resume"))
        assert "ENQUEUED" in out, out
        wait_for(lambda: succeeded(url, "resume") == 1, timeout=60)
        assert "pause cut short" in log.read_text(), log.read_text()
    finally:
        worker.kill()
        worker.wait()


#: The private cluster's connection slots in the too-many-connections test (the superuser's
#: reserved ones included: the test holds them all as the superuser).
MAX_CONNECTIONS = 12


def test_a_full_connection_table_is_named_by_the_worker_health_and_enqueue(
    private_cluster, tmp_path
):
    """Every connection slot held (a leak elsewhere, a pooler misconfigured): a worker started
    meanwhile waits, naming it; ``health`` fails naming it; ``enqueue`` raises the typed error
    with nothing written; once the slots free up the worker serves, and nothing is lost."""
    admin(private_cluster, f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    private_cluster.restart()
    url, env = migrated_database(private_cluster, "jq_full", **FAST_WORKER_SETTINGS)
    before = python(env, ENQUEUE.format(n=20, queue="full"))
    assert before.count("ENQUEUED") == 20, before
    held: list[psycopg.Connection] = []
    log = tmp_path / "worker.log"
    worker = None
    try:
        for _ in range(MAX_CONNECTIONS + 1):
            try:
                held.append(psycopg.connect(url, autocommit=True))
            except psycopg.OperationalError as exc:
                assert "too many clients" in str(exc), exc
                break
        assert len(held) == MAX_CONNECTIONS
        [worker] = start_runworkers(env, [log], "--queues", "full")
        try:
            line = re.compile(
                r"database 'default' is full \(too many connections\): .*too many clients "
                r"already; waiting to register, nothing claimed"
            )
            wait_for(lambda: line.search(log.read_text()), timeout=60)
            assert worker.poll() is None, log.read_text()

            health = cli(env, "health", "--host", "nowhere")
            assert health.returncode == 1, health
            assert re.search(
                r"FAIL  database: full \(too many connections\): .*too many clients already",
                health.stdout,
            ), health.stdout
            assert "Traceback" not in health.stderr, health.stderr

            out = python(env, ENQUEUE.format(n=1, queue="full"))
            assert "RAISED jobqueue.errors.QueueUnavailable True too_many_connections" in out, out
            assert "MESSAGE database 'default' is full (too many connections)" in out, out
            assert "nothing was written" in out, out
        finally:
            for conn in held:
                conn.close()
        # The slots free: the worker registers and runs what waited, and what comes.
        after = python(env, ENQUEUE.format(n=5, queue="full"))
        assert after.count("ENQUEUED") == 5, after
        wait_for(lambda: succeeded(url, "full") == 25, timeout=120)
        assert jobs_by_state(url, "full") == {"succeeded": 25}
        assert "database is back after" in log.read_text()
        assert worker.poll() is None, log.read_text()
    finally:
        if worker is not None:
            worker.kill()
            worker.wait()


def test_a_worker_on_a_standby_says_read_only_and_serves_once_it_is_promoted(
    private_cluster, tmp_path
):
    """A failover: the worker is pointed at the replica before it is promoted. It names the
    standby read-only (not "connection closed"), claims nothing, and once ``pg_ctl promote``
    has made it the primary it serves every job the primary had: nothing lost."""
    primary_url, env = migrated_database(private_cluster, "jq_standby", **FAST_WORKER_SETTINGS)
    env["DATABASE_URL"] = primary_url
    out = python(env, ENQUEUE.format(n=20, queue="standby"))
    assert out.count("ENQUEUED") == 20, out
    try:
        standby = PrivateCluster.standby_of(private_cluster)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"pg_basebackup failed: {exc.stderr}")
    try:
        standby.start()
        url = standby.url("jq_standby")
        env["DATABASE_URL"] = url
        # Written on the primary after the base backup: streamed to the standby.
        out = python({**env, "DATABASE_URL": primary_url}, ENQUEUE.format(n=5, queue="standby"))
        assert out.count("ENQUEUED") == 5, out
        wait_for(lambda: sum(jobs_by_state(url, "standby").values()) == 25, timeout=60)

        log = tmp_path / "worker.log"
        [worker] = start_runworkers(env, [log], "--queues", "standby")
        try:
            line = re.compile(
                r"database 'default' is read-only \(failover\?\): cannot execute \w[\w ]* in a "
                r"read-only transaction; waiting to register, nothing claimed"
            )
            wait_for(lambda: line.search(log.read_text()), timeout=60)
            assert "connection closed" not in log.read_text()
            assert worker.poll() is None, log.read_text()

            health = cli(env, "health", "--host", "nowhere")
            assert health.returncode == 1, health
            assert re.search(
                r"FAIL  database: reachable \(\d+ ms\) but read-only \(failover\?\): "
                r"the server is a standby \(in recovery\)",
                health.stdout,
            ), health.stdout
            out = python(env, ENQUEUE.format(n=1, queue="standby"))
            assert "RAISED jobqueue.errors.DatabaseReadOnly True read_only" in out, out

            # The failover: the old primary goes, the standby is promoted.
            private_cluster.stop()
            standby.promote()
            wait_for(lambda: succeeded(url, "standby") == 25, timeout=120)
            out = python(env, ENQUEUE.format(n=5, queue="standby"))
            assert out.count("ENQUEUED") == 5, out
            wait_for(lambda: succeeded(url, "standby") == 30, timeout=60)
            assert jobs_by_state(url, "standby") == {"succeeded": 30}
            assert "database is back after" in log.read_text()
            assert worker.poll() is None, log.read_text()
        finally:
            worker.kill()
            worker.wait()
    finally:
        standby.destroy()


#: The tmpfs the disk-full test puts the jobs table on: room for the table and its indexes,
#: and quickly filled by a filler table.
SMALL_DISK = "8m"


def test_a_full_disk_is_named_by_the_worker_and_enqueue_and_nothing_is_lost(
    private_cluster, tmp_path
):
    """The jobs table and its indexes on a small tmpfs (a tablespace), filled by another table:
    ``enqueue`` raises ``DatabaseFull`` with nothing written, a worker started then waits
    naming it, and once the filler is dropped every job that got in runs, and new ones too.
    The WAL stays on the cluster's own disk: a full WAL disk stops the server, another test."""
    url, env = migrated_database(private_cluster, "jq_disk", **FAST_WORKER_SETTINGS)
    small = private_cluster.root / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK},mode=0700", "tmpfs", str(small)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    worker = None
    try:
        if private_cluster.as_postgres:
            shutil.chown(small, "postgres", "postgres")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE small LOCATION '{small}'")
            conn.execute("ALTER TABLE jobqueue_job SET TABLESPACE small")
            for (index,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'jobqueue_job'"
            ).fetchall():
                conn.execute(f'ALTER INDEX "{index}" SET TABLESPACE small')
        before = python(env, ENQUEUE.format(n=30, queue="disk"))
        assert before.count("ENQUEUED") == 30, before
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE filler (x float8) TABLESPACE small")
            with pytest.raises(psycopg.errors.DiskFull):
                conn.execute("INSERT INTO filler SELECT random() FROM generate_series(1, 10e6)")
        # Jobs go in while their pages have room; then the enqueue that needs a page fails.
        out = python(env, ENQUEUE.format(n=5000, queue="disk"))
        got_in = 30 + out.count("ENQUEUED")
        assert "RAISED jobqueue.errors.DatabaseFull True disk_full" in out, out
        assert "MESSAGE database 'default' is out of disk space: could not extend" in out, out
        assert "nothing was written" in out, out
        assert sum(jobs_by_state(url, "disk").values()) == got_in

        log = tmp_path / "worker.log"
        [worker] = start_runworkers(env, [log], "--queues", "disk")
        line = re.compile(
            r"database 'default' is out of disk space: could not extend .*No space left on "
            r"device.*; waiting, nothing claimed"
        )
        try:
            wait_for(lambda: line.search(log.read_text()), timeout=60)
        except AssertionError:
            raise AssertionError(f"{got_in} jobs in; worker log:\n{log.read_text()}") from None
        assert worker.poll() is None, log.read_text()
        # Space again: what got in runs, and what comes.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE filler")
        out = python(env, ENQUEUE.format(n=5, queue="disk"))
        assert out.count("ENQUEUED") == 5, out
        wait_for(lambda: succeeded(url, "disk") == got_in + 5, timeout=120)
        assert jobs_by_state(url, "disk") == {"succeeded": got_in + 5}
        assert "database is back after" in log.read_text()
        assert worker.poll() is None, log.read_text()
    finally:
        if worker is not None:
            worker.kill()
            worker.wait()
        private_cluster.stop("immediate")  # before the tablespace's mount goes
        subprocess.run(["umount", str(small)], check=False)
