"""System checks: the JOBQUEUE setting is valid, and the queue database suits several workers."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import connections

from .conf import build_settings
from .errors import JobQueueConfigurationError


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report an invalid ``JOBQUEUE`` setting as an error naming the key (jobqueue.E001)."""
    from django.conf import settings

    try:
        build_settings(getattr(settings, "JOBQUEUE", None))
    except JobQueueConfigurationError as exc:
        return [checks.Error(str(exc), id="jobqueue.E001")]
    return []


@checks.register(checks.Tags.database)
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any):
    """Warn when the default database is not PostgreSQL (jobqueue.W001)."""
    if not databases or "default" not in databases:
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
