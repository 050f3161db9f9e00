"""Backoff policies: how long to wait before attempt ``n + 1`` after attempt ``n`` failed.

Pure functions of (attempt, base, cap, rng) returning seconds, after Marc Brooker's AWS
Architecture Blog post "Exponential Backoff And Jitter" (2015). Full jitter is the default: it
spreads jobs that failed together over the whole window, which is what stops a retry storm.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .conf import get_settings
from .jobtypes import registered
from .policies import Backoff

__all__ = ["backoff_delay", "backoff_for", "decorrelated", "equal", "exponential", "full", "none"]

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


def backoff_for(job_type: str, attempt: int, rng: random.Random | None = None) -> float:
    """Return the retry delay, seconds, for a failed ``attempt`` of ``job_type``.

    Uses the type's ``@job(backoff=...)`` policy when it is registered here, else
    ``JOBQUEUE["BACKOFF"]``. Pass a seeded ``rng`` for repeatable delays.
    """
    found = registered(job_type)
    policy = (found.backoff if found else None) or get_settings().backoff
    return backoff_delay(attempt, policy, rng)
