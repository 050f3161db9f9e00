"""The cron tables: entries, the fire times claimed, and the leader lease.

:class:`CronEntry` is a recurring job, :class:`CronFire` one fire time claimed (so it enqueues
once), :class:`LeaderLease` which process fires cron now.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobqueue import validation
from jobqueue.settings.crontab import validate_cron_expression, validate_timezone


class MissedPolicy(models.TextChoices):
    """What the scheduler does with fire times it reaches later than ``CRON_GRACE_SECONDS``."""

    # One job, for the latest missed fire time (none if an on-time fire is due anyway).
    ONCE = "once", "once: run the latest missed time"
    # No job; resume at the next fire time.
    SKIP = "skip", "skip: resume at the next time"
    # One job per missed fire time, the latest `missed_cap` of them, oldest first.
    ALL = "all", "all: run each missed time (up to the cap)"


class CronSource(models.TextChoices):
    """Who declared a cron entry; ``runworkers`` reconciles only the ``settings`` ones."""

    SETTINGS = "settings", "settings"
    CODE = "code", "code"
    ADMIN = "admin", "admin"


def validate_queue_field(value: str) -> None:
    """Raise ``ValidationError`` unless ``value`` is a valid queue name (a field validator)."""
    try:
        validation.validate_queue_name(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid_queue") from None


#: ``timezone.now``, under a name CronEntry's ``timezone`` field does not shadow.
_now = timezone.now


class CronEntry(models.Model):
    """A recurring job: a cron expression read in a time zone, and the job each fire enqueues.

    ``next_fire_at`` is the next fire time (an aware UTC instant) the scheduler has not handled
    yet; it only moves forward, computed from the previous fire time. Create entries with
    ``jobqueue.schedule``, in ``JOBQUEUE["CRON"]``, or in the admin.
    """

    name = models.CharField(max_length=200, unique=True)
    cron_expr = models.CharField(
        "cron expression",
        max_length=200,
        validators=[validate_cron_expression],
        help_text="5 fields (minute hour day month weekday), or 6 with leading seconds; "
        "read in the entry's time zone.",
    )
    timezone = models.CharField(
        "time zone",
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="Zone database name, e.g. Europe/Berlin.",
    )
    queue = models.CharField(max_length=100, default="default", validators=[validate_queue_field])
    job_type = models.CharField(max_length=200)
    payload = models.JSONField(
        default=dict, blank=True, help_text="Handler keyword arguments; fire_time is added."
    )
    priority = models.SmallIntegerField(default=0, help_text="-100..100; higher runs sooner.")
    enabled = models.BooleanField(default=True)
    missed = models.CharField(
        "missed runs", max_length=8, choices=MissedPolicy.choices, default=MissedPolicy.ONCE
    )
    missed_cap = models.PositiveIntegerField(
        default=10, help_text="With missed=all: most missed times run after downtime."
    )
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(
        null=True, blank=True, help_text="The latest fire time that enqueued a job."
    )
    skipped_fires = models.PositiveBigIntegerField(
        default=0, help_text="Fire times not run because of the missed-run policy."
    )
    source = models.CharField(max_length=8, choices=CronSource.choices, default=CronSource.CODE)
    created_at = models.DateTimeField(default=_now)
    updated_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["name"]
        verbose_name = "cron entry"
        verbose_name_plural = "cron entries"
        permissions = [("run_cronentry", "Can run a cron entry now")]
        indexes = [
            # The scheduler's "what is due" query.
            models.Index(
                fields=["next_fire_at"], name="jobqueue_cron_due", condition=Q(enabled=True)
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="jobqueue_cron_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(missed_cap__gte=1), name="jobqueue_cron_missed_cap_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class CronFire(models.Model):
    """One fire of a cron entry: (entry, fire time) happens once, and this row says it did.

    The row commits with the job it enqueued and outlives it: pruning or deleting finished jobs
    never reopens a fire time. ``job_id`` is a plain id (not a foreign key) for that reason.
    """

    entry = models.ForeignKey(CronEntry, on_delete=models.CASCADE, related_name="fires")
    fire_time = models.DateTimeField(help_text="The scheduled instant this fire serves (UTC).")
    job_id = models.BigIntegerField(null=True, blank=True)
    fired_at = models.DateTimeField(help_text="When the scheduler enqueued it (database clock).")
    fired_by = models.CharField(max_length=200, blank=True, default="")
    manual = models.BooleanField(default=False, help_text="Run now, from the admin or code.")

    class Meta:
        ordering = ["-fire_time"]
        verbose_name = "cron fire"
        constraints = [
            models.UniqueConstraint(fields=["entry", "fire_time"], name="jobqueue_cronfire_once"),
        ]
        indexes = [models.Index(fields=["fire_time"], name="jobqueue_cronfire_time")]

    def __str__(self) -> str:
        return f"{self.entry_id} @ {self.fire_time.isoformat()}"


class LeaderLease(models.Model):
    """Which process leads (fires cron) now. Renewed by its holder; taken over when expired.

    ``fencing_token`` goes up by one each time the lease changes hands; every fire presents
    holder and token, so a leader that was paused past its lease can no longer fire.
    """

    name = models.CharField(max_length=100, unique=True)
    holder = models.CharField(max_length=200)
    fencing_token = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()

    class Meta:
        verbose_name = "leader lease"

    def __str__(self) -> str:
        return f"{self.name}: {self.holder} (token {self.fencing_token})"
