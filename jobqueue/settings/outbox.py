"""The outbox's settings, parsed (a leaf: no Django, no DB).

``JOBQUEUE["OUTBOX_DATABASES"]``: the database aliases that hold an outbox table (its rows are
jobs enqueued inside a transaction on that alias for a queue that lives on another one), and
that the workers relay from. Default ``["default"]``; ``[]`` turns the outbox off.

``JOBQUEUE["QUEUE_DATABASES"]`` is parsed here too, on this branch only: a stub of issue 16
part 2 (``jobqueue/routing.py``), to be replaced by that part's own parser at merge.
"""

from __future__ import annotations

from typing import Any

from jobqueue.errors import JobQueueConfigurationError

__all__ = [
    "DEFAULT_OUTBOX_DATABASES",
    "DEFAULT_OUTBOX_RELAY_INTERVAL_SECONDS",
    "parse_outbox_databases",
]

DEFAULT_OUTBOX_DATABASES: tuple[str, ...] = ("default",)
"""The database aliases whose transactions enqueue may join through an outbox table (a job for
a queue on another database waits there until a worker relays it). Each needs the table
(``migrate --database``). ``[]`` turns the outbox off: enqueue then always writes directly."""

DEFAULT_OUTBOX_RELAY_INTERVAL_SECONDS = 0.2
"""How often each worker looks for outbox rows (jobs enqueued inside a transaction on another
database) to relay to its queue database, seconds, besides the NOTIFY that wakes it at the
caller's commit on PostgreSQL (``jobqueue.maintenance.relay``): without that, the lag is about half
of it."""


def _alias_list(where: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise JobQueueConfigurationError(
            f"{where} must be an alias or a non-empty list of aliases, got {value!r}"
        )
    for item in items:
        if not isinstance(item, str) or not item:
            raise JobQueueConfigurationError(
                f"{where} items must be database aliases (non-empty strings), got {item!r}"
            )
    return tuple(items)


def parse_outbox_databases(value: Any) -> tuple[str, ...]:
    """Validate ``JOBQUEUE["OUTBOX_DATABASES"]``: an alias or a list of aliases (maybe empty).

    Whether the aliases are in ``DATABASES`` is checked by ``manage.py check``.

    Returns:
        The aliases, in the given order, duplicates dropped.

    Raises:
        JobQueueConfigurationError: not an alias or a list of aliases.
    """
    if isinstance(value, (list, tuple)) and not value:
        return ()
    return tuple(dict.fromkeys(_alias_list("JOBQUEUE['OUTBOX_DATABASES']", value)))
