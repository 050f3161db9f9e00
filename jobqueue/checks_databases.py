"""System checks of the databases jobqueue uses (``manage.py check``), each with an id and a hint.

Registered when :mod:`jobqueue.checks` imports this module (``AppConfig.ready``).

* ``jobqueue.E020`` — ``JOBQUEUE["POOLED_DATABASES"]`` names an alias that is not a PostgreSQL
  alias of ``DATABASES``, or a ``LISTEN_DATABASE`` that is not one, or that is pooled itself.
* ``jobqueue.W020`` — a pooled alias whose ``OPTIONS`` set ``prepare_threshold``: psycopg would
  prepare statements there (jobqueue turns it off on that alias's connections; say so in the
  settings, where every reader sees it).
* ``jobqueue.W021`` — a pooled alias without ``DISABLE_SERVER_SIDE_CURSORS = True``: Django's
  ``.iterator()`` server-side cursors do not survive transaction pooling.
* ``jobqueue.W022`` — a PostgreSQL alias not marked pooled whose ``PORT`` is 6432 (PgBouncer's
  own): statically, it looks like a pooler.
* ``jobqueue.E030`` — ``JOBQUEUE["OUTBOX_DATABASES"]`` names an alias that is not in ``DATABASES``.
* ``jobqueue.E021`` — ``manage.py check --database ALIAS`` (and ``migrate``): the alias is behind
  a transaction pooler (two open connections share a server backend) and not marked in
  ``POOLED_DATABASES``, or its ``LISTEN_DATABASE`` is. ``runworkers`` refuses to start then.
* ``jobqueue.E022`` — ``JOBQUEUE["QUEUE_DATABASES"]`` names an alias that is not in ``DATABASES``.
* ``jobqueue.W023`` — ``QUEUE_DATABASES`` places queues off ``default`` but ``DATABASE_ROUTERS``
  lacks ``jobqueue.routers.QueueDatabaseRouter``: ``migrate`` would put jobqueue's tables on
  every database, and leave them off none.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import load_backend

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.settings.conf import get_settings
from jobqueue.settings.pooling import LISTEN_DATABASE

# Importing the pooler also registers its connection_created receiver (no prepared statements
# on a pooled alias): this module is imported by AppConfig.ready in every process.
from jobqueue.store.pooler import refuse_unmarked_pooler

__all__ = [
    "CHECK_TAG",
    "check_outbox_databases",
    "check_pooled_databases",
    "check_queue_databases",
    "check_transaction_pooler",
]

#: The tag of jobqueue's own checks (``manage.py check --tag jobqueue``): ``runworkers`` runs
#: them, with Django's model checks, instead of every check (docs/decisions.md, 2026-12-05).
CHECK_TAG = "jobqueue"


#: PgBouncer's default port: an alias on it that is not marked pooled is worth a look.
PGBOUNCER_PORT = "6432"


def _is_postgres(params: Any) -> bool:
    # The backend's vendor, not its ENGINE's name: a PostGIS or a custom backend built on
    # Django's PostgreSQL one is PostgreSQL too. From the settings given (these checks also
    # run under override_settings), loading the backend module only, never connecting.
    if not isinstance(params, dict) or not params.get("ENGINE"):
        return False
    try:
        return load_backend(params["ENGINE"]).DatabaseWrapper.vendor == "postgresql"
    except ImproperlyConfigured:  # an ENGINE that does not import: Django reports it
        return False


@checks.register(CHECK_TAG)
def check_outbox_databases(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check that every ``OUTBOX_DATABASES`` alias is in ``DATABASES`` (jobqueue.E030)."""
    try:
        aliases = get_settings().outbox_databases
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    return [
        checks.Error(
            f"JOBQUEUE['OUTBOX_DATABASES'] names {alias!r}, which is not an alias of DATABASES.",
            hint="Name the aliases whose transactions enqueue jobs for queues on other databases.",
            id="jobqueue.E030",
        )
        for alias in aliases
        if alias not in django_settings.DATABASES
    ]


