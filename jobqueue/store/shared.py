"""Internal: the rules both drivers share, written once in Python (no SQL here).

The areas of :class:`~jobqueue.store.postgres.PostgresStore` and
:class:`~jobqueue.store.sqlite.GenericStore` both use:

* a child's start from its parents' states (:func:`start`) and the history entries a parent's
  failure or retry writes on its children (:func:`failed_entry`, :func:`retried_entry`);
* a job as the JSON object an outbox row holds and the relay inserts (:func:`job_json`,
  ``relay_jobs.sql``);
* the rate limiters' claim parameters (:func:`claim_params`) and the second claim after a short
  one (:func:`claim_again`);
* the rollup's tally of outcomes (:func:`tally`) and its depth samples (:func:`depth_samples`);
* finish-then-claim in turn, two calls (:func:`finish_then_claim_in_turn`), for a claim that
  cannot share the finish's round trip;
* the rows written rarely, in plain ORM on every database: the worker rows
  (:class:`WorkerRegistry`) and a batch's own row (:class:`BatchRows`).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError
from django.db.models import DurationField, F, Value
from django.db.models.functions import Now
from django.utils import timezone

from jobqueue.errors import InvalidJobOption
from jobqueue.models import Batch, Worker
from jobqueue.models.metrics import BUCKETS, OUTCOMES, bucket_columns
from jobqueue.retries import RunOutcome
from jobqueue.settings.rates import TENANT, RateLimits
from jobqueue.states import JobState
from jobqueue.store.bounded import own_transaction
from jobqueue.store.interface import (
    FAILED,
    NEW_JOB_COLUMNS,
    PARENT_RESULTS_KEY,
    ClaimedJob,
    ClaimRequest,
    FinishedThenClaimed,
    NewJob,
    Observation,
    QueueGauge,
    Start,
)
from jobqueue.store.plan import ClaimPlan


def finish_then_claim_in_turn(
    finish_many: Callable[[Sequence[RunOutcome]], dict[int, str]],
    claim: Callable[..., list[ClaimedJob]],
    outcomes: Sequence[RunOutcome],
    request: ClaimRequest,
) -> FinishedThenClaimed:
    """Record ``outcomes``, then claim: two calls, the claim only once the outcomes are in."""
    try:
        states = finish_many(outcomes)
    except DatabaseError as exc:
        return FinishedThenClaimed(None, None, exc)
    try:
        claimed = claim(
            request.queues, request.worker_id, request.max_jobs, request.lease_s, plan=request.plan
        )
    except DatabaseError as exc:
        return FinishedThenClaimed(states, None, exc)
    return FinishedThenClaimed(states, claimed)


class WorkerRegistry:
    """Worker rows: written rarely, so plain ORM is enough for every backend.

    Each write is a transaction of jobqueue's own, bounded like the others (``bounded.py``).
    """

    alias: str

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        """Insert or refresh this process's Worker row (a reused id takes the row over)."""
        # The database's clock (``Now()``), never this host's: ``health``, ``status``, the metrics
        # and the admin judge liveness on the database clock (issue 32: a worker whose host clock
        # was 60 s behind was reported dead while it served).
        now = Now()
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).update_or_create(
                worker_id=worker_id,
                defaults={
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "queues": list(queues),
                    "concurrency": concurrency,
                    "started_at": now,
                    "last_seen_at": now,
                    "heartbeat_interval_s": heartbeat_interval_s,
                },
            )

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        """Mark the worker seen now, with how many jobs it runs and whether it is draining."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).update(
                last_seen_at=Now(), running_jobs=running_jobs, status=status
            )

    def set_listener_up(self, worker_id: str, up: bool | None) -> None:
        """Record whether the worker's LISTEN connection is up (None: it does not LISTEN)."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).update(listener_up=up)

    def prune_workers(self, silent_for_s: float) -> int:
        """Delete the rows of workers not seen for ``silent_for_s`` seconds; return how many.

        Those processes died without a clean exit (SIGKILL, a lost host). Their jobs were
        recovered by lease expiry long before; the row is only history.
        """
        cutoff = Now() - Value(timedelta(seconds=silent_for_s), output_field=DurationField())
        with own_transaction(self.alias):
            deleted, _ = Worker.objects.using(self.alias).filter(last_seen_at__lt=cutoff).delete()
        return deleted

    def deregister_worker(self, worker_id: str) -> None:
        """Delete the worker's row at clean exit."""
        with own_transaction(self.alias):
            Worker.objects.using(self.alias).filter(worker_id=worker_id).delete()


