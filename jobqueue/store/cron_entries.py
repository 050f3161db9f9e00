"""Internal: the writes of cron entries (a base of both drivers' cron areas), through the ORM.

Entries are written rarely (``schedule()``, the settings at start, the admin), so one ORM
implementation serves the PostgreSQL store and the generic store alike; the host store gives
``alias`` and its clock, ``db_now()``. Each method is one short transaction that locks the rows
it changes, so two writers (two workers reconciling the settings, an admin edit) never lose an
update, and the scheduler's compare-and-set (:meth:`Store.advance_cron`) sees an edit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from jobqueue.models import CronEntry
from jobqueue.settings.crontab import Schedule

#: A change to one of these restarts the schedule from the next fire time after now.
SCHEDULE_FIELDS = ("cron_expr", "timezone")
#: The fields a writer of an entry sets (the scheduler owns the rest).
ENTRY_FIELDS = (
    "cron_expr",
    "timezone",
    "queue",
    "job_type",
    "payload",
    "priority",
    "missed",
    "missed_cap",
    "enabled",
)


def refresh_next_fire(entry: CronEntry, *, was: Mapping[str, Any] | None, now: datetime) -> None:
    """Set ``entry.next_fire_at`` after a create or an edit (``was``: the old field values).

    A new entry, a changed expression or zone, and a re-enabled entry start from the first
    fire time after ``now`` (nothing missed while disabled is caught up); a disabled entry has
    none. Any other edit keeps the pending fire time.

    Args:
        entry: the entry, with its new field values.
        was: the old values of at least ``cron_expr``, ``timezone`` and ``enabled``; None for
            a new entry.
        now: the store's clock.
    """
    if not entry.enabled:
        entry.next_fire_at = None
        return
    changed = was is None or any(was[f] != getattr(entry, f) for f in SCHEDULE_FIELDS)
    if changed or (was is not None and not was["enabled"]) or entry.next_fire_at is None:
        entry.next_fire_at = Schedule(entry.cron_expr, entry.timezone).next_after(now)


class CronEntryWrites:
    """Create, edit, enable and disable cron entries; the host store gives ``alias``."""

    alias: str

    def db_now(self) -> datetime:
        """Return the host store's clock (each store overrides this)."""
        raise NotImplementedError

    def save_cron_entry(
        self, values: Mapping[str, Any], *, source: str, replace_other: bool = True
    ) -> tuple[CronEntry, str]:
        """Create or update the entry named ``values["name"]``; return it and what happened.

        Args:
            values: validated fields (``name`` and :data:`ENTRY_FIELDS`).
            source: ``settings``, ``code`` or ``admin``; the entry takes it.
            replace_other: update an entry of another source (False: leave it, "conflict").

        Returns:
            ``(entry, outcome)`` with outcome ``created``, ``updated``, ``unchanged`` or
            ``conflict``.

        Raises:
            IntegrityError: three tries in a row lost a race with competing creators.
        """
        entries = CronEntry.objects.using(self.alias)
        fields = {f: values[f] for f in ENTRY_FIELDS}
        for _ in range(3):
            try:
                with transaction.atomic(using=self.alias):
                    now = self.db_now()
                    entry = entries.select_for_update().filter(name=values["name"]).first()
                    if entry is None:
                        entry = CronEntry(
                            name=values["name"],
                            source=source,
                            created_at=now,
                            updated_at=now,
                            **fields,
                        )
                        refresh_next_fire(entry, was=None, now=now)
                        entry.save(using=self.alias, force_insert=True)
                        return entry, "created"
                    if entry.source != source and not replace_other:
                        return entry, "conflict"
                    was = {f: getattr(entry, f) for f in ENTRY_FIELDS}
                    if was == fields and entry.source == source:
                        return entry, "unchanged"
                    for f, value in fields.items():
                        setattr(entry, f, value)
                    entry.source = source
                    entry.updated_at = now
                    refresh_next_fire(entry, was=was, now=now)
                    entry.save(using=self.alias)
                    return entry, "updated"
            except IntegrityError:
                continue  # created by a competitor meanwhile: update it
        raise IntegrityError(f"could not save cron entry {values['name']!r}")

    def edit_cron_entry(self, entry_id: int, values: Mapping[str, Any]) -> CronEntry:
        """Set an entry's name and :data:`ENTRY_FIELDS` by id; its source stays.

        Only those fields, ``updated_at`` and ``next_fire_at`` (:func:`refresh_next_fire`) are
        written: what the scheduler wrote meanwhile (last fire, skipped count) stays.

        Raises:
            CronEntry.DoesNotExist: no entry has this id.
            IntegrityError: another entry has the new name.
        """
        with transaction.atomic(using=self.alias):
            now = self.db_now()
            entry = CronEntry.objects.using(self.alias).select_for_update().get(pk=entry_id)
            was = {f: getattr(entry, f) for f in ENTRY_FIELDS}
            entry.name = values["name"]
            for f in ENTRY_FIELDS:
                setattr(entry, f, values[f])
            entry.updated_at = now
            refresh_next_fire(entry, was=was, now=now)
            fields = ["name", *ENTRY_FIELDS, "next_fire_at", "updated_at"]
            entry.save(using=self.alias, update_fields=fields)
        return entry

    def set_cron_entries_enabled(self, entry_ids: Collection[int], enabled: bool) -> list[str]:
        """Enable or disable the entries ``entry_ids`` that are not so already.

        An enabled entry starts from its next fire time after now (nothing missed while it was
        disabled is caught up); a disabled one has no next fire time.

        Returns:
            The names of the entries changed, by name.
        """
        done = []
        with transaction.atomic(using=self.alias):
            now = self.db_now()
            rows = (
                CronEntry.objects.using(self.alias)
                .select_for_update()
                .filter(pk__in=list(entry_ids))
                .exclude(enabled=enabled)
                .order_by("name")
            )
            for entry in rows:
                was = {f: getattr(entry, f) for f in (*SCHEDULE_FIELDS, "enabled")}
                entry.enabled = enabled
                entry.updated_at = now
                refresh_next_fire(entry, was=was, now=now)
                fields = ["enabled", "next_fire_at", "updated_at"]
                entry.save(using=self.alias, update_fields=fields)
                done.append(entry.name)
        return done

    def disable_cron_entries(self, source: str, keep: Collection[str]) -> list[str]:
        """Disable the enabled entries of ``source`` whose names are not in ``keep``.

        Returns:
            The names of the entries disabled, by name.
        """
        done = []
        with transaction.atomic(using=self.alias):
            rows = (
                CronEntry.objects.using(self.alias)
                .select_for_update()
                .filter(source=source, enabled=True)
                .exclude(name__in=list(keep))
                .order_by("name")
            )
            for entry in rows:
                entry.enabled = False
                entry.next_fire_at = None
                entry.save(using=self.alias, update_fields=["enabled", "next_fire_at"])
                done.append(entry.name)
        return done

    def delete_cron_entries(self, entry_ids: Collection[int]) -> list[str]:
        """Delete the entries ``entry_ids``; their fire records go with them (the jobs stay).

        Returns:
            The names of the entries deleted, by name.
        """
        with transaction.atomic(using=self.alias):
            rows = CronEntry.objects.using(self.alias).filter(pk__in=list(entry_ids))
            names = sorted(rows.values_list("name", flat=True))
            rows.delete()
        return names
