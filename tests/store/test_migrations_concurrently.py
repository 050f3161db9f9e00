"""Migration 0005's index builds do not block enqueues on PostgreSQL, and apply on both databases.

A plain ``CREATE INDEX`` waits for the SHARE lock behind any open writing transaction, and every
later INSERT queues behind it: one slow request stops all enqueues for the whole build. Built
``CONCURRENTLY`` the index waits for that transaction instead, and writes go on. The test holds a
writer's transaction open, runs the migration in a real ``migrate`` process, waits (measured, in
``pg_stat_activity``) until that process waits on a lock, and then takes an enqueue's lock from a
third connection with a ``lock_timeout``: nothing to wait for when the build is concurrent.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection

from tests.conftest import ROOT, database_url, requires_postgres, subprocess_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

INDEXES_0005 = {"jobqueue_job_claim", "jobqueue_job_running", "jobqueue_job_ordering"}


def _migrate(*target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", "migrate", *target, "--no-input", "-v", "0"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _job_indexes() -> dict[str, bool]:
    """Return the jobs table's indexes, each with whether it is valid (usable)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'jobqueue_job'::regclass"
        )
        return dict(cursor.fetchall())


def _sqlmigrate_0005() -> str:
    from io import StringIO

    out = StringIO()
    call_command("sqlmigrate", "jobqueue", "0005", stdout=out)
    return out.getvalue()


@requires_postgres()
def test_sqlmigrate_0005_builds_and_drops_concurrently_on_postgresql():
    sql = _sqlmigrate_0005()
    creates = [line for line in sql.splitlines() if line.startswith("CREATE INDEX")]
    assert len(creates) == 3, sql
    assert all(line.startswith("CREATE INDEX CONCURRENTLY") for line in creates), sql
    drops = [line for line in sql.splitlines() if line.startswith("DROP INDEX")]
    assert drops and all("CONCURRENTLY" in line for line in drops), sql
    # The claim index is swapped in under its own name, never missing: build, drop old, rename.
    built = sql.index('CREATE INDEX CONCURRENTLY "jobqueue_job_claim_new"')
    assert built < sql.index('DROP INDEX CONCURRENTLY IF EXISTS "jobqueue_job_claim";')
    assert 'ALTER INDEX "jobqueue_job_claim_new" RENAME TO "jobqueue_job_claim"' in sql
    assert "BEGIN;" not in sql  # atomic = False: CONCURRENTLY refuses a transaction


def test_0005_applies_backwards_and_forwards_with_the_same_indexes():
    """Unapply 0005 and everything after it, apply again: the same index names as before."""

    def names() -> set[str]:
        with connection.cursor() as cursor:
            constraints = connection.introspection.get_constraints(cursor, "jobqueue_job")
        return {name for name, info in constraints.items() if info["index"]}

    before = names()
    assert INDEXES_0005 <= before
    try:
        call_command("migrate", "jobqueue", "0004", verbosity=0)
        after_back = names()
        assert not ({"jobqueue_job_running", "jobqueue_job_ordering"} & after_back)
        assert "jobqueue_job_claim" in after_back  # 0001's claim index, back again
        assert "jobqueue_job_claim_new" not in after_back
    finally:
        call_command("migrate", verbosity=0)
    assert names() == before
    if connection.vendor == "sqlite":
        assert "CONCURRENTLY" not in _sqlmigrate_0005()


