"""The one retry-or-dead rule (``jobqueue.retries.decide``) and the outcome it returns.

No database: ``decide`` is a pure function of the attempt, the error and the backoff policy.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timezone

import pytest

from jobqueue.errors import JobTimeout, PermanentError, RetryAfter, UnknownJobType
from jobqueue.retries import Backoff, RunOutcome, backoff_delay, dead_reason, decide
from jobqueue.states import DeadReason, JobState

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

TOKEN = uuid.uuid4()
POLICY = Backoff(policy="full", base_seconds=2.0, cap_seconds=60.0)
ENTRY = {"kind": "error", "attempt": 1, "message": "m"}


def outcome(attempt: int, max_attempts: int, error, **kwargs) -> RunOutcome:
    return decide(
        7,
        TOKEN,
        attempt=attempt,
        max_attempts=max_attempts,
        error=error,
        backoff=kwargs.pop("backoff", POLICY),
        entry=ENTRY,
        **kwargs,
    )


def test_a_permanent_error_is_dead_at_once():
    o = outcome(1, 5, PermanentError("400"))
    assert (o.state, o.dead_reason, o.error, o.job_id, o.lease_token) == (
        JobState.DEAD,
        DeadReason.PERMANENT_ERROR,
        ENTRY,
        7,
        TOKEN,
    )


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ValueError("x"), DeadReason.ATTEMPTS_EXHAUSTED),
        ("a message", DeadReason.ATTEMPTS_EXHAUSTED),
        (None, DeadReason.ATTEMPTS_EXHAUSTED),  # a lease that expired: no exception
        (UnknownJobType("t"), DeadReason.UNKNOWN_TYPE),
        (JobTimeout(7, 1.0), DeadReason.TIMEOUT),
        (RetryAfter(5), DeadReason.ATTEMPTS_EXHAUSTED),
    ],
)
def test_with_attempts_spent_the_job_is_dead_and_says_why(error, reason):
    o = outcome(3, 3, error, retry_at=datetime(2031, 1, 1, tzinfo=UTC))
    assert (o.state, o.dead_reason, o.status) == (JobState.DEAD, reason, "dead")
    assert dead_reason(3, 3, error) == reason
    # Attempts over the limit (a lowered max_attempts) are spent too.
    assert dead_reason(4, 3, error) == reason


@pytest.mark.parametrize("error", [ValueError("x"), UnknownJobType("t"), JobTimeout(7, 1.0), None])
def test_with_attempts_left_the_job_retries_after_the_types_backoff(error):
    o = outcome(3, 5, error, rng=random.Random(4))
    assert (o.state, o.dead_reason, o.exact_delay, o.status) == (
        JobState.SCHEDULED,
        None,
        False,
        "retry",
    )
    assert o.delay_s == backoff_delay(3, POLICY, random.Random(4))
    assert 0.0 <= o.delay_s <= 8.0  # full jitter under base * 2**2
    assert dead_reason(3, 5, error) is None


def test_retry_after_is_exact_and_opens_its_dependency():
    o = outcome(1, 5, RetryAfter(7.5, dependency="partner"))
    assert (o.state, o.delay_s, o.exact_delay) == (JobState.SCHEDULED, 7.5, True)
    assert (o.opens_dependency, o.opens_for_s) == ("partner", 7.5)
    # The last attempt is dead, and still tells the breaker to pause.
    o = outcome(5, 5, RetryAfter(7.5, dependency="partner"))
    assert (o.state, o.opens_dependency) == (JobState.DEAD, "partner")
    assert outcome(1, 5, RetryAfter(3)).opens_dependency == ""


def test_retry_at_is_exact_and_wins_over_retry_after_and_backoff():
    at = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    o = outcome(1, 5, RetryAfter(3), retry_at=at)
    assert (o.state, o.retry_at, o.delay_s, o.exact_delay) == (JobState.SCHEDULED, at, 0.0, True)
    # ...but not over a permanent error.
    assert outcome(1, 5, PermanentError("no"), retry_at=at).state == JobState.DEAD


def test_a_fixed_policy_gives_its_delay():
    fixed = Backoff(policy="none", base_seconds=7.0, cap_seconds=7.0)
    assert [outcome(n, 9, None, backoff=fixed).delay_s for n in (1, 2, 5)] == [7.0, 7.0, 7.0]


def test_status_maps_the_target_state_to_the_old_words():
    words = {
        state: RunOutcome(job_id=1, lease_token=TOKEN, state=state).status
        for state in (JobState.SUCCEEDED, JobState.SCHEDULED, JobState.DEAD)
    }
    assert words == {
        JobState.SUCCEEDED: "succeeded",
        JobState.SCHEDULED: "retry",
        JobState.DEAD: "dead",
    }
