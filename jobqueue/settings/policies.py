"""The policy settings ``BACKOFF``, ``BREAKER`` and ``RETRY_BUDGET``: frozen values and parsers.

A leaf (imports only ``errors``, ``limits`` and ``validation``): ``conf`` reads the settings
with the ``parse_*`` functions (``@job(backoff=...)`` and the tasks backend's ``OPTIONS`` use
:func:`parse_backoff` too); ``backoff``, ``breakers``, ``budgets`` and the stores take the
frozen values as arguments and never read the settings for them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.retries import Backoff
from jobqueue.settings import ranges as limits
from jobqueue.validation import is_count, is_number

__all__ = [
    "BACKOFF_POLICIES",
    "Breaker",
    "RetryBudgetSettings",
    "parse_backoff",
    "parse_breaker",
    "parse_retry_budget",
]

#: The jitter kinds of ``jobqueue.retries.POLICIES`` (Marc Brooker, "Exponential Backoff And
#: Jitter").
BACKOFF_POLICIES = ("none", "full", "equal", "decorrelated")


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    """Circuit-breaker thresholds, shared by every dependency (``JOBQUEUE["BREAKER"]``).

    The defaults are the setting's: a dependency's breaker opens when, within one window of
    30 s, at least 5 of its jobs failed and they were at least half of its outcomes; it stays
    open 10 s, doubling per failed probe up to 5 min.

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

    The defaults are the setting's: retries of a queue may add 10 % of its successes, plus 10
    retries per second so a queue with no recent success can still retry (Finagle's
    ``RetryBudget`` default floor); up to 100 unspent retries are saved for a burst.

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


def parse_backoff(value: Any, where: str = "JOBQUEUE['BACKOFF']") -> Backoff:
    """Validate a backoff dict such as ``{"policy": "full", "base_seconds": 1, "cap_seconds": 60}``.

    Args:
        value: a dict with any of the keys ``policy``, ``base_seconds``, ``cap_seconds``, or a
            :class:`Backoff` (returned as is).
        where: how to name the value in an error message.

    Returns:
        The :class:`Backoff`, with defaults for missing keys.

    Raises:
        JobQueueConfigurationError: unknown keys, an unknown policy, or bad numbers (ranges:
            ``limits.RANGES``).
    """
    if isinstance(value, Backoff):
        return value
    merged = limits.section(value, where, asdict(Backoff()))
    if merged["policy"] not in BACKOFF_POLICIES:
        raise JobQueueConfigurationError(
            f"{where}['policy'] must be one of {', '.join(BACKOFF_POLICIES)}, "
            f"got {merged['policy']!r}"
        )
    base, cap = (
        limits.setting(f"BACKOFF.{key}", merged[key], f"{where}[{key!r}]")
        for key in ("base_seconds", "cap_seconds")
    )
    if cap < base:
        raise JobQueueConfigurationError(
            f"{where}: cap_seconds ({cap}) must be >= base_seconds ({base})"
        )
    return Backoff(policy=merged["policy"], base_seconds=base, cap_seconds=cap)


def _positive(key: str, value: Any, where: str, high: float | None = None) -> float:
    """Return ``value`` if it is a finite number > 0 (and <= ``high``), naming ``key``."""
    name = f"{where}[{key!r}]"
    if not is_number(value):
        raise JobQueueConfigurationError(f"{name} must be a number, got {value!r}")
    if value <= 0:
        raise JobQueueConfigurationError(f"{name} must be > 0.0, got {value!r}")
    if high is not None and value > high:
        raise JobQueueConfigurationError(f"{name} must be <= {high:g}, got {value!r}")
    return float(value)


def parse_breaker(value: Any, where: str = "JOBQUEUE['BREAKER']") -> Breaker:
    """Validate ``JOBQUEUE["BREAKER"]``, e.g. ``{"failure_threshold": 5, "window_seconds": 30}``.

    Keys left out keep the defaults of :class:`Breaker`.

    Raises:
        JobQueueConfigurationError: not a dict, an unknown key, a count below 1, a duration or
            ratio <= 0, a ratio above 1, or a max cool-down below the cool-down; naming the key.
    """
    merged = limits.section(value, where, asdict(Breaker()))
    threshold = merged["failure_threshold"]
    if not is_count(threshold):
        raise JobQueueConfigurationError(
            f"{where}['failure_threshold'] must be an integer >= 1, got {threshold!r}"
        )
    breaker = Breaker(
        failure_threshold=threshold,
        failure_ratio=_positive("failure_ratio", merged["failure_ratio"], where, high=1),
        **{
            key: limits.setting(f"BREAKER.{key}", merged[key], f"{where}[{key!r}]")
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

    Keys left out keep the defaults of :class:`RetryBudgetSettings`.

    Raises:
        JobQueueConfigurationError: not a dict or None, an unknown key, a ratio <= 0 or > 1, a
            floor <= 0, or a capacity below 1; naming the key.
    """
    if value is None:
        return None
    merged = limits.section(value, where, asdict(RetryBudgetSettings()))
    capacity = _positive("capacity", merged["capacity"], where)
    if capacity < 1:
        raise JobQueueConfigurationError(f"{where}['capacity'] must be >= 1, got {capacity:g}")
    return RetryBudgetSettings(
        ratio=_positive("ratio", merged["ratio"], where, high=1),
        floor_per_second=_positive("floor_per_second", merged["floor_per_second"], where),
        capacity=capacity,
    )
