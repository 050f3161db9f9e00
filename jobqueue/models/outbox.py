"""Internal: the ``OutboxEntry`` model (jobs waiting to be relayed), kept beside ``models.py``.

Import it from :mod:`jobqueue.models`. One row per job enqueued inside a transaction on this
database for a queue that lives on another one (``jobqueue.outbox``): it commits or rolls back with
the caller's rows. The workers of the queue's database (``target``) relay it there and delete it
(``jobqueue.maintenance.relay``). ``job_id`` was drawn from the target's job id sequence at enqueue,
so the relay inserts the job under that id: a second relay of the same row finds the id taken and
inserts nothing.

This table lives on every alias that may hold a caller's transaction (``OUTBOX_DATABASES``,
default every alias); the job tables live where the queues do.
"""

from __future__ import annotations

from django.db import models


class OutboxEntry(models.Model):
    """A job written in a caller's transaction, to be relayed to its queue's database."""

    #: The queue's database alias: where the relay inserts the job.
    target = models.CharField(max_length=100)
    #: The job's id on ``target``, drawn from its sequence at enqueue: the relay's dedupe identity.
    job_id = models.BigIntegerField()
    #: The job as the relay inserts it (enqueue_many.sql's fields; ``at``: its run_at).
    job = models.JSONField()
    #: When the caller wrote it (this database's clock): the relay's lag starts here.
    created_at = models.DateTimeField()

    class Meta:
        db_table = "jobqueue_outbox"
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"
        constraints = [
            models.UniqueConstraint(fields=["target", "job_id"], name="jobqueue_outbox_job"),
        ]
        indexes = [models.Index(fields=["target", "id"], name="jobqueue_outbox_relay")]

    def __str__(self) -> str:
        return f"job {self.job_id} for {self.target}"
