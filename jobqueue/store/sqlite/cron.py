"""Internal: cron entries, fires and the scheduler's leader lease on the ORM.

:class:`GenericCron` is the cron area of :class:`~jobqueue.store.sqlite.GenericStore`, with the
same contract as the PostgreSQL statements (``store/postgres/cron.py``), each operation in a
short transaction of a few ORM statements. Time is this process's clock (SQLite has no shared
server clock); on SQLite the IMMEDIATE transaction mode serializes writers, which is what makes
the lease and the compare-and-sets safe.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from jobqueue.models import CronEntry, CronFire, LeaderLease
from jobqueue.store.cron_entries import CronEntryWrites
from jobqueue.store.interface import Advance, DueEntry, Fire, Fired, Leadership, Store
from jobqueue.store.sqlite.db import Executor, GenericArea


class GenericCron(CronEntryWrites, GenericArea):
    """Cron entries, fires and the scheduler's leader lease on the ORM."""

    def __init__(self, db: Executor, store: Store) -> None:
        super().__init__(db)
        #: The whole store: a fire enqueues through its operation.
        self.store = store

    def db_now(self) -> datetime:
        return timezone.now()

    def _holds(self, leader: Leadership):
        return LeaderLease.objects.using(self.alias).filter(
            name=leader.name, holder=leader.holder, fencing_token=leader.token
        )

    def elect_leader(
        self,
        name: str,
        holder: str,
        token: int | None,
        lease_s: float,
        now: datetime | None = None,
    ) -> Leadership | None:
        now = now or timezone.now()
        expires_at = now + timedelta(seconds=lease_s)
        leases = LeaderLease.objects.using(self.alias)
        with transaction.atomic(using=self.alias):
            row = leases.select_for_update().filter(name=name).first()
            if row is None:
                try:
                    with transaction.atomic(using=self.alias):
                        leases.create(
                            name=name,
                            holder=holder,
                            fencing_token=1,
                            expires_at=expires_at,
                            acquired_at=now,
                            renewed_at=now,
                        )
                except IntegrityError:
                    return None  # a competitor created it first; it leads
                return Leadership(name=name, holder=holder, token=1, expires_at=expires_at, now=now)
            if row.holder == holder and row.fencing_token == token:
                updated = leases.filter(pk=row.pk, holder=holder, fencing_token=token).update(
                    expires_at=expires_at, renewed_at=now
                )
                new_token = token
            elif row.expires_at <= now:
                updated = leases.filter(
                    pk=row.pk, fencing_token=row.fencing_token, expires_at__lte=now
                ).update(
                    holder=holder,
                    fencing_token=F("fencing_token") + 1,
                    expires_at=expires_at,
                    acquired_at=now,
                    renewed_at=now,
                )
                new_token = row.fencing_token + 1
            else:
                return None
        if not updated:
            return None
        return Leadership(name=name, holder=holder, token=new_token, expires_at=expires_at, now=now)

    def resign_leader(self, name: str, holder: str, token: int) -> bool:
        return bool(
            LeaderLease.objects.using(self.alias)
            .filter(name=name, holder=holder, fencing_token=token)
            .update(expires_at=timezone.now())
        )

    def due_cron_entries(self, until: datetime, limit: int = 100) -> list[DueEntry]:
        rows = (
            CronEntry.objects.using(self.alias)
            .filter(Q(next_fire_at__isnull=True) | Q(next_fire_at__lte=until), enabled=True)
            .order_by(F("next_fire_at").asc(nulls_first=True), "id")[:limit]
        )
        return [
            DueEntry(
                id=e.id,
                name=e.name,
                cron_expr=e.cron_expr,
                timezone=e.timezone,
                queue=e.queue,
                job_type=e.job_type,
                payload=e.payload,
                priority=e.priority,
                missed=e.missed,
                missed_cap=e.missed_cap,
                next_fire_at=e.next_fire_at,
                last_fired_at=e.last_fired_at,
            )
            for e in rows
        ]

    def fire_cron(self, fire: Fire) -> Fired:
        with transaction.atomic(using=self.alias):
            if fire.leader is not None and not self._holds(fire.leader).exists():
                return Fired(leading=False, job_id=None)
            try:
                with transaction.atomic(using=self.alias):
                    record = CronFire.objects.using(self.alias).create(
                        entry_id=fire.entry_id,
                        fire_time=fire.fire_time,
                        fired_at=fire.now or timezone.now(),
                        fired_by=fire.fired_by,
                        manual=fire.manual,
                    )
            except IntegrityError:
                return Fired(leading=True, job_id=None)
            job_id, _ = self.store.enqueue_or_get(fire.job)
            CronFire.objects.using(self.alias).filter(pk=record.pk).update(job_id=job_id)
        return Fired(leading=True, job_id=job_id)

    def advance_cron(self, advance: Advance) -> bool:
        with transaction.atomic(using=self.alias):
            if advance.leader is not None and not self._holds(advance.leader).exists():
                return False
            entry = CronEntry.objects.using(self.alias).filter(
                pk=advance.entry_id,
                enabled=True,
                cron_expr=advance.cron_expr,
                timezone=advance.timezone,
            )
            if advance.expected is None:
                entry = entry.filter(next_fire_at__isnull=True)
            else:
                entry = entry.filter(next_fire_at=advance.expected)
            fields = {
                "next_fire_at": advance.next_fire_at,
                "skipped_fires": F("skipped_fires") + advance.skipped,
            }
            if advance.last_fired_at is not None:
                current = entry.values_list("last_fired_at", flat=True).first()
                if current is None or current < advance.last_fired_at:
                    fields["last_fired_at"] = advance.last_fired_at
            return entry.update(**fields) == 1

    def prune_cron_fires(self, older_than: datetime, limit: int = 10_000) -> int:
        fires = CronFire.objects.using(self.alias)
        later = fires.filter(entry_id=OuterRef("entry_id"), fire_time__gt=OuterRef("fire_time"))
        ids = list(
            fires.filter(Exists(later), fire_time__lt=older_than)
            .order_by("id")
            .values_list("id", flat=True)[:limit]
        )
        deleted, _ = fires.filter(id__in=ids).delete()
        return deleted
