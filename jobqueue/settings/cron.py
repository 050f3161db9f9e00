"""Internal: what a cron entry is made of, checked: the rules of ``schedule()`` and ``CRON``.

:func:`validate_entry` checks one entry's fields; :func:`parse_cron_setting` reads
``JOBQUEUE["CRON"]`` into :class:`CronSpec` values with it.

A leaf-ish module (imports ``crontab``, ``errors``, ``payloads`` and ``validation``, never the
store, the models or ``conf``), so ``conf`` validates ``JOBQUEUE["CRON"]`` with it at start-up
without pulling the store in. The checks that need more (a ``@job`` object, the handler
registered in this process, the ``MAX_PAYLOAD_BYTES`` setting) are in :mod:`.entries`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobqueue import validation
from jobqueue.errors import CronConfigurationError, InvalidJobOption, InvalidPayload
from jobqueue.payloads import to_json
from jobqueue.settings.crontab import InvalidTimezone, parse_cron_expression, zone

#: The payload key that carries the fire time to the handler.
FIRE_TIME_KEY = "fire_time"
MISSED_POLICIES = ("once", "skip", "all")

DEFAULT_CRON_MISSED_CAP = 10
"""With ``missed="all"``, the most missed fire times one catch-up runs."""


def accepts_fire_time(func: Callable[..., Any]) -> bool:
    """Return True if ``func`` can be called with a ``fire_time`` keyword argument."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell; do not refuse
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == FIRE_TIME_KEY and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


