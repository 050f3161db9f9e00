"""Internal: the batches part of the store seam: a batch row, its members, an empty batch's end.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_batches.py``, the generic store in ``generic_batches.py``.

Only the writes ``jobqueue.batch()`` makes are here. What happens when a member finishes is in
the statement that records it: ``finish_many.sql`` counts a run's outcomes per batch (one update
of each batch row per statement, rows locked in id order), and the row trigger of migration
0016_batches counts the other transitions (cancel, retry; every transition on SQLite); the
update that brings ``pending`` to zero enqueues the callbacks (docs/decisions.md, "Batches").
Jobs without a batch pay no extra statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class BatchStore(Protocol):
    """The writes of ``jobqueue.batch()``, in the caller's transaction."""

    def create_batch(self, payload_json: str, callbacks_json: str) -> int:
        """Insert an empty batch and return its id.

        Args:
            payload_json: the JSON object handed to the callbacks as ``payload``.
            callbacks_json: the JSON list of callback specs (``kind``: ``success`` or
                ``complete``; ``type``, ``queue``, ``priority``, ``max_attempts``,
                ``timeout_s`` as resolved for the callback's job type).
        """
        ...

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        """Make the jobs ``job_ids`` members of ``batch_id``; return how many joined.

        A job that already belongs to a batch stays where it is and is not counted. The jobs
        are expected unfinished (just enqueued, in the same transaction): each joins
        ``pending``.
        """
        ...

    def close_empty_batch(
        self, batch_id: int, success_job_id: int | None, complete_job_id: int | None
    ) -> None:
        """Record the completion of a batch with no members and the callbacks enqueued for it."""
        ...
