"""The job tables: jobs, their proxies, and the dependency edges between them.

:class:`Job` is one row per job; :class:`DeadLetter` and :class:`QueueDashboard` are its proxies;
:class:`JobParent` holds the edges between jobs.

Use these models to read (the admin, your own reports). Change jobs only through the functions in
``jobqueue`` (``cancel``, ``retry``...), which keep the lease and token invariants.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from jobqueue.states import CLAIMABLE, FAILED_RUN_KINDS, FINISHED, LIVE, DeadReason, JobState

_claimable = Q(state__in=sorted(CLAIMABLE))
_live = Q(state__in=sorted(LIVE))


class JobQuerySet(models.QuerySet["Job"]):
    """Read-side filters over jobs."""

    def claimable(self) -> JobQuerySet:
        """Return jobs a claim could take now (ready or scheduled, run_at due: database clock)."""
        return self.filter(_claimable, run_at__lte=Now())

    def expired_leases(self) -> JobQuerySet:
        """Return leased jobs whose lease has run out by the database clock."""
        return self.filter(state=JobState.LEASED, lease_until__lt=Now())

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
    # The W3C trace context of the enqueue's producer span (jobqueue/tracing.py), when
    # OpenTelemetry traced it: {"traceparent": ..., "tracestate": ...}. NULL otherwise.
    trace = models.JSONField(
        null=True, blank=True, help_text="W3C trace context of the enqueue (OpenTelemetry)."
    )
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
            # The claim's probe of a lane's rate-limited types: one seek per type (without it
            # the probe read the lane's whole backlog whenever it held none of those types).
            # The claimable states as a range (exactly ready and scheduled: no other state sorts
            # between them, tests/limits/test_rates.py), so that only this index, not the one
            # above, matches the probe (store/sql/claim.sql).
            models.Index(
                fields=["queue", "tenant_id", "type", "-priority", "run_at", "id"],
                name="jobqueue_job_claim_type",
                condition=Q(state__gte=JobState.READY, state__lte=JobState.SCHEDULED),
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
            # jobqueue_job_ordering (store/sql/enqueue_in_order.sql; issue 15).
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
        """Return the newest entry of the error history that ended a run unfinished, or None.

        A run ends so when its handler fails, its lease runs out, or its worker process dies
        (``jobqueue.states.FAILED_RUN_KINDS``).
        """
        for entry in reversed(self.errors or []):
            if entry.get("kind", "error") in FAILED_RUN_KINDS:
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


class JobParent(models.Model):
    """One parent of one waiting (or released) job."""

    id = models.BigAutoField(primary_key=True)
    parent_id = models.BigIntegerField()
    child_id = models.BigIntegerField()
    counted = models.BooleanField(
        default=False, help_text="The parent's outcome was taken off the child's waiting_for."
    )
    run_on_parent_failure = models.BooleanField(
        default=False, help_text="The child runs even if this parent ends dead or cancelled."
    )
    takes_parent_results = models.BooleanField(
        default=False, help_text="The child gets its parents' results as parent_results."
    )

    class Meta:
        verbose_name = "job parent"
        constraints = [
            # One edge per pair; also the index a finishing parent's children are found by.
            models.UniqueConstraint(fields=["parent_id", "child_id"], name="jobqueue_parent_edge")
        ]
        indexes = [models.Index(fields=["child_id", "parent_id"], name="jobqueue_parent_child")]

    def __str__(self) -> str:
        return f"#{self.child_id} after #{self.parent_id}"
