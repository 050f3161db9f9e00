"""Internal: the PostgreSQL driver. Runs the statements in ``store/sql/`` on a Django connection.

Each public method is one statement (``reap`` is two, in one transaction) and runs in the
caller's transaction when there is one, so an enqueue commits or rolls back with the caller's
business data. A transaction the store opens itself (a statement in autocommit included) runs
under the transaction limits (``bounded.py``); a caller's transaction, and an enqueue, get none.

One module per area, each a class that receives the :class:`~jobqueue.store.postgres.db.Executor`:
``jobs.py`` (enqueue and claims), ``finishing.py``, ``cron.py``, ``flows.py`` (parents,
batches, progress), ``limits.py`` (breakers, budgets, rate limits, pauses), ``operator.py``,
``metrics.py`` (gauges, rollups), ``outbox.py``. :class:`PostgresStore` is their composition:
the areas share the one executor and call each other's operations through the store.
"""

from __future__ import annotations

from jobqueue.store.composed import ComposedStore
from jobqueue.store.postgres.cron import PostgresCron
from jobqueue.store.postgres.db import Executor
from jobqueue.store.postgres.finishing import PostgresFinishing
from jobqueue.store.postgres.flows import PostgresFlows
from jobqueue.store.postgres.jobs import PostgresJobs
from jobqueue.store.postgres.limits import PostgresLimits
from jobqueue.store.postgres.metrics import PostgresMetrics
from jobqueue.store.postgres.operator import PostgresOperator
from jobqueue.store.postgres.outbox import PostgresOutbox


class PostgresStore(ComposedStore):
    """The queue on PostgreSQL: SKIP LOCKED claims, fenced writes, batch heartbeats.

    A composition of the areas, which share one executor; each operation of
    :class:`~jobqueue.store.interface.Store` is delegated to the area that owns it.
    """

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias
        db = Executor(alias)
        self.finishing = PostgresFinishing(db)
        self.flows = PostgresFlows(db)
        self.limits = PostgresLimits(db)
        self.metrics = PostgresMetrics(db)
        self.jobs = PostgresJobs(db, self, self.flows, self.limits, self.finishing)
        self.cron = PostgresCron(db)
        self.operator = PostgresOperator(db)
        self.outbox = PostgresOutbox(db)
