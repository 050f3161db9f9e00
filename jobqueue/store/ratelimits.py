"""Internal: the rate-limit part of the store seam (issue 18), and the claim's rate parameters.

The wake-up time of drained buckets, and each limiter's state for the dashboard and the metrics.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_ratelimits.py``, the generic store in ``generic_ratelimits.py``. Both claims spend
the buckets (``sql/claim.sql``; ``generic.py``); this part only reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobqueue.settings.rates import TENANT, RateLimits
from jobqueue.store.base import ClaimedJob
from jobqueue.store.plan import ClaimPlan

__all__ = ["RateLimitRow", "RateLimitStore", "claim_params"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitRow:
    """One limiter as the dashboard and the metrics show it.

    Attributes:
        key: the bucket (``type:<name>``, ``dependency:<name>``, ``tenant:<id>``).
        rate: tokens per second.
        burst: most tokens the bucket holds.
        text: the rate as declared (``"600/min"``).
        tokens: tokens in the bucket now (refilled to the database's now, not stored).
        held: due claimable jobs the limiter holds back now (0 while it has a token), exact up
            to the cap given and the cap past it.
    """

    key: str
    rate: float
    burst: float
    text: str
    tokens: float
    held: int


def claim_params(rates: RateLimits) -> dict[str, Any]:
    """Return the ``rl_*`` parameters of ``claim.sql`` (and of the other rate statements)."""
    static = rates.static()
    keys = sorted(static)
    pairs = rates.type_keys()
    default = rates.tenant_default
    return {
        "rl_keys": keys,
        "rl_rates": [static[k].rate for k in keys],
        "rl_bursts": [static[k].burst for k in keys],
        "rl_types": [t for t, _ in pairs],
        "rl_type_keys": [k for _, k in pairs],
        "rl_tenant_rate": None if default is None else default.rate,
        "rl_tenant_burst": None if default is None else default.burst,
        "rl_tenant_own": sorted(rates.tenant_overrides),
        "rl_tenant_prefix": TENANT,
    }


def claim_again(
    claim_once: Callable[..., list[ClaimedJob]],
    queues: Sequence[str],
    worker_id: str,
    max_jobs: int,
    lease_s: float,
    now: datetime | None,
    plan: ClaimPlan | None,
    ensure: Callable[[Sequence[str], ClaimPlan, datetime | None], None] | None = None,
) -> list[ClaimedJob]:
    """Run a store's claim; with rate limits, once more for the slots a limiter left empty.

    Before that second claim, ``ensure`` (the PostgreSQL store's) creates the buckets the claim
    may draw on that are missing (``ensure_rate_buckets.sql``): ``claim.sql`` holds back the
    jobs of a missing bucket (a new tenant's, a new limit's), so a short claim is also how a
    missing bucket shows. A full claim costs one statement, as without limits.

    A claim leaves out the jobs of buckets that are empty when it starts, but a bucket with
    fewer tokens than slots lets all its jobs into the candidates, and spends only its tokens:
    the others' places stay empty. The second claim sees that bucket drained and fills them
    with jobs it does not limit, so a limiter never holds back unrelated jobs, even for a poll;
    it also takes what a bucket locked by a concurrent claim kept from the first. Only with
    limits, and only after a short claim.

    Returns:
        What the claims took (``claim_once``'s return), at most ``max_jobs`` jobs.
    """
    claimed = claim_once(queues, worker_id, max_jobs, lease_s, now, plan)
    if plan is not None and plan.rates.enabled and len(claimed) < max_jobs:
        if ensure is not None:
            ensure(queues, plan, now)
        claimed += claim_once(queues, worker_id, max_jobs - len(claimed), lease_s, now, plan)
    return claimed


class RateLimitStore(Protocol):
    """Read the token buckets the claim spends."""

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        """Return seconds until the soonest drained bucket of ``rates`` has a token again.

        A drained bucket (less than one token, refilled to now) was spent by a claim in the
        last ``1/rate`` seconds: its jobs are likely waiting, so an idle worker sleeps until
        then rather than a poll interval (``worker/loop.py``).

        Args:
            rates: the worker's limits (with its registry's dependencies).
            since_s: seconds ago the caller's claim began (>= 0): a bucket drained then counts
                as drained (wait 0 if it has refilled since), because that claim may have left
                jobs for it. Without it, a worker descheduled for longer than ``1/rate``
                between its claim and this read saw no drained bucket, and ``--burst`` exited
                with jobs left behind.

        Returns:
            Seconds (>= 0), or None when no bucket was drained then or is now.
        """

    def rate_limit_rows(self, rates: RateLimits, cap: int = 10_000) -> list[RateLimitRow]:
        """Return every limiter with a bucket, by key: its limit, tokens now and held jobs.

        Args:
            rates: the declared limits (a bucket whose limit was removed is left out).
            cap: held counts are exact up to this, and read as ``cap`` past it (>= 1).
        """
