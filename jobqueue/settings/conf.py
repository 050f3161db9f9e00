"""The ``JOBQUEUE`` setting: named defaults, a key -> (field, parser) table, validated once.

Read settings through :func:`get_settings`; it caches a frozen :class:`JobQueueSettings` and drops
the cache on Django's ``setting_changed`` signal, so ``override_settings`` works in tests.

Each key has one parser (:data:`FIELDS`); the nested settings are parsed by the module that owns
their value: ``policies`` (``BACKOFF``, ``BREAKER``, ``RETRY_BUDGET``), ``txlimits``
(``TRANSACTION_LIMITS``), ``queuespec`` (``QUEUES``), ``poolspec`` (``POOLED_DATABASES``),
``queuedbspec`` (``QUEUE_DATABASES``).
Ranges come from the one table in ``limits``. ``Backoff``, ``Breaker``, ``RetryBudgetSettings``
and ``TransactionLimits`` are re-exported here, the types of the settings' fields.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.retries import Backoff
from jobqueue.settings import ranges as limits
from jobqueue.settings.concurrency import parse_concurrency_limits, parse_tenant_weights

# CRON entries are checked by the cron package's leaf, which imports neither conf nor the store.
from jobqueue.settings.cron import CronSpec, parse_cron_setting
from jobqueue.settings.databases import parse_queue_databases
from jobqueue.settings.names import (
    parse_discover_modules,
    parse_enqueue_unregistered,
    parse_masked_keys,
)
from jobqueue.settings.outbox import DEFAULT_OUTBOX_DATABASES, parse_outbox_databases
from jobqueue.settings.outbox import DEFAULT_OUTBOX_RELAY_INTERVAL_SECONDS as _RELAY_INTERVAL_S
from jobqueue.settings.policies import (
    Breaker,
    RetryBudgetSettings,
    parse_backoff,
    parse_breaker,
    parse_retry_budget,
)
from jobqueue.settings.pooling import parse_pooled_databases
from jobqueue.settings.queues import parse_queues_setting
from jobqueue.settings.rates import RateLimits, parse_rate_limits
from jobqueue.settings.transactions import TransactionLimits, parse_transaction_limits
from jobqueue.validation import is_count, is_text

__all__ = [
    "Breaker",
    "CronSpec",
    "JobQueueSettings",
    "RetryBudgetSettings",
    "TransactionLimits",
    "build_settings",
    "get_settings",
    "parse_cron_setting",
]

DEFAULT_LEASE_SECONDS = 30.0
"""How long a claim holds a job before another worker may take it; workers heartbeat every third."""

DEFAULT_TIMEOUT_SECONDS = 30.0
"""Hard limit on one run of a job (``timeout_s``), separate from the lease."""

DEFAULT_MAX_ATTEMPTS = 8
"""Claims a job gets before it is dead-lettered."""

DEFAULT_POLL_INTERVAL_SECONDS = 1.0
"""How long an idle worker waits between claims."""

MIN_METRICS_TOKEN_CHARS = 16
"""Shortest ``METRICS_TOKEN`` accepted, characters."""

DEFAULT_METRICS_INTERVAL_SECONDS = 5.0
"""How old the metrics' cluster-wide gauge reading may be before one process recomputes it
(FIELD-CASES 30: once per interval for the whole cluster, however many processes are scraped)."""

DEFAULT_LISTEN_NOTIFY = True
"""On PostgreSQL, idle workers LISTEN for the notification an enqueue sends at commit and claim at
once; polling stays as the fallback. Set False where LISTEN cannot work (PgBouncer in
transaction mode, without ``POOLED_DATABASES``): workers then only poll every
``POLL_INTERVAL_SECONDS``. A pooled alias never LISTENs through the pooler (``poolspec``)."""

DEFAULT_ASYNCHRONOUS_COMMIT = True
"""On PostgreSQL, a worker's own claim, heartbeat and ack transactions commit with
``synchronous_commit = off``: the server answers before it has flushed them to disk, so a worker
does not wait for a disk flush per claim and per ack. A server crash may then forget the last
fraction of a second of them (at most three times ``wal_writer_delay``); each such job runs again,
which at-least-once delivery already covers. Never applied to an enqueue (the caller's
transaction), the outbox relay, a cron fire, or an ack that may complete a batch (its callbacks
are promised once per completion). False: every transaction commits synchronously."""

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
"""Largest payload accepted by enqueue, measured as UTF-8 JSON."""

DEFAULT_CHECKPOINT_MAX_BYTES = 64 * 1024
"""Largest checkpoint a handler may write (``context.checkpoint``), measured as UTF-8 JSON. A
checkpoint is rewritten on the job's row at every step, so it should stay small (1 B..1 MiB)."""

DEFAULT_GRACE_SECONDS = 30.0
"""How long a worker told to stop (SIGTERM) lets running jobs finish before releasing them."""