def validate_entry(
    *,
    name: Any,
    cron_expr: Any,
    job_type: Any,
    max_payload_bytes: int,
    queue: Any = "default",
    payload: Any = None,
    timezone: Any = "UTC",
    priority: Any = 0,
    missed: Any = "once",
    missed_cap: Any = DEFAULT_CRON_MISSED_CAP,
    enabled: Any = True,
) -> dict[str, Any]:
    """Check the fields of a cron entry and return them normalized.

    Args:
        name: the entry's unique name.
        cron_expr: the cron expression.
        job_type: the job type's name (:func:`jobqueue.cron.validate_entry` also takes the
            object ``@job`` returned).
        max_payload_bytes: the payload limit (bytes of JSON).
        queue: the queue name.
        payload: a dict (None: empty), without the reserved ``fire_time`` key.
        timezone: a zone database name.
        priority: -100..100.
        missed: ``once``, ``skip`` or ``all``.
        missed_cap: the most missed times ``all`` runs, >= 1.
        enabled: a bool.

    Returns:
        The fields by name (``payload`` a dict, ``cron_expr`` normalized).

    Raises:
        InvalidCronExpression: the expression does not parse, or never fires.
        InvalidJobOption: a bad name, time zone, queue, job type, priority, missed policy,
            missed_cap or enabled (the message names the option and the value).
        InvalidPayload: the payload is not a JSON object, or holds the reserved ``fire_time``.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 200 or "\x00" in name:
        raise InvalidJobOption(
            "name", f"must be a non-empty string of at most 200 characters, got {name!r}"
        )
    expr = parse_cron_expression(cron_expr)
    try:
        zone(timezone)
    except InvalidTimezone as exc:
        raise InvalidJobOption("timezone", str(exc)) from None
    if not isinstance(job_type, str) or not job_type or len(job_type) > 200:
        raise InvalidJobOption(
            "job_type", f"must be a non-empty string of at most 200 characters, got {job_type!r}"
        )
    # The order of the checks is the one enqueue options have (arguments.validate_options).
    if queue is not None:
        try:
            validation.validate_queue_name(queue)
        except ValueError as exc:
            raise InvalidJobOption("queue", str(exc)) from None
    # Checked here, not by arguments.validate_options: arguments imports conf, which imports this.
    lo, hi = validation.PRIORITY_MIN, validation.PRIORITY_MAX
    if priority is not None and not validation.is_count(priority, lo, hi):
        raise InvalidJobOption("priority", f"must be an integer in {lo}..{hi}, got {priority!r}")
    if queue is None:
        raise InvalidJobOption("queue", "is required")
    if missed not in MISSED_POLICIES:
        raise InvalidJobOption(
            "missed", f"must be one of {', '.join(MISSED_POLICIES)}, got {missed!r}"
        )
    if isinstance(missed_cap, bool) or not isinstance(missed_cap, int) or missed_cap < 1:
        raise InvalidJobOption("missed_cap", f"must be an integer >= 1, got {missed_cap!r}")
    if not isinstance(enabled, bool):
        raise InvalidJobOption("enabled", f"must be True or False, got {enabled!r}")
    payload = {} if payload is None else payload
    if not isinstance(payload, dict):
        raise InvalidJobOption(
            "payload", f"must be a dict of keyword arguments, got {type(payload).__name__}"
        )
    if FIRE_TIME_KEY in payload:
        raise InvalidPayload(
            f"payload[{FIRE_TIME_KEY!r}]", "is reserved: each fire sets it to its fire time"
        )
    to_json(payload, max_bytes=max_payload_bytes)
    return {
        "name": name,
        "cron_expr": expr,
        "job_type": job_type,
        "queue": queue,
        "payload": payload,
        "timezone": timezone,
        "priority": priority,
        "missed": missed,
        "missed_cap": missed_cap,
        "enabled": enabled,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class CronSpec:
    """One entry of ``JOBQUEUE["CRON"]``, validated (the arguments of ``jobqueue.schedule``)."""

    name: str
    cron_expr: str
    job_type: str
    queue: str = "default"
    payload: dict[str, Any] = field(default_factory=dict)
    timezone: str = "UTC"
    priority: int = 0
    missed: str = "once"
    missed_cap: int = DEFAULT_CRON_MISSED_CAP
    enabled: bool = True


#: Keys of one ``JOBQUEUE["CRON"]`` entry; the first two are required.
CRON_ENTRY_KEYS = (
    "cron_expr",
    "job_type",
    "queue",
    "payload",
    "timezone",
    "priority",
    "missed",
    "missed_cap",
    "enabled",
)


def parse_cron_setting(raw: Any, max_payload_bytes: int) -> tuple[CronSpec, ...]:
    """Validate ``JOBQUEUE["CRON"]``: a dict of entry name -> dict of ``schedule`` arguments.

    Example::

        "CRON": {
            "nightly-report": {"cron_expr": "0 3 * * *", "job_type": "shop.jobs.report",
                               "queue": "reports", "timezone": "Europe/Berlin"},
        }

    Args:
        raw: the setting's value.
        max_payload_bytes: the payload limit the entries' payloads must fit.

    Returns:
        The entries, sorted by name.

    Raises:
        CronConfigurationError: naming the entry and the bad or unknown key.
    """
    if not isinstance(raw, dict):
        raise CronConfigurationError(
            f"JOBQUEUE['CRON'] must be a dict of entry name -> entry dict, got {raw!r}"
        )
    specs = []
    for name in sorted(raw, key=str):
        entry = raw[name]
        where = f"JOBQUEUE['CRON'][{name!r}]"
        if not isinstance(entry, dict):
            raise CronConfigurationError(f"{where} must be a dict, got {entry!r}")
        unknown = sorted(set(entry) - set(CRON_ENTRY_KEYS), key=str)
        if unknown:
            raise CronConfigurationError(
                f"{where} has unknown keys: {', '.join(map(str, unknown))} "
                f"(known: {', '.join(CRON_ENTRY_KEYS)})"
            )
        missing = [key for key in CRON_ENTRY_KEYS[:2] if key not in entry]
        if missing:
            raise CronConfigurationError(f"{where} needs {' and '.join(missing)}")
        try:
            values = validate_entry(name=name, **entry, max_payload_bytes=max_payload_bytes)
        except ValueError as exc:
            raise CronConfigurationError(f"{where}: {exc}") from None
        specs.append(CronSpec(**values))
    return tuple(specs)
