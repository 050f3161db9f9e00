"""Signals sent as jobs move through their lifecycle.

Every signal is sent with ``sender=Job`` (the :class:`jobqueue.models.Job` class), so a receiver
can be connected either way::

    from django.dispatch import receiver
    from jobqueue.models import Job
    from jobqueue.signals import job_dead

    @receiver(job_dead, sender=Job)
    def page_someone(sender, job_id, job_type, reason, error, **kwargs):
        ...

Always accept ``**kwargs``: arguments may be added. Where each one is sent:

* ``job_enqueued`` — by :func:`jobqueue.enqueue` and :func:`jobqueue.enqueue_many` (and so
  ``JobType.enqueue`` and the ``django.tasks`` backend) when it inserted a new row, in the
  caller's process and transaction: the row is not committed yet, so use
  ``transaction.on_commit`` for work that needs it visible.
  Not sent when a live job held the dedupe key (nothing new was enqueued). A receiver's exception
  propagates to the caller, as a model signal's does. Arguments: ``job_id``, ``job_type``,
  ``queue``, ``priority``, ``run_at`` (aware datetime, or None for "now"), ``tenant_id``,
  ``using`` (database alias).
* ``job_cancelled`` — when a job becomes ``cancelled``: by :func:`jobqueue.cancel` for a job that
  was not running (arguments: ``job_id``, ``using``), or by the worker when a running job whose
  cancel was requested ends (the worker's arguments below, plus ``using`` and ``status``, what
  the run reported). A cancel the reaper or a shutdown release completes sends nothing.

The rest are sent by the worker process running the job (``runworkers``). A receiver's exception
is logged (logger ``jobqueue.signals``) and never changes the job's outcome or stops the worker.
Each carries ``job_id``, ``job_type``, ``queue``, ``attempt`` (from 1), ``max_attempts`` and
``worker_id``, plus:

* ``job_started`` — in the handler's thread, just before the handler is called. Extra:
  ``context`` (the :class:`jobqueue.JobContext`).
* ``job_succeeded`` — after the ack was recorded. Extra: ``result`` (the stored JSON value),
  ``duration_s`` (seconds the handler ran).
* ``job_retrying`` — after a failed attempt was recorded and the job scheduled again. Extra:
  ``error`` (the error-history entry: ``type``, ``message``, ``traceback``...), ``delay_s``
  (seconds until the retry), ``duration_s``.
* ``job_dead`` — after the worker dead-lettered the job. Extra: ``error``, ``reason`` (a
  :class:`jobqueue.states.DeadReason` value), ``duration_s``. A lease that expires on its last
  attempt is dead-lettered by the reaper, which holds no run of the job: no signal then.
* ``job_lease_lost`` — the run ended but its outcome was discarded, because the lease was gone
  (the lease expired and the reaper or another worker took the job). Extra: ``status``, the
  outcome that was not recorded (``"succeeded"``, ``"retry"`` or ``"dead"``).
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = [
    "job_cancelled",
    "job_dead",
    "job_enqueued",
    "job_lease_lost",
    "job_retrying",
    "job_started",
    "job_succeeded",
]

job_enqueued = Signal()
job_started = Signal()
job_succeeded = Signal()
job_retrying = Signal()
job_dead = Signal()
job_lease_lost = Signal()
job_cancelled = Signal()
