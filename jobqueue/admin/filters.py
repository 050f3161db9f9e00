"""Internal: changelist filters that never scan the jobs table to list their choices.

Django's default filter on a plain column runs ``SELECT DISTINCT`` over the whole table to build
its choices; on millions of jobs that is a full scan per page view. These take their choices from
what the process already knows (settings, the job registry, worker rows), and the tenant filter is
a text box.
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.db.models.functions import Now

from jobqueue.admin.databases import selected_alias
from jobqueue.admin.display import breakable
from jobqueue.masking import escape_control
from jobqueue.models import Job, Worker
from jobqueue.ops import dead_letters
from jobqueue.registry import registry
from jobqueue.settings.conf import get_settings
from jobqueue.states import CLAIMABLE, DeadReason, JobState

RETRYING = "retrying"


class StateFilter(admin.SimpleListFilter):
    """Filter by state, with "ready" and "scheduled" split by run_at as the dashboard counts them.

    A scheduled job whose run_at has come is claimable now, so it is listed under "ready" (the
    claim takes it directly; decisions.md); "scheduled" lists the jobs still waiting. "Retrying"
    is a scheduled job that has failed at least once (attempts > 0), due or not.
    """

    title = "state"
    parameter_name = "state"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        """Return the states and "retrying"."""
        choices = [(state.value, state.label) for state in JobState]
        choices[0] = (JobState.READY.value, "ready (claimable now)")
        choices[1] = (JobState.SCHEDULED.value, "scheduled (waiting for run_at)")
        choices.insert(2, (RETRYING, "scheduled: retrying after a failure"))
        return choices

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet | None:
        """Filter on the state (and run_at for ready and scheduled)."""
        value = self.value()
        claimable = sorted(CLAIMABLE)
        if value == JobState.READY:
            return queryset.filter(state__in=claimable, run_at__lte=Now())
        if value == JobState.SCHEDULED:
            return queryset.filter(state__in=claimable, run_at__gt=Now())
        if value == RETRYING:
            return queryset.filter(state=JobState.SCHEDULED, attempts__gt=0)
        if value in JobState.values:
            return queryset.filter(state=value)
        return queryset


class DeadReasonFilter(admin.SimpleListFilter):
    """Filter dead letters by why they died."""

    title = "reason"
    parameter_name = "reason"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        """Return the dead-letter reasons."""
        return [(reason.value, reason.label) for reason in DeadReason]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet | None:
        """Filter on ``dead_reason``."""
        if self.value():
            return queryset.filter(dead_reason=self.value())
        return queryset


def known_queues(using: str = "default") -> list[str]:
    """Return queue names from settings, registered job types and worker rows (no job scan)."""
    names = set(get_settings().queues)
    names.update(job_type.queue for job_type in registry().values())
    for queues in Worker.objects.using(using).values_list("queues", flat=True):
        names.update(q for q in queues or [] if isinstance(q, str))
    return sorted(names)


#: Newest jobs whose types the job-type filter offers besides the registered ones.
RECENT_TYPES_FROM = 1000


def known_job_types(using: str = "default") -> list[str]:
    """Return the job types registered in this process and those of the newest jobs.

    A ``django.tasks`` task is registered only once its module is imported (a task declared for
    another backend, or in a module the web process never imports, is not), so the registry
    alone left such types out. The newest :data:`RECENT_TYPES_FROM` jobs, read by primary key
    (a bounded read, whatever the table's size), add the types in use.
    """
    recent = Job.objects.using(using).order_by("-id").values_list("type", flat=True)
    return sorted({*registry(), *recent[:RECENT_TYPES_FROM]})


class _ChoicesWithCurrent(admin.SimpleListFilter):
    """A filter whose choices also include the current value, so a link to any value works."""

    field = ""

    def choices_from(self, request: Any) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        """Return the known values plus the one in the query string."""
        values = set(self.choices_from(request))
        current = request.GET.get(self.parameter_name)
        if current:
            values.add(current)
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet | None:
        """Filter on the field's exact value."""
        if self.value() is not None:
            return queryset.filter(**{self.field: self.value()})
        return queryset


class QueueFilter(_ChoicesWithCurrent):
    """Filter by queue."""

    title = "queue"
    parameter_name = "queue"
    field = "queue"

    def choices_from(self, request: Any) -> list[str]:
        """Return the known queue names."""
        return known_queues(selected_alias(request))


class JobTypeFilter(_ChoicesWithCurrent):
    """Filter by job type."""

    title = "job type"
    parameter_name = "type"
    field = "type"

    def choices_from(self, request: Any) -> list[str]:
        """Return the registered job types."""
        return known_job_types(selected_alias(request))

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, Any]]:
        """Return the types, each shown wrapping after its dots only (:func:`.breakable`)."""
        return [(value, breakable(value)) for value, _ in super().lookups(request, model_admin)]


class DeadLetterQueueFilter(QueueFilter):
    """Filter dead letters by queue: the known queues and those that have dead letters."""

    def choices_from(self, request: Any) -> list[str]:
        """Return the known queues plus the queues of dead jobs (a read of dead rows only)."""
        return [*super().choices_from(request), *_dead_values("queue", selected_alias(request))]


