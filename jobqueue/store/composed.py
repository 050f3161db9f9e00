"""Internal: a store as the composition of its areas, the one forwarding both drivers share.

Each driver (``store/postgres/``, ``store/sqlite/``) builds its areas (``jobs``, ``finishing``,
``flows``, ``limits``, ``metrics``, ``cron``, ``operator``, ``outbox``) around its executor, and
:class:`ComposedStore` forwards every operation of :class:`~jobqueue.store.interface.Store` to the
area that owns it: one forwarding for both drivers, so they cannot drift apart. The area
attributes are typed by each driver's class; the conformance suite (tests/store/) calls every
operation on both drivers, so each forwarding is exercised.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobqueue.models import CronEntry
from jobqueue.retries import RunOutcome
from jobqueue.settings.policies import Breaker, RetryBudgetSettings
from jobqueue.settings.rates import RateLimits
from jobqueue.store.interface import (
    COUNT_CAP,
    DEAD_LETTER_GROUPS,
    ENQUEUE_MANY_CHUNK_BYTES,
    MAX_TENANTS,
    OUTBOX_COUNT_CAP,
    PRUNE_ROLLUPS_LIMIT,
    RELEASED_MESSAGE,
    Advance,
    BreakerOutcomes,
    BreakerView,
    ClaimedJob,
    ClaimRequest,
    DeadLetterGroup,
    Deferral,
    DueEntry,
    ExpiredLease,
    FinishedThenClaimed,
    Fire,
    Fired,
    HandBack,
    HeldLease,
    Leadership,
    NewJob,
    OutboxGauge,
    OutboxRow,
    Paused,
    QueueGauge,
    RateLimitRow,
    ReapDecision,
    RunningGauge,
    TypeTotals,
)
from jobqueue.store.plan import ClaimPlan


class ComposedStore:
    """The operations of the store interface, each forwarded to the area that owns it."""

    alias: str
    # The areas, typed by each driver's subclass (PostgresStore, GenericStore).
    jobs: Any
    finishing: Any
    flows: Any
    limits: Any
    metrics: Any
    cron: Any
    operator: Any
    outbox: Any

    def enqueue_or_get(self, job: NewJob) -> tuple[int, bool]:
        return self.jobs.enqueue_or_get(job)

    def enqueue_stamped(self, job: NewJob) -> tuple[int, bool, datetime]:
        return self.jobs.enqueue_stamped(job)

    def enqueue_many(
        self, jobs: Sequence[NewJob], chunk_bytes: int = ENQUEUE_MANY_CHUNK_BYTES
    ) -> list[tuple[int, bool]]:
        return self.jobs.enqueue_many(jobs, chunk_bytes)

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_jobs: int,
        lease_s: float,
        now: datetime | None = None,
        plan: ClaimPlan | None = None,
        taken: Callable[[list[ClaimedJob]], object] | None = None,
    ) -> list[ClaimedJob]:
        return self.jobs.claim(queues, worker_id, max_jobs, lease_s, now, plan, taken)

    def has_work(self, queues: Sequence[str]) -> bool:
        return self.jobs.has_work(queues)

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        return self.finishing.extend_leases(leases, lease_s)

    def finish_many(
        self, outcomes: Sequence[RunOutcome], now: datetime | None = None
    ) -> dict[int, str]:
        return self.finishing.finish_many(outcomes, now)

    def finish_then_claim(
        self, outcomes: Sequence[RunOutcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        return self.jobs.finish_then_claim(outcomes, request)

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        return self.finishing.release(job_id, lease_token, message=message)

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        return self.finishing.lease_info(job_id, lease_token)

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        return self.finishing.expired_leases(limit, now)

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        return self.finishing.reap(decide, limit, now)

    def hand_back(
        self,
        worker_id: str,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        *,
        cause: str = "",
    ) -> HandBack:
        return self.finishing.hand_back(worker_id, decide, cause=cause)

    def breaker_states(
        self, names: Sequence[str], now: datetime | None = None
    ) -> dict[str, BreakerView]:
        return self.limits.breaker_states(names, now)

    def claim_probe(
        self, name: str, job_id: int, probe_s: float, now: datetime | None = None
    ) -> datetime | None:
        return self.limits.claim_probe(name, job_id, probe_s, now)

    def record_breaker_outcomes(
        self, batch: Sequence[BreakerOutcomes], breaker: Breaker, now: datetime | None = None
    ) -> dict[str, str]:
        return self.limits.record_breaker_outcomes(batch, breaker, now)

    def open_breaker(
        self, name: str, seconds: float, reason: str, breaker: Breaker, now: datetime | None = None
    ) -> datetime:
        return self.limits.open_breaker(name, seconds, reason, breaker, now)

    def close_breaker(self, name: str, reason: str, breaker: Breaker) -> bool:
        return self.limits.close_breaker(name, reason, breaker)

    def release_deferred(self, job_types: Sequence[str], now: datetime | None = None) -> int:
        return self.limits.release_deferred(job_types, now)

    def defer_many(
        self, deferrals: Sequence[Deferral], now: datetime | None = None
    ) -> dict[int, str]:
        return self.limits.defer_many(deferrals, now)

    def take_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> dict[str, float]:
        return self.limits.take_retry_tokens(counts, budget, now)

    def credit_retry_tokens(
        self, counts: Mapping[str, int], budget: RetryBudgetSettings, now: datetime | None = None
    ) -> None:
        return self.limits.credit_retry_tokens(counts, budget, now)

    def delete_retry_budgets(self, queues: Collection[str]) -> int:
        return self.limits.delete_retry_budgets(queues)

    def db_now(
        self,
    ) -> datetime:
        return self.cron.db_now()

    def elect_leader(
        self, name: str, holder: str, token: int | None, lease_s: float, now: datetime | None = None
    ) -> Leadership | None:
        return self.cron.elect_leader(name, holder, token, lease_s, now)

    def resign_leader(self, name: str, holder: str, token: int) -> bool:
        return self.cron.resign_leader(name, holder, token)

    def due_cron_entries(self, until: datetime, limit: int = 100) -> list[DueEntry]:
        return self.cron.due_cron_entries(until, limit)

    def fire_cron(self, fire: Fire) -> Fired:
        return self.cron.fire_cron(fire)

    def advance_cron(self, advance: Advance) -> bool:
        return self.cron.advance_cron(advance)

    def prune_cron_fires(self, older_than: datetime, limit: int = 10000) -> int:
        return self.cron.prune_cron_fires(older_than, limit)

    def save_cron_entry(
        self, values: Mapping[str, Any], *, source: str, replace_other: bool = True
    ) -> tuple[CronEntry, str]:
        return self.cron.save_cron_entry(values, source=source, replace_other=replace_other)

    def edit_cron_entry(self, entry_id: int, values: Mapping[str, Any]) -> CronEntry:
        return self.cron.edit_cron_entry(entry_id, values)

    def set_cron_entries_enabled(self, entry_ids: Collection[int], enabled: bool) -> list[str]:
        return self.cron.set_cron_entries_enabled(entry_ids, enabled)

    def disable_cron_entries(self, source: str, keep: Collection[str]) -> list[str]:
        return self.cron.disable_cron_entries(source, keep)

    def delete_cron_entries(self, entry_ids: Collection[int]) -> list[str]:
        return self.cron.delete_cron_entries(entry_ids)

    def queue_gauges(
        self, cap: int = COUNT_CAP, max_tenants: int = MAX_TENANTS, now: datetime | None = None
    ) -> list[QueueGauge]:
        return self.metrics.queue_gauges(cap, max_tenants, now)

    def dead_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        return self.metrics.dead_gauges(cap)

    def type_totals(self, start: datetime, end: datetime) -> list[TypeTotals]:
        return self.metrics.type_totals(start, end)

    def dead_letter_groups(self, limit: int = DEAD_LETTER_GROUPS) -> list[DeadLetterGroup]:
        return self.metrics.dead_letter_groups(limit)

    def dead_letter_ids(self, error_type: str, digest: str, limit: int) -> list[int]:
        return self.metrics.dead_letter_ids(error_type, digest, limit)

    def waiting_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        return self.metrics.waiting_gauges(cap)

    def running_gauges(self, top: int) -> RunningGauge:
        return self.metrics.running_gauges(top)

    def concurrency_gauges(self, top: int) -> list[tuple[str, int, int | None]]:
        return self.metrics.concurrency_gauges(top)

    def prunable_by_state(
        self, retention: Mapping[str, float], cap: int | None, now: datetime | None = None
    ) -> dict[str, int]:
        return self.metrics.prunable_by_state(retention, cap, now)

    def estimate_prunable(
        self, state: str, older_than_s: float, now: datetime | None = None
    ) -> int | None:
        return self.metrics.estimate_prunable(state, older_than_s, now)

    def cancel_or_request(self, job_id: int, by: str = "") -> str | None:
        return self.operator.cancel_or_request(job_id, by)

    def retry(self, job_id: int, by: str = "") -> bool:
        return self.operator.retry(job_id, by)

    def cancel_many(self, job_ids: Sequence[int], by: str = "") -> dict[int, str]:
        return self.operator.cancel_many(job_ids, by)

    def retry_many(self, job_ids: Sequence[int], by: str = "") -> set[int]:
        return self.operator.retry_many(job_ids, by)

    def run_now(self, job_id: int, by: str = "") -> bool:
        return self.operator.run_now(job_id, by)

    def prune(
        self, states: Sequence[str], older_than_s: float, limit: int, now: datetime | None = None
    ) -> int:
        return self.operator.prune(states, older_than_s, limit, now)

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        return self.operator.count_prunable(states, older_than_s, now)

    def reserve_job_id(
        self,
    ) -> int:
        return self.outbox.reserve_job_id()

    def reserve_job_ids(self, n: int) -> list[int]:
        return self.outbox.reserve_job_ids(n)

    def put_outbox(self, target: str, job_id: int, job: NewJob) -> datetime:
        return self.outbox.put_outbox(target, job_id, job)

    def put_outbox_many(self, target: str, jobs: Sequence[tuple[int, NewJob]]) -> datetime:
        return self.outbox.put_outbox_many(target, jobs)

    def take_outbox(self, target: str, limit: int) -> list[OutboxRow]:
        return self.outbox.take_outbox(target, limit)

    def delete_outbox(self, ids: Sequence[int]) -> int:
        return self.outbox.delete_outbox(ids)

    def insert_relayed(self, rows: Sequence[OutboxRow]) -> int:
        return self.outbox.insert_relayed(rows)

    def outbox_gauges(
        self, targets: Sequence[str], cap: int = OUTBOX_COUNT_CAP
    ) -> list[OutboxGauge]:
        return self.outbox.outbox_gauges(targets, cap)

    def release_stranded(self, limit: int = 500) -> int:
        return self.flows.release_stranded(limit)

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        return self.flows.enqueue_after(
            job,
            after,
            run_on_parent_failure=run_on_parent_failure,
            takes_parent_results=takes_parent_results,
        )

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        return self.limits.pause(kind, name, by, reason)

    def resume(self, kind: str, name: str) -> Paused | None:
        return self.limits.resume(kind, name)

    def paused(
        self,
    ) -> list[Paused]:
        return self.limits.paused()

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        return self.flows.record_progress(job_id, lease_token, done, total)

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        return self.flows.save_checkpoint(job_id, lease_token, state_json)

    def read_checkpoint(self, job_id: int) -> Any:
        return self.flows.read_checkpoint(job_id)

    def watch(self, job_id: int) -> str | None:
        return self.flows.watch(job_id)

    def rate_limit_wait(self, rates: RateLimits, since_s: float = 0.0) -> float | None:
        return self.limits.rate_limit_wait(rates, since_s)

    def rate_limit_rows(self, rates: RateLimits, cap: int = 10000) -> list[RateLimitRow]:
        return self.limits.rate_limit_rows(rates, cap)

    def sample_depth(self, now: datetime | None = None) -> int:
        return self.metrics.sample_depth(now)

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        return self.metrics.prune_rollups(older_than_s, limit, now)

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        return self.operator.register_worker(worker_id, queues, concurrency, heartbeat_interval_s)

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        return self.operator.touch_worker(worker_id, running_jobs, status)

    def set_listener_up(self, worker_id: str, up: bool | None) -> None:
        return self.operator.set_listener_up(worker_id, up)

    def wake_queues(self, queues: Sequence[str]) -> None:
        return self.operator.wake_queues(queues)

    def prune_workers(self, silent_for_s: float) -> int:
        return self.operator.prune_workers(silent_for_s)

    def deregister_worker(self, worker_id: str) -> None:
        return self.operator.deregister_worker(worker_id)

    def create_batch(self, payload_json: str, callbacks_json: str) -> int:
        return self.flows.create_batch(payload_json, callbacks_json)

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        return self.flows.add_batch_members(batch_id, job_ids)

    def close_empty_batch(
        self, batch_id: int, success_job_id: int | None, complete_job_id: int | None
    ) -> None:
        return self.flows.close_empty_batch(batch_id, success_job_id, complete_job_id)
