"""Internal: backoff policies, the outcome of a run, and the one retry-or-dead decision.

A leaf: it imports nothing of ours above ``errors`` and ``states``; settings come in as
arguments (a :class:`Backoff`, parsed by ``jobqueue.settings.policies``; the policy of a job
type is ``jobqueue.registry.policy_for``). Every path that
ends an attempt asks :func:`decide` whether the job retries or goes dead (the executor for a
handler's exception or a timeout, ``jobqueue.nack`` for a consumer's failure, the reaper for an
expired lease, the hand-back for a process that died running one job), and every outcome is
recorded with one store method, ``finish_many``.

The policies are pure functions of (attempt, base, cap, rng) returning seconds, after Marc
Brooker's AWS Architecture Blog post "Exponential Backoff And Jitter" (2015). Full jitter is the
default: it spreads jobs that failed together over the whole window, which is what stops a retry
storm.

Why not ``retry.py``, as the layout once named it: ``jobqueue.retry`` is the public operator
function; importing a submodule of that name would replace it on the package (docs/decisions.md).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobqueue.errors import JobTimeout, PermanentError, RetryAfter, UnknownJobType
from jobqueue.states import DeadReason, JobState

__all__ = [
    "POLICIES",
    "Backoff",
    "RunOutcome",
    "backoff_delay",
    "dead_reason",
    "decide",
    "decorrelated",
    "equal",
    "exponential",
    "full",
    "none",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """A backoff policy: the shape of the delays between attempts (``JOBQUEUE["BACKOFF"]``).

    The defaults are the setting's: exponential backoff with full jitter, base 1 s, cap 1 h
    (the AWS backoff analysis). ``jobqueue.settings.policies.parse_backoff`` builds one from
    the setting or a job type's ``backoff=``.

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


