"""Rate limits (issue 18): token buckets per dependency, job type and tenant, shared through the DB.

``JOBQUEUE["RATE_LIMITS"]`` declares them::

    "RATE_LIMITS": {
        "dependency": {"partner-api": "100/s"},
        "type": {"emails.send": {"rate": "600/min", "burst": 20}},
        "tenant": {"default": "50/s", "overrides": {"big": "500/s", "internal": None}},
    }

A limit is ``"<number>/<unit>"`` with a unit of :data:`RATE_UNITS` (``s``, ``min``, ``h`` or
their long forms ``sec``, ``second``, ``minute``, ``hour``), a bare number (per second), or
``{"rate": ..., "burst": n}``; the burst (how many tokens a full bucket holds, so how many jobs
may start at once after a quiet spell) defaults to one second's worth, at least 1. The tenant
default gives every tenant (``tenant_id`` not empty) its own bucket; an override of None exempts
a tenant.

A job is subject to every limiter that names it: its type's, its type's dependency's (the
``@job(dependency=...)`` of the worker's registry), its tenant's. The claim takes one token from
each, and leaves the job claimable-later when any has none (``store/sql/claim.sql``). This module
is a leaf: it parses the setting and builds the values the stores read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.settings.ranges import setting

__all__ = ["RATE_UNITS", "Limiter", "RateLimits", "parse_rate", "parse_rate_limits"]

WHERE = "JOBQUEUE['RATE_LIMITS']"

#: The units a rate string may name, each with its seconds: the one list the parser accepts
#: (docs/rate-limits.md lists the same; a test compares them). Short form first, then its long
#: forms, which are accepted as written in prose ("5/sec", "5/hour").
RATE_UNITS: Mapping[str, float] = MappingProxyType(
    {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}
)
_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*/\s*([a-z]+)\s*")

#: Bucket key prefixes: one namespace per kind, so a type and a dependency may share a name.
TYPE, DEPENDENCY, TENANT = "type:", "dependency:", "tenant:"


@dataclass(frozen=True, slots=True)
class Limiter:
    """One token bucket's limit.

    Attributes:
        rate: tokens added per second.
        burst: most tokens the bucket holds.
        text: the rate as declared (``"600/min"``), for the dashboard and the metrics.
    """

    rate: float
    burst: float
    text: str = ""


@dataclass(frozen=True, slots=True)
class RateLimits:
    """Every declared limit, and which job types fall under which dependency.

    Attributes:
        dependencies: dependency name -> its limit.
        types: job type name -> its limit.
        tenant_default: the limit of every tenant without an override; None: none.
        tenant_overrides: tenant id -> its own limit, or None to exempt it.
        type_dependencies: job type -> its dependency, from the worker's registry (only types
            whose dependency has a limit matter).
    """

    dependencies: Mapping[str, Limiter] = field(default_factory=lambda: MappingProxyType({}))
    types: Mapping[str, Limiter] = field(default_factory=lambda: MappingProxyType({}))
    tenant_default: Limiter | None = None
    tenant_overrides: Mapping[str, Limiter | None] = field(
        default_factory=lambda: MappingProxyType({})
    )
    type_dependencies: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def enabled(self) -> bool:
        """True when some limit is declared (the claim then reads the buckets)."""
        return bool(
            self.dependencies
            or self.types
            or self.tenant_default
            or any(v is not None for v in self.tenant_overrides.values())
        )

    def with_dependencies(self, type_dependencies: Mapping[str, str | None]) -> RateLimits:
        """Return these limits knowing each job type's dependency (``{type: dependency}``)."""
        known = {t: d for t, d in type_dependencies.items() if d is not None}
        return RateLimits(
            self.dependencies,
            self.types,
            self.tenant_default,
            self.tenant_overrides,
            MappingProxyType(known),
        )

    def with_type_limits(self, declared: Mapping[str, Limiter]) -> RateLimits:
        """Return these limits plus ``declared`` (``@job(rate_limit=...)``); settings win."""
        types = {**declared, **self.types}
        return RateLimits(
            self.dependencies,
            MappingProxyType(types),
            self.tenant_default,
            self.tenant_overrides,
            self.type_dependencies,
        )

    def static(self) -> dict[str, Limiter]:
        """Return the buckets known without looking at jobs: bucket key -> limit.

        Every tenant under the default has a bucket too (``tenant:<id>``); those are found from
        the claimable jobs (:meth:`of_tenant`).
        """
        keys = {DEPENDENCY + d: lim for d, lim in self.dependencies.items()}
        keys.update({TYPE + t: lim for t, lim in self.types.items()})
        keys.update({TENANT + t: lim for t, lim in self.tenant_overrides.items() if lim})
        return keys

    def type_keys(self) -> list[tuple[str, str]]:
        """Return ``(job type, bucket key)`` for each type's own and dependency's limit."""
        pairs = [(t, TYPE + t) for t in self.types]
        pairs += [
            (t, DEPENDENCY + d) for t, d in self.type_dependencies.items() if d in self.dependencies
        ]
        return sorted(pairs)

    def of_tenant(self, tenant_id: str) -> Limiter | None:
        """Return ``tenant_id``'s limit (None: not limited; jobs without a tenant never are)."""
        if tenant_id in self.tenant_overrides:
            return self.tenant_overrides[tenant_id]
        return None if tenant_id == "" else self.tenant_default

    def keys_of(self, job_type: str, tenant_id: str) -> list[str]:
        """Return the bucket keys a job of ``job_type`` for ``tenant_id`` takes a token from."""
        keys = [key for t, key in self.type_keys() if t == job_type]
        if self.of_tenant(tenant_id) is not None:
            keys.append(TENANT + tenant_id)
        return sorted(keys)

    def limit_of(self, key: str) -> Limiter | None:
        """Return the limit of bucket ``key`` (None: no limit declared for it any more)."""
        if key.startswith(TENANT):
            return self.of_tenant(key[len(TENANT) :])
        return self.static().get(key)


