"""Internal: rate limits on the ORM. A mixin of :class:`~jobqueue.store.generic.GenericStore`.

The same buckets (``jobqueue_rate_limit``) and arithmetic as ``sql/claim.sql``, in Python, inside
the generic claim's transaction: :meth:`GenericRateLimitStore._rate_gate` refills the buckets the
claim may draw on, the claim leaves out the jobs of empty ones (so they never crowd out other
jobs) and :meth:`RateGate.admit` spends a token per limiter for each job it takes. Correct for one
process and for SQLite, whose writers take turns (the claim's transaction is the lock); on other
databases without row locks concurrent claims may over-admit (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from jobqueue.models import Job, RateBucket
from jobqueue.settings.rates import TENANT, RateLimits
from jobqueue.states import CLAIMABLE
from jobqueue.store.interface import RateLimitRow


@dataclass
class RateGate:
    """The buckets one generic claim may draw on, refilled to ``now``: key -> tokens."""

    rates: RateLimits
    now: datetime
    tokens: dict[str, float]
    spent: set[str] = field(default_factory=set)

    def empty_types(self) -> set[str]:
        """Return the job types whose type or dependency bucket has less than one token."""
        return {t for t, key in self.rates.type_keys() if self.tokens.get(key, 0) < 1}

    def empty_tenants(self) -> set[str]:
        """Return the tenants whose own bucket has less than one token."""
        return {
            key[len(TENANT) :]
            for key, left in self.tokens.items()
            if key.startswith(TENANT) and left < 1
        }

    def admit(self, job_type: str, tenant_id: str) -> bool:
        """Spend one token of each bucket of a job; False (nothing spent) when one is empty."""
        keys = self.rates.keys_of(job_type, tenant_id)
        if any(self.tokens.get(k, 0) < 1 for k in keys):
            return False
        for key in keys:
            self.tokens[key] -= 1
            self.spent.add(key)
        return True


class GenericRateLimitStore:
    """The generic claim's rate gate, rate_limit_wait, rate_limit_rows (host: ``alias``)."""

    alias: str

    def _rate_gate(self, rates: RateLimits, tenants: Iterable[str], now: datetime) -> RateGate:
        """Return the refilled buckets of ``rates`` and of ``tenants``; create missing ones full."""
        limits = rates.static()
        for tenant_id in tenants:
            limit = rates.of_tenant(tenant_id)
            if limit is not None:
                limits[TENANT + tenant_id] = limit
        rows = RateBucket.objects.using(self.alias)
        found = {b.key: b for b in rows.filter(key__in=list(limits))}
        missing = [
            RateBucket(key=k, tokens=lim.burst, refreshed_at=now)
            for k, lim in limits.items()
            if k not in found
        ]
        rows.bulk_create(missing, ignore_conflicts=True)
        tokens = {}
        for key, limit in limits.items():
            bucket = found.get(key)
            if bucket is None:
                tokens[key] = limit.burst
            else:
                elapsed = max((now - bucket.refreshed_at).total_seconds(), 0.0)
                tokens[key] = min(limit.burst, bucket.tokens + limit.rate * elapsed)
        return RateGate(rates, now, tokens)

    def _rate_save(self, gate: RateGate) -> None:
        """Store the buckets the claim spent from, as of the claim's time."""
        rows = RateBucket.objects.using(self.alias)
        for key in sorted(gate.spent):
            rows.filter(key=key, refreshed_at__lte=gate.now).update(
                tokens=gate.tokens[key], refreshed_at=gate.now
            )

    def _rate_rows(self, rates: RateLimits) -> list[tuple[RateBucket, float, float, str]]:
        """Return each bucket with a declared limit: (row, rate, tokens now, text)."""
        now = timezone.now()
        out = []
        for bucket in RateBucket.objects.using(self.alias).order_by("key"):
            limit = rates.limit_of(bucket.key)
            if limit is None:
                continue
            elapsed = max((now - bucket.refreshed_at).total_seconds(), 0.0)
            left = min(limit.burst, bucket.tokens + limit.rate * elapsed)
            out.append((bucket, limit.rate, left, limit.text))
        return out

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        if not rates.enabled:
            return None
        # Drained since_s ago (the claim's time): what refilled since then counts too.
        then = timezone.now() - timedelta(seconds=max(since_s, 0.0))
        waits = [
            max((1 - left) / rate, 0.0)
            for bucket, rate, left, _ in self._rate_rows(rates)
            if bucket.tokens + rate * max((then - bucket.refreshed_at).total_seconds(), 0.0) < 1
        ]
        return min(waits) if waits else None

    def rate_limit_rows(self, rates: RateLimits, cap: int = 10_000) -> list[RateLimitRow]:
        if not rates.enabled:
            return []
        out = []
        for bucket, rate, left, text in self._rate_rows(rates):
            held = 0
            if left < 1:
                under = Q(type__in=[t for t, k in rates.type_keys() if k == bucket.key])
                if bucket.key.startswith(TENANT):
                    under |= Q(tenant_id=bucket.key[len(TENANT) :])
                due = Job.objects.using(self.alias).filter(
                    under, state__in=CLAIMABLE, run_at__lte=timezone.now()
                )
                held = len(due.values_list("id", flat=True)[:cap])
            limit = rates.limit_of(bucket.key)
            assert limit is not None
            out.append(
                RateLimitRow(
                    key=bucket.key, rate=rate, burst=limit.burst, text=text, tokens=left, held=held
                )
            )
        return out