def shared_interval_s(interval_s: float, sharing: int) -> float:
    """Return how long one of ``sharing`` processes waits between turns of a duty they share.

    A duty whose work is the database's, not the process's (an idle poll, the reaper, asking
    for the cron leader lease), needs doing about once per ``interval_s`` by a host, not by
    each of its processes: each process waits ``sharing`` times longer, jittered so that they
    spread out (docs/decisions.md, "One of a host's processes at a time").

    Args:
        interval_s: how often the host should do it, seconds.
        sharing: how many processes on the host share it (``runworkers --processes``); 1: the
            interval as it is.

    Returns:
        Seconds: ``interval_s`` when ``sharing`` <= 1, else ``interval_s * sharing`` times a
        uniform draw from [0.5, 1.5].
    """
    if sharing <= 1:
        return interval_s
    return interval_s * sharing * random.uniform(0.5, 1.5)


DEFAULT_REAPER_INTERVAL_SECONDS = 1.0
"""How often each worker returns expired leases to the claimable set."""

DEFAULT_CONCURRENCY = 25
"""Jobs one worker process runs at once (threads), and so the most one claim takes.

25, not 10: a claim or an ack costs about the same whatever it carries (a commit), so a worker
drains short jobs about as fast as it claims; 25 drained no-op jobs 1.7-2.9x faster than 10 and
stays within PostgreSQL's default 100 connections with two processes whose handlers all use the
database (docs/decisions.md, "Default concurrency 25")."""

DEFAULT_ASYNC_CONCURRENCY = 100
"""``async def`` jobs one worker process runs at once on its event loop, besides its threads.

An awaiting coroutine costs a few kilobytes, not a thread, so the limit is well above
``CONCURRENCY``; what bounds it is what the handlers await (their connections, the remote
side's patience), not the process (docs/decisions.md, "Async jobs on one event loop")."""

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
lease is taken over within this long plus about one scheduler tick (a follower among N processes
of a host asks every N ticks, jittered, so the host asks about once a tick)."""

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

DEFAULT_ROLLUP_RETENTION_SECONDS = 48 * 3600.0
"""How long the per-minute rollup rows (charts, rates and histograms) are kept: 48 hours, so the
dashboard's 24-hour charts always have their whole day."""

DEFAULT_ENQUEUE_UNREGISTERED = False
"""Enqueue refuses a job type that no ``@job`` or task registers in the enqueuing process. True
(any name) or a list of type-name prefixes (``["billing."]``) allows types that only the
workers define, such as another service's."""

RETENTION_STATES = tuple(DEFAULT_RETENTION_SECONDS)
"""The finished states the pruner deletes; live jobs are never pruned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueSettings:
    """The validated ``JOBQUEUE`` setting. Durations are seconds."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS
    listen_notify: bool = DEFAULT_LISTEN_NOTIFY
    asynchronous_commit: bool = DEFAULT_ASYNCHRONOUS_COMMIT
    metrics_interval_seconds: float = DEFAULT_METRICS_INTERVAL_SECONDS
    #: The bearer token the metrics view accepts (``Authorization: Bearer ...``); None: none.
    metrics_token: str | None = None
    #: True: the metrics view answers anyone (a private network's opt-in).
    metrics_public: bool = False
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    checkpoint_max_bytes: int = DEFAULT_CHECKPOINT_MAX_BYTES
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    reaper_interval_seconds: float = DEFAULT_REAPER_INTERVAL_SECONDS
    concurrency: int = DEFAULT_CONCURRENCY
    async_concurrency: int = DEFAULT_ASYNC_CONCURRENCY
    queues: tuple[str, ...] = DEFAULT_QUEUES
    queue_weights: tuple[int, ...] = (1,)
    tenant_max_running: int | None = None
    tenant_max_running_overrides: Mapping[str, int | None] = field(
        default_factory=lambda: MappingProxyType({})
    )
    tenant_weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    concurrency_limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
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
    rollup_retention_seconds: float = DEFAULT_ROLLUP_RETENTION_SECONDS
    breaker: Breaker = field(default_factory=Breaker)
    #: None: no retry budget (retries wait for their backoff only).
    retry_budget: RetryBudgetSettings | None = field(default_factory=RetryBudgetSettings)
    transaction_limits: TransactionLimits = field(default_factory=TransactionLimits)
    #: Type-name prefixes enqueue accepts unregistered; ``("",)`` accepts any name (True).
    enqueue_unregistered: tuple[str, ...] = ()
    #: Pooler mode (``settings/pooling.py``): pooled alias -> the alias its workers LISTEN on,
    #: or None (they poll). Aliases not in it are direct connections.
    pooled_databases: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    #: Token-bucket rate limits per dependency, job type and tenant (``ratelimits.py``).
    rate_limits: RateLimits = field(default_factory=RateLimits)
    #: Queue databases (``settings/databases.py``): queue or ``"*"`` -> its aliases (shards).
    queue_databases: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    #: The aliases that hold an outbox table and are relayed from (``jobqueue/outbox.py``).
    outbox_databases: tuple[str, ...] = DEFAULT_OUTBOX_DATABASES
    outbox_relay_interval_seconds: float = _RELAY_INTERVAL_S


