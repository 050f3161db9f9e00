"""A side table the fault tests' handlers write: one row per run of a job."""

from django.db import models

from tests.testapp.startup_pause import pause_if_asked

pause_if_asked("models")


class Run(models.Model):
    """One run of a job's handler (written at its start)."""

    job_id = models.BigIntegerField(db_index=True)
    attempt = models.PositiveIntegerField()
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(auto_now_add=True)


class StepRun(models.Model):
    """One executed step of a checkpointed job (``jobs.checkpointed_steps``), committed with its
    checkpoint: a step counted twice ran twice."""

    job_id = models.BigIntegerField(db_index=True)
    step = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
