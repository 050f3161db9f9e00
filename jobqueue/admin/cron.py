"""Admin for cron entries: the schedule at a glance, enable / disable / run now, recent fires.

Entries are rows of each queue database: the list shows the selected one's (``?db=``) and its
actions act there. Times are shown in each entry's own zone (the zone its cron fields are read in).
Saving goes through the same validation as ``jobqueue.schedule``: a bad expression, an unknown zone
or a reserved payload key is a form error and nothing is written. "Run now" enqueues through the
firing path (a manual fire record), without moving the schedule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from jobqueue.admin.databases import QueueDatabaseMixin, with_db
from jobqueue.admin.display import format_time, json_block, time_column
from jobqueue.admin.inputs import InputGuardMixin
from jobqueue.cron import entries as cron
from jobqueue.cron.firing import run_now
from jobqueue.errors import InvalidCronExpression, InvalidJobOption, InvalidPayload
from jobqueue.masking import mask, unmask
from jobqueue.models import CronEntry, CronFire, CronSource, Job
from jobqueue.ops.clock import db_now
from jobqueue.routing import queue_alias
from jobqueue.settings.crontab import Schedule, zone

#: Fire records shown on an entry's change page.
RECENT_FIRES = 20
#: Upcoming fire times shown in the list.
UPCOMING = 5
#: Columns of the recent-fires table.
FIRE_COLUMNS = ("fire time", "kind", "job", "job state", "fired at", "by")


def local(value: datetime | None, timezone: str) -> SafeString:
    """Format an instant in ``timezone`` with :func:`~jobqueue.admin.display.format_time`.

    ``2027-03-28 03:00:00 CEST``: the entry's own zone, resolved here.

    Args:
        value: an aware instant, or None (shown as ``-``).
        timezone: an IANA zone name (an unknown one shows the instant in the current zone).
    """
    try:
        tz = zone(timezone)
    except ValueError:
        tz = None
    return format_time(value, zone=tz)


#: The fields a person edits: the name and the fields every writer of an entry sets (the rest is
#: the scheduler's; the list is the store's, ``jobqueue.store.cron_entries``).
ENTRY_FIELDS = ["name", *cron.ENTRY_FIELDS]


class CronEntryForm(forms.ModelForm):
    """The entry form, validated like ``jobqueue.schedule`` (errors land on their fields)."""

    class Meta:
        model = CronEntry
        fields = ENTRY_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and "payload" in self.fields:
            # ADMIN_MASKED_KEYS: the form shows ******** for masked values; clean() puts the
            # stored value back for each one left as it was.
            self.initial["payload"] = mask(self.instance.payload)

    def clean(self) -> dict[str, Any]:
        """Run :func:`jobqueue.cron.validate_entry` on the fields that passed their own checks."""
        # ModelForm.clean returns cleaned_data; django-stubs types it as Form.clean (dict | None).
        data = cast(dict[str, Any], super().clean())
        if self.instance.pk is not None and isinstance(data.get("payload"), dict):
            data["payload"] = unmask(data["payload"], self.instance.payload)
        if self.errors:
            return data
        values: dict[str, Any] = {
            f: data.get(f) if f in self.fields else getattr(self.instance, f) for f in ENTRY_FIELDS
        }
        try:
            cron.validate_entry(**values, handler=True)
        except InvalidCronExpression as exc:
            self.add_error("cron_expr", str(exc))
        except InvalidPayload as exc:
            self.add_error("payload", str(exc))
        except InvalidJobOption as exc:
            self.add_error(exc.option if exc.option in self.fields else None, str(exc))
        return data


@admin.register(CronEntry)
class CronEntryAdmin(QueueDatabaseMixin, InputGuardMixin, admin.ModelAdmin):
    """Cron entries: list, edit, enable / disable / run now, and each entry's recent fires."""

    form = CronEntryForm
    list_display = (
        "name",
        "schedule",
        "timezone",
        "next_fire_times",
        "last_fired",
        "enabled",
        "missed",
        "source",
    )
    list_filter = ("enabled", "source", "missed", "queue")
    search_fields = ("name", "job_type", "queue", "cron_expr")
    actions = ["enable", "disable", "run_now"]
    fieldsets = [
        (None, {"fields": ["name", "cron_expr", "timezone", "enabled"]}),
        ("Job", {"fields": ["queue", "job_type", "payload", "priority"]}),
        ("Missed runs", {"fields": ["missed", "missed_cap", "skipped_fires"]}),
        (
            "State",
            {
                "fields": [
                    "source",
                    "next_fire_times",
                    "last_fired",
                    "created_at_shown",
                    "updated_at_shown",
                ]
            },
        ),
        ("Recent fires", {"fields": ["recent_fires"]}),
    ]
    #: Fields no form writes: the scheduler and the code own them.
    state_fields = (
        "skipped_fires",
        "source",
        "next_fire_times",
        "last_fired",
        "created_at_shown",
        "updated_at_shown",
        "recent_fires",
    )
    created_at_shown = time_column("created_at", "created at")
    updated_at_shown = time_column("updated_at", "updated at")

    def get_fieldsets(self, request: HttpRequest, obj: CronEntry | None = None):
        """Leave out the state sections on the add page; show a read-only payload masked."""
        if obj is None:
            return [fs for fs in self.fieldsets if fs[0] not in ("State", "Recent fires")]
        if self.has_change_permission(request, obj):
            return self.fieldsets
        # View-only (no change permission, or an entry from the settings): Django would print
        # the raw JSON of a read-only field; show it masked, like a job's payload.
        return [
            (title, {"fields": ["payload_masked" if f == "payload" else f for f in opts["fields"]]})
            for title, opts in self.fieldsets
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: CronEntry | None = None):
        """Make an entry from ``JOBQUEUE["CRON"]`` read-only: runworkers would undo an edit."""
        if obj is None:
            return ("skipped_fires",)
        if obj.source == CronSource.SETTINGS or not self.has_change_permission(request, obj):
            return (*ENTRY_FIELDS, "payload_masked", *self.state_fields)
        return self.state_fields

    def has_change_permission(self, request: HttpRequest, obj: CronEntry | None = None) -> bool:
        """Refuse changes to an entry from ``JOBQUEUE["CRON"]``: the settings own it.

        Its page is then view-only (no save buttons): runworkers would undo any edit at its
        next start.
        """
        if obj is not None and obj.source == CronSource.SETTINGS:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: CronEntry | None = None) -> bool:
        """Refuse to delete an entry from ``JOBQUEUE["CRON"]``: runworkers would bring it back.

        Its page then has no Delete button, and a POST to its delete page is refused (403).
        """
        if obj is not None and obj.source == CronSource.SETTINGS:
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """Name the settings entries among ``objs`` as not deletable: the delete is refused.

        Django's bulk delete ("Delete selected") asks only the model-wide permission; an entry
        from ``JOBQUEUE["CRON"]`` among the selection makes the confirmation page say why
        and the confirmed POST is refused (403), nothing deleted.
        """
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        declared = sorted(o.name for o in objs if o.source == CronSource.SETTINGS)
        if declared:
            perms_needed = {
                *perms_needed,
                f"cron entries declared in JOBQUEUE['CRON'] ({', '.join(declared)})",
            }
        return deleted, counts, perms_needed, protected

    def has_run_permission(self, request: HttpRequest) -> bool:
        """Return True if the user may enqueue an entry's job now."""
        return request.user.has_perm("jobqueue.run_cronentry")

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description="schedule", ordering="cron_expr")
    def schedule(self, obj: CronEntry) -> str:
        """Return the cron expression."""
        return format_html("<code>{}</code>", obj.cron_expr)

    @admin.display(description=f"next {UPCOMING} fire times")
    def next_fire_times(self, obj: CronEntry) -> str:
        """Return the next fire times in the entry's zone, from its pending one."""
        if not obj.enabled:
            return "disabled"
        try:
            schedule = Schedule(obj.cron_expr, obj.timezone)
        except ValueError as exc:
            return format_html("<span class='errornote'>{}</span>", exc)
        if obj.next_fire_at is not None:
            times = [obj.next_fire_at, *schedule.upcoming(obj.next_fire_at, UPCOMING - 1)]
        else:
            # From the database's time, which fires the entries (issue 32: not this host's).
            times = schedule.upcoming(db_now(obj._state.db or "default"), UPCOMING)
        return format_html_join(
            "",
            "<div class='jobqueue-fire-time'>{}</div>",
            ((local(t, obj.timezone),) for t in times),
        )

    @admin.display(description="payload")
    def payload_masked(self, obj: CronEntry) -> str:
        """Return the payload as pretty JSON with ``ADMIN_MASKED_KEYS`` masked."""
        return json_block(obj.payload)

    @admin.display(description="last fired", ordering="last_fired_at")
    def last_fired(self, obj: CronEntry) -> str:
        """Return the latest fire time that enqueued a job, in the entry's zone."""
        return local(obj.last_fired_at, obj.timezone)

    @admin.display(description="recent fires")
    def recent_fires(self, obj: CronEntry) -> str:
        """Return a table of the entry's latest fires and the state of each one's job."""
        fires = list(
            CronFire.objects.using(obj._state.db)
            .filter(entry=obj)
            .order_by("-fire_time")[:RECENT_FIRES]
        )
        if not fires:
            return "none yet"
        states = dict(
            Job.objects.using(obj._state.db)
            .filter(id__in=[f.job_id for f in fires if f.job_id])
            .values_list("id", "state")
        )
        rows = (
            (
                local(f.fire_time, obj.timezone),
                "run now" if f.manual else "scheduled",
                self._job_link(f.job_id, obj._state.db or "default"),
                states.get(f.job_id, "pruned") if f.job_id else "-",
                local(f.fired_at, obj.timezone),
                f.fired_by or "-",
            )
            for f in fires
        )
        head = format_html_join("", "<th>{}</th>", ((h,) for h in FIRE_COLUMNS))
        body = format_html_join(
            "",
            "<tr class='jobqueue-fire'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>",
            rows,
        )
        return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)

    @staticmethod
    def _job_link(job_id: int | None, alias: str) -> str:
        if job_id is None:
            return "-"
        try:
            url = with_db(reverse("admin:jobqueue_job_change", args=[job_id]), alias)
        except NoReverseMatch:
            return f"#{job_id}"
        return format_html('<a href="{}">#{}</a>', url, job_id)

    # -- saving ----------------------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: CronEntry, form: Any, change: bool) -> None:
        """Save through the cron API (the store writes; ``next_fire_at`` follows the schedule).

        A new entry's source is ``admin``; an edited one keeps its source and its database. A
        new entry goes where its jobs go, as a ``JOBQUEUE["CRON"]`` entry does (its fire and its
        job commit together there): its queue's database, for a sharded queue the shard its
        name hashes to (:func:`jobqueue.routing.holds_cron_entry`).
        """
        using = obj._state.db if change else queue_alias(obj.queue, dedupe_key=obj.name)
        values = {f: getattr(obj, f) for f in ENTRY_FIELDS}
        if change:
            saved = cron.edit_entry(obj.pk, values, using=using)
        else:
            saved, _ = cron.save_entry(values, source=CronSource.ADMIN, using=using)
        # The admin goes on with ``obj`` (the log entry, the redirect): give it what was saved.
        for f in CronEntry._meta.concrete_fields:
            setattr(obj, f.attname, getattr(saved, f.attname))
        obj._state.adding, obj._state.db = False, using

    def delete_model(self, request: HttpRequest, obj: CronEntry) -> None:
        """Delete through the store, on the entry's database; its fire records go with it."""
        cron.delete_entries([obj.pk], using=obj._state.db)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[CronEntry]) -> None:
        """Delete the selected entries through the store, on the queryset's database."""
        cron.delete_entries(list(queryset.values_list("pk", flat=True)), using=queryset.db)

    # -- actions ---------------------------------------------------------------------------

    @admin.action(description="Enable selected cron entries", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[CronEntry]) -> None:
        """Enable entries; each starts from its next fire time (nothing missed is caught up)."""
        queryset = self._skip_settings_entries(request, queryset)
        done = self._set_enabled(queryset.filter(enabled=False), True)
        self.message_user(
            request,
            ngettext("Enabled %d cron entry.", "Enabled %d cron entries.", done) % done,
            messages.SUCCESS,
        )

    @admin.action(description="Disable selected cron entries", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[CronEntry]) -> None:
        """Disable entries: they fire nothing until enabled again."""
        queryset = self._skip_settings_entries(request, queryset)
        done = self._set_enabled(queryset.filter(enabled=True), False)
        self.message_user(
            request,
            ngettext("Disabled %d cron entry.", "Disabled %d cron entries.", done) % done,
            messages.SUCCESS,
        )

    def _skip_settings_entries(
        self, request: HttpRequest, queryset: QuerySet[CronEntry]
    ) -> QuerySet[CronEntry]:
        """Leave out entries declared in settings, and say so: runworkers would undo the change."""
        declared = list(queryset.filter(source=CronSource.SETTINGS).values_list("name", flat=True))
        if declared:
            self.message_user(
                request,
                ngettext(
                    "Skipped %(count)d entry declared in JOBQUEUE['CRON'] (%(names)s): set its "
                    "'enabled' there; runworkers would undo a change made here.",
                    "Skipped %(count)d entries declared in JOBQUEUE['CRON'] (%(names)s): set "
                    "their 'enabled' there; runworkers would undo a change made here.",
                    len(declared),
                )
                % {"count": len(declared), "names": ", ".join(declared)},
                messages.WARNING,
            )
        return queryset.exclude(source=CronSource.SETTINGS)

    @staticmethod
    def _set_enabled(queryset: QuerySet[CronEntry], enabled: bool) -> int:
        ids = list(queryset.values_list("pk", flat=True))
        return len(cron.set_enabled(ids, enabled, using=queryset.db))

    @admin.action(description="Run selected cron entries now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[CronEntry]) -> None:
        """Enqueue each entry's job now (a manual fire); the schedule does not move."""
        jobs = [
            (
                entry.name,
                run_now(entry, fired_by=f"admin:{request.user.get_username()}", using=queryset.db),
            )
            for entry in queryset.order_by("name")
        ]
        self.message_user(
            request,
            ngettext(
                "Enqueued %(count)d job: %(jobs)s.", "Enqueued %(count)d jobs: %(jobs)s.", len(jobs)
            )
            % {"count": len(jobs), "jobs": ", ".join(f"{n} (job {j})" for n, j in jobs)},
            messages.SUCCESS,
        )
