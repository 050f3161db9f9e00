"""Backoff policies: how long to wait before attempt ``n + 1`` after attempt ``n`` failed.

Pure functions of (attempt, base, cap, rng) returning seconds, after Marc Brooker's AWS
Architecture Blog post "Exponential Backoff And Jitter" (2015). Full jitter is the default: it
spreads jobs that failed together over the whole window, which is what stops a retry storm.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from . import limits
from .errors import JobQueueConfigurationError

__all__ = [
    "Backoff",
    "backoff_delay",
    "decorrelated",
    "equal",
    "exponential",
    "full",
    "none",
    "parse_backoff",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """A backoff policy: the shape of the delays between attempts (``JOBQUEUE["BACKOFF"]``).

    The defaults are the setting's: exponential backoff with full jitter, base 1 s, cap 1 h
    (the AWS backoff analysis).

    Attributes:
        policy: one of ``none``, ``full``, ``equal``, ``decorrelated`` (jitter kinds).
        base_seconds: delay of the first retry before jitter, seconds (> 0).
        cap_seconds: largest delay, seconds (>= base_seconds).
    """

    policy: str = "full"
    base_seconds: float = 1.0
    cap_seconds: float = 3600.0


# 2**1000 overflows a float multiply; no real cap needs more than 2**64 times the base.
_MAX_EXPONENT = 64


def exponential(attempt: int, base: float, cap: float) -> float:
    """Return the un-jittered delay ``min(cap, base * 2**(attempt - 1))`` in seconds.

    Args:
        attempt: the attempt that just failed, counting from 1.
        base: delay after the first attempt, seconds.
        cap: largest delay, seconds.
    """
    return min(cap, base * 2 ** min(max(attempt - 1, 0), _MAX_EXPONENT))


def none(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Return the plain exponential delay, no jitter (deterministic; invites retry storms)."""
    return exponential(attempt, base, cap)


def full(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Return a "full jitter" delay: uniform in ``[0, exponential]``."""
    return rng.uniform(0.0, exponential(attempt, base, cap))


def equal(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Return an "equal jitter" delay: half the exponential plus uniform in the other half."""
    ceiling = exponential(attempt, base, cap)
    return ceiling / 2 + rng.uniform(0.0, ceiling / 2)


def decorrelated(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Return a "decorrelated jitter" delay: ``min(cap, uniform(base, previous * 3))``.

    The AWS recipe keeps the previous delay as state. We keep no state per job: the chain is
    replayed from the first attempt with ``rng``, which draws the ``attempt``-th delay from the
    same distribution the stateful recipe produces.
    """
    delay = base
    for _ in range(max(attempt, 1)):
        delay = min(cap, rng.uniform(base, delay * 3))
    return delay


POLICIES: dict[str, Callable[[int, float, float, random.Random], float]] = {
    "none": none,
    "full": full,
    "equal": equal,
    "decorrelated": decorrelated,
}

_rng = random.SystemRandom()


def backoff_delay(attempt: int, backoff: Backoff, rng: random.Random | None = None) -> float:
    """Return the delay in seconds before retrying a job whose attempt ``attempt`` failed.

    Args:
        attempt: the failed attempt, counting from 1.
        backoff: the policy, base and cap (from ``JOBQUEUE["BACKOFF"]`` or the job type).
        rng: random source; pass a seeded ``random.Random`` for repeatable delays in tests.
    """
    return POLICIES[backoff.policy](attempt, backoff.base_seconds, backoff.cap_seconds, rng or _rng)


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
    if merged["policy"] not in POLICIES:
        raise JobQueueConfigurationError(
            f"{where}['policy'] must be one of {', '.join(POLICIES)}, got {merged['policy']!r}"
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
