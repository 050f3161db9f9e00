"""Internal: breakers, retry budgets, rate limits and pauses on the ORM.

:class:`GenericLimits` is the limits area of :class:`~jobqueue.store.sqlite.GenericStore`.

Circuit breakers, deferrals and retry budgets keep the contract of the PostgreSQL statements,
each in one short transaction that locks the rows it reads (``select_for_update``; on SQLite the
IMMEDIATE transaction mode serializes writers). Time is this process's clock.

Rate limits: the same buckets (``jobqueue_rate_limit``) and arithmetic as ``sql/claim.sql``, in
Python, inside the generic claim's transaction: :meth:`~GenericLimits.rate_gate` refills the
buckets the claim may draw on, the claim leaves out the jobs of empty ones (so they never crowd
out other jobs) and :meth:`RateGate.admit` spends a token per limiter for each job it takes.
Correct for one process and for SQLite, whose writers take turns (the claim's transaction is the
lock); on other databases without row locks concurrent claims may over-admit (docs/decisions.md).

Pause and resume: no wake-up on resume, since this store has no LISTEN/NOTIFY; workers find the
jobs at their next poll (``POLL_INTERVAL_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobqueue.models import DependencyBreaker, Job, Pause, RateBucket, RetryBudget
from jobqueue.settings.policies import Breaker, RetryBudgetSettings
from jobqueue.settings.rates import TENANT, RateLimits
from jobqueue.states import CLAIMABLE, JobState
from jobqueue.store.interface import (
    PROBE_FAILED,
    PROBE_OK,
    BreakerOutcomes,
    BreakerView,
    Deferral,
    Paused,
    RateLimitRow,
)
from jobqueue.store.sqlite.db import GenericArea


def _apply(row, o: BreakerOutcomes, breaker: Breaker, now: datetime) -> None:
    """Move ``row`` (a locked DependencyBreaker) as ``record_breaker_outcomes.sql`` does."""
    is_probe = row.state == "half_open" and o.probe_job_id is not None
    is_probe = is_probe and o.probe_job_id == row.probe_job_id
    if row.window_started_at + timedelta(seconds=breaker.window_seconds) <= now:
        failures, successes, started = o.failures, o.successes, now
    else:
        failures, successes = row.failures + o.failures, row.successes + o.successes
        started = row.window_started_at
    if is_probe and o.probe_result == PROBE_OK:
        move = "closed"
    elif is_probe and o.probe_result == PROBE_FAILED:
        move = "reopened"
    elif is_probe:
        move = "released"
    elif (
        row.state == "closed"
        and failures >= breaker.failure_threshold
        and failures >= breaker.failure_ratio * (failures + successes)
    ):
        move = "tripped"
    else:
        move = "same"
    if move == "same":
        row.failures, row.successes, row.window_started_at = failures, successes, started
    else:
        row.failures, row.successes, row.window_started_at = 0, 0, now
    if move == "reopened":
        row.cooldown_s = min(
            breaker.max_cooldown_seconds, max(row.cooldown_s, breaker.cooldown_seconds) * 2
        )
        row.open_until = now + timedelta(seconds=row.cooldown_s)
        row.reason = f"probe job {row.probe_job_id} failed"
    elif move == "tripped":
        row.cooldown_s = breaker.cooldown_seconds
        row.open_until = now + timedelta(seconds=row.cooldown_s)
        row.reason = f"{failures} failures of {failures + successes} outcomes in the window"
    elif move == "closed":
        row.cooldown_s = breaker.cooldown_seconds
        row.open_until = None
        row.reason = f"probe job {row.probe_job_id} succeeded"
    elif move == "released":
        row.open_until = now
    if move in ("tripped", "reopened"):
        row.opened_count += 1
        row.last_opened_at = now
    if move != "same":
        row.state = "closed" if move == "closed" else "open"
    if is_probe:
        row.probe_job_id = row.probe_until = None
    row.updated_at = now


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


class GenericLimits(GenericArea):
    """Breakers, retry budgets, rate limits and pauses on the ORM."""

    @property
    def _breakers(self):
        return DependencyBreaker.objects.using(self.alias)

    @property
    def _budgets(self):
        return RetryBudget.objects.using(self.alias)

    def breaker_states(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[str, BreakerView]:
        now = now or timezone.now()
        return {
            b.name: BreakerView(
                name=b.name,
                state=b.state,
                open_until=b.open_until,
                probe_until=b.probe_until,
                cooldown_s=b.cooldown_s,
                now=now,
            )
            for b in self._breakers.filter(name__in=list(names))
        }

    def claim_probe(
        self, name: str, job_id: int, probe_s: float, now: datetime | None = None
    ) -> datetime | None:
        now = now or timezone.now()
        until = now + timedelta(seconds=probe_s)
        won = self._breakers.filter(
            Q(state="open", open_until__lte=now) | Q(state="half_open", probe_until__lte=now),
            name=name,
        ).update(state="half_open", probe_job_id=job_id, probe_until=until, updated_at=now)
        return until if won else None

    def _ensure(self, names: Sequence[str], breaker: Breaker, now: datetime) -> None:
        existing = set(self._breakers.filter(name__in=list(names)).values_list("name", flat=True))
        for name in sorted(set(names) - existing):
            try:
                with transaction.atomic(using=self.alias):
                    self._breakers.create(
                        name=name,
                        window_started_at=now,
                        cooldown_s=breaker.cooldown_seconds,
                        updated_at=now,
                    )
            except IntegrityError:
                pass  # another worker created it first

    def record_breaker_outcomes(
        self, batch: Sequence[BreakerOutcomes], breaker: Breaker, now: datetime | None = None
    ) -> dict[str, str]:
        now = now or timezone.now()
        self._ensure([o.name for o in batch], breaker, now)
        states: dict[str, str] = {}
        with transaction.atomic(using=self.alias):
            for o in sorted(batch, key=lambda o: o.name):
                row = self._breakers.select_for_update().get(name=o.name)
                _apply(row, o, breaker, now)
                row.save(using=self.alias)
                states[row.name] = row.state
        return states

    def open_breaker(
        self,
        name: str,
        seconds: float,
        reason: str,
        breaker: Breaker,
        now: datetime | None = None,
    ) -> datetime:
        now = now or timezone.now()
        until = now + timedelta(seconds=seconds)
        self._ensure([name], breaker, now)
        with transaction.atomic(using=self.alias):
            row = self._breakers.select_for_update().get(name=name)
            if row.state == "open":
                until = max(row.open_until or until, until)
            else:
                row.opened_count += 1
                row.last_opened_at = now
            row.state, row.open_until = "open", until
            row.failures = row.successes = 0
            row.window_started_at = now
            row.probe_job_id = row.probe_until = None
            row.cooldown_s = max(row.cooldown_s, breaker.cooldown_seconds)
            row.reason, row.updated_at = reason[:200], now
            row.save(using=self.alias)
        return until

    def close_breaker(self, name: str, reason: str, breaker: Breaker) -> bool:
        now = timezone.now()
        return bool(
            self._breakers.filter(name=name).update(
                state="closed",
                failures=0,
                successes=0,
                window_started_at=now,
                open_until=None,
                probe_job_id=None,
                probe_until=None,
                cooldown_s=breaker.cooldown_seconds,
                reason=reason[:200],
                updated_at=now,
            )
        )

    def release_deferred(self, job_types: Sequence[str], now: datetime | None = None) -> int:
        now = now or timezone.now()
        jobs = Job.objects.using(self.alias)
        with transaction.atomic(using=self.alias):
            held = [
                job_id
                for job_id, errors in jobs.filter(
                    state="scheduled", type__in=list(job_types)
                ).values_list("id", "errors")
                if errors and errors[-1].get("kind") == "deferred"
            ]
            return jobs.filter(id__in=held, state="scheduled").update(state="ready", run_at=now)

    def defer_many(
        self, deferrals: Sequence[Deferral], now: datetime | None = None
    ) -> dict[int, str]:
        now = now or timezone.now()
        jobs = Job.objects.using(self.alias)
        deferred: dict[int, str] = {}
        with transaction.atomic(using=self.alias):
            for d in sorted(deferrals, key=lambda d: d.id):
                held = jobs.filter(id=d.id, lease_token=d.lease_token, state=JobState.LEASED)
                row = held.values("errors", "attempts", "leased_by", "cancel_requested_at").first()
                if row is None:
                    continue
                entry = {
                    "kind": "deferred",
                    "attempt": row["attempts"],
                    "at": now.isoformat(),
                    "worker": row["leased_by"],
                    "message": d.message,
                }
                fields: dict[str, Any] = (
                    {"state": JobState.SCHEDULED, "run_at": d.run_at, "finished_at": None}
                    if row["cancel_requested_at"] is None
                    else {"state": JobState.CANCELLED, "finished_at": now}
                )
                held.update(
                    attempts=F("attempts") - 1 if row["attempts"] > 0 else 0,
                    errors=[*row["errors"], entry],
                    lease_token=None,
                    lease_until=None,
                    **fields,
                )
                deferred[d.id] = fields["state"]
        return deferred

    def _refilled(self, tokens: float, since: datetime, now: datetime, budget) -> float:
        elapsed = max((now - since).total_seconds(), 0.0)
        return min(budget.capacity, tokens + budget.floor_per_second * elapsed)

    def take_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> dict[str, float]:
        now = now or timezone.now()
        left: dict[str, float] = {}
        with transaction.atomic(using=self.alias):
            for queue in sorted(counts):
                row = self._budgets.select_for_update().filter(queue=queue).first()
                if row is None:
                    row = self._budgets.create(
                        queue=queue, tokens=budget.capacity - counts[queue], updated_at=now
                    )
                else:
                    row.tokens = self._refilled(row.tokens, row.updated_at, now, budget)
                    row.tokens -= counts[queue]
                    row.updated_at = max(row.updated_at, now)
                    row.save(using=self.alias)
                left[queue] = row.tokens
        return left

    def credit_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> None:
        now = now or timezone.now()
        with transaction.atomic(using=self.alias):
            for queue in sorted(counts):
                row = self._budgets.select_for_update().filter(queue=queue).first()
                if row is None:
                    continue  # never retried: its bucket is full
                refilled = self._refilled(row.tokens, row.updated_at, now, budget)
                row.tokens = min(budget.capacity, refilled + budget.ratio * counts[queue])
                row.updated_at = max(row.updated_at, now)
                row.save(using=self.alias)

    def delete_retry_budgets(self, queues: Collection[str]) -> int:
        with transaction.atomic(using=self.alias):
            deleted, _ = self._budgets.filter(queue__in=list(queues)).delete()
        return deleted

    def rate_gate(self, rates: RateLimits, tenants: Iterable[str], now: datetime) -> RateGate:
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

    def rate_save(self, gate: RateGate) -> None:
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

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        rows = Pause.objects.using(self.alias)
        try:
            # A savepoint: a concurrent pause's row (the unique constraint) aborts only this.
            with transaction.atomic(using=self.alias):
                created = rows.create(kind=kind, name=name, paused_by=by, reason=reason)
            return Paused.of(created), True
        except IntegrityError:
            return Paused.of(rows.get(kind=kind, name=name)), False

    def resume(self, kind: str, name: str) -> Paused | None:
        with transaction.atomic(using=self.alias):
            row = Pause.objects.using(self.alias).filter(kind=kind, name=name).first()
            if row is None:
                return None
            Pause.objects.using(self.alias).filter(id=row.id).delete()
        return Paused.of(row)

    def paused(self) -> list[Paused]:
        return [Paused.of(p) for p in Pause.objects.using(self.alias).order_by("kind", "name")]

    def paused_names(self) -> tuple[set[str], set[str]]:
        """Return ``(paused queues, paused job types)`` for the claim."""
        queues: set[str] = set()
        types: set[str] = set()
        for kind, name in Pause.objects.using(self.alias).values_list("kind", "name"):
            (queues if kind == "queue" else types).add(name)
        return queues, types
