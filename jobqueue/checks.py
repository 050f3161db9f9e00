"""System checks (``manage.py check``), each with an id and a hint.

* ``jobqueue.E001`` — the ``JOBQUEUE`` setting is invalid (unknown keys, wrong types; also
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
* ``jobqueue.W004`` — ``JOBQUEUE["ENQUEUE_UNREGISTERED"]`` is True: enqueue accepts any job type
  name, so a mistyped one is retried until dead (``unknown_type``); a list of prefixes is not
  reported. With the default (False), a cron entry of a type not registered here is E004.
* ``jobqueue.E006`` — a ``TASKS`` entry names ``JobQueueBackend`` but ``"jobqueue"`` is not in
  ``INSTALLED_APPS``. Reported by the backend's own ``check()`` (``jobqueue/tasks/backend.py``):
  without the app, nothing here is registered.
* ``jobqueue.E020``-``E022``, ``E030``, ``W020``-``W023`` — the databases: pooler mode, queue
  databases, outbox databases (:mod:`jobqueue.checks_databases`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db import connections

# Registers the database checks too (pooler mode, queue and outbox databases); re-exported.
from jobqueue.checks_databases import CHECK_TAG
from jobqueue.checks_databases import check_outbox_databases as check_outbox_databases
from jobqueue.checks_databases import check_pooled_databases as check_pooled_databases
from jobqueue.checks_databases import check_queue_databases as check_queue_databases
from jobqueue.checks_databases import check_transaction_pooler as check_transaction_pooler
from jobqueue.cron.entries import check_handler

# Registers the database checks too (pooler mode, queue and outbox databases); re-exported.
from jobqueue.errors import CronConfigurationError, JobQueueConfigurationError, UnknownJobType
from jobqueue.options import allows_unregistered
from jobqueue.settings.conf import DEFAULT_MAX_PAYLOAD_BYTES, build_settings, get_settings
from jobqueue.settings.cron import parse_cron_setting
from jobqueue.validation import is_count
from jobqueue.worker.executor import resolve_handler

BACKEND_PATH = "jobqueue.backends.JobQueueBackend"


@checks.register(CHECK_TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report an invalid ``JOBQUEUE`` setting as an error naming the key (jobqueue.E001)."""
    from django.conf import settings

    try:
        build_settings(getattr(settings, "JOBQUEUE", None))
    except CronConfigurationError:
        return []  # reported by check_cron_settings (jobqueue.E005)
    except JobQueueConfigurationError as exc:
        return [
            checks.Error(
                str(exc),
                hint="Fix the key in settings.JOBQUEUE; the README lists every key and its type.",
                id="jobqueue.E001",
            )
        ]
    return []


@checks.register(CHECK_TAG)
def check_cron_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report each bad ``JOBQUEUE["CRON"]`` entry (jobqueue.E005).

    Also warn about an entry whose handler is registered but cannot take the ``fire_time``
    keyword argument every cron job gets (jobqueue.W003).
    """
    from django.conf import settings

    setting = getattr(settings, "JOBQUEUE", None)
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
    ``manage.py check`` shows it, as the README says (the tag would hide it unless
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
    from django.utils.module_loading import import_string

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
    from django.conf import settings

    tasks = getattr(settings, "TASKS", None)
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
            from django.tasks.exceptions import InvalidTaskBackend

            from jobqueue.backends import parse_backend_params  # Django 6.0+ only, as in _is_ours

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
