"""Database models. Migrations are the schema; the store layer does every hot-path write.

Use these models to read (the admin, your own reports). Change jobs only through the functions in
``jobqueue`` (``cancel``, ``retry``...), which keep the lease and token invariants.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobqueue import validation
from jobqueue.models.batches import Batch  # noqa: F401  (re-exported: its model module)
from jobqueue.models.breakers import BreakerState, DependencyBreaker, RetryBudget  # noqa: F401  (re-exported)
from jobqueue.models.gauges import GaugeSnapshot  # noqa: F401  (re-exported: its model module)
from jobqueue.models.outbox import OutboxEntry  # noqa: F401  (re-exported: its model module)
from jobqueue.models.parents import JobParent  # noqa: F401  (re-exported: its model module)
from jobqueue.models.pauses import Pause, PauseKind  # noqa: F401  (re-exported: its model module)
from jobqueue.models.rates import RateBucket  # noqa: F401  (re-exported: its model module)
from jobqueue.models.rollups import Rollup  # noqa: F401  (re-exported: its model module)
from jobqueue.settings.crontab import validate_cron_expression, validate_timezone
from jobqueue.states import CLAIMABLE, FINISHED, LIVE, DeadReason, JobState

_claimable = Q(state__in=sorted(CLAIMABLE))
_live = Q(state__in=sorted(LIVE))


class JobQuerySet(models.QuerySet["Job"]):
    """Read-side filters over jobs."""

    def claimable(self) -> JobQuerySet:
        """Return jobs a claim could take now (ready or scheduled, run_at due by this clock)."""
        return self.filter(_claimable, run_at__lte=timezone.now())

    def expired_leases(self) -> JobQuerySet:
        """Return leased jobs whose lease has run out by this process's clock."""
        return self.filter(state=JobState.LEASED, lease_until__lt=timezone.now())

    def for_tenant(self, tenant_id: str) -> JobQuerySet:
        """Return the jobs of one tenant."""
        return self.filter(tenant_id=tenant_id)


