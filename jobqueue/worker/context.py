"""What a handler is told about its run: :class:`JobContext` (``@job(takes_context=True)``).

The job's id and attempt, whether its lease was lost, its time ran out or a cancel was asked
for, and the calls that record progress and checkpoints on its row (through a
:class:`RunRecorder`, the store's, fenced by the lease token). Re-exported by
:mod:`jobqueue.registry` and :mod:`jobqueue.client`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from asgiref.sync import sync_to_async

from jobqueue.errors import InvalidJobOption, InvalidPayload, JobQueueError, LeaseLost
from jobqueue.payloads import to_json
from jobqueue.settings.conf import get_settings

__all__ = ["JobContext", "RunRecorder"]


class RunRecorder(Protocol):
    """Where a run's progress and checkpoints are written: the store (``jobqueue.store.Store``)."""

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        """Store progress on the held job; raise ``LeaseLost`` if not held."""

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        """Store a checkpoint on the held job; raise ``LeaseLost`` if not held."""

    def read_checkpoint(self, job_id: int) -> Any:
        """Return the job's last checkpoint, or None."""


#: A checkpoint not read yet (None is a read one: the job has none).
_UNREAD: Any = object()


@dataclass(slots=True, kw_only=True)
class JobContext:
    """What a handler that asked for it (``takes_context=True``) learns about its run.

    Attributes:
        job_id: the job's id. Also its idempotency key: the same on every attempt.
        job_type: the registered type name.
        queue: the queue the job was claimed from.
        attempt: this attempt's number, counting from 1 (attempts count claims).
        max_attempts: attempts the job gets before it is dead-lettered.
        worker_id: the worker running it.
        lease_token: this run's lease token, which fences :meth:`progress` and
            :meth:`checkpoint` (None in a context made by hand, which records nothing).
        recorder: where those go (the worker's store).
    """

    job_id: int
    job_type: str
    queue: str
    attempt: int
    max_attempts: int
    worker_id: str
    #: The run's lease token (None in a context made by hand: it records nothing).
    lease_token: uuid.UUID | None = field(default=None, repr=False)
    #: Where progress and checkpoints go: the worker's store (None: nowhere).
    recorder: RunRecorder | None = field(default=None, repr=False)
    _checkpoint: Any = field(default=_UNREAD, repr=False)
    _lease_lost: bool = field(default=False, repr=False)
    _timed_out: bool = field(default=False, repr=False)
    _cancel_requested: bool = field(default=False, repr=False)
    # Set with any of the three flags, so a handler can wait on "stop" instead of polling.
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    # Called once when the run is told to stop: the event loop cancels an async handler's task.
    _on_stop: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def idempotency_key(self) -> str:
        """Return a key that is the same on every attempt of this job: ``str(job_id)``."""
        return str(self.job_id)

    @property
    def lease_lost(self) -> bool:
        """Return True once the worker learned that this job's lease is gone.

        Another worker may run the job now (the reaper or another claim took it); the outcome
        of this run will not be recorded.
        """
        return self._lease_lost

    @property
    def timed_out(self) -> bool:
        """Return True once the run passed its ``timeout_s``.

        The worker has already recorded this attempt as failed (a retry or a dead letter); what
        the handler does from now on is not recorded.
        """
        return self._timed_out

    @property
    def cancel_requested(self) -> bool:
        """Return True once an operator asked to cancel this job while it runs.

        The job ends ``cancelled`` whatever the handler returns, so it should stop now.
        """
        return self._cancel_requested

    @property
    def should_stop(self) -> bool:
        """Return True when the handler should return now: lease lost, timed out, or cancelled.

        A long handler should check it between steps (or block on :meth:`wait_for_stop`).
        """
        return self._stop.is_set()

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Block until :attr:`should_stop` is true, or ``timeout`` seconds pass.

        Use it instead of ``time.sleep`` in a handler that waits, so it wakes at once when it
        is told to stop.

        Returns:
            True if the handler should stop, False if the timeout passed first.
        """
        return self._stop.wait(timeout)

    def progress(self, done: int, total: int | None = None) -> None:
        """Record that ``done`` of ``total`` steps are done.

        Shown by ``jobqueue.status``, the admin's job page and ``manage.py jobqueue show``.
        One fenced write to the job's row per call: report every step of a job with hundreds of
        steps, not every item of a million.

        Args:
            done: steps done, an int >= 0.
            total: steps in all, an int >= ``done``, or None when unknown.

        Raises:
            InvalidJobOption: ``done`` or ``total`` is not such an int; nothing is written.
            LeaseLost: this run no longer holds the job (another attempt may run it); nothing
                is written, and :attr:`should_stop` is now true.
            JobQueueError: the context belongs to no worker (made by hand).
        """
        for name, value in (("done", done), ("total", total)):
            if (value is not None or name == "done") and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise InvalidJobOption(f"progress {name}", f"must be an int >= 0, got {value!r}")
        if total is not None and done > total:
            raise InvalidJobOption("progress done", f"{done} is more than total ({total})")
        recorder, token = self._recording()
        try:
            recorder.record_progress(self.job_id, token, done, total)
        except LeaseLost:
            self.mark_lease_lost()
            raise

    def checkpoint(self, state: Any) -> None:
        """Store ``state`` on the job's row; the next attempt reads it as :attr:`checkpoint_state`.

        Fenced by this run's lease token: once another attempt holds the job (this run is a
        zombie), nothing is written and ``LeaseLost`` is raised. A crash, a lost lease or a
        release at shutdown then resumes from the last checkpoint that was written.

        Args:
            state: a JSON value of at most ``JOBQUEUE["CHECKPOINT_MAX_BYTES"]`` bytes (64 KiB).

        Raises:
            InvalidPayload: not JSON, or over the size limit; nothing is written.
            LeaseLost: this run no longer holds the job; nothing is written, and
                :attr:`should_stop` is now true.
            JobQueueError: the context belongs to no worker (made by hand).
        """
        text = to_json(state, root="checkpoint")
        limit = get_settings().checkpoint_max_bytes
        size = len(text.encode("utf-8"))
        if size > limit:
            raise InvalidPayload(
                "checkpoint",
                f"{size} bytes of JSON is over the limit of {limit} (CHECKPOINT_MAX_BYTES)",
            )
        recorder, token = self._recording()
        try:
            recorder.save_checkpoint(self.job_id, token, text)
        except LeaseLost:
            self.mark_lease_lost()
            raise LeaseLost(
                self.job_id,
                f"checkpoint of job {self.job_id} refused: this run lost its lease (another "
                "attempt holds the job, or it finished); nothing was written",
            ) from None
        self._checkpoint = json.loads(text)

    @property
    def checkpoint_state(self) -> Any:
        """Return the job's last checkpoint (decoded JSON), or None when it has none.

        On a later attempt, what an earlier attempt last wrote with :meth:`checkpoint`: resume
        from there. Read from the row once, at first use; then the value this run last wrote.
        """
        if self._checkpoint is _UNREAD:
            recorder, _ = self._recording()
            self._checkpoint = recorder.read_checkpoint(self.job_id)
        return self._checkpoint

    async def aprogress(self, done: int, total: int | None = None) -> None:
        """Record progress from an ``async def`` handler: :meth:`progress`, awaited.

        The write runs where Django's own async ORM runs its queries (``sync_to_async``, one
        shared thread), not on the event loop, which it would block.
        """
        await sync_to_async(self.progress)(done, total)

    async def acheckpoint(self, state: Any) -> None:
        """Store a checkpoint from an ``async def`` handler: :meth:`checkpoint`, awaited."""
        await sync_to_async(self.checkpoint)(state)

    async def acheckpoint_state(self) -> Any:
        """Return :attr:`checkpoint_state` from an ``async def`` handler (the read is awaited)."""
        return await sync_to_async(lambda: self.checkpoint_state)()

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Internal: call ``callback`` (once, from the thread that tells) when the run must stop.

        Called at once if it already must. The worker's event loop uses it to cancel an
        ``async def`` handler's task at its timeout, its cancel request or its lost lease.
        """
        self._on_stop.append(callback)
        if self._stop.is_set():
            callback()

    def _stopped(self) -> None:
        first = not self._stop.is_set()
        self._stop.set()
        if first:
            for callback in self._on_stop:
                callback()

    def _recording(self) -> tuple[RunRecorder, uuid.UUID]:
        if self.recorder is None or self.lease_token is None:
            raise JobQueueError(
                f"job {self.job_id}: this context records no progress or checkpoint (it was "
                "not made by a worker)"
            )
        return self.recorder, self.lease_token

    def mark_timed_out(self) -> None:
        """Internal: called by the worker when the run passes ``timeout_s``."""
        self._timed_out = True
        self._stopped()

    def mark_lease_lost(self) -> None:
        """Internal: called by the worker's heartbeat when the lease is found lost."""
        self._lease_lost = True
        self._stopped()

    def mark_cancel_requested(self) -> None:
        """Internal: called by the worker's heartbeat when a cancel request is seen."""
        self._cancel_requested = True
        self._stopped()
