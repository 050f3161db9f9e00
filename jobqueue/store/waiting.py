"""Internal: the PostgreSQL side of ``jobqueue.wait``: LISTEN for a job's finish.

``jobqueue.wait`` opens a :class:`FinishListener` (its own psycopg connection, LISTENing on
:data:`~jobqueue.store.interface.FINISHED_CHANNEL`), then marks the job as watched
(``Store.watch``): from then on the statement that finishes it notifies at commit (migration
0013_progress's trigger), and the waiter reads the row again only when told, or after a long
safety interval. Listening before marking leaves no gap: a job that finishes between the two is
seen finished by ``watch`` itself.
"""

from __future__ import annotations

import time
from typing import Any

try:
    import psycopg
except ImportError:  # SQLite only: wait() polls, and never builds a listener
    psycopg = None  # type: ignore[assignment]

from jobqueue.store.interface import FINISHED_CHANNEL
from jobqueue.store.notify import listen_connection_params


class FinishListener:
    """A LISTEN on the finished channel, for one waiter; :meth:`close` it when done.

    Args:
        alias: database alias of the job (PostgreSQL, not through a transaction pooler).
        name: the connection's ``application_name``.

    Raises:
        psycopg.Error: the connection could not be opened (the caller falls back to polling).
        RuntimeError: psycopg is not installed.
    """

    def __init__(self, alias: str, name: str = "jobqueue-wait") -> None:
        if psycopg is None:
            raise RuntimeError("LISTEN needs psycopg")
        self._conn: Any = psycopg.connect(
            **listen_connection_params(alias), autocommit=True, application_name=name[:63]
        )
        self._conn.execute(f"LISTEN {FINISHED_CHANNEL}")

    def close(self) -> None:
        """Close the listening connection."""
        self._conn.close()

    def wait_for(self, job_id: int, timeout_s: float) -> bool:
        """Block until a notification names ``job_id``, or ``timeout_s`` seconds pass.

        Returns:
            True when ``job_id`` was notified, False when the time ran out first.
        """
        wanted = str(job_id)
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for notify in self._conn.notifies(timeout=left, stop_after=1):
                if notify.payload == wanted:
                    return True
