"""Internal: heartbeats, outcomes, releases, reaping and dead workers' jobs on PostgreSQL.

:class:`PostgresFinishing` is the area of :class:`~jobqueue.store.postgres.PostgresStore` that
writes a held job's end: heartbeats (``heartbeat.sql``), outcomes (``finish_many.sql``),
give-backs (``release.sql``), the reaper's expired leases (``expired_leases.sql``,
``lease_info.sql``) and a worker process's death (``dead_worker_leases.sql``,
``hand_back.sql``; contract: ``Store.hand_back``).

Each public method is one statement (``reap`` is two, in one transaction) and runs in the
caller's transaction when there is one. A transaction the store opens itself (a statement in
autocommit included) runs under the transaction limits (``bounded.py``); a caller's
transaction gets none.

Also here: which text of ``finish_many.sql`` the outcomes need (:func:`finish_statement`): the
batch bookkeeping is sent only when an outcome may be a batch member, which this process knows
for the jobs it claimed (:func:`note_claimed`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from django.db import transaction

from jobqueue.errors import LeaseLost
from jobqueue.models.metrics import EXPIRED_KIND, ROLLUP_SHARDS
from jobqueue.retries import RunOutcome
from jobqueue.store import bounded
from jobqueue.store.finishing import (
    charge_expired,
    charged_outcome,
    died_entry,
    died_words,
    expired_entry,
    lease_of,
)
from jobqueue.store.interface import (
    ALONE_MESSAGE,
    COMPANY_MESSAGE,
    RELEASED_MESSAGE,
    ExpiredLease,
    HandBack,
    HeldLease,
    ReapDecision,
)
from jobqueue.store.postgres.db import PostgresArea
from jobqueue.store.rows import fetchall, fetchone

#: Per database alias, ids of jobs this process claimed that have no batch (claim.sql returns
#: batch_id). A job's batch_id is written in the transaction that inserts it (the batch block's
#: ``atomic()``: ``jobqueue/flows/batches.py``, ``add_batch_members.sql`` sets it only where NULL,
#: on the ids just enqueued) and never changes, so an id here stays true for good: the set can be
#: stale only by missing ids, which sends the full text. Ids leave at their outcome's statement.
_UNBATCHED: dict[str, set[int]] = {}


#: Ids kept per alias at most: leases never finished here (a lost lease, a hand-back) would
#: otherwise pile up; past it the set starts over (the next outcomes get the full text).
UNBATCHED_MAX = 65_536


def note_claimed(alias: str, rows: Sequence[Any]) -> None:
    """Remember which of a claim's ``rows`` (with ``id`` and ``batch_id``) have no batch."""
    known = _UNBATCHED.setdefault(alias, set())
    if len(known) > UNBATCHED_MAX:
        known.clear()
    known.update(r.id for r in rows if r.batch_id is None)


def finish_statement(alias: str, ids: Sequence[int]) -> str:
    """Return the name of the ``finish_many.sql`` text to send for the outcomes of jobs ``ids``.

    ``"finish_many~batches"`` (no batch bookkeeping: no count, no callback, the same outcome for
    rows without a batch) when this process claimed every one of these jobs and none had a
    batch; else ``"finish_many"`` (the reaper's, a dead process's charged job, ``jobqueue.ack``
    of a job claimed elsewhere). The ids leave the set either way.

    Args:
        alias: database alias.
        ids: the outcomes' job ids (not empty).

    Returns:
        A name for :func:`~jobqueue.store.sqltext.sql`.
    """
    known = _UNBATCHED.get(alias)
    if known is None:
        return "finish_many"
    plain = all(job_id in known for job_id in ids)
    known.difference_update(ids)
    return "finish_many~batches" if plain else "finish_many"


def may_complete_batch(statement: str) -> bool:
    """Return whether the ``finish_many.sql`` text ``statement`` may complete a batch.

    Such a write commits synchronously even in a worker's ack (``bounded.synchronous_commit``):
    the batch's callbacks it enqueues are promised once per completion, and a committed but
    unflushed completion could be seen (its callback run) and then forgotten by a server crash,
    completing the batch (and running the callback) a second time. The text without batch
    bookkeeping (``"finish_many~batches"``) never completes one.
    """
    return statement == "finish_many"


