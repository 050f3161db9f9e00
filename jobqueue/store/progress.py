"""Internal: the progress part of the store seam: progress, checkpoints, and waiters.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_progress.py``, the generic store in ``generic_progress.py``.

* A running handler reports progress (:meth:`ProgressStore.record_progress`) and writes a
  checkpoint (:meth:`ProgressStore.save_checkpoint`). Both are fenced on ``(id, lease_token,
  state = 'leased')`` like every write after the claim: a zombie (a run whose lease another
  claim or the reaper took) writes nothing and gets :class:`~jobqueue.errors.LeaseLost`.
* The next attempt reads the checkpoint back (:meth:`ProgressStore.read_checkpoint`).
* :meth:`ProgressStore.watch` marks a job as waited on: on PostgreSQL, finishing it then sends
  ``pg_notify(FINISHED_CHANNEL, '<id>')`` (migration 0013_progress's trigger), so
  ``jobqueue.wait`` sleeps on LISTEN instead of reading the row in a loop. Jobs nobody waits on
  send nothing: the finish path of a drain pays no notification.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

#: The channel a finished watched job is notified on; the payload is its id. Keep in sync with
#: migration 0013_progress.
FINISHED_CHANNEL = "jobqueue_finished"


class ProgressStore(Protocol):
    """Progress and checkpoints of running jobs, and the mark that makes finishing notify."""

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        """Store ``done`` of ``total`` (None: unknown) steps on the held job's row.

        Raises:
            LeaseLost: the job is no longer leased under ``lease_token``; nothing was written.
        """

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        """Store ``state_json`` (checked JSON text) as the held job's checkpoint.

        Raises:
            LeaseLost: the job is no longer leased under ``lease_token``; nothing was written.
        """

    def read_checkpoint(self, job_id: int) -> Any:
        """Return the job's last checkpoint (decoded JSON), or None when it has none.

        Raises:
            JobNotFound: no job has this id.
        """

    def watch(self, job_id: int) -> str | None:
        """Mark the job as waited on and return its state, or None when no job has this id.

        On PostgreSQL, once marked, the statement that finishes it (succeeded, dead, cancelled)
        notifies :data:`FINISHED_CHANNEL` at commit; the caller LISTENs before calling this, so
        a job that finishes in between is either seen finished here or notified.
        """
