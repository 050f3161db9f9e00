"""Internal: finding jobs for the operator: filters, a listing row, one job in full.

The state an operator names is the lifecycle's (DESIGN.md): ``ready`` means claimable now (state
ready, or scheduled with ``run_at`` come) and ``scheduled`` means waiting for ``run_at``, so a
filter and the status counts always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from jobqueue.flows.status import Progress
from jobqueue.masking import mask, mask_entry, secrets_of
from jobqueue.models import Job, JobParent
from jobqueue.states import CLAIMABLE, JobState

#: The states an operator can name, in lifecycle order.
STATES = [state.value for state in JobState]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """Which jobs a listing, a bulk retry or a bulk cancel acts on (None: any)."""

    queue: str | None = None
    state: str | None = None
    job_type: str | None = None
    tenant: str | None = None

    @property
    def empty(self) -> bool:
        """Return True if no criterion is set (the filter matches every job)."""
        return not any(v is not None for v in (self.queue, self.state, self.job_type, self.tenant))


def state_q(state: str, now: datetime) -> Q:
    """Return the condition for jobs in lifecycle ``state`` at ``now``.

    Raises:
        ValueError: ``state`` is not a job state.
    """
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}; expected one of {', '.join(STATES)}")
    if state == JobState.READY:
        return Q(state__in=sorted(CLAIMABLE), run_at__lte=now)
    if state == JobState.SCHEDULED:
        return Q(state__in=sorted(CLAIMABLE), run_at__gt=now)
    return Q(state=state)


def lifecycle_state(job: Job, now: datetime) -> str:
    """Return the state an operator sees: a scheduled job whose run_at has come is ready."""
    if job.state in CLAIMABLE:
        return JobState.READY if job.run_at <= now else JobState.SCHEDULED
    return job.state


def matching(criteria: JobFilter, now: datetime, using: str = "default") -> QuerySet[Job]:
    """Return the jobs ``criteria`` selects, newest first.

    Raises:
        ValueError: the state is not a job state.
    """
    jobs = Job.objects.using(using).order_by("-id")
    if criteria.queue is not None:
        jobs = jobs.filter(queue=criteria.queue)
    if criteria.state is not None:
        jobs = jobs.filter(state_q(criteria.state, now))
    if criteria.job_type is not None:
        jobs = jobs.filter(type=criteria.job_type)
    if criteria.tenant is not None:
        jobs = jobs.filter(tenant_id=criteria.tenant)
    return jobs


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def summary(job: Job, now: datetime) -> dict[str, Any]:
    """Return a listing row for ``job`` (no payload, no history: see :func:`detail`).

    The last error's message is masked (``jobqueue.masking``): values under masked keys of the
    payload and result, and ``token=...``-style values, are ``********``.
    """
    last = job.last_error
    if last:
        last = mask_entry(last, secrets_of(job.payload, job.result, job.checkpoint))
    return {
        "id": job.id,
        "queue": job.queue,
        "type": job.type,
        "state": lifecycle_state(job, now),
        "tenant": job.tenant_id,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "run_at": _iso(job.run_at),
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "last_error": (f"{last.get('type', '')}: {last.get('message', '')}" if last else None),
    }


def progress_text(job: Job) -> str | None:
    """Return the job's progress as its handler last reported it (``"3 of 10 (30%)"``), or None."""
    if job.progress_done is None:
        return None
    return str(Progress(job.progress_done, job.progress_total))


#: Most parent or child ids ``detail`` lists.
FAMILY_SHOWN = 50


def _family(job: Job, mine: str, theirs: str) -> list[int]:
    """Return the ids of ``job``'s parents or children (enqueue's ``after=``), first ones first."""
    edges = JobParent.objects.using(job._state.db).filter(**{mine: job.id}).order_by("id")
    return list(edges.values_list(theirs, flat=True)[:FAMILY_SHOWN])


def detail(job: Job, now: datetime) -> dict[str, Any]:
    """Return everything about ``job``: its row, payload, result and full error history.

    Masked as every output is (``jobqueue.masking``): the values of masked keys in the payload,
    result and checkpoint, and those values (or ``token=...``-style ones) in every error message
    and traceback.
    """
    secrets = secrets_of(job.payload, job.result, job.checkpoint)
    row = summary(job, now)
    row.update(
        {
            "stored_state": job.state,
            "dead_reason": job.dead_reason or None,
            "timeout_s": job.timeout_s,
            "dedupe_key": job.dedupe_key,
            "ordering_key": job.ordering_key,
            "concurrency_key": job.concurrency_key,
            "concurrency_limit": job.concurrency_limit,
            "leased_by": job.leased_by or None,
            "lease_until": _iso(job.lease_until),
            "cancel_requested_at": _iso(job.cancel_requested_at),
            "started_at": _iso(job.started_at),
            "progress": progress_text(job),
            "after": _family(job, "child_id", "parent_id"),
            "waiting_for": job.waiting_for if job.state == JobState.WAITING else None,
            "before": _family(job, "parent_id", "child_id") if job.has_children else [],
            "checkpoint": mask(job.checkpoint),
            "checkpoint_at": _iso(job.checkpoint_at),
            "payload": mask(job.payload),
            "result": mask(job.result),
            "errors": [mask_entry(entry, secrets) for entry in job.errors or []],
        }
    )
    return row
