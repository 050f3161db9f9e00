"""What the benches on private clusters share: a cluster with pg_stat_statements, its bench
database migrated, a PgBouncer in front of it, and the statement counters they read.

``bench/scale.py`` (one cluster behind PgBouncer) and ``bench/shards.py`` (two clusters) used to
set these up each its own way; a fix to one (planning tracked, a migrate failure shown) now
reaches both. The clusters are ``tests/pgcluster.py``'s (initdb, pg_ctl) and the pooler
``tests/pgbouncer.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT
from tests.pgbouncer import PrivateBouncer
from tests.pgcluster import PrivateCluster

#: Statements that are the benches' own readings, left out of the counts (``ILIKE`` patterns).
OWN_READINGS = ("%pg_stat%", "%pg_wal%")


def start_cluster(
    dbname: str, *, max_connections: int | None = None, owner: str | None = None
) -> PrivateCluster:
    """Start a private cluster with pg_stat_statements (planning tracked) and database ``dbname``.

    Args:
        dbname: the bench database to create (with the extension in it).
        max_connections: the server's ``max_connections`` (None: the cluster's default).
        owner: a login role (not a superuser) created to own ``dbname``, as a site's processes
            log in; None: the superuser owns it.

    Returns:
        The running cluster; the caller destroys it.
    """
    cluster = PrivateCluster()
    cluster.start()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        if max_connections is not None:
            conn.execute(f"ALTER SYSTEM SET max_connections = {int(max_connections)}")
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    # Planning counts too (the claim is planned afresh each time); set in the file, since
    # ALTER SYSTEM does not know the library's parameters before it is loaded.
    with (cluster.datadir / "postgresql.conf").open("a") as conf:
        conf.write("pg_stat_statements.track_planning = on\n")
    cluster.restart()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        if owner is not None:
            conn.execute(f"CREATE ROLE {owner} LOGIN")
            conn.execute(f'CREATE DATABASE "{dbname}" OWNER {owner}')
        else:
            conn.execute(f'CREATE DATABASE "{dbname}"')
    with psycopg.connect(cluster.url(dbname), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    return cluster


def as_role(url: str, role: str) -> str:
    """Return ``url`` (a superuser's ``postgres://postgres@...``) logging in as ``role``."""
    return url.replace("postgres://postgres@", f"postgres://{role}@")


def start_bouncer(cluster: PrivateCluster, pool_size: int, role: str) -> PrivateBouncer:
    """Start a PgBouncer in transaction mode in front of ``cluster`` that lets ``role`` in.

    Args:
        cluster: the server behind it.
        pool_size: server connections per database and user, and per database in all.
        role: a login role without a password (added to its user list).

    Returns:
        The running pooler; the caller stops it.
    """
    bouncer = PrivateBouncer(
        cluster.port, default_pool_size=pool_size, max_db_connections=pool_size
    )
    with (bouncer.root / "userlist.txt").open("a") as users:
        users.write(f'"{role}" ""\n')
    bouncer.start()
    return bouncer


def django_env(
    url: str, settings: Mapping[str, object] | None = None, **extra: str
) -> dict[str, str]:
    """Return the environment of a Django process (``migrate``, ``runworkers``, an enqueuer).

    Args:
        url: its ``default`` database.
        settings: ``JOBQUEUE`` entries (``JOBQUEUE_SETTINGS``, JSON), None for none.
        **extra: more variables (``JOBQUEUE_QUEUES2_URL``, ``JOBQUEUE_DIRECT_URL``...).
    """
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "JOBQUEUE_LOG_LEVEL": "WARNING",
    }
    if settings is not None:
        env["JOBQUEUE_SETTINGS"] = json.dumps(settings)
    env.update(extra)
    return env


def migrate(env: Mapping[str, str], database: str | None = None) -> None:
    """Run ``migrate`` in a child process with ``env``; exit the bench, showing why, if it fails.

    Args:
        env: the process's environment (:func:`django_env`).
        database: ``--database`` (None: ``default``).
    """
    cmd = [sys.executable, "-m", "django", "migrate", "-v", "0"]
    if database is not None:
        cmd += ["--database", database]
    done = subprocess.run(cmd, env=dict(env), cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:])} failed:\n{done.stderr[-2000:]}")


def statement_totals(url: str, dbname: str, skip: tuple[str, ...] = ()) -> tuple[int, float]:
    """Return (statements run in ``dbname`` so far, their time in ms, execution + planning).

    Read from pg_stat_statements, leaving out :data:`OWN_READINGS` and the ``skip`` patterns
    (``ILIKE``: a bench's own reads of the jobs table).
    """
    patterns = [*OWN_READINGS, *skip]
    where = " AND ".join(["d.datname = %s", *("s.query NOT ILIKE %s" for _ in patterns)])
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(s.calls), 0)::bigint,"
            " coalesce(sum(s.total_exec_time + s.total_plan_time), 0)::float8"
            " FROM pg_stat_statements AS s JOIN pg_database AS d ON d.oid = s.dbid"
            f" WHERE {where}",
            [dbname, *patterns],
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1])