class DeadLetterTypeFilter(JobTypeFilter):
    """Filter dead letters by type: registered types and those that have dead letters."""

    def choices_from(self, request: Any) -> list[str]:
        """Return the registered types plus the types of dead jobs (a read of dead rows only)."""
        return [*super().choices_from(request), *_dead_values("type", selected_alias(request))]


def _dead_values(field: str, using: str) -> list[str]:
    # Dead rows only, found through the partial index on finished jobs; a handful of values.
    dead = Job.objects.using(using).filter(state=JobState.DEAD)
    return list(dead.values_list(field, flat=True).distinct().order_by())


class _TypedFilter(admin.ListFilter):
    """Filter on one column's exact value, typed into a box (too many values to list).

    Subclasses set ``title``, ``parameter_name`` (the query-string name) and ``field``.
    """

    parameter_name = ""
    field = ""
    template = "admin/jobqueue/input_filter.html"

    def __init__(self, request: Any, params: dict[str, Any], model: Any, model_admin: Any):
        super().__init__(request, params, model, model_admin)
        if self.parameter_name in params:
            value = params.pop(self.parameter_name)
            self.used_parameters[self.parameter_name] = (
                value[-1] if isinstance(value, list) else value
            )

    def value(self) -> str | None:
        """Return the value in the query string, if any."""
        # Only __init__ writes it: one query-string value (ListFilter types its values object).
        return cast("str | None", self.used_parameters.get(self.parameter_name))

    def has_output(self) -> bool:
        """Always show the box."""
        return True

    def expected_parameters(self) -> list[str | None]:
        """Return the one query parameter this filter reads."""
        return [self.parameter_name]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        """Filter on the exact value."""
        if self.value() is not None:
            return queryset.filter(**{self.field: self.value()})
        return queryset

    def choices(self, changelist: Any):
        """Yield "All", then the form's data: the current value and the other parameters."""
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "All",
        }
        others = [
            (key, value)
            for key, values in changelist.filter_params.items()
            if key != self.parameter_name
            for value in values
        ]
        yield {
            "form": True,
            "parameter_name": self.parameter_name,
            "value": self.value() or "",
            "hidden": others,
        }


class TenantFilter(_TypedFilter):
    """Filter by tenant id, typed into a box (tenants are too many to list)."""

    title = "tenant"
    parameter_name = "tenant"
    field = "tenant_id"


class ConcurrencyKeyFilter(_TypedFilter):
    """Filter by concurrency key (issue 18), typed into a box (keys may be one per account)."""

    title = "concurrency key"
    parameter_name = "concurrency_key"
    field = "concurrency_key"


class ErrorGroupFilter(admin.ListFilter):
    """The dead letters of one error group: ``?error_type=`` and ``?error=`` (its digest).

    ``error`` is :attr:`jobqueue.ops.dead_letters.ErrorGroup.digest`, never the message. The
    groups table above the dead-letter list links here (:mod:`jobqueue.ops.dead_letters`);
    the block shows only while it filters, with a link that clears it. The jobs are the newest
    :data:`~jobqueue.ops.dead_letters.GROUP_IDS_LIMIT` of the group, found by the store.
    """

    title = "error"
    template = "admin/jobqueue/error_filter.html"
    parameters = ("error_type", "error")

    def __init__(self, request: Any, params: dict[str, Any], model: Any, model_admin: Any):
        super().__init__(request, params, model, model_admin)
        self.alias = selected_alias(request)
        for name in self.parameters:
            if name in params:
                value = params.pop(name)
                self.used_parameters[name] = value[-1] if isinstance(value, list) else value

    def active(self) -> bool:
        """Return whether the query string names a group (its message may be empty)."""
        return "error" in self.used_parameters or "error_type" in self.used_parameters

    def has_output(self) -> bool:
        """Always: Django applies only the filters it shows (the template may show nothing)."""
        return True

    def expected_parameters(self) -> list[str | None]:
        """Return the two query parameters this filter reads."""
        return list(self.parameters)

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        """Keep the group's jobs (none, when nothing matches)."""
        if not self.active():
            return queryset
        ids = dead_letters.group_ids(
            str(self.used_parameters.get("error_type", "")),
            str(self.used_parameters.get("error", "")),
            self.alias,
        )
        return queryset.filter(id__in=ids)

    def choices(self, changelist: Any):
        """Yield the current group (its message masked) with the link that clears it."""
        if not self.active():
            return
        kind = str(self.used_parameters.get("error_type", ""))
        group = dead_letters.find_group(
            kind, str(self.used_parameters.get("error", "")), self.alias
        )
        message = "" if group is None else escape_control(group.shown_message, one_line=True)
        yield {
            "selected": True,
            "display": ": ".join(str(part) for part in (kind, message) if part) or "(no error)",
            "query_string": changelist.get_query_string(remove=list(self.parameters)),
        }
