"""System checks (``manage.py check``), each with an id and a hint.

* ``jobqueue.E001`` — the ``JOBQUEUE`` setting is invalid, one error per bad key (unknown keys,
  wrong types; also
  ``BREAKER`` thresholds, windows and ratios, and ``RETRY_BUDGET`` fractions, out of range).
* ``jobqueue.W001`` — the default database is not PostgreSQL.
* ``jobqueue.W002`` — SQLite without ``transaction_mode = "IMMEDIATE"``.
* ``jobqueue.E002`` — a ``TASKS`` entry using ``JobQueueBackend`` is invalid (``QUEUES``,
  ``OPTIONS``).
* ``jobqueue.E003`` — a ``TASKS`` entry names ``JobQueueBackend`` but this Django has no
  ``django.tasks`` (Django 5.2).
* ``jobqueue.E004`` — a job type named in the settings cannot be resolved.
* ``jobqueue.E005`` — an entry of ``JOBQUEUE["CRON"]`` is invalid.
* ``jobqueue.W003`` — a cron entry's handler cannot take the ``fire_time`` keyword argument.
* ``jobqueue.W005`` — ``jobqueue.metrics`` is mounted in the URLconf but neither
  ``JOBQUEUE["METRICS_TOKEN"]`` nor ``JOBQUEUE["METRICS_PUBLIC"]`` is set (only staff sessions
  may read it).
* ``jobqueue.W004`` — ``JOBQUEUE["ENQUEUE_UNREGISTERED"]`` is True: enqueue accepts any job type
  name, so a mistyped one is retried until dead (``unknown_type``); a list of prefixes is not
  reported. With the default (False), a cron entry of a type not registered here is E004.
* ``jobqueue.E006`` — a ``TASKS`` entry names ``JobQueueBackend`` but ``"jobqueue"`` is not in
  ``INSTALLED_APPS``. Reported by the backend's own ``check()`` (``jobqueue/tasks/backend.py``):
  without the app, nothing here is registered.
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

from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.utils import load_backend
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.module_loading import import_string

from jobqueue.cron.entries import check_handler
from jobqueue.errors import CronConfigurationError, JobQueueConfigurationError, UnknownJobType
from jobqueue.options import allows_unregistered
from jobqueue.registry import resolve_handler
from jobqueue.settings.conf import DEFAULT_MAX_PAYLOAD_BYTES, build_settings, get_settings
from jobqueue.settings.cron import parse_cron_setting
from jobqueue.settings.pooling import LISTEN_DATABASE

# Importing the pooler also registers its connection_created receiver (no prepared statements
# on a pooled alias): this module is imported by AppConfig.ready in every process.
from jobqueue.store.pooler import refuse_unmarked_pooler
from jobqueue.validation import is_count

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


BACKEND_PATH = "jobqueue.backends.JobQueueBackend"


@checks.register(CHECK_TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report an invalid ``JOBQUEUE`` setting as an error naming the key (jobqueue.E001)."""
    try:
        build_settings(getattr(django_settings, "JOBQUEUE", None))
    except CronConfigurationError:
        return []  # reported by check_cron_settings (jobqueue.E005)
    except JobQueueConfigurationError as exc:
        # One error per bad key, all at once.
        return [
            checks.Error(
                problem,
                hint=(
                    "Fix the key in settings.JOBQUEUE; docs/settings.md lists every key and "
                    "its range."
                ),
                id="jobqueue.E001",
            )
            for problem in exc.problems
        ]
    return []


