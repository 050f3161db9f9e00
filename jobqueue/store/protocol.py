"""Internal: the store seam, whole: one Protocol composed of the parts its callers use.

Callers (client, consumer, worker, cron, breakers, budgets, pruning, deaths) type against
:class:`Store`; :func:`~jobqueue.store.get_store` returns one, so mypy checks that both
``PostgresStore`` and ``GenericStore`` implement all of it, and tests/store/test_contract.py
checks that both take the same parameters for every member. The parts live beside their value
objects: jobs (``base.py``), operator (``operator.py``), cron and leader lease (``cron.py``),
breakers and budgets (``breakers.py``), worker rows (``workers.py``), pauses (``pauses.py``),
the metrics' gauges (``gauges.py``).
progress and checkpoints (``progress.py``).
the per-minute rollup (``rollups.py``), the rate limiters (``ratelimits.py``).
jobs enqueued after other jobs (``parents.py``), batches (``batches.py``),
the transactional outbox (``outbox.py``).
The composite lives here, not in ``base.py``, because ``cron.py`` takes
:class:`~jobqueue.store.base.NewJob` from there.
"""

from __future__ import annotations

from typing import Protocol

from jobqueue.store.base import JobStore
from jobqueue.store.batches import BatchStore
from jobqueue.store.breakers import DependencyStore
from jobqueue.store.cron import CronStore
from jobqueue.store.gauges import GaugeStore
from jobqueue.store.operator import OperatorStore
from jobqueue.store.outbox import OutboxStore
from jobqueue.store.parents import ParentStore
from jobqueue.store.pauses import PauseStore
from jobqueue.store.progress import ProgressStore
from jobqueue.store.ratelimits import RateLimitStore
from jobqueue.store.rollups import RollupStore
from jobqueue.store.workers import WorkerStore


class Store(
    JobStore,
    OperatorStore,
    CronStore,
    DependencyStore,
    WorkerStore,
    PauseStore,
    OutboxStore,
    GaugeStore,
    ProgressStore,
    RateLimitStore,
    RollupStore,
    ParentStore,
    BatchStore,
    Protocol,
):
    """Everything jobqueue asks of a store, on one database alias (``alias``)."""

    alias: str
