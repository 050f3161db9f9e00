"""Pooler mode at run time: which connection listens, no prepared statements, pooler detection.

``JOBQUEUE["POOLED_DATABASES"]`` (parsed in ``jobqueue/settings/pooling.py``) marks aliases reached
through a transaction-mode pooler. jobqueue's statements keep no session state anyway (advisory
locks are ``pg_advisory_xact_lock``, limits are ``set_config(..., true)``, the cron leader is a
table lease, no server-side cursors), so on a pooled alias this module changes three things:

* :func:`listen_alias`: the worker LISTENs on the alias's ``LISTEN_DATABASE`` (direct), or polls;
* :func:`forbid_prepared_statements`: every Django connection to a pooled alias has psycopg's
  ``prepare_threshold`` off, whatever ``OPTIONS`` say (``manage.py check`` warns about them);
* :func:`refuse_unmarked_pooler`: ``runworkers`` (and ``manage.py check --database``) refuse an
  alias not marked pooled that is behind a transaction pooler, and a ``LISTEN_DATABASE`` that is.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.settings.conf import get_settings

__all__ = [
    "forbid_prepared_statements",
    "is_pooled",
    "listen_alias",
    "refuse_unmarked_pooler",
    "shared_backend_pid",
]

#: How long the detection waits for each connection, seconds: ``runworkers`` must decide within
#: 10 s; an unreachable database is not a pooler (the worker then waits for it as usual).
DETECT_CONNECT_TIMEOUT_S = 3
#: Rounds of the two-connection probe: a busy pool may hand the second client another idle
#: server once; a transaction pooler that is not busy hands it the same one (LIFO).
DETECT_ROUNDS = 3


def is_pooled(alias: str) -> bool:
    """Return whether database ``alias`` is marked as behind a transaction pooler."""
    return alias in get_settings().pooled_databases


def listen_alias(alias: str) -> str | None:
    """Return the alias a worker of the queue database ``alias`` LISTENs on, or None (poll).

    Args:
        alias: database alias of the worker's queues.

    Returns:
        ``alias`` itself when it is not pooled; its ``LISTEN_DATABASE`` when it is (a direct
        connection to the same primary); None when it is pooled without one: the worker polls
        every ``POLL_INTERVAL_SECONDS`` (1 s or less keeps pickup within 1 s).
    """
    pooled = get_settings().pooled_databases
    if alias not in pooled:
        return alias
    return pooled[alias]


@receiver(connection_created, dispatch_uid="jobqueue.store.pooler")
def forbid_prepared_statements(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: no server-side prepared statements on a pooled alias.

    psycopg names prepared statements per client connection; behind a transaction pooler two
    clients share a server backend and their names clash (DuplicatePreparedStatement), or a
    statement prepared on one backend is run on another (InvalidSqlStatementName). Django's
    default is already ``prepare_threshold=None``; this also covers ``OPTIONS`` that set it.
    """
    if connection.vendor != "postgresql" or not is_pooled(connection.alias):
        return
    raw = connection.connection
    if hasattr(raw, "prepare_threshold"):  # psycopg 3; psycopg2 never prepares
        raw.prepare_threshold = None


def shared_backend_pid(alias: str) -> int | None:
    """Probe ``alias`` for a transaction pooler: two open connections, one server backend.

    Opens two connections to ``alias`` (autocommit, no prepared statements) and asks each for
    ``pg_backend_pid()``, :data:`DETECT_ROUNDS` times. On direct connections, and through a
    session-mode pooler, two open connections never share a backend.

    Args:
        alias: a PostgreSQL database alias.

    Returns:
        The backend pid both connections reported (a transaction or statement pooler), or None
        (none seen, or the database could not be reached: the worker waits for it as usual).
    """
    wrapper = connections[alias]
    # Django's own connection parameters and factory (no psycopg import here: SQLite-only
    # installs have none), outside its per-thread handling: both must be open at once.
    params = dict(wrapper.get_connection_params())
    params.setdefault("connect_timeout", DETECT_CONNECT_TIMEOUT_S)
    params["application_name"] = "jobqueue pooler probe"
    params["prepare_threshold"] = None
    # The driver's own errors: these connections are not wrapped by Django's error mapping.
    driver_error: type[Exception] = wrapper.Database.Error  # type: ignore[attr-defined]
    opened: list[Any] = []
    try:
        for _ in range(2):
            raw = wrapper.get_new_connection(params)
            opened.append(raw)
            raw.autocommit = True
        for _ in range(DETECT_ROUNDS):
            pids = [raw.execute("SELECT pg_backend_pid()").fetchone()[0] for raw in opened]
            if pids[0] == pids[1]:
                return int(pids[0])
    except driver_error:
        return None
    finally:
        for raw in opened:
            raw.close()
    return None


def refuse_unmarked_pooler(alias: str) -> None:
    """Raise if ``alias`` is behind a transaction pooler but not marked, or listens through one.

    Args:
        alias: database alias of the worker's queues.

    Raises:
        JobQueueConfigurationError: ``alias`` shares server backends between open connections
            (a transaction pooler) and is not in ``JOBQUEUE["POOLED_DATABASES"]``; or it is, and
            its ``LISTEN_DATABASE`` does too. The message names the setting.
    """
    if connections[alias].vendor != "postgresql":
        return
    listen = listen_alias(alias)
    if not is_pooled(alias):
        pid = shared_backend_pid(alias)
        if pid is not None:
            raise JobQueueConfigurationError(
                f"database {alias!r} is behind a transaction pooler (two open connections were "
                f"served by one server backend, pid {pid}): LISTEN and session state do not "
                f"work there. Mark it: JOBQUEUE['POOLED_DATABASES'] = {{{alias!r}: "
                "{'LISTEN_DATABASE': <an alias that reaches the primary directly, or None to "
                "poll>}}, or point the alias at the primary (or a session-mode pool)"
            )
    elif listen is not None and listen in connections and shared_backend_pid(listen) is not None:
        raise JobQueueConfigurationError(
            f"JOBQUEUE['POOLED_DATABASES'][{alias!r}]['LISTEN_DATABASE'] is {listen!r}, which is "
            "behind a transaction pooler too: LISTEN there loses wake-ups. Point it at the "
            "primary directly, or set it to None to poll"
        )
