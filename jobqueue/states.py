"""Job states and the sets of them that the store and the admin reason about."""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    """Where a job is in its lifecycle (see DESIGN.md, "Job lifecycle")."""

    # In: enqueue with run_at <= now; operator retry; release at graceful shutdown.
    # Out: claim (-> leased), cancel.
    READY = "ready", "ready"
    # In: enqueue with run_at > now; nack or lease expiry with attempts left (a retry).
    # Out: claim once run_at <= now() (no promotion step), cancel.
    SCHEDULED = "scheduled", "scheduled"
    # In: claim. Out: ack, nack, lease expiry (reaper), release, cancel; each fenced on the token.
    LEASED = "leased", "leased"
    # In: ack. Final.
    SUCCEEDED = "succeeded", "succeeded"
    # In: nack/expiry with attempts spent, permanent error. Out: operator retry, cancel.
    DEAD = "dead", "dead"
    # In: cancel. Out: operator retry.
    CANCELLED = "cancelled", "cancelled"
    # In: enqueue with ``after=`` parents not all succeeded; a parent's operator retry (a
    # dependant its failure had cancelled). Out: the last parent succeeds (-> ready/scheduled,
    # in that parent's transaction), a parent ends dead or cancelled (-> cancelled), cancel.
    # Outside the claim index: waiting jobs cost claims nothing (jobqueue/store/interface.py,
    # "Jobs after other jobs").
    WAITING = "waiting", "waiting"


class DeadReason(models.TextChoices):
    """Why a job was dead-lettered."""

    ATTEMPTS_EXHAUSTED = "attempts_exhausted", "attempts exhausted"
    PERMANENT_ERROR = "permanent_error", "permanent error"
    TIMEOUT = "timeout", "timeout"
    UNKNOWN_TYPE = "unknown_type", "unknown job type"


#: States a claim may take a job from (when its run_at is due).
CLAIMABLE = frozenset({JobState.READY, JobState.SCHEDULED})
#: States in which a dedupe key is held.
LIVE = frozenset({JobState.READY, JobState.SCHEDULED, JobState.LEASED})
#: States no worker will move a job out of.
FINISHED = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED})
#: States an operator may cancel from. Cancelling a leased job fences its worker out.
CANCELLABLE = frozenset(
    {JobState.READY, JobState.SCHEDULED, JobState.LEASED, JobState.DEAD, JobState.WAITING}
)
#: States an operator may retry from.
RETRYABLE = frozenset({JobState.DEAD, JobState.CANCELLED})
#: Error-history kinds that end a run without a result: the handler failed (``error``), its
#: lease ran out (``lease_expired``: the reaper), its worker process died under the supervisor
#: (``process_died``: the hand-back, charged or not). ``Job.last_error`` and the admin's
#: timeline read these; operator actions, releases and deferrals are not failures.
FAILED_RUN_KINDS = frozenset({"error", "lease_expired", "process_died"})
