"""System checks: the JOBQUEUE setting is valid, and the queue database suits several workers."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import connections

from .conf import build_settings
from .errors import CronConfigurationError, JobQueueConfigurationError


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report an invalid ``JOBQUEUE`` setting as an error naming the key (jobqueue.E001)."""
    from django.conf import settings

    try:
        build_settings(getattr(settings, "JOBQUEUE", None))
    except CronConfigurationError:
        return []  # reported by check_cron_settings (jobqueue.E002)
    except JobQueueConfigurationError as exc:
        return [checks.Error(str(exc), id="jobqueue.E001")]
    return []


@checks.register()
def check_cron_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report each bad ``JOBQUEUE["CRON"]`` entry (jobqueue.E002).

    Also warn about an entry whose handler is registered but cannot take the ``fire_time``
    keyword argument every cron job gets (jobqueue.W002).
    """
    from django.conf import settings

    from .conf import DEFAULT_MAX_PAYLOAD_BYTES, parse_cron_setting
    from .cron import check_handler

    setting = getattr(settings, "JOBQUEUE", None)
    if not isinstance(setting, dict) or setting.get("CRON") is None:
        return []
    raw = setting["CRON"]
    limit = setting.get("MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        limit = DEFAULT_MAX_PAYLOAD_BYTES  # reported by check_settings (E001)
    if not isinstance(raw, dict):
        try:
            parse_cron_setting(raw, limit)
        except CronConfigurationError as exc:
            return [checks.Error(str(exc), id="jobqueue.E002")]
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
                    id="jobqueue.E002",
                )
            )
            continue
        try:
            check_handler(spec.job_type)
        except ValueError as exc:
            messages.append(
                checks.Warning(f"JOBQUEUE['CRON'][{name!r}]: {exc}", id="jobqueue.W002")
            )
    return messages


@checks.register(checks.Tags.database)
def check_database(app_configs: Any = None, databases: Any = None, **kwargs: Any):
    """Warn when the default database is not PostgreSQL (jobqueue.W001)."""
    if not databases or "default" not in databases:
        return []
    vendor = connections["default"].vendor
    if vendor == "postgresql":
        return []
    return [
        checks.Warning(
            f"jobqueue is running on {vendor}: fine for development, not for several worker "
            "processes on a busy site.",
            hint="Use PostgreSQL in production (SKIP LOCKED claims, database clock).",
            id="jobqueue.W001",
        )
    ]