def _json_time(value: datetime | None) -> str:
    return "null" if value is None else json.dumps(value.isoformat())


def _json_raw(value: str | None) -> str:
    return "null" if value is None else value  # JSON text already (payloads.to_json, tracing)


def _json_float(value: float) -> str:
    return repr(float(value))


#: How each type of :data:`NEW_JOB_COLUMNS` is written as JSON text.
_JSON_OF: dict[str, Callable[[Any], str]] = {
    "text": json.dumps,
    "int2": json.dumps,
    "int4": json.dumps,
    "float8": _json_float,
    "jsonb": _json_raw,
    "timestamptz": _json_time,
}
#: The JSON fields of a job: :data:`NEW_JOB_COLUMNS`, but ``run_at`` is ``at`` (the name outbox
#: rows already written carry, and ``enqueue_many.sql`` computes its own ``run_at`` from it).
_JSON_FIELDS = tuple(
    ("at" if name == "run_at" else name, attribute, _JSON_OF[kind])
    for name, attribute, kind in NEW_JOB_COLUMNS
)


def job_json(job: NewJob, job_id: int | None) -> str:
    """Return ``job`` as one JSON object: a row of ``enqueue_many.sql`` and of the outbox.

    The fields are :data:`NEW_JOB_COLUMNS` and ``id`` (None: drawn by the insert); ``at`` is
    ``job.run_at`` (None: the store sets it to now plus ``delay_s`` at enqueue, by the caller's
    database clock, so a delay counts from the enqueue, not from the relay).
    """
    fields = ",".join(
        f'"{name}":{encode(getattr(job, attribute))}' for name, attribute, encode in _JSON_FIELDS
    )
    return f'{{"id":{json.dumps(job_id)},{fields}}}'


def failed_entry(parent_id: int, parent_state: str, previous_state: str, at: datetime) -> dict:
    """Return the history entry of a child cancelled because ``parent_id`` ended dead/cancelled."""
    return {
        "kind": "parent_failed",
        "at": at.isoformat(),
        "parent": parent_id,
        "parent_state": parent_state,
        "previous_state": previous_state,
        "message": f"parent job #{parent_id} ended {parent_state}",
    }


def retried_entry(parent_id: int, at: datetime) -> dict:
    """Return the history entry of a child waiting again after its parent was retried."""
    return {
        "kind": "parent_retried",
        "at": at.isoformat(),
        "parent": parent_id,
        "previous_state": JobState.CANCELLED.value,
        "message": f"parent job #{parent_id} was retried; waiting again",
    }