class Job(models.Model):
    """One unit of work: a job type, its JSON payload, and where it is in its lifecycle."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100, default="default")
    type = models.CharField("job type", max_length=200)
    payload = models.JSONField(default=dict)
    priority = models.SmallIntegerField(default=0, help_text="-100..100; higher runs sooner.")
    tenant_id = models.CharField(max_length=100, blank=True, default="")
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.READY)
    run_at = models.DateTimeField(help_text="Claimable from this time (database clock).")
    attempts = models.PositiveIntegerField(default=0, help_text="Claims so far.")
    max_attempts = models.PositiveIntegerField(default=8)
    timeout_s = models.FloatField("timeout (s)", default=30.0)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    leased_by = models.CharField(max_length=200, blank=True, default="")
    dedupe_key = models.CharField(max_length=200, null=True, blank=True)
    ordering_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        help_text="Jobs with the same key run one at a time, in enqueue order.",
    )
    # Concurrency limits (issue 18): at most concurrency_limit leased jobs of one key, all
    # workers; both fixed at enqueue (jobqueue/limits/concurrency.py). NULL: not limited.
    concurrency_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        help_text="At most concurrency_limit jobs of this key run at once, across all workers.",
    )
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True, help_text="One entry per failed attempt.")
    dead_reason = models.CharField(
        max_length=32, choices=DeadReason.choices, blank=True, default=""
    )
    result = models.JSONField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set when a running job is asked to cancel; it ends cancelled.",
    )
    suspect = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Its worker process died while it ran beside other jobs; it next runs alone.",
    )
    # Progress and checkpoint of a long handler (jobqueue.JobContext), and jobqueue.wait's mark.
    progress_done = models.BigIntegerField(null=True, blank=True, help_text="Steps done.")
    progress_total = models.BigIntegerField(null=True, blank=True, help_text="Steps in all.")
    checkpoint = models.JSONField(null=True, blank=True, help_text="The next attempt resumes.")
    checkpoint_at = models.DateTimeField(null=True, blank=True)
    watched = models.BooleanField(default=False, db_default=False, help_text="Waited on.")
    # Jobs enqueued after=[...] this one (JobParent rows): finishing it settles them. False for
    # every job nobody waits for, so their finish runs no trigger function (migration 0015).
    has_children = models.BooleanField(
        default=False, db_default=False, help_text="Other jobs wait for this one."
    )
    waiting_for = models.IntegerField(
        default=0, db_default=0, help_text="Parents that have not succeeded yet."
    )
    # jobqueue.batch(): the Batch this job belongs to. No foreign key: adding one would validate
    # every existing row under a lock (docs/upgrading.md); the batch row outlives its members.
    batch_id = models.BigIntegerField(null=True, blank=True, help_text="Its batch, if any.")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        permissions = [
            ("retry_job", "Can retry dead or cancelled jobs, or run scheduled jobs now"),
            ("cancel_job", "Can cancel jobs"),
        ]
        indexes = [
            # The claim: per queue and tenant, priority DESC, run_at, over claimable rows only,
            # so finished history never slows it down. tenant_id second lets the claim walk the
            # tenants that have work with one probe each (store/sql/claim.sql).
            models.Index(
                fields=["queue", "tenant_id", "-priority", "run_at", "id"],
                name="jobqueue_job_claim",
                condition=_claimable,
            ),
            # Leased jobs per tenant: the claim's fairness order and caps. Only leased rows.
            models.Index(
                fields=["tenant_id"],
                name="jobqueue_job_running",
                condition=Q(state=JobState.LEASED),
            ),
            # Ordering keys: the earliest live job of a key, and whether one is leased.
            models.Index(
                fields=["ordering_key", "id"],
                name="jobqueue_job_ordering",
                condition=_live & Q(ordering_key__isnull=False),
            ),
            # Ordering keys' followers: a job enqueued while its key has a job waits (state
            # waiting, off the claim index) for the key's last one, found here and in
            # jobqueue_job_ordering (store/sql/ordering_tail.sql; issue 15).
            models.Index(
                fields=["ordering_key", "id"],
                name="jobqueue_job_ordering_wait",
                condition=Q(state=JobState.WAITING) & Q(ordering_key__isnull=False),
            ),
            # Leased jobs per concurrency key: the claim's limit check. Only leased rows with a
            # key, so it holds at most one entry per running limited job.
            models.Index(
                fields=["concurrency_key"],
                name="jobqueue_job_conc_running",
                condition=Q(state=JobState.LEASED) & Q(concurrency_key__isnull=False),
            ),
            # The reaper: expired leases.
            models.Index(
                fields=["lease_until"],
                name="jobqueue_job_lease",
                condition=Q(state=JobState.LEASED),
            ),
            # Finished jobs by state and finish time: the pruner's range, the dead letters newest
            # first, and the admin dashboard's recent and dead counts. Live rows are not in it.
            models.Index(
                fields=["state", "finished_at"],
                name="jobqueue_job_finished",
                condition=Q(state__in=sorted(FINISHED)),
            ),
            # Dead letters by job type and queue: the dashboard's counts, the dead-letter page's
            # filters, and a bulk retry of one type. Only dead rows, so it stays small.
            models.Index(
                fields=["type", "queue"],
                name="jobqueue_job_dead",
                condition=Q(state=JobState.DEAD),
            ),
            # Waiting jobs (after=[...]) per queue: the status, metrics and dashboard counts.
            # Only waiting rows, so a site that never uses after= keeps it empty, and the claim
            # never reads it (waiting rows stay outside the claim index).
            models.Index(
                fields=["queue"],
                name="jobqueue_job_waiting",
                condition=Q(state=JobState.WAITING),
            ),
            # A batch's members (the admin's member list). Only batch members.
            models.Index(
                fields=["batch_id", "state"],
                name="jobqueue_job_batch",
                condition=Q(batch_id__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "dedupe_key"],
                name="jobqueue_job_live_dedupe_key",
                condition=_live & Q(dedupe_key__isnull=False),
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="jobqueue_job_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1), name="jobqueue_job_max_attempts_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.type} ({self.state})"

    @property
    def last_error(self) -> dict | None:
        """Return the newest failure entry of the error history, or None."""
        for entry in reversed(self.errors or []):
            if entry.get("kind", "error") in {"error", "lease_expired"}:
                return entry
        return None


_JobManager = models.Manager.from_queryset(JobQuerySet)


class DeadLetterManager(_JobManager["DeadLetter"]):
    """Only dead jobs (with Job's queryset methods, like ``Job.objects``)."""

    def get_queryset(self) -> models.QuerySet[DeadLetter]:
        """Return the jobs in state ``dead``."""
        return super().get_queryset().filter(state=JobState.DEAD)


class DeadLetter(Job):
    """A job that went ``dead``: its ``dead_reason`` and full ``errors`` history say why."""

    objects: ClassVar[DeadLetterManager] = DeadLetterManager()

    class Meta:
        proxy = True
        verbose_name = "dead letter"
        ordering = ["-finished_at"]


class QueueDashboard(Job):
    """No data: the site index lists models, so this puts the dashboard there (admin/jobs.py)."""

    class Meta:
        proxy = True
        verbose_name = "queue dashboard"
        verbose_name_plural = "queue dashboard"
        default_permissions = ()


class Worker(models.Model):
    """One running worker process, refreshed by its heartbeat and removed at clean exit."""

    worker_id = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    heartbeat_interval_s = models.FloatField(default=10.0)
    running_jobs = models.PositiveIntegerField(default=0, help_text="At its last heartbeat.")
    status = models.CharField(
        max_length=16,
        default="running",
        help_text="running, or draining (told to stop: claims nothing new).",
    )
    listener_up = models.BooleanField(
        null=True,
        blank=True,
        help_text="Its LISTEN connection is up (None: it polls, no LISTEN).",
    )

    class Meta:
        ordering = ["host", "pid"]

    def __str__(self) -> str:
        return self.worker_id

    @property
    def is_alive(self) -> bool:
        """Return True if the worker heartbeated within three of its heartbeat intervals."""
        silence = timedelta(seconds=3 * self.heartbeat_interval_s)
        return timezone.now() - self.last_seen_at <= silence

    @property
    def reported_status(self) -> str:
        """Return its status, or that it fell silent: a killed process never reports "stopped"."""
        if self.is_alive:
            return self.status
        return f"silent (last: {self.status})"


# -- cron ------------------------------------------------------------------------------------


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
