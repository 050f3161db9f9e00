"""Internal: breakers, retry budgets, rate limits and pauses on PostgreSQL.

:class:`PostgresLimits` is the limits area of :class:`~jobqueue.store.postgres.PostgresStore`.

Circuit breakers: ``ensure_breakers.sql``, ``breaker_states.sql``,
``record_breaker_outcomes.sql``, ``open_breaker.sql``, ``close_breaker.sql``, ``claim_probe.sql``.
Deferrals: ``defer_many.sql``, ``release_deferred.sql``. Retry budgets: ``take_retry_tokens.sql``,
``credit_retry_tokens.sql``, ``delete_retry_budgets.sql``.

Rate limiters are read here (``rate_limit_wait.sql``, ``rate_limit_rows.sql``) and their missing
buckets created (``ensure_rate_buckets.sql``); ``claim.sql`` spends the buckets.

Pause and resume: ``pause.sql``, ``resume.sql``; ``claim.sql`` reads the rows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobqueue.models import Pause
from jobqueue.settings.policies import Breaker, RetryBudgetSettings
from jobqueue.settings.rates import RateLimits
from jobqueue.store.interface import BreakerOutcomes, BreakerView, Deferral, Paused, RateLimitRow
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.postgres.db import PostgresArea
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import claim_params


class PostgresLimits(PostgresArea):
    """Breakers, retry budgets, rate limits and pauses on PostgreSQL."""

    def breaker_states(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[str, BreakerView]:
        if not names:
            return {}
        with self.db.execute("breaker_states", {"names": sorted(names), "now": now}) as cursor:
            return {
                r.name: BreakerView(
                    name=r.name,
                    state=r.state,
                    open_until=r.open_until,
                    probe_until=r.probe_until,
                    cooldown_s=r.cooldown_s,
                    now=r.now,
                )
                for r in fetchall(cursor)
            }

    def claim_probe(
        self, name: str, job_id: int, probe_s: float, now: datetime | None = None
    ) -> datetime | None:
        params = {"name": name, "job_id": job_id, "probe_s": probe_s, "now": now}
        with self.db.execute("claim_probe", params) as cursor:
            row = fetchone(cursor)
        return row.probe_until if row else None

    def record_breaker_outcomes(
        self, batch: Sequence[BreakerOutcomes], breaker: Breaker, now: datetime | None = None
    ) -> dict[str, str]:
        if not batch:
            return {}
        ordered = sorted(batch, key=lambda o: o.name)
        params: dict[str, Any] = {
            "names": [o.name for o in ordered],
            "successes": [o.successes for o in ordered],
            "failures": [o.failures for o in ordered],
            "probe_ids": [o.probe_job_id for o in ordered],
            "probe_results": [o.probe_result for o in ordered],
            "threshold": breaker.failure_threshold,
            "ratio": breaker.failure_ratio,
            "window_s": breaker.window_seconds,
            "cooldown_s": breaker.cooldown_seconds,
            "max_cooldown_s": breaker.max_cooldown_seconds,
            "now": now,
        }
        with self.db.execute("record_breaker_outcomes", params) as cursor:
            states = {r.name: r.state for r in fetchall(cursor)}
        missing = [o.name for o in ordered if o.name not in states]
        if missing:
            # First outcomes of these dependencies: create their rows, then count again.
            ensure = {"names": missing, "cooldown_s": breaker.cooldown_seconds, "now": now}
            self.db.execute("ensure_breakers", ensure).close()
            params.update(
                {
                    key: [
                        value
                        for o, value in zip(ordered, params[key], strict=True)
                        if o.name in missing
                    ]
                    for key in ("names", "successes", "failures", "probe_ids", "probe_results")
                }
            )
            with self.db.execute("record_breaker_outcomes", params) as cursor:
                states.update((r.name, r.state) for r in fetchall(cursor))
        return states

    def open_breaker(
        self,
        name: str,
        seconds: float,
        reason: str,
        breaker: Breaker,
        now: datetime | None = None,
    ) -> datetime:
        params = {
            "name": name,
            "seconds": seconds,
            "reason": reason[:200],
            "cooldown_s": breaker.cooldown_seconds,
            "now": now,
        }
        with self.db.execute("open_breaker", params) as cursor:
            return fetchone(cursor).open_until

    def close_breaker(self, name: str, reason: str, breaker: Breaker) -> bool:
        params = {
            "name": name,
            "reason": reason[:200],
            "cooldown_s": breaker.cooldown_seconds,
            "now": None,
        }
        with self.db.execute("close_breaker", params) as cursor:
            return cursor.fetchone() is not None

    def release_deferred(self, job_types: Sequence[str], now: datetime | None = None) -> int:
        if not job_types:
            return 0
        with self.db.execute("release_deferred", {"types": list(job_types), "now": now}) as cursor:
            return len(cursor.fetchall())

    def defer_many(
        self, deferrals: Sequence[Deferral], now: datetime | None = None
    ) -> dict[int, str]:
        if not deferrals:
            return {}
        ordered = sorted(deferrals, key=lambda d: d.id)
        params = {
            "ids": [d.id for d in ordered],
            "tokens": [d.lease_token for d in ordered],
            "run_ats": [d.run_at for d in ordered],
            "messages": [d.message for d in ordered],
            "now": now,
        }
        with self.db.execute("defer_many", params) as cursor:
            return {r.id: r.state for r in fetchall(cursor)}

    def take_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> dict[str, float]:
        if not counts:
            return {}
        queues = sorted(counts)
        params = {
            "queues": queues,
            "counts": [counts[q] for q in queues],
            "capacity": budget.capacity,
            "floor_per_second": budget.floor_per_second,
            "now": now,
        }
        with self.db.execute("take_retry_tokens", params) as cursor:
            return {r.queue: r.tokens for r in fetchall(cursor)}

    def credit_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> None:
        if not counts:
            return
        queues = sorted(counts)
        params = {
            "queues": queues,
            "counts": [counts[q] for q in queues],
            "capacity": budget.capacity,
            "ratio": budget.ratio,
            "floor_per_second": budget.floor_per_second,
            "now": now,
        }
        self.db.execute("credit_retry_tokens", params).close()

    def delete_retry_budgets(self, queues: Collection[str]) -> int:
        if not queues:
            return 0
        with self.db.execute("delete_retry_budgets", {"queues": sorted(queues)}) as cursor:
            return cursor.rowcount

    def ensure_buckets(self, queues: Sequence[str], plan: ClaimPlan, now: datetime | None) -> None:
        """Create the missing buckets a claim of ``queues`` may draw on (full)."""
        params = {
            **claim_params(plan.rates),
            "queues": list(queues),
            "every": plan.every,
            "now": now,
        }
        self.db.execute("ensure_rate_buckets", params).close()

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        if not rates.enabled:
            return None
        params = {**claim_params(rates), "since_s": max(since_s, 0.0)}
        with self.db.execute("rate_limit_wait", params) as cursor:
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
        with self.db.execute("rate_limit_rows", params) as cursor:
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

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        params = {"kind": kind, "name": name, "by": by, "reason": reason}
        # An empty answer: a concurrent pause committed after this statement's snapshot (its
        # insert won, ours did nothing, and our read could not see it yet). Once more sees it.
        for _ in range(3):
            with self.db.execute("pause", params) as cursor:
                row = fetchone(cursor)
            if row is not None:
                return Paused.of(row), row.created
        raise RuntimeError(f"pause of {kind} {name!r} neither inserted nor found")

    def resume(self, kind: str, name: str) -> Paused | None:
        with self.db.execute("resume", {"kind": kind, "name": name}) as cursor:
            row = fetchone(cursor)
        return None if row is None else Paused.of(row)

    def paused(self) -> list[Paused]:
        return [Paused.of(p) for p in Pause.objects.using(self.alias).order_by("kind", "name")]