@checks.register(CHECK_TAG)
def check_pooled_databases(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check pooler mode against ``DATABASES`` (jobqueue.E020, W020, W021, W022).

    Only what the settings show; a pooler that is really there is found by the database check
    (:func:`check_transaction_pooler`, E021) and by ``runworkers`` at start-up.
    """
    try:
        pooled = get_settings().pooled_databases
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    databases = django_settings.DATABASES
    where = "JOBQUEUE['POOLED_DATABASES']"
    messages: list[checks.CheckMessage] = []
    for alias, listen in pooled.items():
        if not _is_postgres(databases.get(alias)):
            messages.append(
                checks.Error(
                    f"{where} names {alias!r}, which is not a PostgreSQL alias of DATABASES.",
                    hint="Name the DATABASES alias that goes through PgBouncer.",
                    id="jobqueue.E020",
                )
            )
            continue
        if listen is not None and (not _is_postgres(databases.get(listen)) or listen in pooled):
            messages.append(
                checks.Error(
                    f"{where}[{alias!r}]['{LISTEN_DATABASE}'] is {listen!r}: not a PostgreSQL "
                    "alias of DATABASES that reaches the primary directly.",
                    hint="Add a DATABASES alias for the same database without the pooler (host "
                    "and port of the primary), or set it to None to poll.",
                    id="jobqueue.E020",
                )
            )
        params = databases[alias]
        if params.get("OPTIONS", {}).get("prepare_threshold") is not None:
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}]['OPTIONS']['prepare_threshold'] lets psycopg prepare "
                    "statements, which clash behind a transaction pooler "
                    "(DuplicatePreparedStatement, InvalidSqlStatementName).",
                    hint="Remove it or set it to None; jobqueue turns it off on this alias's "
                    "connections, but other code reading the settings would not.",
                    id="jobqueue.W020",
                )
            )
        if not params.get("DISABLE_SERVER_SIDE_CURSORS"):
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is pooled but keeps server-side cursors: "
                    "QuerySet.iterator() outside a transaction fails behind a transaction pooler.",
                    hint=f"Set DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True.",
                    id="jobqueue.W021",
                )
            )
    for alias, params in databases.items():
        if alias in pooled or not _is_postgres(params):
            continue
        if str(params.get("PORT") or "") == PGBOUNCER_PORT:
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] uses port {PGBOUNCER_PORT}, PgBouncer's: if it is a "
                    "transaction pooler, workers refuse to start (LISTEN, prepared statements "
                    "and session state break there).",
                    hint=f"Mark it: {where} = {{{alias!r}: {{'{LISTEN_DATABASE}': <a direct "
                    "alias, or None to poll>}}; `manage.py check --database "
                    f"{alias}` looks for a pooler (jobqueue.E021).",
                    id="jobqueue.W022",
                )
            )
    return messages


@checks.register(checks.Tags.database)
def check_transaction_pooler(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Report a transaction pooler on an alias not marked pooled (jobqueue.E021).

    Runs with ``manage.py check --database ALIAS`` (and ``migrate``): two connections are opened
    to each alias named and asked for their server backend (``store/pooler.py``).
    """
    try:
        get_settings()
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    messages: list[checks.CheckMessage] = []
    for alias in databases or ():
        try:
            refuse_unmarked_pooler(alias)
        except JobQueueConfigurationError as exc:
            messages.append(
                checks.Error(
                    str(exc),
                    hint="See 'Behind PgBouncer' in docs/deployment.md.",
                    id="jobqueue.E021",
                )
            )
    return messages


ROUTER_PATH = "jobqueue.routers.QueueDatabaseRouter"


@checks.register(CHECK_TAG)
def check_queue_databases(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check ``JOBQUEUE["QUEUE_DATABASES"]`` against ``DATABASES`` (jobqueue.E022, W023).

    Any engine jobqueue supports may hold a queue (SQLite for development and tests too).
    """
    try:
        placed = get_settings().queue_databases
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    databases = django_settings.DATABASES
    messages: list[checks.CheckMessage] = []
    for queue, aliases in placed.items():
        for alias in aliases:
            if alias not in databases:
                messages.append(
                    checks.Error(
                        f"JOBQUEUE['QUEUE_DATABASES'][{queue!r}] names {alias!r}, which is not "
                        f"an alias of DATABASES ({', '.join(sorted(databases))}).",
                        hint="Add the database to DATABASES, or fix the alias.",
                        id="jobqueue.E022",
                    )
                )
    elsewhere = {alias for aliases in placed.values() for alias in aliases} - {"default"}
    if elsewhere and ROUTER_PATH not in getattr(django_settings, "DATABASE_ROUTERS", []):
        messages.append(
            checks.Warning(
                f"JOBQUEUE['QUEUE_DATABASES'] stores queues on {', '.join(sorted(elsewhere))} "
                f"but DATABASE_ROUTERS lacks {ROUTER_PATH!r}: `migrate --database` would create "
                "jobqueue's tables on every database.",
                hint=f"Add {ROUTER_PATH!r} to DATABASE_ROUTERS, then run `manage.py migrate "
                "--database ALIAS` for each queue database.",
                id="jobqueue.W023",
            )
        )
    return messages