#: The old status words of an outcome (``RunOutcome.status``), by target state. Signals
#: ``job_cancelled`` and ``job_lease_lost`` still carry them as ``status``.
_STATUS = {JobState.SUCCEEDED: "succeeded", JobState.SCHEDULED: "retry", JobState.DEAD: "dead"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """What one run of a leased job comes to, and what the store writes for it.

    The store records it with ``finish_many``, fenced on ``(job_id, lease_token, state =
    'leased')``; a job whose cancel was requested while it ran ends ``cancelled`` instead of
    ``state`` (the store decides that, from the row).

    Attributes:
        job_id: the job this is the outcome of.
        lease_token: the token of the claim that ran it (the fence of the write).
        state: the target state: ``succeeded``, ``scheduled`` (a retry) or ``dead``
            (:class:`~jobqueue.states.JobState` values).
        result_json: the handler's return value as JSON (succeeded only; kept if cancelled).
        error: the error-history entry (scheduled and dead; succeeded when the result could not
            be stored, kind ``result_not_stored``); the store adds ``at``.
        delay_s: seconds from now (database clock) to the retry (scheduled only).
        retry_at: aware datetime of the retry, exact; wins over ``delay_s`` (scheduled only).
        dead_reason: a :class:`~jobqueue.states.DeadReason` value (dead only), else None.
        duration_s: how long the handler ran, seconds.
        exact_delay: the retry time is the handler's or caller's own (``RetryAfter``,
            ``retry_at``): no budget may move it.
        opens_dependency: the dependency a ``RetryAfter(dependency=...)`` named: its breaker
            opens for ``opens_for_s`` seconds.
    """

    job_id: int
    lease_token: uuid.UUID
    state: str
    result_json: str = "null"
    error: dict[str, Any] | None = None
    delay_s: float = 0.0
    retry_at: datetime | None = None
    dead_reason: str | None = None
    duration_s: float = 0.0
    exact_delay: bool = False
    opens_dependency: str = ""
    opens_for_s: float = 0.0

    @property
    def status(self) -> str:
        """The outcome in the old words: ``"succeeded"``, ``"retry"`` or ``"dead"``.

        Kept for the worker (until it speaks states) and for the ``status`` argument of the
        ``job_cancelled`` and ``job_lease_lost`` signals.
        """
        return _STATUS[JobState(self.state)]


def dead_reason(attempt: int, max_attempts: int, error: BaseException | str | None) -> str | None:
    """Return why a failed attempt makes the job dead, or None when it retries.

    The dead half of :func:`decide` (which see), for code that needs only to know whether this
    attempt was the last: a ``PermanentError`` is dead at once (``permanent_error``); with
    attempts spent, ``unknown_type``, ``timeout`` or ``attempts_exhausted``.

    Args:
        attempt: the failed attempt, from 1.
        max_attempts: attempts allowed.
        error: what failed (an exception, a message, or None).

    Returns:
        A :class:`~jobqueue.states.DeadReason` value, or None.
    """
    if isinstance(error, PermanentError):
        return DeadReason.PERMANENT_ERROR
    if attempt < max_attempts:
        return None
    if isinstance(error, UnknownJobType):
        return DeadReason.UNKNOWN_TYPE
    if isinstance(error, JobTimeout):
        return DeadReason.TIMEOUT
    return DeadReason.ATTEMPTS_EXHAUSTED


def decide(
    job_id: int,
    lease_token: uuid.UUID,
    *,
    attempt: int,
    max_attempts: int,
    error: BaseException | str | None,
    backoff: Backoff,
    entry: dict[str, Any] | None = None,
    retry_at: datetime | None = None,
    duration_s: float = 0.0,
    rng: random.Random | None = None,
) -> RunOutcome:
    """Decide whether a failed attempt retries or goes dead: THE rule, for every path.

    In order: a ``PermanentError`` is dead at once (``permanent_error``). With attempts spent the
    job is dead: ``unknown_type`` if its type is unknown, ``timeout`` if it ran past its limit,
    else ``attempts_exhausted``. Otherwise it is scheduled: at ``retry_at`` exactly when given,
    after exactly a ``RetryAfter``'s seconds, else after ``backoff``'s delay for ``attempt``.

    Args:
        job_id: the job.
        lease_token: the token of the claim whose attempt failed.
        attempt: the failed attempt (the job's attempts after its claim), from 1.
        max_attempts: attempts allowed.
        error: what failed: the exception, a message, or None (a lease that expired, a process
            that died: no exception to read).
        backoff: the job type's backoff policy (``jobqueue.registry.policy_for``).
        entry: the error-history entry the outcome carries (``jobqueue.history.error_entry``).
        retry_at: aware datetime of the retry, honored exactly (``jobqueue.nack``).
        duration_s: how long the attempt ran, seconds.
        rng: random source for the backoff's jitter (seed it in tests).

    Returns:
        An :class:`RunOutcome` whose ``state`` is ``scheduled`` or ``dead``.
    """
    # Even a dead-lettered attempt tells the breaker that the dependency asked for a pause.
    opens: dict[str, Any] = (
        {"opens_dependency": error.dependency, "opens_for_s": error.seconds}
        if isinstance(error, RetryAfter) and error.dependency
        else {}
    )
    common: dict[str, Any] = {
        "job_id": job_id,
        "lease_token": lease_token,
        "error": entry,
        "duration_s": duration_s,
    }
    reason = dead_reason(attempt, max_attempts, error)
    if reason == DeadReason.PERMANENT_ERROR:
        return RunOutcome(state=JobState.DEAD, dead_reason=reason, **common)
    if reason is not None:
        return RunOutcome(state=JobState.DEAD, dead_reason=reason, **common, **opens)
    if retry_at is not None:
        return RunOutcome(state=JobState.SCHEDULED, retry_at=retry_at, exact_delay=True, **common)
    if isinstance(error, RetryAfter):
        return RunOutcome(
            state=JobState.SCHEDULED, delay_s=error.seconds, exact_delay=True, **common, **opens
        )
    delay = backoff_delay(attempt, backoff, rng)
    return RunOutcome(state=JobState.SCHEDULED, delay_s=delay, **common, **opens)