def start(
    job: NewJob,
    after: Sequence[int],
    found: Mapping[int, tuple[str, Any]],
    *,
    run_on_parent_failure: bool,
    takes_parent_results: bool,
    now: datetime,
) -> Start:
    """Decide how a job enqueued after ``after`` starts, from its parents' (state, result).

    Raises:
        InvalidJobOption: a parent id names no job (``option`` is ``after``).
    """
    missing = [parent for parent in after if parent not in found]
    if missing:
        raise InvalidJobOption("after", f"no job has id {missing[0]} (parents must exist)")
    counted = tuple(
        found[p][0] == JobState.SUCCEEDED or (run_on_parent_failure and found[p][0] in FAILED)
        for p in after
    )
    failed = [
        p for p, done in zip(after, counted, strict=True) if found[p][0] in FAILED and not done
    ]
    payload_json = job.payload_json
    if failed:
        state: str | None = JobState.CANCELLED
        entry = failed_entry(failed[0], found[failed[0]][0], JobState.WAITING, now)
        return Start(
            state=state,
            waiting_for=counted.count(False),
            counted=counted,
            errors=(entry,),
            payload_json=payload_json,
        )
    waiting_for = counted.count(False)
    if waiting_for == 0 and takes_parent_results:
        payload = json.loads(payload_json)
        payload[PARENT_RESULTS_KEY] = [found[p][1] for p in after]
        payload_json = json.dumps(payload, separators=(",", ":"))
    return Start(
        state=JobState.WAITING if waiting_for else None,
        waiting_for=waiting_for,
        counted=counted,
        errors=(),
        payload_json=payload_json,
    )


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
    claim_once: Callable[..., tuple[list[ClaimedJob], bool]],
    queues: Sequence[str],
    worker_id: str,
    max_jobs: int,
    lease_s: float,
    now: datetime | None,
    plan: ClaimPlan | None,
    ensure: Callable[[Sequence[str], ClaimPlan, datetime | None], None] | None = None,
    taken: Callable[[list[ClaimedJob]], object] | None = None,
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
    limits, only after a short claim, and only when ``claim_once`` says a bucket kept a job
    out or may be missing: a claim short for want of work (an idle worker's poll, a trickle's
    one job) is one statement, as without limits.

    Args:
        claim_once: the store's one claim, returning ``(jobs, held)``: ``held`` True when a
            bucket kept out a job it could have taken, or a bucket it may draw on is missing
            (a store that cannot tell says True whenever it came back short).
        queues: the queues to claim from (``Store.claim``).
        worker_id: the claiming worker's id.
        max_jobs: most jobs to take, both claims together.
        lease_s: the lease's length, seconds.
        now: the claim's time (tests), or None for the database's clock.
        plan: fairness, caps and limits (None: even, no limits, one claim).
        ensure: creates the missing buckets before the second claim (None: nothing to create).
        taken: a worker's; called with each claim's jobs as soon as that claim returns, so the
            jobs of the first start while the buckets are checked and the second claim runs.

    Returns:
        What the claims took, at most ``max_jobs`` jobs.
    """
    claimed, held = claim_once(queues, worker_id, max_jobs, lease_s, now, plan)
    if taken is not None and claimed:
        taken(claimed)
    if plan is not None and plan.rates.enabled and held and len(claimed) < max_jobs:
        if ensure is not None:
            ensure(queues, plan, now)
        more, _ = claim_once(queues, worker_id, max_jobs - len(claimed), lease_s, now, plan)
        if taken is not None and more:
            taken(more)
        claimed = claimed + more
    return claimed


def tally(observed: Iterable[Observation], at: datetime) -> dict[tuple[str, str], dict[str, float]]:
    """Return the rollup increments of runs recorded at ``at``, per (queue, type).

    The ORM twin of the ``observed``/``rolled`` part of finish_many.sql: outcome counts by
    recorded state, and per histogram its count, sum (seconds) and cumulative ``le`` counts.
    Pickup is ``started_at - run_at``, run ``at - started_at``, both at least 0; ``expired``
    counts the runs whose lease ran out.
    """
    out: dict[tuple[str, str], dict[str, float]] = {}
    for queue, job_type, state, due_at, started_at, expired in observed:
        row = out.setdefault((queue, job_type), {})
        column = OUTCOMES.get(state)
        if column is not None:
            row[column] = row.get(column, 0) + 1
        if expired:
            row["expired"] = row.get("expired", 0) + 1
        if started_at is None:
            continue
        spans = {"run": max((at - started_at).total_seconds(), 0.0)}
        if due_at is not None:
            spans["pickup"] = max((started_at - due_at).total_seconds(), 0.0)
        for histogram, seconds in spans.items():
            row[f"{histogram}_count"] = row.get(f"{histogram}_count", 0) + 1
            row[f"{histogram}_sum_s"] = row.get(f"{histogram}_sum_s", 0.0) + seconds
            for name, le in zip(bucket_columns(histogram), BUCKETS, strict=True):
                if seconds <= le:
                    row[name] = row.get(name, 0) + 1
    return out


def depth_samples(gauges: Iterable[QueueGauge], at: datetime) -> list[tuple[str, int, float]]:
    """Return the depth sample rows of ``gauges`` read at ``at``: (queue, ready, lag seconds).

    Queues with jobs due now only (a queue of future jobs has no depth); the counts are the
    gauges' capped ones, so a sample reads a bounded part of the claim index however deep a
    queue is (``queue_gauges``).
    """
    return [
        (g.queue, g.ready, max((at - g.oldest_due).total_seconds(), 0.0))
        for g in gauges
        if g.ready and g.oldest_due is not None
    ]


class BatchRows:
    """A batch's own row, written once per batch: plain ORM for every driver.

    Every write runs in the caller's transaction. The members (``add_batch_members``) are each
    driver's own: one statement on PostgreSQL, chunked updates on the ORM.
    """

    alias: str

    def create_batch(self, payload_json: str, callbacks_json: str) -> int:
        batch = Batch.objects.using(self.alias).create(
            payload=json.loads(payload_json), callbacks=json.loads(callbacks_json)
        )
        return batch.id

    def close_empty_batch(
        self, batch_id: int, success_job_id: int | None, complete_job_id: int | None
    ) -> None:
        Batch.objects.using(self.alias).filter(id=batch_id, total=0).update(
            completions=F("completions") + 1,
            completed_at=timezone.now(),
            success_job_id=success_job_id,
            complete_job_id=complete_job_id,
        )
