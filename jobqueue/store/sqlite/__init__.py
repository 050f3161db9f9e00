"""Internal: the ORM driver, for SQLite (the zero-setup default) and other Django databases.

It keeps the same contract as the PostgreSQL driver, with these costs: a claim is a short
transaction of a few statements instead of one, and time comes from this process's clock
(``django.utils.timezone.now``), since SQLite has no shared server clock. On SQLite, configure
``OPTIONS = {"transaction_mode": "IMMEDIATE", "timeout": 30}`` so writers queue for the lock
instead of failing with "database is locked"; SQLite serializes writers, which is what keeps two
claims from taking the same job.

One module per area, as in ``store/postgres/``, each a class that receives the
:class:`~jobqueue.store.sqlite.db.Executor`; :class:`GenericStore` is their composition.
"""

from __future__ import annotations

from jobqueue.store.composed import ComposedStore
from jobqueue.store.sqlite.cron import GenericCron
from jobqueue.store.sqlite.db import Executor
from jobqueue.store.sqlite.finishing import GenericFinishing
from jobqueue.store.sqlite.flows import GenericFlows
from jobqueue.store.sqlite.jobs import GenericJobs
from jobqueue.store.sqlite.limits import GenericLimits
from jobqueue.store.sqlite.metrics import GenericMetrics
from jobqueue.store.sqlite.operator import GenericOperator
from jobqueue.store.sqlite.outbox import GenericOutbox


class GenericStore(ComposedStore):
    """The queue on any Django database through the ORM.

    A composition of the areas, which share one executor; each operation of
    :class:`~jobqueue.store.interface.Store` is delegated to the area that owns it.
    """

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias
        db = Executor(alias)
        self.flows = GenericFlows(db)
        self.limits = GenericLimits(db)
        self.metrics = GenericMetrics(db)
        self.finishing = GenericFinishing(db, self.flows, self.metrics)
        self.jobs = GenericJobs(db, self, self.flows, self.limits, self.finishing)
        self.cron = GenericCron(db, self)
        self.operator = GenericOperator(db, self.flows)
        self.outbox = GenericOutbox(db)
