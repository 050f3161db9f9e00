"""Internal: the pause part of the store seam: pause and resume a queue or a job type.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_pauses.py``, the generic store in ``generic_pauses.py``. The claim of each store
reads the same rows (``jobqueue_pause``) and leaves the jobs they name where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    """One paused queue (``kind="queue"``) or job type (``kind="type"``)."""

    kind: str
    name: str
    paused_by: str
    #: When the pause began (database clock on PostgreSQL), aware.
    paused_at: datetime
    reason: str

    @classmethod
    def of(cls, row: Any) -> Paused:
        """Return the pause in ``row`` (a named row or a ``Pause`` model instance)."""
        return cls(
            kind=row.kind,
            name=row.name,
            paused_by=row.paused_by,
            paused_at=row.paused_at,
            reason=row.reason,
        )


class PauseStore(Protocol):
    """Pause and resume claims of a queue or a job type (every worker, every host)."""

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        """Stop every claim from taking jobs of queue (``kind="queue"``) or type ``name``.

        Running jobs are left alone and enqueue keeps working. Pausing what is paused already
        changes nothing: the first pause's ``by``, time and reason stand.

        Args:
            kind: ``"queue"`` or ``"type"``.
            name: the queue or job type name (validated by the caller).
            by: who paused it (a user name), for the record.
            reason: why, for the record (may be empty).

        Returns:
            ``(the pause in force, True if this call made it)``.
        """

    def resume(self, kind: str, name: str) -> Paused | None:
        """Let claims take jobs of queue or type ``name`` again, and wake idle workers for them.

        Returns:
            The pause that was lifted, or None when ``name`` was not paused.
        """

    def paused(self) -> list[Paused]:
        """Return every pause in force, by kind and name."""