def parse_rate(value: Any, where: str) -> Limiter:
    """Return the limit ``value`` declares: ``"600/min"``, ``20`` (per second), or a dict.

    The dict is ``{"rate": one of those, "burst": n}``.

    Args:
        value: the declared limit.
        where: how errors name it, e.g. ``JOBQUEUE['RATE_LIMITS']['type']['emails.send']``.

    Raises:
        JobQueueConfigurationError: not a rate string or dict, an unknown unit or key, or a rate
            or burst outside ``limits.RANGES`` (``RATE_LIMITS.rate``, ``RATE_LIMITS.burst``).
    """
    burst: Any = None
    if isinstance(value, dict):
        unknown = sorted(map(str, set(value) - {"rate", "burst"}))
        if unknown or "rate" not in value:
            raise JobQueueConfigurationError(
                f"{where} must be a rate like '100/s' or {{'rate': '100/s', 'burst': 20}}, "
                f"got {value!r}"
            )
        value, burst = value["rate"], value.get("burst")
    if isinstance(value, str):
        match = _RATE.fullmatch(value)
        if match is None or match.group(2) not in RATE_UNITS:
            raise JobQueueConfigurationError(
                f"{where} must be a rate like '100/s', '600/min' or '10/h' (units: "
                f"{', '.join(RATE_UNITS)}), got {value!r}"
            )
        per_s: Any = float(match.group(1)) / RATE_UNITS[match.group(2)]
        text = value.strip()
    else:
        # A bare number is jobs per second; the range check refuses anything else.
        per_s, text = value, f"{value}/s"
    rate = setting("RATE_LIMITS.rate", per_s, f"{where} (per second)")
    if burst is None:
        burst = max(1, math.ceil(rate))
    return Limiter(rate, setting("RATE_LIMITS.burst", burst, f"{where} burst"), text)


def _names(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise JobQueueConfigurationError(f"{where} must be a dict of names to rates, got {value!r}")
    return value


def parse_rate_limits(value: Any) -> RateLimits:
    """Validate ``JOBQUEUE["RATE_LIMITS"]`` (the shape in the module docstring).

    Raises:
        JobQueueConfigurationError: naming the bad key and value.
    """
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(f"{WHERE} must be a dict, got {value!r}")
    unknown = sorted(map(str, set(value) - {"dependency", "type", "tenant"}))
    if unknown:
        raise JobQueueConfigurationError(
            f"{WHERE} has unknown keys: {', '.join(unknown)} (known: dependency, type, tenant)"
        )
    deps = {
        name: parse_rate(rate, f"{WHERE}['dependency'][{name!r}]")
        for name, rate in _names(value.get("dependency", {}), f"{WHERE}['dependency']").items()
    }
    types = {
        name: parse_rate(rate, f"{WHERE}['type'][{name!r}]")
        for name, rate in _names(value.get("type", {}), f"{WHERE}['type']").items()
    }
    tenant = value.get("tenant", {})
    where = f"{WHERE}['tenant']"
    if not isinstance(tenant, dict) or set(tenant) - {"default", "overrides"}:
        raise JobQueueConfigurationError(
            f"{where} must be a dict with 'default' and 'overrides', got {tenant!r}"
        )
    default = tenant.get("default")
    overrides = {
        name: None if rate is None else parse_rate(rate, f"{where}['overrides'][{name!r}]")
        for name, rate in _names(tenant.get("overrides", {}), f"{where}['overrides']").items()
    }
    return RateLimits(
        MappingProxyType(deps),
        MappingProxyType(types),
        None if default is None else parse_rate(default, f"{where}['default']"),
        MappingProxyType(overrides),
    )
