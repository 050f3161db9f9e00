"""Internal: the transactional outbox on the ORM.

:class:`GenericOutbox` is the outbox area of :class:`~jobqueue.store.sqlite.GenericStore`, with
the same rows and answers as ``store/postgres/outbox.py``. SQLite takes its write lock for the
whole relay transaction (``transaction_mode = "IMMEDIATE"``), so there is no row to skip; ids
drawn by :meth:`~GenericOutbox.reserve_job_id` are never reused because Django's SQLite primary
keys are AUTOINCREMENT.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobqueue.models import Job, OutboxEntry
from jobqueue.states import LIVE, JobState
from jobqueue.store.interface import OUTBOX_COUNT_CAP, NewJob, OutboxGauge, OutboxRow
from jobqueue.store.shared import job_json
from jobqueue.store.sqlite.db import GenericArea


class GenericOutbox(GenericArea):
    """The transactional outbox on the ORM."""

    def reserve_job_id(self) -> int:
        # A placeholder row inserted and deleted in one transaction: its id is spent.
        with transaction.atomic(using=self.alias):
            row = Job(queue="", type="", state=JobState.CANCELLED, run_at=timezone.now())
            row.save(using=self.alias, force_insert=True)
            Job.objects.using(self.alias).filter(id=row.id).delete()
        return int(row.id)

    def reserve_job_ids(self, n: int) -> list[int]:
        return [self.reserve_job_id() for _ in range(int(n))]

    def put_outbox(self, target: str, job_id: int, job: NewJob) -> datetime:
        now = timezone.now()
        data = json.loads(job_json(job, job_id))
        if data["at"] is None:
            data["at"] = (now + timedelta(seconds=job.delay_s)).isoformat()
        OutboxEntry.objects.using(self.alias).create(
            target=target, job_id=job_id, job=data, created_at=now
        )
        return now

    def put_outbox_many(self, target: str, jobs: Sequence[tuple[int, NewJob]]) -> datetime:
        now = timezone.now()
        entries = []
        for job_id, job in jobs:
            data = json.loads(job_json(job, job_id))
            if data["at"] is None:
                data["at"] = (now + timedelta(seconds=job.delay_s)).isoformat()
            entries.append(OutboxEntry(target=target, job_id=job_id, job=data, created_at=now))
        OutboxEntry.objects.using(self.alias).bulk_create(entries)
        return now

    def take_outbox(self, target: str, limit: int) -> list[OutboxRow]:
        rows = OutboxEntry.objects.using(self.alias).filter(target=target).order_by("id")
        return [
            OutboxRow(id=r.id, job_id=r.job_id, job=json.dumps(r.job), created_at=r.created_at)
            for r in rows[: int(limit)]
        ]

    def delete_outbox(self, ids: Sequence[int]) -> int:
        deleted, _ = OutboxEntry.objects.using(self.alias).filter(id__in=list(ids)).delete()
        return deleted

    def insert_relayed(self, rows: Sequence[OutboxRow]) -> int:
        jobs = Job.objects.using(self.alias)
        inserted = 0
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            for row in rows:
                data = json.loads(row.job)
                run_at = parse_datetime(data["at"])
                assert run_at is not None
                if jobs.filter(id=data["id"]).exists():
                    continue
                if (
                    data["dedupe_key"] is not None
                    and jobs.filter(
                        queue=data["queue"], dedupe_key=data["dedupe_key"], state__in=LIVE
                    ).exists()
                ):
                    continue
                try:
                    with transaction.atomic(using=self.alias):
                        Job(
                            id=data["id"],
                            queue=data["queue"],
                            type=data["type"],
                            payload=data["payload"],
                            priority=data["priority"],
                            tenant_id=data["tenant_id"],
                            state=JobState.SCHEDULED if run_at > now else JobState.READY,
                            run_at=run_at,
                            max_attempts=data["max_attempts"],
                            timeout_s=data["timeout_s"],
                            dedupe_key=data["dedupe_key"],
                            ordering_key=data["ordering_key"],
                            # .get: rows an older version wrote before the relay knew them.
                            concurrency_key=data.get("concurrency_key"),
                            concurrency_limit=data.get("concurrency_limit"),
                            trace=data.get("trace"),
                            created_at=now,
                        ).save(using=self.alias, force_insert=True)
                except IntegrityError:
                    continue
                inserted += 1
        return inserted

    def outbox_gauges(
        self, targets: Sequence[str], cap: int = OUTBOX_COUNT_CAP
    ) -> list[OutboxGauge]:
        now = timezone.now()
        gauges = []
        for target in sorted(targets):
            rows = OutboxEntry.objects.using(self.alias).filter(target=target)
            oldest = rows.order_by("id").values_list("created_at", flat=True).first()
            gauges.append(
                OutboxGauge(
                    target=target,
                    waiting=len(rows.values_list("id", flat=True)[: int(cap)]),
                    oldest_age_s=None if oldest is None else (now - oldest).total_seconds(),
                )
            )
        return gauges
