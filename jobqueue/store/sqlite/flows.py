"""Internal: jobs after parents, batches, progress and checkpoints on the ORM.

:class:`GenericFlows` is the flows area of :class:`~jobqueue.store.sqlite.GenericStore`, for
SQLite and other Django databases; the contract and the rules are
:mod:`jobqueue.store.interface`.

Jobs after other jobs. :meth:`~GenericFlows.settle_children` is the ORM twin of migration
0015_parents's trigger: it runs in the transaction that moved a parent with children
(:meth:`~jobqueue.store.sqlite.finishing.GenericFinishing._finish`, the operator's cancel and
retry), only when the row read there says ``has_children``, so jobs nobody waits for pay no extra
statement. SQLite serializes writers, so a child's ``waiting_for`` is counted down by one writer
at a time. A job with an ordering key waits behind its key's last job the same way
(:meth:`~GenericFlows.enqueue_in_order`).

Batches: the batch rows are :class:`~jobqueue.store.shared.BatchRows`, as on PostgreSQL; the
members are updated here in chunks, where PostgreSQL sends one statement
(``add_batch_members.sql``). Every write runs in the caller's transaction.

Progress, checkpoints and waiters. There is no notification here: ``jobqueue.wait`` polls on
these databases, so :meth:`~GenericFlows.watch` only reads the state.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobqueue.errors import JobNotFound, LeaseLost
from jobqueue.models import Batch, Job, JobParent
from jobqueue.states import FINISHED, LIVE, JobState
from jobqueue.store.interface import FAILED, PARENT_RESULTS_KEY, NewJob
from jobqueue.store.shared import BatchRows, failed_entry, retried_entry, start
from jobqueue.store.sqlite.db import GenericArea, new_row

#: The states of an ordering key's jobs a new job of that key waits behind.
ORDERED = LIVE | {JobState.WAITING}


#: Ids per UPDATE: SQLite's bound-parameter limit is 999 on old builds.
MEMBER_CHUNK = 900


class GenericFlows(BatchRows, GenericArea):
    """Jobs after parents, batches, progress and checkpoints on the ORM."""

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            parents = self._jobs.select_for_update().filter(id__in=after).order_by("id")
            found = {i: (s, r) for i, s, r in parents.values_list("id", "state", "result")}
            begin = start(
                job,
                after,
                found,
                run_on_parent_failure=run_on_parent_failure,
                takes_parent_results=takes_parent_results,
                now=now,
            )
            self._jobs.filter(id__in=after).update(has_children=True)
            row = new_row(
                job,
                now,
                payload=json.loads(begin.payload_json),
                errors=list(begin.errors),
                waiting_for=begin.waiting_for,
            )
            if begin.state:
                row.state = begin.state
            row.finished_at = now if row.state == JobState.CANCELLED else None
            row.save(using=self.alias, force_insert=True)
            JobParent.objects.using(self.alias).bulk_create(
                JobParent(
                    parent_id=parent,
                    child_id=row.id,
                    counted=counted,
                    run_on_parent_failure=run_on_parent_failure,
                    takes_parent_results=takes_parent_results,
                )
                for parent, counted in zip(after, begin.counted, strict=True)
            )
        return row.id, now

    def enqueue_in_order(self, job: NewJob) -> tuple[int, bool, datetime]:
        """Enqueue a job with an ordering key (no dedupe key) behind its key's last job.

        The ORM twin of ``enqueue_in_order.sql``: when the key has a live or waiting job, the new
        job waits (``waiting_for`` 1) with the key's last one as its parent, run on failure too,
        so :meth:`settle_children` releases it when that one ends. SQLite serializes writers,
        so the last job read here is the key's last.

        Returns:
            ``(id, True, created_at)``.
        """
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            tail = (
                self._jobs.select_for_update()
                .filter(ordering_key=job.ordering_key, state__in=sorted(ORDERED))
                .order_by("-id")
                .values_list("id", flat=True)
                .first()
            )
            row = new_row(job, now, waiting_for=0 if tail is None else 1)
            if tail is not None:
                self._jobs.filter(id=tail).update(has_children=True)
                row.state = JobState.WAITING
            row.save(using=self.alias, force_insert=True)
            if tail is not None:
                JobParent.objects.using(self.alias).create(
                    parent_id=tail, child_id=row.id, run_on_parent_failure=True
                )
        return row.id, True, now

    def release_stranded(self, limit: int = 500) -> int:
        """Release ordering-key followers whose parent ended without counting them off.

        Internal (the reaper's tick); the ORM twin of ``release_stranded.sql``. On SQLite, which
        serializes writers, a follower is never stranded: this finds nothing there, and is here
        so both stores keep one contract.

        Args:
            limit: most jobs released in one call.

        Returns:
            How many jobs were released (ready or scheduled).
        """
        now = timezone.now()
        released = 0
        waiting = self._jobs.filter(state=JobState.WAITING, ordering_key__isnull=False)
        with transaction.atomic(using=self.alias):
            keys = waiting.order_by("ordering_key").values_list("ordering_key", flat=True)
            for key in keys.distinct():
                if released >= limit:
                    break
                head = waiting.filter(ordering_key=key).order_by("id").values("id").first()
                if head is None:
                    continue
                edges = JobParent.objects.using(self.alias).filter(
                    child_id=head["id"], counted=False, run_on_parent_failure=True
                )
                ended = []
                for edge in edges.values("id", "parent_id"):
                    state = (
                        self._jobs.filter(id=edge["parent_id"])
                        .values_list("state", flat=True)
                        .first()
                    )
                    if state is None or state in FINISHED:
                        ended.append(edge["id"])
                if not ended:
                    continue
                JobParent.objects.using(self.alias).filter(id__in=ended).update(counted=True)
                for _ in ended:
                    self._count_off(head["id"], now)
                if not self._jobs.filter(id=head["id"], state=JobState.WAITING).exists():
                    released += 1
        return released

    def settle_children(self, parent_id: int, old: str, new: str, now: datetime) -> None:
        """Settle the children of a parent that moved from ``old`` to ``new`` (``shared.start``).

        Call it in the transaction that moved the parent, for a parent with ``has_children``.
        """
        if old == new:
            return
        edges = JobParent.objects.using(self.alias).filter(parent_id=parent_id, counted=False)
        if new in FINISHED:
            counting = edges
            if new != JobState.SUCCEEDED:
                counting = edges.filter(run_on_parent_failure=True)
            children = sorted(counting.values_list("child_id", flat=True))
            counting.update(counted=True)
            for child_id in children:
                self._count_off(child_id, now)
            if new in FAILED:
                doomed = list(
                    edges.filter(run_on_parent_failure=False).values_list("child_id", flat=True)
                )
                waiting = self._jobs.filter(id__in=doomed, state=JobState.WAITING).order_by("id")
                for child in waiting.values("id", "errors", "has_children"):
                    entry = failed_entry(parent_id, new, JobState.WAITING, now)
                    self._move(child, JobState.WAITING, JobState.CANCELLED, now, entry)
        elif old in FAILED:
            cancelled = edges.filter(run_on_parent_failure=False).values_list("child_id", flat=True)
            for child in self._jobs.filter(id__in=list(cancelled), state=JobState.CANCELLED).values(
                "id", "errors", "has_children"
            ):
                last = child["errors"][-1] if child["errors"] else {}
                if last.get("kind") == "parent_failed" and not self._other_failed(
                    child["id"], parent_id
                ):
                    entry = retried_entry(parent_id, now)
                    self._move(child, JobState.CANCELLED, JobState.WAITING, now, entry)

    def _move(self, child: dict, old: str, new: str, now: datetime, entry: dict) -> None:
        finished_at = now if new == JobState.CANCELLED else None
        self._jobs.filter(id=child["id"], state=old).update(
            state=new, finished_at=finished_at, errors=[*child["errors"], entry]
        )
        if child["has_children"]:
            self.settle_children(child["id"], old, new, now)

    def _other_failed(self, child_id: int, parent_id: int) -> bool:
        others = JobParent.objects.using(self.alias).filter(
            child_id=child_id, counted=False, run_on_parent_failure=False
        )
        ids = others.exclude(parent_id=parent_id).values_list("parent_id", flat=True)
        return self._jobs.filter(id__in=list(ids), state__in=sorted(FAILED)).exists()

    def _count_off(self, child_id: int, now: datetime) -> None:
        """Take one parent off a child's ``waiting_for``; release it at 0."""
        # A child not waiting (cancelled for another parent) is counted too: retried, it waits
        # only for the parents still uncounted.
        self._jobs.filter(id=child_id).update(waiting_for=F("waiting_for") - 1)
        child = self._jobs.filter(id=child_id, state=JobState.WAITING)
        row = child.values("waiting_for", "run_at", "payload").first()
        if row is None or row["waiting_for"] > 0:
            return
        run_at = max(row["run_at"], now)
        fields: dict[str, Any] = {
            "state": JobState.SCHEDULED if row["run_at"] > now else JobState.READY,
            "run_at": run_at,
        }
        links = JobParent.objects.using(self.alias).filter(child_id=child_id).order_by("id")
        if links.filter(takes_parent_results=True).exists():
            parents = list(links.values_list("parent_id", flat=True))
            results = dict(self._jobs.filter(id__in=parents).values_list("id", "result"))
            payload = dict(row["payload"])
            payload[PARENT_RESULTS_KEY] = [results.get(p) for p in parents]
            fields["payload"] = payload
        child.update(**fields)

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        ids = list(job_ids)
        joined = 0
        for first in range(0, len(ids), MEMBER_CHUNK):
            joined += (
                Job.objects.using(self.alias)
                .filter(id__in=ids[first : first + MEMBER_CHUNK], batch_id__isnull=True)
                .update(batch_id=batch_id)
            )
        if joined:
            Batch.objects.using(self.alias).filter(id=batch_id).update(
                total=F("total") + joined, pending=F("pending") + joined
            )
        return joined

    def _held_row(self, job_id: int, lease_token: uuid.UUID) -> Any:
        return Job.objects.using(self.alias).filter(
            id=job_id, lease_token=lease_token, state=JobState.LEASED
        )

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        with transaction.atomic(using=self.alias):
            if not self._held_row(job_id, lease_token).update(
                progress_done=done, progress_total=total
            ):
                raise LeaseLost(job_id)

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        with transaction.atomic(using=self.alias):
            if not self._held_row(job_id, lease_token).update(
                checkpoint=json.loads(state_json), checkpoint_at=timezone.now()
            ):
                raise LeaseLost(job_id)

    def read_checkpoint(self, job_id: int) -> Any:
        rows = list(Job.objects.using(self.alias).filter(id=job_id).values_list("checkpoint"))
        if not rows:
            raise JobNotFound(job_id)
        return rows[0][0]

    def watch(self, job_id: int) -> str | None:
        return (
            Job.objects.using(self.alias).filter(id=job_id).values_list("state", flat=True).first()
        )