@checks.register(CHECK_TAG)
def check_cron_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report each bad ``JOBQUEUE["CRON"]`` entry (jobqueue.E005).

    Also warn about an entry whose handler is registered but cannot take the ``fire_time``
    keyword argument every cron job gets (jobqueue.W003).
    """
    setting = getattr(django_settings, "JOBQUEUE", None)
    if not isinstance(setting, dict) or setting.get("CRON") is None:
        return []
    raw = setting["CRON"]
    limit = setting.get("MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES)
    if not is_count(limit):
        limit = DEFAULT_MAX_PAYLOAD_BYTES  # reported by check_settings (E001)
    if not isinstance(raw, dict):
        try:
            parse_cron_setting(raw, limit)
        except CronConfigurationError as exc:
            return [checks.Error(str(exc), id="jobqueue.E005")]
    messages: list[checks.CheckMessage] = []
    for name, entry in raw.items():
        try:
            [spec] = parse_cron_setting({name: entry}, limit)
        except CronConfigurationError as exc:
            messages.append(
                checks.Error(
                    str(exc),
                    hint="Cron expressions have 5 fields, or 6 with leading seconds; time "
                    "zones are zone database names such as 'Europe/Berlin'.",
                    id="jobqueue.E005",
                )
            )
            continue
        try:
            check_handler(spec.job_type)
        except ValueError as exc:
            messages.append(
                checks.Warning(f"JOBQUEUE['CRON'][{name!r}]: {exc}", id="jobqueue.W003")
            )
    return messages


@checks.register(CHECK_TAG)
def check_database(app_configs: Any = None, **kwargs: Any):
    """Warn when the default database is not PostgreSQL (jobqueue.W001, jobqueue.W002).

    It reads ``DATABASES`` only (no connection), so it is not tagged ``database``: a plain
    ``manage.py check`` shows it, as docs/settings.md says (the tag would hide it unless
    ``--database`` is given).
    """
    if "default" not in connections:
        return []
    connection = connections["default"]
    vendor = connection.vendor
    if vendor == "postgresql":
        return []
    messages = [
        checks.Warning(
            f"jobqueue is running on {vendor}: fine for development, not for several worker "
            "processes on a busy site.",
            hint="Use PostgreSQL in production (SKIP LOCKED claims, database clock).",
            id="jobqueue.W001",
        )
    ]
    options = connection.settings_dict.get("OPTIONS", {})
    if vendor == "sqlite" and options.get("transaction_mode") != "IMMEDIATE":
        messages.append(
            checks.Warning(
                "SQLite without OPTIONS['transaction_mode'] = 'IMMEDIATE': a worker's threads "
                "fail with 'database is locked' when two of them start writing at once.",
                hint="Set DATABASES['default']['OPTIONS'] = "
                "{'transaction_mode': 'IMMEDIATE', 'timeout': 30}.",
                id="jobqueue.W002",
            )
        )
    return messages


def _is_ours(backend_path: Any) -> bool | None:
    """Return whether ``TASKS[...]["BACKEND"]`` is JobQueueBackend (or a subclass).

    None when it names ours but ``django.tasks`` cannot be imported.
    """
    if not isinstance(backend_path, str):
        return False
    try:
        # Here, not at module level: django.tasks arrived in Django 6.0, and on 5.2 (supported)
        # the backend cannot be imported at all.
        from jobqueue.backends import JobQueueBackend
    except ImportError:
        return None if backend_path.startswith("jobqueue.") else False
    try:
        backend_class = import_string(backend_path)
    except ImportError:
        return False  # not ours to report: Django's own TASKS handling names it
    return isinstance(backend_class, type) and issubclass(backend_class, JobQueueBackend)


@checks.register(CHECK_TAG)
def check_tasks_setting(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check every ``TASKS`` entry that uses ``JobQueueBackend`` (jobqueue.E002, E003)."""
    tasks = getattr(django_settings, "TASKS", None)
    if not isinstance(tasks, dict):
        return []
    messages: list[checks.CheckMessage] = []
    for alias, params in tasks.items():
        if not isinstance(params, dict):
            continue
        ours = _is_ours(params.get("BACKEND"))
        if ours is None:
            messages.append(
                checks.Error(
                    f"TASKS[{alias!r}] uses {params.get('BACKEND')}, but this Django has no "
                    "django.tasks (it arrived in Django 6.0).",
                    hint="Upgrade to Django 6.0 or later, or remove the entry and use jobqueue's "
                    "own API (@job, jobqueue.enqueue).",
                    id="jobqueue.E003",
                )
            )
        elif ours:
            # Here, not at module level: Django 6.0+ only, as in _is_ours (ours is True only
            # where the backend imported).
            from django.tasks.exceptions import InvalidTaskBackend

            from jobqueue.backends import parse_backend_params

            try:
                parse_backend_params(alias, params)
            except InvalidTaskBackend as exc:
                messages.append(
                    checks.Error(
                        str(exc),
                        hint="QUEUES is a list of queue names ([A-Za-z0-9_.:-]{1,100}); OPTIONS "
                        "takes database, max_attempts, timeout_s and backoff.",
                        id="jobqueue.E002",
                    )
                )
    return messages


