"""Backoff policies: bounds, the cap, reproducibility with a seeded RNG, and the jitter spread."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from jobqueue import retries
from jobqueue.retries import Backoff, backoff_delay, decorrelated, equal, exponential, full, none

POLICIES = {"none": none, "full": full, "equal": equal, "decorrelated": decorrelated}


def test_exponential_doubles_from_the_base_until_the_cap():
    assert [exponential(n, 1.0, 3600.0) for n in range(1, 14)] == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        512,
        1024,
        2048,
        3600,
    ]
    assert [exponential(n, 0.5, 3.0) for n in range(1, 5)] == [0.5, 1.0, 2.0, 3.0]
    # An attempt below 1 is read as the first (no fractional delays below the base).
    assert exponential(0, 2.0, 60.0) == 2.0
    assert exponential(-3, 2.0, 60.0) == 2.0


def test_none_is_the_exact_exponential():
    rng = random.Random(1)
    for attempt in range(1, 30):
        assert none(attempt, 1.0, 3600.0, rng) == min(3600.0, 2.0 ** (attempt - 1))


@pytest.mark.parametrize("attempt", range(1, 25))
def test_full_jitter_is_between_zero_and_the_exponential(attempt):
    rng = random.Random(attempt)
    ceiling = exponential(attempt, 1.0, 3600.0)
    delays = [full(attempt, 1.0, 3600.0, rng) for _ in range(300)]
    assert all(0.0 <= d <= ceiling for d in delays)
    # Jitter uses the whole window, not a sliver of it.
    assert max(delays) - min(delays) > 0.8 * ceiling


@pytest.mark.parametrize("attempt", range(1, 25))
def test_equal_jitter_is_between_half_and_all_of_the_exponential(attempt):
    rng = random.Random(attempt)
    ceiling = exponential(attempt, 1.0, 3600.0)
    delays = [equal(attempt, 1.0, 3600.0, rng) for _ in range(300)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert max(delays) - min(delays) > 0.4 * ceiling


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 8, 12, 20])
def test_decorrelated_jitter_is_between_base_and_cap(attempt):
    rng = random.Random(attempt)
    delays = [decorrelated(attempt, 2.0, 90.0, rng) for _ in range(300)]
    assert all(2.0 <= d <= 90.0 for d in delays)
    if attempt == 1:
        # The first retry is uniform in [base, 3 * base]: well below the cap, never constant.
        assert all(d <= 6.0 for d in delays)
        assert len(set(delays)) == 300


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("attempt", [100, 10_000])
def test_the_cap_holds_for_huge_attempts_without_overflow(policy, attempt):
    rng = random.Random(3)
    delays = [POLICIES[policy](attempt, 1.0, 3600.0, rng) for _ in range(50)]
    assert all(0.0 <= d <= 3600.0 for d in delays)
    if policy == "none":
        assert delays == [3600.0] * 50
    if policy == "equal":
        assert all(d >= 1800.0 for d in delays)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_seeded_rng_gives_the_same_delays(policy):
    def series(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [backoff_delay(n, Backoff(policy=policy), rng) for n in range(1, 12)]

    assert series(42) == series(42)
    if policy != "none":
        assert series(42) != series(43)


def test_backoff_delay_applies_the_policy_base_and_cap():
    assert backoff_delay(3, Backoff(policy="none", base_seconds=2.0, cap_seconds=5.0)) == 5.0
    assert backoff_delay(2, Backoff(policy="none", base_seconds=2.0, cap_seconds=60.0)) == 4.0
    assert backoff_delay(
        4, Backoff(policy="full", base_seconds=1.0, cap_seconds=3600.0), random.Random(9)
    ) == full(4, 1.0, 3600.0, random.Random(9))


def test_backoff_delay_without_an_rng_uses_a_system_source_within_bounds():
    assert isinstance(retries._rng, random.SystemRandom)
    delays = [backoff_delay(5, Backoff()) for _ in range(200)]
    assert all(0.0 <= d <= 16.0 for d in delays)
    assert len(set(delays)) == 200


@pytest.mark.parametrize(("failed_attempt", "ceiling"), [(1, 10.0), (2, 20.0)])
def test_full_jitter_spreads_jobs_that_failed_together(failed_attempt, ceiling):
    """FIELD-CASES 14: 500 jobs failing at once get retry times spread over the whole window."""
    rng = random.Random(14)
    policy = Backoff(policy="full", base_seconds=10.0, cap_seconds=3600.0)
    delays = [backoff_delay(failed_attempt, policy, rng) for _ in range(500)]
    assert all(0.0 <= d <= ceiling for d in delays)
    assert max(delays) - min(delays) >= 2.0
    buckets = Counter(int(d * 10) for d in delays)  # 100 ms buckets
    assert max(buckets.values()) <= 50  # no bucket holds more than 10 % of the jobs
