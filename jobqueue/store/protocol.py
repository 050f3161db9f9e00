"""Internal: the store seam, whole: one Protocol composed of the parts its callers use.

Callers (client, consumer, worker, cron, breakers, budgets, pruning, deaths) type against
:class:`Store`; :func:`~jobqueue.store.get_store` returns one, so mypy checks that both
``PostgresStore`` and ``GenericStore`` implement all of it, and tests/test_store_contract.py
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

from .base import JobStore
from .batches import BatchStore
from .breakers import DependencyStore
from .cron import CronStore
from .gauges import GaugeStore
from .operator import OperatorStore
from .outbox import OutboxStore
from .parents import ParentStore
from .pauses import PauseStore
from .progress import ProgressStore
from .ratelimits import RateLimitStore
from .rollups import RollupStore
from .workers import WorkerStore


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
