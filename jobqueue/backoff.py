"""Internal: the backoff policy of a job type, and the delay of its next retry.

The policies themselves (pure functions of attempt, base, cap and rng) live in
:mod:`jobqueue.retries`, with the retry-or-dead decision; they are re-exported here, where code
and tests have always found them. This module adds what needs the registry and the settings:
which policy a job type retries by.
"""

from __future__ import annotations

import random

from jobqueue.jobtypes import registered
from jobqueue.retries import POLICIES as POLICIES
from jobqueue.retries import _rng as _rng
from jobqueue.retries import backoff_delay as backoff_delay
from jobqueue.retries import decorrelated as decorrelated
from jobqueue.retries import equal as equal
from jobqueue.retries import exponential as exponential
from jobqueue.retries import full as full
from jobqueue.retries import none as none
from jobqueue.settings.conf import get_settings
from jobqueue.settings.policies import Backoff

__all__ = [
    "backoff_delay",
    "backoff_for",
    "decorrelated",
    "equal",
    "exponential",
    "full",
    "none",
    "policy_for",
]


def policy_for(job_type: str) -> Backoff:
    """Return the backoff policy of ``job_type``.

    The type's ``@job(backoff=...)`` (or its tasks backend's ``backoff`` option) when it is
    registered in this process, else ``JOBQUEUE["BACKOFF"]``.
    """
    found = registered(job_type)
    return (found.backoff if found else None) or get_settings().backoff


def backoff_for(job_type: str, attempt: int, rng: random.Random | None = None) -> float:
    """Return the retry delay, seconds, for a failed ``attempt`` of ``job_type``.

    Uses :func:`policy_for`. Pass a seeded ``rng`` for repeatable delays.
    """
    return backoff_delay(attempt, policy_for(job_type), rng)