def _waiting_on_a_lock(conn: psycopg.Connection, where: str, *params: object) -> bool:
    """Return whether a backend of the test database matching ``where`` waits for a lock."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        f" AND wait_event_type = 'Lock' AND {where}",
        params,
    ).fetchone()
    conn.rollback()
    return bool(row and row[0])


@requires_postgres()
@pytest.mark.slow
def test_migrating_0005_on_postgresql_does_not_block_an_enqueue(tmp_path):
    back = _migrate("jobqueue", "0004")
    assert back.returncode == 0, back.stderr
    url = database_url()
    first, second, observer = (psycopg.connect(url) for _ in range(3))
    log_path = tmp_path / "migrate.log"
    migrate: subprocess.Popen[str] | None = None
    locker = ThreadPoolExecutor(max_workers=1)
    try:
        # A request that wrote a job and has not committed yet holds ROW EXCLUSIVE on the table.
        first.execute("LOCK TABLE jobqueue_job IN ROW EXCLUSIVE MODE")
        with log_path.open("w") as log:
            migrate = subprocess.Popen(
                [sys.executable, "-m", "django", "migrate", "jobqueue", "0005", "--no-input"],
                cwd=ROOT,
                env=subprocess_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

        def migration_waits(statement: str) -> bool:
            assert migrate.poll() is None, log_path.read_text()
            return _waiting_on_a_lock(observer, "query ILIKE %s", f"{statement}%%")

        # Adding the column needs a moment of ACCESS EXCLUSIVE, so it waits for the open
        # transaction (no migration can avoid that; docs/upgrading.md: lock_timeout). A second
        # request queues behind it and gets its lock as soon as the column is added, so it is
        # open when the index builds start.
        wait_for(lambda: migration_waits("ALTER TABLE"), timeout=120)
        pending = locker.submit(second.execute, "LOCK TABLE jobqueue_job IN ROW EXCLUSIVE MODE")
        second_pid = second.info.backend_pid
        wait_for(lambda: _waiting_on_a_lock(observer, "pid = %s", second_pid), timeout=60)
        first.commit()
        pending.result(timeout=120)

        # The build waits for the second request's transaction to end. A plain CREATE INDEX
        # would wait in the lock queue for its SHARE lock, and every enqueue would queue behind
        # it until that request commits; the lock_timeout would end this one's wait with an
        # error. The lock every INSERT takes stands for the enqueue: the model's columns are a
        # later migration's, so the ORM cannot insert at 0005.
        wait_for(lambda: migration_waits("CREATE INDEX"), timeout=120)
        observer.execute("SET lock_timeout = '5s'")
        observer.execute("LOCK TABLE jobqueue_job IN ROW EXCLUSIVE MODE")
        observer.commit()
        assert migrate.poll() is None  # the build still waits for the open transaction
        second.commit()
        assert migrate.wait(timeout=300) == 0, log_path.read_text()
    finally:
        for conn in (first, second, observer):
            conn.close()
        locker.shutdown(wait=False)
        if migrate is not None and migrate.poll() is None:
            migrate.kill()
            migrate.wait()
        restored = _migrate()
    assert restored.returncode == 0, restored.stderr
    indexes = _job_indexes()
    assert INDEXES_0005 <= set(indexes)
    assert all(indexes.values()), indexes  # none left INVALID
    assert "jobqueue_job_claim_new" not in indexes


@requires_postgres()
def test_a_rerun_after_a_failed_concurrent_build_completes_and_rebuilds_the_invalid_index():
    import jobqueue

    jobqueue.enqueue("default", "tests.testapp.jobs.noop", {})
    jobqueue.enqueue("default", "tests.testapp.jobs.noop", {})
    try:
        call_command("migrate", "jobqueue", "0004", verbosity=0)
        with connection.cursor() as cursor, pytest.raises(IntegrityError):
            # A concurrent build that fails (here: a unique violation, two rows) leaves its
            # index behind, INVALID, under the name the migration is about to build.
            cursor.execute(
                'CREATE UNIQUE INDEX CONCURRENTLY "jobqueue_job_running" ON "jobqueue_job" ((1))'
            )
        with connection.cursor() as cursor:
            # The migration is not atomic: its first operation, the column, committed before
            # the build failed, and the migration was not recorded.
            cursor.execute('ALTER TABLE "jobqueue_job" ADD COLUMN "ordering_key" varchar(200) NULL')
        assert _job_indexes()["jobqueue_job_running"] is False
        call_command("migrate", "jobqueue", "0005", verbosity=0)
        assert _job_indexes()["jobqueue_job_running"] is True
    finally:
        call_command("migrate", verbosity=0)
