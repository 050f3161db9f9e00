"""Internal: pause and resume on the ORM. A mixin of :class:`~jobqueue.store.generic.GenericStore`.

No wake-up on resume: the generic store has no LISTEN/NOTIFY, workers find the jobs at their
next poll (``POLL_INTERVAL_SECONDS``).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from jobqueue.models import Pause
from jobqueue.store.interface import Paused


class GenericPauseStore:
    """pause, resume, paused on the ORM; the host class provides ``alias``."""

    alias: str

    def pause(self, kind: str, name: str, by: str, reason: str = "") -> tuple[Paused, bool]:
        rows = Pause.objects.using(self.alias)
        try:
            # A savepoint: a concurrent pause's row (the unique constraint) aborts only this.
            with transaction.atomic(using=self.alias):
                created = rows.create(kind=kind, name=name, paused_by=by, reason=reason)
            return Paused.of(created), True
        except IntegrityError:
            return Paused.of(rows.get(kind=kind, name=name)), False

    def resume(self, kind: str, name: str) -> Paused | None:
        with transaction.atomic(using=self.alias):
            row = Pause.objects.using(self.alias).filter(kind=kind, name=name).first()
            if row is None:
                return None
            Pause.objects.using(self.alias).filter(id=row.id).delete()
        return Paused.of(row)

    def paused(self) -> list[Paused]:
        return [Paused.of(p) for p in Pause.objects.using(self.alias).order_by("kind", "name")]

    def _paused_names(self) -> tuple[set[str], set[str]]:
        """Return ``(paused queues, paused job types)`` for the claim."""
        queues: set[str] = set()
        types: set[str] = set()
        for kind, name in Pause.objects.using(self.alias).values_list("kind", "name"):
            (queues if kind == "queue" else types).add(name)
        return queues, types
