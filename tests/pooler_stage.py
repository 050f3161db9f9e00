"""The pooler stage (``JOBQUEUE_TEST_POOLER=1``): the default database through a real PgBouncer.

Issue 16: "the core, capped-claim, cron and admin tests run once through the pooler too"
(``.ci/test``'s pooler stage). With ``JOBQUEUE_TEST_POOLER=1``, ``tests/settings.py`` calls
:func:`configure`, which:

* starts one PgBouncer in transaction mode (``tests/pgbouncer.py``) on a free port in front of
  the server that ``DATABASE_URL`` names, in the first process that reads the settings (the
  pytest session, or each xdist worker started before it), which stops it at exit; the port is
  put in the environment, so processes started later (xdist workers, worker subprocesses, whose
  ``DATABASE_URL`` already names the pooler) reuse it;
* points ``default`` at it, marked pooled (``POOLED_DATABASES``) with ``direct`` (the same test
  database, directly: a test mirror) as its ``LISTEN_DATABASE``;
* installs :func:`guard_statement` on every connection to ``default``: a statement that would
  keep session state on a pooled server connection (a session ``SET`` or ``set_config``, a
  session advisory lock, ``LISTEN``, ``PREPARE``, a ``WITH HOLD`` cursor) or a connection that
  would prepare statements fails at once with :class:`SessionStateError`, in the test process
  and in every worker subprocess. PgBouncer 1.18 shares server connections between clients and
  does not track prepared statements: such statements leak state or fail only sometimes, so the
  guard makes them fail every time.

The other aliases (``outbox_queue``, ``queues2``, ``sqlite``) stay direct.
"""

from __future__ import annotations

import atexit
import os
import re
from typing import Any

import psycopg
from django.db.backends.signals import connection_created

from tests.pgbouncer import PrivateBouncer

#: Environment: the running PgBouncer's port, the server's port behind it, the starter's pid.
PORT_ENV = "JOBQUEUE_TEST_POOLER_PORT"
SERVER_PORT_ENV = "JOBQUEUE_TEST_POOLER_SERVER_PORT"
OWNER_ENV = "JOBQUEUE_TEST_POOLER_OWNER"

#: Statements that keep state in the server session, which transaction pooling hands to others.
SESSION_STATE = re.compile(
    r"^\s*(SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)|RESET\b|LISTEN\b|UNLISTEN\b|PREPARE\b"
    r"|DISCARD\b|DEALLOCATE\b)"
    r"|\bset_config\s*\([^()]*,\s*false\s*\)"
    r"|\bpg_(try_)?advisory_(un)?lock(_shared)?\s*\("
    r"|\bWITH\s+HOLD\b",
    re.IGNORECASE,
)


class SessionStateError(RuntimeError):
    """A statement or a connection that would break behind a transaction pooler."""


def guard_statement(execute: Any, sql: str, params: Any, many: bool, context: dict) -> Any:
    """Django execute wrapper: refuse what would keep session state on the pooled connection.

    Raises:
        SessionStateError: the statement keeps session state, or the connection would use
            server-side prepared statements.
    """
    wrapper = context["connection"]
    raw = wrapper.connection
    if getattr(raw, "prepare_threshold", None) is not None:
        raise SessionStateError(
            f"{wrapper.alias!r} is pooled but its connection prepares statements "
            f"(prepare_threshold={raw.prepare_threshold})"
        )
    text = sql if isinstance(sql, str) else str(sql)
    if SESSION_STATE.search(text):
        raise SessionStateError(
            f"{wrapper.alias!r} is behind a transaction pooler; this statement keeps session "
            f"state there: {text[:200]!r}"
        )
    return execute(sql, params, many, context)


def _install_guard(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.alias == "default" and guard_statement not in connection.execute_wrappers:
        connection.execute_wrappers.append(guard_statement)


def _bouncer_port(server_port: int, user: str) -> int:
    """Return the port of the stage's PgBouncer, starting it in this process if none runs.

    It lets in ``user`` only, the role ``DATABASE_URL`` names (any role the server trusts).
    """
    if os.environ.get(PORT_ENV):
        return int(os.environ[PORT_ENV])
    # Only here: the other processes of the stage find the port in their environment.
    bouncer = PrivateBouncer(server_port, user=user, default_pool_size=20, max_db_connections=40)
    bouncer.start()
    atexit.register(bouncer.stop)
    os.environ[PORT_ENV] = str(bouncer.port)
    os.environ[SERVER_PORT_ENV] = str(server_port)
    os.environ[OWNER_ENV] = str(os.getpid())
    return bouncer.port


def configure(databases: dict[str, dict[str, Any]], jobqueue: dict[str, Any]) -> None:
    """Point ``databases["default"]`` at the stage's PgBouncer and mark it pooled in ``jobqueue``.

    Args:
        databases: the settings' ``DATABASES`` (PostgreSQL ``default``), changed in place.
        jobqueue: the settings' ``JOBQUEUE``, changed in place.
    """
    given = databases["default"]
    port = int(given.get("PORT") or 5432)
    # A worker subprocess's DATABASE_URL already names the pooler: the server is behind it.
    if os.environ.get(PORT_ENV) and port == int(os.environ[PORT_ENV]):
        port = int(os.environ[SERVER_PORT_ENV])
    direct = {**given, "HOST": given.get("HOST") or "127.0.0.1", "PORT": port}
    databases["direct"] = {**direct, "TEST": {"MIRROR": "default"}}
    databases["default"] = {
        **direct,
        "PORT": _bouncer_port(port, direct.get("USER") or "postgres"),
        # Django's own advice behind PgBouncer (docs/deployment.md says it for a pooled alias).
        "DISABLE_SERVER_SIDE_CURSORS": True,
    }
    jobqueue.setdefault("POOLED_DATABASES", {"default": {"LISTEN_DATABASE": "direct"}})
    connection_created.connect(_install_guard, dispatch_uid="tests.pooler_stage")


def release(dbname: str, user: str) -> None:
    """Close PgBouncer's server connections to ``dbname`` (before the test database is dropped).

    A transaction pooler keeps idle server connections open after their clients left; DROP
    DATABASE refuses a database that has any.
    """
    port = os.environ.get(PORT_ENV)
    if not port:
        return
    with psycopg.connect(f"postgres://{user}@127.0.0.1:{port}/pgbouncer", autocommit=True) as c:
        # The console speaks the simple query protocol; RESUME lets the drop's clients in.
        cursor = psycopg.ClientCursor(c)
        cursor.execute(f"KILL {dbname}")
        cursor.execute(f"RESUME {dbname}")
