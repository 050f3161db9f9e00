"""Internal: the ORM driver's executor, and the base every area of the driver shares.

The driver is named for SQLite, the database it is written for (the example project's default),
and runs on any Django database other than PostgreSQL. :class:`Executor` is its handle on one
database alias: the job rows, and the database clock stand-in (this process's clock); each area
(``jobs.py``, ``finishing.py``, ``cron.py``, ``flows.py``, ``limits.py``, ``operator.py``,
``metrics.py``, ``outbox.py``) receives it.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store.interface import NEW_JOB_COLUMNS, NewJob


def new_row(job: NewJob, now: datetime, **columns: Any) -> Job:
    """Return ``job`` as an unsaved ``Job`` row: the ORM's form of :data:`NEW_JOB_COLUMNS`.

    ``run_at`` is ``job.run_at`` or ``now`` plus its delay, the state ``ready`` or
    ``scheduled`` by it, ``created_at`` is ``now``; ``columns`` set or override any column.
    """
    run_at = job.run_at or now + timedelta(seconds=job.delay_s)
    values: dict[str, Any] = {
        name: getattr(job, attribute) for name, attribute, _ in NEW_JOB_COLUMNS if name != "delay_s"
    }
    values.update(
        payload=json.loads(job.payload_json),
        trace=None if job.trace_json is None else json.loads(job.trace_json),
        run_at=run_at,
        state=JobState.SCHEDULED if run_at > now else JobState.READY,
        created_at=now,
    )
    values.update(columns)
    return Job(**values)


def now_or(now: datetime | None) -> datetime:
    """Return ``now`` (a test's stand-in for the clock), else this process's clock."""
    return now or timezone.now()


class Executor:
    """The ORM on database ``alias``."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def jobs(self) -> QuerySet[Job]:
        """Return the job rows of this database."""
        return Job.objects.using(self.alias)

    def held(self, job_id: int, lease_token: uuid.UUID) -> QuerySet[Job]:
        """Return job ``job_id`` if ``lease_token`` still holds its lease (the fence)."""
        return self.jobs().filter(id=job_id, lease_token=lease_token, state=JobState.LEASED)


class GenericArea:
    """One area of the ORM store: it reaches the database through ``db``."""

    def __init__(self, db: Executor) -> None:
        self.db = db
        self.alias = db.alias

    @property
    def _jobs(self):
        return self.db.jobs()

    def _held(self, job_id: int, lease_token: uuid.UUID):
        return self.db.held(job_id, lease_token)
