"""Internal: what the worker calls around its runs for breakers and budgets (two small hooks).

``admit`` after a claim: the jobs to run (an open breaker holds the others back). ``observe``
before outcomes are recorded: breakers count them, and the retry budget may push retries later.
The worker stays unaware of both mechanisms beyond these two calls.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from jobqueue.limits.breakers import BreakerGate
from jobqueue.limits.budgets import RetryBudgetKeeper
from jobqueue.registry import JobType
from jobqueue.retries import RunOutcome
from jobqueue.store import ClaimedJob, Store


class ObservedRun(Protocol):
    """A finished run as the worker holds it: the claimed job and its outcome (settable)."""

    claimed: ClaimedJob
    outcome: RunOutcome | None


class DependencyGuard:
    """Breakers and retry budgets for one worker.

    Args:
        store: the queue's store.
        lease_s: the worker's lease, seconds.
        rng: random source for spreading held-back jobs (seed it in tests).
    """

    def __init__(self, store: Store, lease_s: float, rng: random.Random | None = None) -> None:
        self.breakers = BreakerGate(store, lease_s, rng)
        self.budget = RetryBudgetKeeper(store)
        # Lease tokens of runs already observed but not yet recorded: a run whose recording
        # failed comes back in the next pass and must not be counted twice.
        self._seen: set[uuid.UUID] = set()

    def admit(
        self,
        claimed: Sequence[ClaimedJob],
        job_types: Mapping[int, JobType | None] | None = None,
    ) -> list[ClaimedJob]:
        """Return the claimed jobs to run now (see :meth:`BreakerGate.admit`).

        ``job_types`` (job id -> its resolved type, None if it could not be) spares resolving
        the types again; a job missing from it is resolved by its name.
        """
        return self.breakers.admit(claimed, job_types=job_types)

    def observe(
        self, runs: Sequence[ObservedRun], job_types: Mapping[int, JobType | None] | None = None
    ) -> None:
        """Count the runs not seen yet, and set the retry budget's later delays on them.

        ``job_types`` as in :meth:`admit`.
        """
        fresh = [
            r for r in runs if r.outcome is not None and r.claimed.lease_token not in self._seen
        ]
        self._seen = {r.claimed.lease_token for r in runs}
        if not fresh:
            return
        pairs = [(r.claimed, r.outcome) for r in fresh]
        self.breakers.observe(pairs, job_types=job_types)  # type: ignore[arg-type]
        delayed = self.budget.apply(pairs)  # type: ignore[arg-type]
        for run in fresh:
            if run.claimed.id in delayed:
                run.outcome = delayed[run.claimed.id]
