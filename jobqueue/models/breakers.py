"""The dependencies' circuit breakers and the queues' retry budgets (re-exported by ``models``).

In a module of its own to keep ``models.py`` small; the app's models are still
``jobqueue.models.*`` (the app label is the same, so the migrations do not change).
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
