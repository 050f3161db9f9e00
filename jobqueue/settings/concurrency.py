"""Concurrency limits and tenant weights as settings: ``CONCURRENCY_LIMITS`` and ``TENANT_WEIGHTS``.

A leaf (imports only ``errors`` and ``validation``): ``conf`` parses the two settings here,
:mod:`jobqueue.limits.concurrency` resolves a job's key and limit at enqueue with the key rules
named
here, and the claim (``store/sql/claim.sql``, ``store/ranking.py``) applies both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.validation import is_count, is_number, is_text

__all__ = [
    "KEY_MAX_LENGTH",
    "MAX_CONCURRENCY_LIMIT",
    "MAX_TENANT_WEIGHT",
    "check_declared",
    "dependency_key",
    "parse_concurrency_limits",
    "parse_tenant_weights",
    "type_key",
]

KEY_MAX_LENGTH = 200
"""Longest concurrency key (``Job.concurrency_key``)."""

MAX_CONCURRENCY_LIMIT = 1_000_000
"""Largest concurrency limit: more running jobs than any fleet holds."""

MAX_TENANT_WEIGHT = 1000
"""Largest tenant weight: as for queue weights, beyond 1000:1 is a strict order in all but name."""


def dependency_key(dependency: str) -> str:
    """Return the concurrency key of a dependency's limit: ``dependency:<name>``."""
    return f"dependency:{dependency}"


def type_key(type_name: str) -> str:
    """Return the concurrency key of a job type's limit: ``type:<name>``."""
    return f"type:{type_name}"[:KEY_MAX_LENGTH]


def parse_concurrency_limits(value: Any) -> Mapping[str, int]:
    """Validate ``JOBQUEUE["CONCURRENCY_LIMITS"]``: ``{concurrency key: most running >= 1}``.

    Keys are concurrency keys as stored on jobs: ``"dependency:partner-api"`` (every job type
    declaring that dependency), ``"type:shop.jobs.sync"`` (one job type), or a key a job computes
    (``"acct:42"``). A key listed here also overrides the limit jobs of that key were enqueued
    with, from the next claim on.

    Raises:
        JobQueueConfigurationError: not a dict, a key that is not a non-empty string of at most
            200 characters, or a limit that is not an integer in 1..1,000,000; names the key.
    """
    where = "JOBQUEUE['CONCURRENCY_LIMITS']"
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"{where} must be a dict of concurrency key -> most running jobs, like "
            f"{{'dependency:partner-api': 5}}, got {value!r}"
        )
    for key, limit in value.items():
        if not is_text(key, KEY_MAX_LENGTH) or not key:
            raise JobQueueConfigurationError(
                f"{where}: keys are non-empty strings of at most {KEY_MAX_LENGTH} characters, "
                f"got {key!r}"
            )
        if not is_count(limit, 1, MAX_CONCURRENCY_LIMIT):
            raise JobQueueConfigurationError(
                f"{where}[{key!r}] must be an integer in 1..{MAX_CONCURRENCY_LIMIT:,}, "
                f"got {limit!r}"
            )
    return MappingProxyType(dict(value))


def parse_tenant_weights(value: Any) -> Mapping[str, float]:
    """Validate ``JOBQUEUE["TENANT_WEIGHTS"]``: ``{tenant_id: weight}``; unlisted tenants weigh 1.

    Raises:
        JobQueueConfigurationError: not a dict, a tenant id that is not a string of at most 100
            characters, or a weight that is not a number in (0, 1000]; names the tenant.
    """
    where = "JOBQUEUE['TENANT_WEIGHTS']"
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"{where} must be a dict of tenant id -> weight, like {{'enterprise-a': 5}}, "
            f"got {value!r}"
        )
    for tenant, weight in value.items():
        if not is_text(tenant, 100):
            raise JobQueueConfigurationError(
                f"{where}: tenant ids are strings of at most 100 characters, got {tenant!r}"
            )
        if not is_number(weight, 0, MAX_TENANT_WEIGHT, low_open=True):
            raise JobQueueConfigurationError(
                f"{where}[{tenant!r}] must be a number in (0, {MAX_TENANT_WEIGHT}], got {weight!r}"
            )
    return MappingProxyType({tenant: float(weight) for tenant, weight in value.items()})


def check_declared(
    where: str, key: str | Callable[..., str | None] | None, limit: int | None
) -> None:
    """Refuse a bad ``@job(concurrency_key=, concurrency_limit=)`` pair (limits/concurrency.py).

    Args:
        where: how the message names the declaration (``@job for <type>``).
        key: the type's concurrency key: a string, a function of the payload, or None.
        limit: the type's limit, or None.

    Raises:
        JobQueueConfigurationError: a limit out of range, a bad fixed key, or a key function
            without a limit.

    A fixed key may take its limit from ``JOBQUEUE["CONCURRENCY_LIMITS"]``; a key function
    needs its own limit, as its keys cannot be listed in settings ahead of time.
    """
    if limit is not None and not is_count(limit, 1, MAX_CONCURRENCY_LIMIT):
        raise JobQueueConfigurationError(
            f"{where}: concurrency_limit must be an integer in 1..{MAX_CONCURRENCY_LIMIT:,}, "
            f"got {limit!r}"
        )
    if key is None or callable(key):
        if callable(key) and limit is None:
            raise JobQueueConfigurationError(
                f"{where}: a concurrency_key function needs a concurrency_limit"
            )
        return
    if not is_text(key, KEY_MAX_LENGTH) or not key:
        raise JobQueueConfigurationError(
            f"{where}: concurrency_key must be a non-empty string of at most {KEY_MAX_LENGTH} "
            f"characters or a function of the payload, got {key!r}"
        )