_RELAY_KEY = "OUTBOX_RELAY_INTERVAL_SECONDS"


def _ranged(key: str) -> Callable[[Any], float]:
    """Return the parser of a number setting: within its range in ``limits.RANGES``."""
    return lambda value: limits.setting(key, value, f"JOBQUEUE[{key!r}]")


def _listen_notify(value: Any) -> bool:
    if not isinstance(value, bool):
        raise JobQueueConfigurationError(
            f"JOBQUEUE['LISTEN_NOTIFY'] must be True or False, got {value!r}"
        )
    return value


def _bool(key: str) -> Callable[[Any], bool]:
    def parse(value: Any) -> bool:
        if not isinstance(value, bool):
            raise JobQueueConfigurationError(
                f"JOBQUEUE[{key!r}] must be True or False, got {value!r}"
            )
        return value

    return parse


def parse_metrics_token(value: Any) -> str | None:
    """Validate ``JOBQUEUE["METRICS_TOKEN"]``: None, or printable ASCII of at least 16 characters.

    The token Prometheus sends as ``Authorization: Bearer <token>`` (its ``authorization``
    scrape option); short ones are refused, so a guessable token is not mistaken for protection.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.isascii() or not value.isprintable():
        raise JobQueueConfigurationError(
            "JOBQUEUE['METRICS_TOKEN'] must be a string of printable ASCII characters (or None), "
            f"got {type(value).__name__}"
        )
    if len(value) < MIN_METRICS_TOKEN_CHARS or " " in value:
        raise JobQueueConfigurationError(
            f"JOBQUEUE['METRICS_TOKEN'] must be at least {MIN_METRICS_TOKEN_CHARS} characters "
            f"without spaces, got {len(value)}; make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'"
        )
    return value


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
        if not is_text(tenant, 100):
            raise JobQueueConfigurationError(
                f"{where}: tenant ids are strings of at most 100 characters, got {tenant!r}"
            )
        if cap is not None and not is_count(cap):
            raise JobQueueConfigurationError(
                f"{where}[{tenant!r}] must be an integer >= 1 (or None: no cap), got {cap!r}"
            )
    return MappingProxyType(dict(value))


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
        merged[state] = limits.setting("RETENTION", seconds, f"JOBQUEUE['RETENTION'][{state!r}]")
    # Read-only, like the rest of the frozen settings.
    return MappingProxyType(merged)


#: ``JOBQUEUE`` key -> (the field or fields of :class:`JobQueueSettings` it sets, its parser).
#: A parser takes the key's value and returns the field's, or raises
#: ``JobQueueConfigurationError`` naming the key. ``CRON`` is parsed last (:func:`build_settings`).
FIELDS: dict[str, tuple[str | tuple[str, ...], Callable[[Any], Any]]] = {
    "LEASE_SECONDS": ("lease_seconds", _ranged("LEASE_SECONDS")),
    "TIMEOUT_SECONDS": ("timeout_seconds", _ranged("TIMEOUT_SECONDS")),
    "MAX_ATTEMPTS": ("max_attempts", _ranged("MAX_ATTEMPTS")),
    "BACKOFF": ("backoff", parse_backoff),
    "POLL_INTERVAL_SECONDS": ("poll_interval_seconds", _ranged("POLL_INTERVAL_SECONDS")),
    "LISTEN_NOTIFY": ("listen_notify", _listen_notify),
    "ASYNCHRONOUS_COMMIT": ("asynchronous_commit", _bool("ASYNCHRONOUS_COMMIT")),
    "METRICS_INTERVAL_SECONDS": (
        "metrics_interval_seconds",
        _ranged("METRICS_INTERVAL_SECONDS"),
    ),
    "METRICS_TOKEN": ("metrics_token", parse_metrics_token),
    "METRICS_PUBLIC": ("metrics_public", _bool("METRICS_PUBLIC")),
    "MAX_PAYLOAD_BYTES": ("max_payload_bytes", _ranged("MAX_PAYLOAD_BYTES")),
    "CHECKPOINT_MAX_BYTES": ("checkpoint_max_bytes", _ranged("CHECKPOINT_MAX_BYTES")),
    "GRACE_SECONDS": ("grace_seconds", _ranged("GRACE_SECONDS")),
    "REAPER_INTERVAL_SECONDS": ("reaper_interval_seconds", _ranged("REAPER_INTERVAL_SECONDS")),
    "CONCURRENCY": ("concurrency", _ranged("CONCURRENCY")),
    "ASYNC_CONCURRENCY": ("async_concurrency", _ranged("ASYNC_CONCURRENCY")),
    "QUEUES": (("queues", "queue_weights"), parse_queues_setting),
    "TENANT_MAX_RUNNING": (
        "tenant_max_running",
        lambda value: None if value is None else _ranged("TENANT_MAX_RUNNING")(value),
    ),
    "TENANT_MAX_RUNNING_OVERRIDES": ("tenant_max_running_overrides", parse_tenant_overrides),
    "TENANT_WEIGHTS": ("tenant_weights", parse_tenant_weights),
    "CONCURRENCY_LIMITS": ("concurrency_limits", parse_concurrency_limits),
    "DISCOVER_MODULES": ("discover_modules", parse_discover_modules),
    "RETENTION": ("retention_seconds", parse_retention),
    "ADMIN_MASKED_KEYS": ("admin_masked_keys", parse_masked_keys),
    "LEADER_LEASE_SECONDS": ("leader_lease_seconds", _ranged("LEADER_LEASE_SECONDS")),
    "SCHEDULER_INTERVAL_SECONDS": (
        "scheduler_interval_seconds",
        _ranged("SCHEDULER_INTERVAL_SECONDS"),
    ),
    "CRON_GRACE_SECONDS": ("cron_grace_seconds", _ranged("CRON_GRACE_SECONDS")),
    "CRON_FIRE_RETENTION_SECONDS": (
        "cron_fire_retention_seconds",
        _ranged("CRON_FIRE_RETENTION_SECONDS"),
    ),
    "ROLLUP_RETENTION_SECONDS": (
        "rollup_retention_seconds",
        _ranged("ROLLUP_RETENTION_SECONDS"),
    ),
    "BREAKER": ("breaker", parse_breaker),
    "RETRY_BUDGET": ("retry_budget", parse_retry_budget),
    "TRANSACTION_LIMITS": ("transaction_limits", parse_transaction_limits),
    "ENQUEUE_UNREGISTERED": ("enqueue_unregistered", parse_enqueue_unregistered),
    "POOLED_DATABASES": ("pooled_databases", parse_pooled_databases),
    "RATE_LIMITS": ("rate_limits", parse_rate_limits),
    "QUEUE_DATABASES": ("queue_databases", parse_queue_databases),
    "OUTBOX_DATABASES": ("outbox_databases", parse_outbox_databases),
    _RELAY_KEY: ("outbox_relay_interval_seconds", _ranged(_RELAY_KEY)),
}

_KEYS = {*FIELDS, "CRON"}


def build_settings(raw: Any) -> JobQueueSettings:
    """Validate a ``JOBQUEUE`` dict and return the frozen settings.

    Raises:
        JobQueueConfigurationError: naming every bad or unknown key (its ``problems``, in
            :data:`FIELDS` order; ``CRON`` last, as :class:`CronConfigurationError`, check
            jobqueue.E005).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise JobQueueConfigurationError(f"JOBQUEUE must be a dict, got {type(raw).__name__}")
    # Every bad key is reported, not the first one only (issue 31: check jobqueue.E001 named one
    # at a time).
    problems: list[str] = []
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        problems.append(
            f"JOBQUEUE has unknown keys: {', '.join(map(str, unknown))} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    values: dict[str, Any] = {}
    for key, (names, parse) in FIELDS.items():
        if key in raw:
            try:
                parsed = parse(raw[key])
            except JobQueueConfigurationError as exc:
                problems += exc.problems
                continue
            if isinstance(names, tuple):
                values.update(zip(names, parsed, strict=True))
            else:
                values[names] = parsed
    if problems:
        raise JobQueueConfigurationError(
            problems[0] if len(problems) == 1 else "; ".join(problems), problems=problems
        )
    built = JobQueueSettings(**values)
    failover = built.leader_lease_seconds + built.scheduler_interval_seconds
    if "CRON_GRACE_SECONDS" not in raw and built.cron_grace_seconds < failover:
        built = replace(built, cron_grace_seconds=failover)
    if built.cron_grace_seconds < failover:
        # Otherwise a leader failover would turn on-time fires into missed runs, which
        # missed="skip" drops.
        raise JobQueueConfigurationError(
            f"JOBQUEUE['CRON_GRACE_SECONDS'] ({built.cron_grace_seconds:g}) must be at least "
            f"LEADER_LEASE_SECONDS + SCHEDULER_INTERVAL_SECONDS ({failover:g}), so a leader "
            "failover never makes a fire time a missed run"
        )
    if "CRON" in raw:
        built = replace(built, cron=parse_cron_setting(raw["CRON"], built.max_payload_bytes))
    return built


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
