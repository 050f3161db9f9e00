"""The limit tables: breakers, retry budgets, pauses and rate-limit buckets.

Dependency breakers and retry budgets, pauses (of a queue or a job type), and the token buckets
of rate limits. Only the store writes their rows.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class BreakerState(models.TextChoices):
    """Where a dependency's circuit breaker is (see ``jobqueue.limits.breakers``)."""

    # Jobs of the dependency run; failures are counted in the window. Out: threshold -> open.
    CLOSED = "closed", "closed"
    # Jobs of the dependency are deferred until open_until. Out: a probe is claimed -> half_open.
    OPEN = "open", "open"
    # One probe job runs. Out: its success -> closed; its failure -> open, longer cool-down.
    HALF_OPEN = "half_open", "half-open"


class DependencyBreaker(models.Model):
    """The circuit breaker of one dependency (``@job(dependency=...)``), shared by all workers.

    Every change is one SQL statement of the store, fenced on the row's own state, with the
    database clock; the admin changes it only through ``jobqueue.limits.breakers.open_breaker`` and
    ``close_breaker``.
    """

    name = models.CharField(max_length=100, unique=True)
    state = models.CharField(
        max_length=16, choices=BreakerState.choices, default=BreakerState.CLOSED
    )
    window_started_at = models.DateTimeField(
        default=timezone.now, help_text="Start of the window failures are counted in."
    )
    failures = models.PositiveIntegerField(default=0, help_text="Failures in the window.")
    successes = models.PositiveIntegerField(default=0, help_text="Successes in the window.")
    open_until = models.DateTimeField(
        null=True, blank=True, help_text="End of the cool-down; then one probe job may run."
    )
    cooldown_s = models.FloatField(
        "cool-down (s)", default=0.0, help_text="The current cool-down; doubles per failed probe."
    )
    probe_job_id = models.BigIntegerField(null=True, blank=True)
    probe_until = models.DateTimeField(
        null=True, blank=True, help_text="When an unanswered probe lapses and another may run."
    )
    opened_count = models.PositiveIntegerField("times opened", default=0)
    last_opened_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name = "dependency breaker"
        permissions = [("operate_dependencybreaker", "Can open or close circuit breakers")]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"


class RetryBudget(models.Model):
    """The retry token bucket of one queue (see ``jobqueue.limits.budgets``).

    ``tokens`` may go negative: that is the debt later retries wait off. The row appears with a
    queue's first retry; a queue without one has a full bucket.
    """

    queue = models.CharField(max_length=100, unique=True)
    tokens = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["queue"]
        verbose_name = "retry budget"

    def __str__(self) -> str:
        return f"{self.queue}: {self.tokens:.1f} tokens"


class PauseKind(models.TextChoices):
    """What a :class:`Pause` names."""

    QUEUE = "queue", "queue"
    TYPE = "type", "job type"


class Pause(models.Model):
    """A paused queue or job type: who paused it, when, and why. Enqueue keeps working."""

    kind = models.CharField(max_length=8, choices=PauseKind.choices, default=PauseKind.QUEUE)
    name = models.CharField(max_length=200, help_text="The queue name, or the job type name.")
    paused_by = models.CharField(max_length=200, blank=True, default="")
    paused_at = models.DateTimeField("paused since", default=timezone.now)
    reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["kind", "name"]
        verbose_name = "pause"
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="jobqueue_pause_kind_name"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name}"


class RateBucket(models.Model):
    """A limiter's tokens as of its last refill. Only the store writes rows."""

    key = models.CharField(max_length=300, primary_key=True)
    tokens = models.FloatField(help_text="Tokens left at refreshed_at.")
    refreshed_at = models.DateTimeField(help_text="Last refill (database clock).")

    class Meta:
        db_table = "jobqueue_rate_limit"
        ordering = ["key"]
        verbose_name = "rate limit bucket"

    def __str__(self) -> str:
        return self.key


class Lane(models.Model):
    """One (queue, tenant) lane's virtual time: what the claim's fair share is counted on.

    ``vtime`` is the virtual finish tag of the last job the lane was served (each job adds
    1 / the tenant's weight). The claim writes the rows (``store/sql/claim.sql``); a lane
    without a row is new and enters one job behind the front of its queue, so deleting rows (a
    tenant gone for good) is always safe. See docs/fairness.md.
    """

    queue = models.CharField(max_length=100)
    tenant_id = models.CharField(max_length=100, blank=True, default="")
    vtime = models.FloatField(default=0.0, help_text="Virtual time: jobs served / weight.")
    served_at = models.DateTimeField(
        default=timezone.now, help_text="Last served (database clock)."
    )

    class Meta:
        db_table = "jobqueue_lane"
        ordering = ["queue", "tenant_id"]
        verbose_name = "lane"
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "tenant_id"], name="jobqueue_lane_queue_tenant"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.tenant_id or '-'}"
