"""The ``JOBQUEUE`` setting: named defaults, validated once, reset when settings change.

Read settings through :func:`get_settings`; it caches a frozen :class:`JobQueueSettings` and drops
the cache on Django's ``setting_changed`` signal, so ``override_settings`` works in tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from . import limits
from .cron.spec import DEFAULT_CRON_MISSED_CAP, validate_entry
from .errors import CronConfigurationError, JobQueueConfigurationError
from .txlimits import TransactionLimits, parse_transaction_limits
from .validation import validate_dependency_name as validate_dependency_name  # re-exported
from .validation import validate_queue_name as validate_queue_name  # re-exported

DEFAULT_LEASE_SECONDS = 30.0
"""How long a claim holds a job before another worker may take it; workers heartbeat every third."""

DEFAULT_TIMEOUT_SECONDS = 30.0
"""Hard limit on one run of a job (``timeout_s``), separate from the lease."""

DEFAULT_MAX_ATTEMPTS = 8
"""Claims a job gets before it is dead-lettered."""

DEFAULT_BACKOFF = {"policy": "full", "base_seconds": 1.0, "cap_seconds": 3600.0}
"""Exponential backoff with full jitter, base 1 s, cap 1 h (the AWS backoff analysis)."""

DEFAULT_POLL_INTERVAL_SECONDS = 1.0
"""How long an idle worker waits between claims."""

DEFAULT_LISTEN_NOTIFY = True
"""On PostgreSQL, idle workers LISTEN for the notification an enqueue sends at commit and claim at
once; polling stays as the fallback. Set False where LISTEN cannot work (PgBouncer in
transaction mode): workers then only poll every ``POLL_INTERVAL_SECONDS``."""

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
"""Largest payload accepted by enqueue, measured as UTF-8 JSON."""

DEFAULT_GRACE_SECONDS = 30.0
"""How long a worker told to stop (SIGTERM) lets running jobs finish before releasing them."""

DEFAULT_REAPER_INTERVAL_SECONDS = 1.0
"""How often each worker returns expired leases to the claimable set."""

DEFAULT_CONCURRENCY = 10
"""Jobs one worker process runs at once (threads)."""

DEFAULT_QUEUES = ("default",)
"""Queues a worker serves when none are named."""

DEFAULT_DISCOVER_MODULES = ("jobs", "tasks")
"""Modules imported from every installed app at startup, so workers know every job type and task."""
DEFAULT_RETENTION_SECONDS = {
    "succeeded": 7 * 86400.0,
    "cancelled": 7 * 86400.0,
    "dead": 30 * 86400.0,
}
"""How long finished jobs are kept before the pruner deletes them, seconds, per finished state."""

DEFAULT_ADMIN_MASKED_KEYS = ("password", "token", "secret", "card", "authorization")
"""Payload and result keys the admin masks, at any depth: a key containing one of these
(case-insensitive) has its whole value shown as ``********``."""

DEFAULT_LEADER_LEASE_SECONDS = 15.0
"""How long the leader lease (the right to fire cron) lasts without renewal; a dead leader's
lease is taken over within this long plus one scheduler tick."""

DEFAULT_SCHEDULER_INTERVAL_SECONDS = 1.0
"""How often each worker's scheduler ticks: renews or tries to take the leader lease, and, as
leader, fires what is due. Fires are enqueued up to one tick ahead, with run_at = fire time."""

DEFAULT_CRON_GRACE_SECONDS = 60.0
"""A fire time less than this late when the scheduler reaches it is fired, whatever the entry's
missed-run policy (a leader failover is late, not missed); older ones are missed runs. Never
less than LEADER_LEASE_SECONDS + SCHEDULER_INTERVAL_SECONDS (the default grows to it)."""

DEFAULT_CRON_FIRE_RETENTION_SECONDS = 30 * 24 * 3600.0
"""How long fire records (which make each fire time happen once) are kept: 30 days. The
latest record of each entry is always kept."""

DEFAULT_BREAKER = {
    "failure_threshold": 5,
    "failure_ratio": 0.5,
    "window_seconds": 30.0,
    "cooldown_seconds": 10.0,
    "max_cooldown_seconds": 300.0,
}
"""A dependency's breaker opens when, within one window of 30 s, at least 5 of its jobs failed
and they were at least half of its outcomes; it stays open 10 s, doubling per failed probe up to
5 min."""

DEFAULT_RETRY_BUDGET = {"ratio": 0.1, "floor_per_second": 10.0, "capacity": 100.0}
"""Retries of a queue may add 10 % of its successes, plus 10 retries per second so a queue with no
recent success can still retry (Finagle's ``RetryBudget`` default floor); up to 100 unspent
retries are saved for a burst."""

BACKOFF_POLICIES = ("none", "full", "equal", "decorrelated")
RETENTION_STATES = ("succeeded", "cancelled", "dead")


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """A backoff policy: the shape of the delays between attempts.

    Attributes:
        policy: one of ``none``, ``full``, ``equal``, ``decorrelated`` (jitter kinds).
        base_seconds: delay of the first retry before jitter, seconds (> 0).
        cap_seconds: largest delay, seconds (>= base_seconds).
    """

    policy: str = "full"
    base_seconds: float = 1.0
    cap_seconds: float = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    """Circuit-breaker thresholds, shared by every dependency (``JOBQUEUE["BREAKER"]``).

    Attributes:
        failure_threshold: failures within one window that can open the breaker (>= 1).
        failure_ratio: and the share of the window's outcomes they must be, in (0, 1].
        window_seconds: length of the window failures are counted in, seconds (> 0).
        cooldown_seconds: first cool-down after opening, seconds (> 0).
        max_cooldown_seconds: cap of the cool-down, which doubles per failed probe, seconds.
    """

    failure_threshold: int = 5
    failure_ratio: float = 0.5
    window_seconds: float = 30.0
    cooldown_seconds: float = 10.0
    max_cooldown_seconds: float = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBudgetSettings:
    """The retry budget of each queue (``JOBQUEUE["RETRY_BUDGET"]``).

    Attributes:
        ratio: retry tokens one success earns, in (0, 1]: the share of successful throughput
            retries may add.
        floor_per_second: tokens every queue earns per second regardless (> 0), so a queue
            with no recent success can still retry.
        capacity: most tokens a queue saves up (>= 1): the burst of retries allowed at once.
    """

    ratio: float = 0.1
    floor_per_second: float = 10.0
    capacity: float = 100.0


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


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueSettings:
    """The validated ``JOBQUEUE`` setting. Durations are seconds."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS
    listen_notify: bool = DEFAULT_LISTEN_NOTIFY
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    reaper_interval_seconds: float = DEFAULT_REAPER_INTERVAL_SECONDS
    concurrency: int = DEFAULT_CONCURRENCY
    queues: tuple[str, ...] = DEFAULT_QUEUES
    queue_weights: tuple[int, ...] = (1,)
    tenant_max_running: int | None = None
    tenant_max_running_overrides: Mapping[str, int | None] = field(
        default_factory=lambda: MappingProxyType({})
    )
    discover_modules: tuple[str, ...] = DEFAULT_DISCOVER_MODULES
    retention_seconds: Mapping[str, float | None] = field(
        default_factory=lambda: MappingProxyType(dict(DEFAULT_RETENTION_SECONDS))
    )
    admin_masked_keys: tuple[str, ...] = DEFAULT_ADMIN_MASKED_KEYS
    cron: tuple[CronSpec, ...] = ()
    leader_lease_seconds: float = DEFAULT_LEADER_LEASE_SECONDS
    scheduler_interval_seconds: float = DEFAULT_SCHEDULER_INTERVAL_SECONDS
    cron_grace_seconds: float = DEFAULT_CRON_GRACE_SECONDS
    cron_fire_retention_seconds: float = DEFAULT_CRON_FIRE_RETENTION_SECONDS
    breaker: Breaker = field(default_factory=Breaker)
    #: None: no retry budget (retries wait for their backoff only).
    retry_budget: RetryBudgetSettings | None = field(default_factory=RetryBudgetSettings)
    transaction_limits: TransactionLimits = field(default_factory=TransactionLimits)


def _number(
    key: str,
    value: Any,
    *,
    minimum: float = 0.0,
    strict: bool = True,
    where: str = "JOBQUEUE",
    limit: str | None = None,
) -> float:
    name = f"{where}[{key!r}]"
    limit = limit or (key if where == "JOBQUEUE" else None)
    if limit is not None and limits.range_of(limit) is not None:  # the one table (limits.py)
        try:
            return limits.check(limit, value, name)
        except ValueError as exc:
            raise JobQueueConfigurationError(str(exc)) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JobQueueConfigurationError(f"{name} must be a number, got {value!r}")
    if (value <= minimum) if strict else (value < minimum):
        op = ">" if strict else ">="
        raise JobQueueConfigurationError(f"{name} must be {op} {minimum}, got {value!r}")
    return float(value)


def _integer(key: str, value: Any) -> int:
    try:
        return int(limits.check(key, value, f"JOBQUEUE[{key!r}]"))
    except ValueError as exc:
        raise JobQueueConfigurationError(str(exc)) from None


def parse_queues_setting(value: Any) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Validate ``JOBQUEUE["QUEUES"]``: a list of ``"name"`` or ``"name:weight"`` strings.

    Returns:
        ``(names, weights)``; a name without a weight has weight 1.

    Raises:
        JobQueueConfigurationError: not a non-empty list, or a bad item (the message names it).
    """
    from .fairness import parse_queue_spec

    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise JobQueueConfigurationError(
            f"JOBQUEUE['QUEUES'] must be a non-empty list of queue names, got {value!r}"
        )
    try:
        return parse_queue_spec(list(value))
    except ValueError as exc:
        raise JobQueueConfigurationError(f"JOBQUEUE['QUEUES']: {exc}") from None


def parse_tenant_overrides(value: Any) -> Mapping[str, int | None]:
    """Validate ``JOBQUEUE["TENANT_MAX_RUNNING_OVERRIDES"]``: ``{tenant_id: cap >= 1 or None}``.

    Raises:
        JobQueueConfigurationError: not a dict, a tenant id that is not a string of at most 100
            characters, or a cap that is not an integer >= 1; the message names the tenant.
    """
    where = "JOBQUEUE['TENANT_MAX_RUNNING_OVERRIDES']"
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"{where} must be a dict of tenant id -> most leased jobs, got {value!r}"
        )
    for tenant, cap in value.items():
        if not isinstance(tenant, str) or len(tenant) > 100 or "\x00" in tenant:
            raise JobQueueConfigurationError(
                f"{where}: tenant ids are strings of at most 100 characters, got {tenant!r}"
            )
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise JobQueueConfigurationError(
                f"{where}[{tenant!r}] must be an integer >= 1 (or None: no cap), got {cap!r}"
            )
    return MappingProxyType(dict(value))


def parse_backoff(value: Any, where: str = "JOBQUEUE['BACKOFF']") -> Backoff:
    """Validate a backoff dict such as ``{"policy": "full", "base_seconds": 1, "cap_seconds": 60}``.

    Args:
        value: a dict with any of the keys ``policy``, ``base_seconds``, ``cap_seconds``, or a
            :class:`Backoff` (returned as is).
        where: how to name the value in an error message.

    Returns:
        The :class:`Backoff`, with defaults for missing keys.

    Raises:
        JobQueueConfigurationError: unknown keys, an unknown policy, or bad numbers.
    """
    if isinstance(value, Backoff):
        return value
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(f"{where} must be a dict, got {value!r}")
    unknown = sorted(set(value) - {"policy", "base_seconds", "cap_seconds"})
    if unknown:
        raise JobQueueConfigurationError(f"{where} has unknown keys: {', '.join(unknown)}")
    merged = {**DEFAULT_BACKOFF, **value}
    if merged["policy"] not in BACKOFF_POLICIES:
        raise JobQueueConfigurationError(
            f"{where}['policy'] must be one of {', '.join(BACKOFF_POLICIES)}, "
            f"got {merged['policy']!r}"
        )
    base = _number(
        "base_seconds", merged["base_seconds"], where=where, limit="BACKOFF.base_seconds"
    )
    cap = _number("cap_seconds", merged["cap_seconds"], where=where, limit="BACKOFF.cap_seconds")
    if cap < base:
        raise JobQueueConfigurationError(
            f"{where}: cap_seconds ({cap}) must be >= base_seconds ({base})"
        )
    return Backoff(policy=merged["policy"], base_seconds=base, cap_seconds=cap)


_KEYS = {
    "LEASE_SECONDS",
    "TIMEOUT_SECONDS",
    "MAX_ATTEMPTS",
    "BACKOFF",
    "POLL_INTERVAL_SECONDS",
    "LISTEN_NOTIFY",
    "MAX_PAYLOAD_BYTES",
    "GRACE_SECONDS",
    "REAPER_INTERVAL_SECONDS",
    "CONCURRENCY",
    "QUEUES",
    "TENANT_MAX_RUNNING",
    "TENANT_MAX_RUNNING_OVERRIDES",
    "DISCOVER_MODULES",
    "RETENTION",
    "ADMIN_MASKED_KEYS",
    "CRON",
    "LEADER_LEASE_SECONDS",
    "SCHEDULER_INTERVAL_SECONDS",
    "CRON_GRACE_SECONDS",
    "CRON_FIRE_RETENTION_SECONDS",
    "BREAKER",
    "RETRY_BUDGET",
    "TRANSACTION_LIMITS",
}

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


def parse_cron_setting(
    raw: Any, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> tuple[CronSpec, ...]:
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


def build_settings(raw: Any) -> JobQueueSettings:
    """Validate a ``JOBQUEUE`` dict and return the frozen settings.

    Raises:
        JobQueueConfigurationError: naming the first bad or unknown key.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise JobQueueConfigurationError(f"JOBQUEUE must be a dict, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise JobQueueConfigurationError(
            f"JOBQUEUE has unknown keys: {', '.join(map(str, unknown))} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    values: dict[str, Any] = {}
    if "LEASE_SECONDS" in raw:
        values["lease_seconds"] = _number("LEASE_SECONDS", raw["LEASE_SECONDS"])
    if "TIMEOUT_SECONDS" in raw:
        values["timeout_seconds"] = _number("TIMEOUT_SECONDS", raw["TIMEOUT_SECONDS"])
    if "MAX_ATTEMPTS" in raw:
        values["max_attempts"] = _integer("MAX_ATTEMPTS", raw["MAX_ATTEMPTS"])
    if "BACKOFF" in raw:
        values["backoff"] = parse_backoff(raw["BACKOFF"])
    if "POLL_INTERVAL_SECONDS" in raw:
        values["poll_interval_seconds"] = _number(
            "POLL_INTERVAL_SECONDS", raw["POLL_INTERVAL_SECONDS"]
        )
    if "LISTEN_NOTIFY" in raw:
        if not isinstance(raw["LISTEN_NOTIFY"], bool):
            raise JobQueueConfigurationError(
                f"JOBQUEUE['LISTEN_NOTIFY'] must be True or False, got {raw['LISTEN_NOTIFY']!r}"
            )
        values["listen_notify"] = raw["LISTEN_NOTIFY"]
    if "MAX_PAYLOAD_BYTES" in raw:
        values["max_payload_bytes"] = _integer("MAX_PAYLOAD_BYTES", raw["MAX_PAYLOAD_BYTES"])
    if "GRACE_SECONDS" in raw:
        values["grace_seconds"] = _number("GRACE_SECONDS", raw["GRACE_SECONDS"])
    if "REAPER_INTERVAL_SECONDS" in raw:
        values["reaper_interval_seconds"] = _number(
            "REAPER_INTERVAL_SECONDS", raw["REAPER_INTERVAL_SECONDS"]
        )
    if "CONCURRENCY" in raw:
        values["concurrency"] = _integer("CONCURRENCY", raw["CONCURRENCY"])
    if "QUEUES" in raw:
        values["queues"], values["queue_weights"] = parse_queues_setting(raw["QUEUES"])
    if "TENANT_MAX_RUNNING" in raw and raw["TENANT_MAX_RUNNING"] is not None:
        values["tenant_max_running"] = _integer("TENANT_MAX_RUNNING", raw["TENANT_MAX_RUNNING"])
    if "TENANT_MAX_RUNNING_OVERRIDES" in raw:
        values["tenant_max_running_overrides"] = parse_tenant_overrides(
            raw["TENANT_MAX_RUNNING_OVERRIDES"]
        )
    if "DISCOVER_MODULES" in raw:
        values["discover_modules"] = parse_discover_modules(raw["DISCOVER_MODULES"])
    if "RETENTION" in raw:
        values["retention_seconds"] = parse_retention(raw["RETENTION"])
    if "ADMIN_MASKED_KEYS" in raw:
        values["admin_masked_keys"] = parse_masked_keys(raw["ADMIN_MASKED_KEYS"])
    for key in (
        "LEADER_LEASE_SECONDS",
        "SCHEDULER_INTERVAL_SECONDS",
        "CRON_GRACE_SECONDS",
        "CRON_FIRE_RETENTION_SECONDS",
    ):
        if key in raw:
            values[key.lower()] = _number(key, raw[key])
    built = JobQueueSettings(**values)
    failover = built.leader_lease_seconds + built.scheduler_interval_seconds
    if "CRON_GRACE_SECONDS" not in raw and built.cron_grace_seconds < failover:
        built = replace(built, cron_grace_seconds=failover)
    if built.cron_grace_seconds < failover:
        # Otherwise a leader failover would turn on-time fires into missed runs, which
        # missed="skip" drops.
        raise JobQueueConfigurationError(
            f"JOBQUEUE['CRON_GRACE_SECONDS'] ({built.cron_grace_seconds:g}) must be at least "
            f"LEADER_LEASE_SECONDS + SCHEDULER_INTERVAL_SECONDS "
            f"({built.leader_lease_seconds + built.scheduler_interval_seconds:g}), so a leader "
            "failover never makes a fire time a missed run"
        )
    if "BREAKER" in raw:
        built = replace(built, breaker=parse_breaker(raw["BREAKER"]))
    if "RETRY_BUDGET" in raw:
        built = replace(built, retry_budget=parse_retry_budget(raw["RETRY_BUDGET"]))
    if "TRANSACTION_LIMITS" in raw:
        limits = parse_transaction_limits(raw["TRANSACTION_LIMITS"])
        built = replace(built, transaction_limits=limits)
    if "CRON" in raw:
        # Last: an entry's error is a CronConfigurationError (check jobqueue.E005).
        built = replace(built, cron=parse_cron_setting(raw["CRON"], built.max_payload_bytes))
    return built


def _fields(value: Any, where: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """Return ``defaults`` updated with the dict ``value``; refuse anything else, naming it."""
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(f"{where} must be a dict, got {value!r}")
    unknown = sorted(map(str, set(value) - set(defaults)))
    if unknown:
        raise JobQueueConfigurationError(
            f"{where} has unknown keys: {', '.join(unknown)} (known: {', '.join(defaults)})"
        )
    return {**defaults, **value}


def _fraction(key: str, value: Any, where: str) -> float:
    fraction = _number(key, value, where=where)
    if fraction > 1:
        raise JobQueueConfigurationError(f"{where}[{key!r}] must be <= 1, got {value!r}")
    return fraction


def parse_breaker(value: Any, where: str = "JOBQUEUE['BREAKER']") -> Breaker:
    """Validate ``JOBQUEUE["BREAKER"]``, e.g. ``{"failure_threshold": 5, "window_seconds": 30}``.

    Keys left out keep :data:`DEFAULT_BREAKER`.

    Raises:
        JobQueueConfigurationError: not a dict, an unknown key, a count below 1, a duration or
            ratio <= 0, a ratio above 1, or a max cool-down below the cool-down; naming the key.
    """
    merged = _fields(value, where, DEFAULT_BREAKER)
    threshold = merged["failure_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise JobQueueConfigurationError(
            f"{where}['failure_threshold'] must be an integer >= 1, got {threshold!r}"
        )
    breaker = Breaker(
        failure_threshold=threshold,
        failure_ratio=_fraction("failure_ratio", merged["failure_ratio"], where),
        **{
            key: _number(key, merged[key], where=where, limit=f"BREAKER.{key}")
            for key in ("window_seconds", "cooldown_seconds", "max_cooldown_seconds")
        },
    )
    if breaker.max_cooldown_seconds < breaker.cooldown_seconds:
        raise JobQueueConfigurationError(
            f"{where}['max_cooldown_seconds'] ({breaker.max_cooldown_seconds:g}) must be >= "
            f"cooldown_seconds ({breaker.cooldown_seconds:g})"
        )
    return breaker


def parse_retry_budget(
    value: Any, where: str = "JOBQUEUE['RETRY_BUDGET']"
) -> RetryBudgetSettings | None:
    """Validate ``JOBQUEUE["RETRY_BUDGET"]``: a dict like ``{"ratio": 0.1}``, or None (off).

    Keys left out keep :data:`DEFAULT_RETRY_BUDGET`.

    Raises:
        JobQueueConfigurationError: not a dict or None, an unknown key, a ratio <= 0 or > 1, a
            floor <= 0, or a capacity below 1; naming the key.
    """
    if value is None:
        return None
    merged = _fields(value, where, DEFAULT_RETRY_BUDGET)
    capacity = _number("capacity", merged["capacity"], where=where)
    if capacity < 1:
        raise JobQueueConfigurationError(f"{where}['capacity'] must be >= 1, got {capacity:g}")
    return RetryBudgetSettings(
        ratio=_fraction("ratio", merged["ratio"], where),
        floor_per_second=_number("floor_per_second", merged["floor_per_second"], where=where),
        capacity=capacity,
    )


def parse_discover_modules(value: Any) -> tuple[str, ...]:
    """Validate ``JOBQUEUE["DISCOVER_MODULES"]``: a list of dotted module names, maybe empty.

    Each name is imported relative to every installed app (``"jobs"`` imports ``shop.jobs``);
    an empty list turns discovery off.

    Raises:
        JobQueueConfigurationError: not a list or tuple, or a name that is not a dotted Python
            identifier.
    """
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise JobQueueConfigurationError(
            f"JOBQUEUE['DISCOVER_MODULES'] must be a list of module names, got {value!r}"
        )
    for name in value:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise JobQueueConfigurationError(
                "JOBQUEUE['DISCOVER_MODULES'] entries must be dotted module names like 'jobs', "
                f"got {name!r}"
            )
    return tuple(dict.fromkeys(value))


def parse_retention(value: Any) -> Mapping[str, float | None]:
    """Validate ``RETENTION``: finished state -> seconds to keep (number or timedelta), or None.

    ``None`` keeps that state's jobs forever; a state left out keeps its default
    (:data:`DEFAULT_RETENTION_SECONDS`).

    Raises:
        JobQueueConfigurationError: not a dict, a state that is not finished, or a bad duration.
    """
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"JOBQUEUE['RETENTION'] must be a dict like {{'succeeded': 604800}}, got {value!r}"
        )
    unknown = sorted(map(str, set(value) - set(RETENTION_STATES)))
    if unknown:
        raise JobQueueConfigurationError(
            f"JOBQUEUE['RETENTION'] has unknown states: {', '.join(unknown)} "
            f"(known: {', '.join(RETENTION_STATES)}; live jobs are never pruned)"
        )
    merged: dict[str, float | None] = dict(DEFAULT_RETENTION_SECONDS)
    for state, seconds in value.items():
        if seconds is None:
            merged[state] = None
            continue
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        merged[state] = _number(state, seconds, where="JOBQUEUE['RETENTION']", limit="RETENTION")
    # Read-only, like the rest of the frozen settings.
    return MappingProxyType(merged)


def parse_masked_keys(value: Any) -> tuple[str, ...]:
    """Validate ``ADMIN_MASKED_KEYS``: a list or tuple of non-empty strings, lower-cased.

    Raises:
        JobQueueConfigurationError: a bare string (a common slip), or an item that is not a
            non-empty string.
    """
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise JobQueueConfigurationError(
            f"JOBQUEUE['ADMIN_MASKED_KEYS'] must be a list of key names, got {value!r}"
        )
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise JobQueueConfigurationError(
                f"JOBQUEUE['ADMIN_MASKED_KEYS'] items must be non-empty strings, got {item!r}"
            )
    return tuple(item.strip().lower() for item in value)


@functools.cache
def get_settings() -> JobQueueSettings:
    """Return the validated ``JOBQUEUE`` settings (cached until a setting changes).

    Raises:
        JobQueueConfigurationError: the setting is invalid; the message names the key.
    """
    return build_settings(getattr(django_settings, "JOBQUEUE", None))


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "JOBQUEUE":
        get_settings.cache_clear()