@checks.register(CHECK_TAG)
def check_enqueue_unregistered(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when enqueue accepts every unregistered job type name (jobqueue.W004)."""
    try:
        allowed = get_settings().enqueue_unregistered
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    if "" not in allowed:
        return []
    return [
        checks.Warning(
            "JOBQUEUE['ENQUEUE_UNREGISTERED'] is True: enqueue accepts any job type name, so a "
            "mistyped one is accepted and retried until dead (unknown_type).",
            hint="List the prefixes of the types only the workers define instead, e.g. "
            "JOBQUEUE['ENQUEUE_UNREGISTERED'] = ['billing.'].",
            id="jobqueue.W004",
        )
    ]


def _metrics_mounted() -> bool:
    """Return whether the root URLconf mounts ``jobqueue.metrics.view`` or a ``cached_view``."""

    def walk(patterns: Iterable[Any]) -> bool:
        for pattern in patterns:
            if isinstance(pattern, URLResolver) and walk(pattern.url_patterns):
                return True
            if isinstance(pattern, URLPattern) and getattr(
                pattern.callback, "jobqueue_metrics", False
            ):
                return True
        return False

    try:
        return walk(get_resolver().url_patterns)
    except Exception:  # noqa: BLE001 - a broken URLconf is Django's own check to report
        return False


@checks.register(CHECK_TAG)
def check_metrics_access(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when the metrics view is mounted and only staff sessions may read it (W005)."""
    try:
        conf = get_settings()
    except JobQueueConfigurationError:
        return []  # reported by check_settings (E001)
    if conf.metrics_token is not None or conf.metrics_public or not _metrics_mounted():
        return []
    return [
        checks.Warning(
            "jobqueue.metrics is mounted but neither JOBQUEUE['METRICS_TOKEN'] nor "
            "JOBQUEUE['METRICS_PUBLIC'] is set: it refuses every scrape but a staff session's "
            "(401), so Prometheus cannot read it.",
            hint="Set JOBQUEUE['METRICS_TOKEN'] to a random string of 16+ characters and give it "
            "to Prometheus (authorization: {credentials: ...}), or set "
            "JOBQUEUE['METRICS_PUBLIC'] = True if only a private network reaches the URL.",
            id="jobqueue.W005",
        )
    ]


def job_types_named_in_settings() -> Iterable[tuple[str, str]]:
    """Return ``(where, job type)`` for every job type that the settings name.

    The job type of each ``JOBQUEUE["CRON"]`` entry, each type ``RATE_LIMITS["type"]`` limits and
    each ``"type:<name>"`` key of ``CONCURRENCY_LIMITS``: a mistyped name there would limit
    nothing, silently. An invalid ``JOBQUEUE`` is reported elsewhere (E001, E005) and yields
    nothing here.
    """
    try:
        conf = get_settings()
    except JobQueueConfigurationError:
        return []
    named = [(f"JOBQUEUE['CRON'][{spec.name!r}]", spec.job_type) for spec in conf.cron]
    named += [
        (f"JOBQUEUE['RATE_LIMITS']['type'][{name!r}]", name) for name in conf.rate_limits.types
    ]
    named += [
        (f"JOBQUEUE['CONCURRENCY_LIMITS'][{key!r}]", key.removeprefix("type:"))
        for key in conf.concurrency_limits
        if key.startswith("type:")
    ]
    return named


@checks.register(CHECK_TAG)
def check_job_types(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report each job type named in the settings that workers could not resolve (E004).

    A name ``JOBQUEUE["ENQUEUE_UNREGISTERED"]`` allows is left out: another service's
    workers define it, and the fire enqueues it like any allowed name.
    """
    messages: list[checks.CheckMessage] = []
    for where, type_name in job_types_named_in_settings():
        if allows_unregistered(type_name):
            continue
        try:
            resolve_handler(type_name)
        except UnknownJobType:
            messages.append(
                checks.Error(
                    f"{where} names job type {type_name!r}, which no @job or @task defines.",
                    hint="Use the dotted path of a @job or @task function, and define it in a "
                    "module of an installed app that jobqueue imports (jobs.py or tasks.py, "
                    "see JOBQUEUE['DISCOVER_MODULES']); if only other workers define it, "
                    "allow it with JOBQUEUE['ENQUEUE_UNREGISTERED'] (a list of prefixes).",
                    id="jobqueue.E004",
                )
            )
    return messages
