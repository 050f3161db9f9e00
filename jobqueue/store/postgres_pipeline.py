"""Internal: record outcomes and claim the next jobs in one round trip, on PostgreSQL (issue 15).

``finish_many`` and the claim go in one psycopg pipeline with one Sync, each in its own
transaction under the transaction limits (``bounded.execute_each``): two commits, one round trip.
Only a claim that is one statement in autocommit goes this way; one that takes turns (caps,
limits, rates, ``"*"``) records, then claims, in two calls. docs/decisions.md, "The ack and the
next claim share a round trip, not a transaction". A mixin of
:class:`~jobqueue.store.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django.db import DatabaseError

from ..retries import Outcome
from . import bounded
from .base import ClaimRequest, FinishedThenClaimed, JobStore, finish_then_claim_in_turn
from .plan import ClaimPlan
from .postgres_concurrency import _KEYED_SEEN
from .rows import fetchall
from .sqltext import sql


class PostgresFinishThenClaim:
    """finish_then_claim (the contract: ``JobStore.finish_then_claim``).

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
        """Record ``outcomes``, then claim per ``request``: ``JobStore.finish_then_claim``."""
        store = cast("JobStore", self)
        if not outcomes or not self._one_statement_claim(request.plan):
            return finish_then_claim_in_turn(store, outcomes, request)
        if not bounded.pipelines(self.alias):
            return finish_then_claim_in_turn(store, outcomes, request)
        queues = list(request.queues)
        plan = request.plan or ClaimPlan.even(len(queues))
        name, claim_params_ = self._claim_statement(
            queues, request.worker_id, request.max_jobs, request.lease_s, None, plan
        )
        done, error = bounded.execute_each(
            self.alias,
            [(sql("finish_many"), self._finish_params(outcomes, None)), (sql(name), claim_params_)],
        )
        states = {r.id: r.state for r in fetchall(done[0])} if done else None
        try:
            claimed = self._claimed(fetchall(done[1]), plan, False) if len(done) > 1 else None
        except DatabaseError as exc:  # the limit check failed: its jobs went back
            return FinishedThenClaimed(states, None, exc)
        return FinishedThenClaimed(states, claimed, error)
