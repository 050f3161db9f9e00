"""Internal: the operator's part of the store seam: cancel, retry, run now, prune.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps
it in ``postgres_operator.py``, the generic store in ``generic_operator.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol


class OperatorStore(Protocol):
    """What an operator (the client's ``cancel``, ``retry``, ``run_now``, the pruner) writes."""

    def cancel_or_request(self, job_id: int, by: str = "") -> str | None:
        """Cancel a ready, scheduled or dead job now; ask a leased (running) one to stop.

        Either way the job's history gains an ``operator_cancel`` entry naming ``by`` (who).

        Returns:
            ``"cancelled"`` (cancelled now), ``"leased"`` (running: its cancel was requested), or
            None (already finished, or a cancel already requested). Raises JobNotFound.
        """

    def cancel_many(self, job_ids: Sequence[int], by: str = "") -> dict[int, str]:
        """Cancel or ask to stop each job of ``job_ids`` exactly as :meth:`cancel_or_request` would.

        One statement on PostgreSQL (issue 33: a statement per job made 20,000 cancels take
        21 s). Finished jobs, jobs already asked to stop and missing ids are left alone.

        Returns:
            id -> ``"cancelled"`` or ``"leased"`` (cancel requested), for the jobs acted on.
        """
        ...

    def retry(self, job_id: int, by: str = "") -> bool:
        """Send a dead or cancelled job back to ``ready`` with a fresh attempt budget.

        Its history gains an ``operator_retry`` entry naming ``by`` (who).

        Returns False when the job is in another state. Raises JobNotFound, DuplicateJob.
        """

    def retry_many(self, job_ids: Sequence[int], by: str = "") -> set[int]:
        """Retry each dead or cancelled job of ``job_ids`` exactly as :meth:`retry` would.

        A row in another state, a missing id, and a row whose dedupe key a live job holds are
        left alone. When several of ``job_ids`` share one (queue, dedupe key), only the lowest
        id is retried. Never raises DuplicateJob.

        Returns:
            The ids retried.
        """

    def run_now(self, job_id: int, by: str = "") -> bool:
        """Make a ``scheduled`` job ``ready`` now (``run_at = now()``); attempts and history kept.

        Its history gains an ``operator_run_now`` entry naming ``by`` (who).

        Returns False when the job is in another state. Raises JobNotFound.
        """

    def prune(
        self,
        states: Sequence[str],
        older_than_s: float,
        limit: int,
        now: datetime | None = None,
    ) -> int:
        """Delete up to ``limit`` jobs in ``states`` that finished more than ``older_than_s`` ago.

        Args:
            states: finished states only (``succeeded``, ``cancelled``, ``dead``); other states
                never match.
            older_than_s: seconds before now (database clock) a job must have finished.
            limit: most rows deleted by this call (one bounded statement).
            now: stands in for the database clock (tests only).

        Rows another pruner is deleting are skipped, not waited on. The parent links whose child
        is deleted go with it (a link whose parent is deleted stays while its child lives: a
        waiting child reads its parents' results through its links, in order), and then, after
        that commit, the batches of the deleted jobs that are done and have no member left.

        Returns:
            How many jobs were deleted.
        """

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        """Return how many jobs :meth:`prune` would delete with no limit (for a dry run)."""
