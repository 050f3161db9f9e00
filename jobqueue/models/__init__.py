"""Database models, one module per table family; migrations are the schema.

The store layer does every hot-path write.

Use these models to read (the admin, your own reports). Change jobs only through the functions in
``jobqueue`` (``cancel``, ``retry``...), which keep the lease and token invariants.

``jobqueue.models`` is the public path of every model; ``validate_queue_field`` is named here by
migration 0004.
"""

from jobqueue.models.batches import Batch
from jobqueue.models.cron import (
    CronEntry,
    CronFire,
    CronSource,
    LeaderLease,
    MissedPolicy,
    validate_queue_field,
)
from jobqueue.models.jobs import (
    DeadLetter,
    DeadLetterManager,
    Job,
    JobParent,
    JobQuerySet,
    QueueDashboard,
)
from jobqueue.models.limits import (
    BreakerState,
    DependencyBreaker,
    Lane,
    Pause,
    PauseKind,
    RateBucket,
    RetryBudget,
)
from jobqueue.models.metrics import GaugeSnapshot, Rollup
from jobqueue.models.outbox import OutboxEntry
from jobqueue.models.workers import Worker

__all__ = [
    "Batch",
    "BreakerState",
    "CronEntry",
    "CronFire",
    "CronSource",
    "DeadLetter",
    "DeadLetterManager",
    "DependencyBreaker",
    "GaugeSnapshot",
    "Job",
    "JobParent",
    "JobQuerySet",
    "Lane",
    "LeaderLease",
    "MissedPolicy",
    "OutboxEntry",
    "Pause",
    "PauseKind",
    "QueueDashboard",
    "RateBucket",
    "RetryBudget",
    "Rollup",
    "Worker",
    "validate_queue_field",
]
