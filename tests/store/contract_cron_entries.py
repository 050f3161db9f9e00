"""Store contract for writing cron entries (mixed into StoreContract).

``save_cron_entry`` (by name: ``schedule()`` and the settings), ``edit_cron_entry`` (by id: the
admin), ``set_cron_entries_enabled`` and ``disable_cron_entries``: each writes on the store's own
alias and keeps the rule of ``next_fire_at``: a new entry, a changed schedule and a re-enabled
entry start from the first fire time after the store's clock; a disabled one has none.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from jobqueue.models import CronEntry
from jobqueue.settings.crontab import Schedule

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

T = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def values(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": "tick",
        "cron_expr": "*/5 * * * *",
        "timezone": "UTC",
        "queue": "q",
        "job_type": "tests.jobs.noop",
        "payload": {"a": 1},
        "priority": 0,
        "missed": "once",
        "missed_cap": 10,
        "enabled": True,
    }
    fields.update(overrides)
    return fields


def first_after(entry: CronEntry, now: datetime) -> datetime:
    return Schedule(entry.cron_expr, entry.timezone).next_after(now)


class CronEntryContract:
    alias: str

    def entry(self, name: str = "tick") -> CronEntry:
        return CronEntry.objects.using(self.alias).get(name=name)

    def test_save_cron_entry_creates_updates_and_leaves_an_unchanged_entry(self, store):
        created, outcome = store.save_cron_entry(values(), source="code")
        assert outcome == "created"
        row = self.entry()
        assert (row.id, row.source, row.payload) == (created.id, "code", {"a": 1})
        assert row.next_fire_at == first_after(row, row.created_at)

        assert store.save_cron_entry(values(), source="code")[1] == "unchanged"
        # An edit that leaves the schedule keeps the pending fire time.
        pending = T + timedelta(days=1)
        CronEntry.objects.using(self.alias).filter(id=row.id).update(next_fire_at=pending)
        assert store.save_cron_entry(values(priority=5), source="code")[1] == "updated"
        row = self.entry()
        assert (row.priority, row.next_fire_at) == (5, pending)
        # A changed expression restarts from the store's clock.
        assert store.save_cron_entry(values(cron_expr="0 * * * *"), source="code")[1] == "updated"
        row = self.entry()
        assert row.next_fire_at == first_after(row, row.updated_at)
        assert CronEntry.objects.using(self.alias).count() == 1

    def test_save_cron_entry_of_another_source_is_a_conflict_or_taken_over(self, store):
        store.save_cron_entry(values(), source="code")
        entry, outcome = store.save_cron_entry(
            values(priority=9), source="settings", replace_other=False
        )
        assert (outcome, entry.source) == ("conflict", "code")
        assert (self.entry().priority, self.entry().source) == (0, "code")
        assert store.save_cron_entry(values(priority=9), source="admin")[1] == "updated"
        assert (self.entry().priority, self.entry().source) == (9, "admin")

    def test_save_cron_entry_disabled_has_no_next_fire_time(self, store):
        store.save_cron_entry(values(enabled=False), source="code")
        assert self.entry().next_fire_at is None

    def test_edit_cron_entry_by_id_keeps_its_source_and_the_schedulers_fields(self, store):
        created, _ = store.save_cron_entry(values(), source="code")
        # The scheduler fires and counts meanwhile: the edit must not undo that.
        CronEntry.objects.using(self.alias).filter(id=created.id).update(
            last_fired_at=T, skipped_fires=3, next_fire_at=T + timedelta(minutes=5)
        )
        edited = store.edit_cron_entry(created.id, values(name="renamed", priority=7))
        row = self.entry("renamed")
        assert (edited.id, row.id, row.source, row.priority) == (created.id, created.id, "code", 7)
        assert (row.last_fired_at, row.skipped_fires) == (T, 3)
        assert row.next_fire_at == T + timedelta(minutes=5)
        assert row.updated_at >= created.updated_at
        store.edit_cron_entry(created.id, values(name="renamed", enabled=False))
        assert self.entry("renamed").next_fire_at is None
        store.edit_cron_entry(created.id, values(name="renamed", timezone="Europe/Berlin"))
        row = self.entry("renamed")
        assert row.next_fire_at == first_after(row, row.updated_at)

    def test_set_cron_entries_enabled_changes_only_those_not_so_already(self, store):
        for name in ("a", "b", "c"):
            store.save_cron_entry(values(name=name), source="admin")
        a, b = self.entry("a"), self.entry("b")
        assert store.set_cron_entries_enabled([a.id, b.id], False) == ["a", "b"]
        assert store.set_cron_entries_enabled([a.id, b.id], False) == []
        assert [self.entry(n).next_fire_at for n in ("a", "b")] == [None, None]
        assert self.entry("c").enabled is True
        # Re-enabled: from the next fire time after now, nothing missed is caught up.
        assert store.set_cron_entries_enabled([a.id], True) == ["a"]
        row = self.entry("a")
        assert row.enabled is True
        assert row.next_fire_at == first_after(row, row.updated_at)

    def test_disable_cron_entries_of_one_source_not_kept(self, store):
        for name, source in (("s1", "settings"), ("s2", "settings"), ("c1", "code")):
            store.save_cron_entry(values(name=name), source=source)
        assert store.disable_cron_entries("settings", keep=["s1"]) == ["s2"]
        assert store.disable_cron_entries("settings", keep=["s1"]) == []
        enabled = dict(CronEntry.objects.using(self.alias).values_list("name", "enabled"))
        assert enabled == {"s1": True, "s2": False, "c1": True}
        assert self.entry("s2").next_fire_at is None
