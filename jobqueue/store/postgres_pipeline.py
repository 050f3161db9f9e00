"""Internal: record outcomes and claim the next jobs in one round trip, on PostgreSQL (issue 15).

``finish_many`` and the claim go in one psycopg pipeline with one Sync, each in its own
transaction under the transaction limits (``bounded.execute_each``): two commits, one round trip.
Only a claim that is one statement in autocommit goes this way; one that takes turns (caps,
limits, rates, ``"*"``) records, then claims, in two calls. docs/decisions.md, "The ack and the
next claim share a round trip, not a transaction". A mixin of
:class:`~jobqueue.store.postgres.PostgresStore`.

Also here: which text of ``finish_many.sql`` the outcomes need (:func:`finish_statement`): the
batch bookkeeping is sent only when an outcome may be a batch member.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django.db import DatabaseError

from jobqueue.retries import Outcome
from jobqueue.store import bounded
from jobqueue.store.interface import ClaimRequest, FinishedThenClaimed, Store
from jobqueue.store.plan import ClaimPlan
from jobqueue.store.postgres_concurrency import _KEYED_SEEN
from jobqueue.store.rows import fetchall
from jobqueue.store.shared import finish_then_claim_in_turn
from jobqueue.store.sqltext import sql

#: Per database alias, ids of jobs this process claimed that have no batch (claim.sql returns
#: batch_id). A job's batch_id is written in the transaction that inserts it (the batch block's
#: ``atomic()``: ``jobqueue/batches.py``, ``add_batch_members.sql`` sets it only where NULL, on
#: the ids just enqueued) and never changes, so an id here stays true for good: the set can be
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


class PostgresFinishThenClaim:
    """finish_then_claim (the contract: ``Store.finish_then_claim``).

    The host gives ``alias``, ``_claim_statement``, ``_finish_params`` and ``_claimed``.
    """

    alias: str
    _claim_statement: Any
    _finish_params: Any
    _claimed: Any

    def _one_statement_claim(self, plan: ClaimPlan | None) -> bool:
        """Return whether a claim under ``plan`` is one statement in autocommit (no turn)."""
        if plan is None:
            return True
        caps, limits = plan.caps, plan.limits
        return not (
            plan.every
            or plan.rates.enabled
            or caps.enabled
            or limits.enabled
            or self.alias in _KEYED_SEEN
        )

    def finish_then_claim(
        self, outcomes: Sequence[Outcome], request: ClaimRequest
    ) -> FinishedThenClaimed:
        """Record ``outcomes``, then claim per ``request``: ``Store.finish_then_claim``."""
        store = cast("Store", self)
        if not outcomes or not self._one_statement_claim(request.plan):
            return finish_then_claim_in_turn(store, outcomes, request)
        if not bounded.pipelines(self.alias):
            return finish_then_claim_in_turn(store, outcomes, request)
        queues = list(request.queues)
        plan = request.plan or ClaimPlan.even(len(queues))
        name, claim_params_ = self._claim_statement(
            queues, request.worker_id, request.max_jobs, request.lease_s, None, plan
        )
        finish_params = self._finish_params(outcomes, None)
        finish = sql(finish_statement(self.alias, finish_params["ids"]))
        done, error = bounded.execute_each(
            self.alias, [(finish, finish_params), (sql(name), claim_params_)]
        )
        states = {r.id: r.state for r in fetchall(done[0])} if done else None
        try:
            claimed = self._claimed(fetchall(done[1]), plan, False) if len(done) > 1 else None
        except DatabaseError as exc:  # the limit check failed: its jobs went back
            return FinishedThenClaimed(states, None, exc)
        return FinishedThenClaimed(states, claimed, error)
