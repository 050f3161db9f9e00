"""A database router for jobqueue's tables, for ``DATABASE_ROUTERS``.

``DATABASE_ROUTERS = ["jobqueue.routers.QueueDatabaseRouter"]`` makes ``migrate --database X``
create jobqueue's tables on ``X`` only when a queue lives there (``JOBQUEUE["QUEUE_DATABASES"]``,
:func:`jobqueue.routing.all_queue_aliases`), when ``X`` holds callers' transactions whose
enqueues go through the outbox (``JOBQUEUE["OUTBOX_DATABASES"]``: its ``jobqueue_outbox``
table), or ``X`` is ``default``, and nowhere else. All of jobqueue's tables go together: its
migrations hold triggers and SQL of their own that a per-model split would break. It has
no opinion on other apps, nor on reads and writes: jobqueue names the alias of every statement
itself.
"""

from __future__ import annotations

from typing import Any

from jobqueue.routing import all_queue_aliases
from jobqueue.settings.conf import get_settings

__all__ = ["QueueDatabaseRouter"]

APP_LABEL = "jobqueue"


class QueueDatabaseRouter:
    """Migrate jobqueue's models on the queue databases (and ``default``), and only there."""

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        """Return whether jobqueue's migrations run on ``db``; None (no opinion) for other apps.

        Args:
            db: the alias ``migrate`` runs on.
            app_label: the migrated model's app.
            model_name: the model (unused: all of jobqueue's tables go together).
            **hints: Django's hints (unused).

        Returns:
            True or False for ``app_label == "jobqueue"``, else None.

        Raises:
            JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
        """
        if app_label != APP_LABEL:
            return None
        return db == "default" or db in all_queue_aliases() or db in get_settings().outbox_databases