class PostgresFinishing(PostgresArea):
    """Heartbeats, outcomes, releases, reaping and dead workers' jobs on PostgreSQL."""

    def extend_leases(
        self, leases: Sequence[tuple[int, uuid.UUID]], lease_s: float
    ) -> dict[int, HeldLease]:
        if not leases:
            return {}
        ordered = sorted(leases)
        params = {
            "ids": [job_id for job_id, _ in ordered],
            "tokens": [token for _, token in ordered],
            "lease_s": lease_s,
        }
        with self.db.execute("heartbeat", params) as cursor:
            return {
                r.id: HeldLease(lease_until=r.lease_until, cancel_requested=r.cancel_requested)
                for r in fetchall(cursor)
            }

    def finish_many(
        self, outcomes: Sequence[RunOutcome], now: datetime | None = None
    ) -> dict[int, str]:
        if not outcomes:
            return {}
        params = self.finish_params(outcomes, now)
        name = finish_statement(self.alias, params["ids"])
        durable = bounded.synchronous_commit() if may_complete_batch(name) else nullcontext()
        with durable, self.db.execute(name, params) as cursor:
            return {r.id: r.state for r in fetchall(cursor)}

    def finish_params(self, outcomes: Sequence[RunOutcome], now: datetime | None) -> dict[str, Any]:
        """Return ``finish_many.sql``'s parameters for ``outcomes`` (not empty)."""
        # Rows in id order, as every multi-row write here: two batches never wait on each other
        # in opposite orders.
        ordered = sorted(outcomes, key=lambda o: o.job_id)
        return {
            "ids": [o.job_id for o in ordered],
            "tokens": [o.lease_token for o in ordered],
            "states": [str(o.state) for o in ordered],
            "results": [o.result_json for o in ordered],
            "errors": [None if o.error is None else json.dumps(o.error) for o in ordered],
            "dead_reasons": [o.dead_reason for o in ordered],
            "retry_ats": [o.retry_at for o in ordered],
            "delays": [o.delay_s for o in ordered],
            "now": now,
            "shards": ROLLUP_SHARDS,
            "expired_kind": EXPIRED_KIND,
        }

    def release(
        self, job_id: int, lease_token: uuid.UUID, *, message: str = RELEASED_MESSAGE
    ) -> str:
        params = {"id": job_id, "lease_token": lease_token, "message": message}
        with self.db.execute("release", params) as cursor:
            row = fetchone(cursor)
        if row is None:
            raise LeaseLost(job_id)
        return row.state

    def lease_info(self, job_id: int, lease_token: uuid.UUID) -> ExpiredLease:
        with self.db.execute("lease_info", {"id": job_id, "lease_token": lease_token}) as cursor:
            row = fetchone(cursor)
        if row is None:
            raise LeaseLost(job_id)
        return ExpiredLease.of(row)

    def expired_leases(self, limit: int, now: datetime | None = None) -> list[ExpiredLease]:
        with self.db.execute("expired_leases", {"limit": limit, "now": now}) as cursor:
            return [lease_of(r) for r in fetchall(cursor)]

    def reap(
        self,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        limit: int = 500,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        decide = decide or charge_expired
        # Almost every round finds nothing: asked alone (one round trip, the statement in its
        # own implicit transaction), where the transaction that locks and charges costs three.
        if not self.expired_leases(1, now):
            return 0, 0
        with bounded.own_transaction(self.alias):
            expired = self.expired_leases(limit, now)
            if not expired:
                return 0, 0
            bounded.checkpoint("reaper", self.alias)
            outcomes = [charged_outcome(x, decide(x), expired_entry(x)) for x in expired]
            states = list(self.finish_many(outcomes, now=now).values())
        return states.count("scheduled"), states.count("dead")

    def hand_back(
        self,
        worker_id: str,
        decide: Callable[[ExpiredLease], ReapDecision] | None = None,
        *,
        cause: str = "",
    ) -> HandBack:
        """Return a dead worker process's leases: ``Store.hand_back``."""
        decide = decide or charge_expired
        with transaction.atomic(using=self.alias):
            with self.db.execute("dead_worker_leases", {"worker_id": worker_id}) as cursor:
                leases = [lease_of(r) for r in fetchall(cursor)]
            if not leases:
                return HandBack()
            if len(leases) == 1:
                # Alone, its job is charged as an expired lease is: an outcome like any other.
                [lease] = leases
                message = ALONE_MESSAGE.format(died=died_words(cause))
                entry = died_entry(lease, charged=True, message=message)
                recorded = self.finish_many([charged_outcome(lease, decide(lease), entry)])
                return HandBack.count(list(recorded.values()), company=False)
            params = {
                "ids": [x.id for x in leases],
                "tokens": [x.lease_token for x in leases],
                "message": COMPANY_MESSAGE.format(died=died_words(cause), n=len(leases)),
            }
            with self.db.execute("hand_back", params) as cursor:
                states = [r.state for r in fetchall(cursor)]
        return HandBack.count(states, company=True)
