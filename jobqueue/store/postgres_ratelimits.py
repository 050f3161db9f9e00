"""Internal: rate limiters read on PostgreSQL (``rate_limit_wait.sql``, ``rate_limit_rows.sql``).

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`. ``claim.sql`` spends the buckets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobqueue.settings.rates import RateLimits
from jobqueue.store.interface import RateLimitRow
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import claim_params


class PostgresRateLimitStore:
    """rate_limit_wait, rate_limit_rows on PostgreSQL; the host provides ``_execute``."""

    _execute: Any

    def _ensure_buckets(self, queues: Sequence[str], plan: ClaimPlan, now: datetime | None) -> None:
        """Create the missing buckets a claim of ``queues`` may draw on (full)."""
        params = {
            **claim_params(plan.rates),
            "queues": list(queues),
            "every": plan.every,
            "now": now,
        }
        self._execute("ensure_rate_buckets", params).close()

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        if not rates.enabled:
            return None
        params = {**claim_params(rates), "since_s": max(since_s, 0.0)}
        with self._execute("rate_limit_wait", params) as cursor:
            row = fetchone(cursor)
        return None if row is None or row.wait_s is None else max(float(row.wait_s), 0.0)

    def rate_limit_rows(self, rates: RateLimits, cap: int = 10_000) -> list[RateLimitRow]:
        if not rates.enabled:
            return []
        static = rates.static()
        keys = sorted(static)
        default = rates.tenant_default
        params = {
            **claim_params(rates),
            "keys": keys,
            "rates": [static[k].rate for k in keys],
            "bursts": [static[k].burst for k in keys],
            "texts": [static[k].text for k in keys],
            "tenant_text": "" if default is None else default.text,
            "cap": cap,
        }
        with self._execute("rate_limit_rows", params) as cursor:
            return [
                RateLimitRow(
                    key=r.key,
                    rate=r.rate,
                    burst=r.burst,
                    text=r.text,
                    tokens=float(r.tokens),
                    held=r.held,
                )
                for r in fetchall(cursor)
            ]
