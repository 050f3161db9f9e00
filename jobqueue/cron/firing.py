"""Internal: the firing path: one fire, scheduled or manual, and the job it enqueues.

Every fire goes through :func:`fire` (the scheduler) or :func:`run_now` (code, the admin): the
fire record of (entry, fire time) and the job commit together, and a fire time that already
fired writes nothing (:meth:`~jobqueue.store.interface.Store.fire_cron`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from django.db import IntegrityError, transaction

from jobqueue.cron.entries import cron_store
from jobqueue.logging import job_extra
from jobqueue.models import CronEntry
from jobqueue.options import new_job
from jobqueue.registry import EnqueueOptions
from jobqueue.settings.cron import FIRE_TIME_KEY
from jobqueue.store import NewJob, Store
from jobqueue.store.bounded import own_transaction
from jobqueue.store.interface import Advance, DueEntry, Fire, Fired, Leadership
from jobqueue.tracing import producer_span

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

logger = logging.getLogger("jobqueue.cron")


def build_job(entry: DueEntry | CronEntry, fire_time: datetime, now: datetime) -> NewJob:
    """Return the job one fire enqueues: the entry's payload plus ``fire_time``.

    A fire time still ahead of ``now`` (the scheduler fires up to one tick early) becomes the
    job's ``run_at``, so the job starts on time and not before; otherwise it may run now.

    The job is built as any enqueue builds it (:func:`jobqueue.options.new_job`, from one
    :class:`~jobqueue.registry.EnqueueOptions`): the entry's own queue and priority are
    explicit options, and the job type's other ``@job`` defaults apply (attempts, timeout,
    concurrency key).

    Raises:
        InvalidPayload: the payload no longer fits ``MAX_PAYLOAD_BYTES``.
        InvalidJobOption: the entry's queue or priority is no longer valid (or the type's
            concurrency key function fails on the payload).
        UnregisteredJobType: the entry's type is not registered here and
            ``ENQUEUE_UNREGISTERED`` does not allow it (a ``ValueError``: the scheduler
            reports the entry, as for a bad queue).
    """
    payload = {**entry.payload, FIRE_TIME_KEY: fire_time.astimezone(UTC).isoformat()}
    options = EnqueueOptions(
        queue=entry.queue,
        priority=entry.priority,
        run_at=fire_time if fire_time > now else None,
    )
    return new_job(entry.job_type, payload, options)


class _Refused(Exception):
    """Roll the fire back: the entry moved (another scheduler) or the lease was lost."""

    def __init__(self, leading: bool) -> None:
        self.leading = leading


@dataclass(frozen=True, slots=True, kw_only=True)
class FireOutcome:
    """What :func:`fire` did for one planned step."""

    leading: bool
    advanced: bool
    job_id: int | None


def fire(
    store: Store,
    entry: DueEntry,
    fire_time: datetime | None,
    *,
    next_fire_at: datetime,
    skipped: int = 0,
    leader: Leadership | None,
    now: datetime,
    injected_now: datetime | None = None,
    using: str | None = None,
) -> FireOutcome:
    """Fire ``entry`` at ``fire_time`` (None: only advance) and move it to ``next_fire_at``.

    One transaction: the fire record, the job and the compare-and-set of ``next_fire_at``
    (from the ``entry.next_fire_at`` the plan started with) commit together or not at all. A
    fire time that already fired is not an error: the entry still advances past it. The
    transaction is bounded (``store/bounded.py``): the database aborts it if this process
    stalls in it (paused, cut off), so the next leader is not kept waiting on its locks.
    """
    try:
        with own_transaction(using or "default"):
            fired = Fired(leading=True, job_id=None)
            if fire_time is not None:
                fired = _fire(
                    store,
                    Fire(
                        entry_id=entry.id,
                        fire_time=fire_time,
                        job=build_job(entry, fire_time, now),
                        fired_by=leader.holder if leader else "",
                        leader=leader,
                        now=injected_now,
                    ),
                )
                if not fired.leading:
                    raise _Refused(leading=False)
            advanced = store.advance_cron(
                Advance(
                    entry_id=entry.id,
                    expected=entry.next_fire_at,
                    cron_expr=entry.cron_expr,
                    timezone=entry.timezone,
                    next_fire_at=next_fire_at,
                    last_fired_at=fire_time,
                    skipped=skipped,
                    leader=leader,
                )
            )
            if not advanced:
                raise _Refused(leading=True)
    except _Refused as refused:
        return FireOutcome(leading=refused.leading, advanced=False, job_id=None)
    return FireOutcome(leading=True, advanced=True, job_id=fired.job_id)


def _fire(store: Any, fire: Fire) -> Fired:
    """Fire inside a producer span (``jobqueue/tracing.py``), its context stored on the job."""
    job = fire.job
    with producer_span([job.queue], job.type, job.tenant_id, operation="fire") as span:
        if span.trace_json is not None:
            fire = replace(fire, job=replace(job, trace_json=span.trace_json))
        fired = store.fire_cron(fire)
        if fired.job_id is not None:
            span.sent([fired.job_id])
    return fired


def run_now(entry: CronEntry | str, *, fired_by: str = "", using: str | None = None) -> int:
    """Enqueue the entry's job now, through the firing path (a "manual" fire record).

    The fire time is the database clock now; the schedule (``next_fire_at``) is unchanged.

    Returns:
        The new job's id.

    Raises:
        CronEntry.DoesNotExist: no entry has this name.
    """
    alias = using or "default"
    if isinstance(entry, str):
        entry = CronEntry.objects.using(alias).get(name=entry)
    store = cron_store(alias)
    with transaction.atomic(using=alias):
        now = store.db_now()
        for attempt in range(3):
            fire_time = now + timedelta(microseconds=attempt)
            fired = _fire(
                store,
                Fire(
                    entry_id=entry.id,
                    fire_time=fire_time,
                    job=build_job(entry, fire_time, fire_time),
                    fired_by=fired_by,
                    manual=True,
                ),
            )
            if fired.job_id is not None:
                logger.info(
                    "cron entry %r run now by %s: job %d",
                    entry.name,
                    fired_by or "code",
                    fired.job_id,
                    extra=job_extra(
                        job_id=fired.job_id, job_type=entry.job_type, queue=entry.queue
                    ),
                )
                return fired.job_id
    raise IntegrityError(f"cron entry {entry.name!r}: could not record a manual fire")
