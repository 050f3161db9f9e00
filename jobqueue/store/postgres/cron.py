"""Internal: cron entries, fires and the scheduler's leader lease on PostgreSQL.

:class:`PostgresCron` is the cron area of :class:`~jobqueue.store.postgres.PostgresStore`: the
entries due (``due_cron_entries.sql``), a fire and its job (``fire_cron.sql``), the
compare-and-set on ``next_fire_at`` (``advance_cron.sql``), the fire records' pruning
(``prune_cron_fires.sql``), the leader lease (``elect_leader.sql``, ``resign_leader.sql``) and
the database clock (``db_now.sql``). One statement each; each runs in the caller's transaction
when there is one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobqueue.store.cron_entries import CronEntryWrites
from jobqueue.store.interface import Advance, DueEntry, Fire, Fired, Leadership
from jobqueue.store.postgres.db import PostgresArea, enqueue_params
from jobqueue.store.rows import fetchall, fetchone, json_value


def _leader_params(leader: Leadership | None) -> dict[str, Any]:
    if leader is None:
        return {"lease_name": "", "holder": "", "token": None}
    return {"lease_name": leader.name, "holder": leader.holder, "token": leader.token}


class PostgresCron(CronEntryWrites, PostgresArea):
    """Cron entries, fires and the scheduler's leader lease on PostgreSQL."""

    def db_now(self) -> datetime:
        with self.db.execute("db_now", {}) as cursor:
            return fetchone(cursor).now

    def elect_leader(
        self,
        name: str,
        holder: str,
        token: int | None,
        lease_s: float,
        now: datetime | None = None,
    ) -> Leadership | None:
        params = {"name": name, "holder": holder, "token": token, "lease_s": lease_s, "now": now}
        with self.db.execute("elect_leader", params) as cursor:
            row = fetchone(cursor)
        if row is None:
            return None
        return Leadership(
            name=name,
            holder=holder,
            token=row.fencing_token,
            expires_at=row.expires_at,
            now=row.renewed_at,
        )

    def resign_leader(self, name: str, holder: str, token: int) -> bool:
        params = {"name": name, "holder": holder, "token": token}
        with self.db.execute("resign_leader", params) as cursor:
            return cursor.rowcount > 0

    def due_cron_entries(self, until: datetime, limit: int = 100) -> list[DueEntry]:
        with self.db.execute("due_cron_entries", {"until": until, "limit": limit}) as cursor:
            rows = fetchall(cursor)
        return [
            DueEntry(
                id=r.id,
                name=r.name,
                cron_expr=r.cron_expr,
                timezone=r.timezone,
                queue=r.queue,
                job_type=r.job_type,
                payload=json_value(r.payload),
                priority=r.priority,
                missed=r.missed,
                missed_cap=r.missed_cap,
                next_fire_at=r.next_fire_at,
                last_fired_at=r.last_fired_at,
            )
            for r in rows
        ]

    def fire_cron(self, fire: Fire) -> Fired:
        params = {
            **_leader_params(fire.leader),
            **enqueue_params(fire.job),
            "entry_id": fire.entry_id,
            "fire_time": fire.fire_time,
            "fired_by": fire.fired_by,
            "manual": fire.manual,
            "now": fire.now,
        }
        with self.db.execute("fire_cron", params) as cursor:
            row = fetchone(cursor)
        return Fired(leading=bool(row.leading), job_id=row.job_id)

    def advance_cron(self, advance: Advance) -> bool:
        params = {
            **_leader_params(advance.leader),
            "entry_id": advance.entry_id,
            "expected": advance.expected,
            "cron_expr": advance.cron_expr,
            "timezone": advance.timezone,
            "next_fire_at": advance.next_fire_at,
            "last_fired_at": advance.last_fired_at,
            "skipped": advance.skipped,
        }
        with self.db.execute("advance_cron", params) as cursor:
            return cursor.rowcount == 1

    def prune_cron_fires(self, older_than: datetime, limit: int = 10_000) -> int:
        params = {"older_than": older_than, "limit": limit}
        with self.db.execute("prune_cron_fires", params) as cursor:
            return cursor.rowcount
