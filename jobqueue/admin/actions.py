"""Internal: the admin's bulk actions on jobs, thin over ``jobqueue.ops.actions``; their reports.

The actions themselves (:func:`~jobqueue.ops.actions.cancel_jobs`, ``retry_jobs``,
``run_jobs_now``) are the operator API's; this module confirms, calls them and words the result.
Every action takes the ids of the selected jobs in an eligible state and hands each one to the
client function the API offers (``cancel``, ``retry_many``, ``run_now``); none writes job rows
itself. A job that changed state since the page loaded is left alone by that function's fence
and reported as skipped, with its state now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.db.models import Count, QuerySet
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from jobqueue.admin.inputs import bad_ids
from jobqueue.models import Job
from jobqueue.ops.actions import ActionReport, cancel_jobs, job_states, retry_jobs, run_jobs_now
from jobqueue.states import CANCELLABLE, RETRYABLE, JobState

#: Job ids named in a message before "and N more".
MAX_IDS_NAMED = 10


@dataclass(frozen=True)
class BulkAction:
    """One operator action: which states it applies to and the client call that does it."""

    name: str
    verb: str  # "cancel", "retry", "run now"
    past: str  # "Cancelled", "Retried", "Made ready"
    eligible: frozenset[str]
    #: ``(ids, using, by)``: ``by`` is the signed-in user, recorded (jobqueue.ops.audit).
    apply: Callable[[Sequence[int], str, Any], ActionReport]
    confirm: bool
    explain: str
    #: Completes "Skipped 2 jobs that are ...".
    not_eligible_text: str


def _ids(ids: Iterable[int]) -> str:
    ids = list(ids)
    named = ", ".join(f"#{i}" for i in ids[:MAX_IDS_NAMED])
    if len(ids) > MAX_IDS_NAMED:
        named += f" and {len(ids) - MAX_IDS_NAMED} more"
    return named


def _held(ids: Sequence[int], holders: dict[int, int]) -> str:
    """Name each job and the live job holding its key: ``#5 (held by #9)``."""
    named = [f"#{i} (held by #{holders[i]})" if i in holders else f"#{i}" for i in ids]
    shown = ", ".join(named[:MAX_IDS_NAMED])
    if len(named) > MAX_IDS_NAMED:
        shown += f" and {len(named) - MAX_IDS_NAMED} more"
    return shown


def _by_state(states: dict[int, str]) -> str:
    """Return ``5 leased, 5 ready`` for the skipped jobs' current states."""
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


CANCEL = BulkAction(
    name="cancel_jobs",
    verb="cancel",
    past="Cancelled",
    eligible=frozenset(CANCELLABLE),
    apply=cancel_jobs,
    confirm=True,
    explain="Cancelled jobs never run again (a running job is told to stop). "
    "A cancelled job can be retried later.",
    not_eligible_text="already finished",
)
RETRY = BulkAction(
    name="retry_jobs",
    verb="retry",
    past="Retried",
    eligible=frozenset(RETRYABLE),
    apply=retry_jobs,
    confirm=True,
    explain="Each job goes back to ready now with a fresh attempt budget; its error history is "
    "kept, with a “retried by operator” entry. Its handler runs again.",
    not_eligible_text="not dead or cancelled",
)
RUN_NOW = BulkAction(
    name="run_jobs_now",
    verb="run now",
    past="Made ready",
    eligible=frozenset({JobState.SCHEDULED}),
    apply=run_jobs_now,
    confirm=False,
    explain="Scheduled jobs become ready now; attempts and history are kept.",
    not_eligible_text="not scheduled",
)


def report(modeladmin: Any, request: Any, action: BulkAction, outcome: ActionReport) -> None:
    """Tell the operator what the action did and what it skipped, and why."""
    done = len(outcome.done)
    skipped = (
        outcome.requested
        or outcome.changed
        or outcome.duplicate
        or outcome.missing
        or outcome.changed_since_confirmed
    )
    if done or outcome.attempted or not skipped:
        modeladmin.message_user(
            request,
            ngettext("%(past)s %(count)d job.", "%(past)s %(count)d jobs.", done)
            % {"past": action.past, "count": done},
            messages.SUCCESS if done else messages.WARNING,
        )
    if outcome.requested:
        n = len(outcome.requested)
        modeladmin.message_user(
            request,
            ngettext(
                "Asked %(count)d running job to cancel (%(ids)s): it ends cancelled when its "
                "worker next checks in.",
                "Asked %(count)d running jobs to cancel (%(ids)s): they end cancelled when their "
                "workers next check in.",
                n,
            )
            % {"count": n, "ids": _ids(outcome.requested)},
            messages.SUCCESS,
        )
    for states, singular, plural in (
        (
            outcome.changed_since_confirmed,
            "Skipped %(count)d job that changed since the page loaded (now: %(detail)s).",
            "Skipped %(count)d jobs that changed since the page loaded (%(by_state)s; "
            "now: %(detail)s).",
        ),
        (
            outcome.changed,
            "Skipped %(count)d job that is %(why)s (now: %(detail)s).",
            "Skipped %(count)d jobs that are %(why)s (%(by_state)s; now: %(detail)s).",
        ),
    ):
        if not states:
            continue
        n = len(states)
        named = sorted(states.items())[:MAX_IDS_NAMED]
        detail = ", ".join(f"#{job_id} is {state}" for job_id, state in named)
        if n > MAX_IDS_NAMED:
            detail += f" and {n - MAX_IDS_NAMED} more"
        modeladmin.message_user(
            request,
            ngettext(singular, plural, n)
            % {
                "count": n,
                "why": action.not_eligible_text,
                "detail": detail,
                "by_state": _by_state(states),
            },
            messages.WARNING,
        )
    if outcome.duplicate:
        n = len(outcome.duplicate)
        modeladmin.message_user(
            request,
            ngettext(
                "Skipped %(count)d job whose dedupe key a live job holds: %(ids)s.",
                "Skipped %(count)d jobs whose dedupe keys live jobs hold: %(ids)s.",
                n,
            )
            % {"count": n, "ids": _held(outcome.duplicate, outcome.holders)},
            messages.WARNING,
        )
    if outcome.missing:
        n = len(outcome.missing)
        modeladmin.message_user(
            request,
            ngettext(
                "Skipped %(count)d job that no longer exists (%(ids)s).",
                "Skipped %(count)d jobs that no longer exist (%(ids)s).",
                n,
            )
            % {"count": n, "ids": _ids(sorted(outcome.missing))},
            messages.WARNING,
        )


def run_bulk_action(
    modeladmin: Any, request: Any, queryset: QuerySet, action: BulkAction
) -> TemplateResponse | None:
    """Run ``action`` on the selected jobs, after a confirmation page if the action asks for one.

    Jobs selected on the page but no longer eligible (or gone) are skipped and reported. With
    "select all", the jobs matching the filters in an eligible state are acted on.
    """
    using = queryset.db
    select_across = request.POST.get("select_across") == "1"
    eligible = queryset.filter(state__in=sorted(action.eligible))
    if action.confirm and request.POST.get("post") != "yes":
        return confirmation_page(modeladmin, request, queryset, eligible, action, select_across)
    try:
        confirmed = _confirmed_ids(request)
    except ValueError as exc:
        modeladmin.message_user(request, f"Nothing was changed: {exc}", messages.ERROR)
        return None
    if confirmed is not None:
        # Act on what the confirmation page showed, no more (rows matching the filters since
        # are not acted on); the client's per-row fence skips what changed since. Not through
        # the filtered queryset: a row that left the filter (state=dead) is reported, not lost.
        # Rows of any job list are visible to whoever may act on them (view_job).
        ids = sorted(Job.objects.using(using).filter(id__in=confirmed).values_list("id", flat=True))
        eligible_now = set(eligible.filter(id__in=ids).values_list("id", flat=True))
        outcome = action.apply(ids, using, request.user) if ids else ActionReport()
        late = {i: s for i, s in outcome.changed.items() if i not in eligible_now}
        outcome.changed = {i: s for i, s in outcome.changed.items() if i in eligible_now}
        outcome.changed_since_confirmed = late
        outcome.attempted = bool(ids)
        if not select_across:
            posted = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
            selected = {int(pk) for pk in posted if pk.isascii() and pk.isdigit()}
            outcome.changed.update(job_states(selected - set(ids), using))
            outcome.missing.extend(sorted(selected - set(ids) - set(outcome.changed)))
        report(modeladmin, request, action, outcome)
        return None
    ids = sorted(eligible.values_list("id", flat=True))
    outcome = action.apply(ids, using, request.user) if ids else ActionReport()
    if not select_across:
        posted = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        selected = {int(pk) for pk in posted if pk.isascii() and pk.isdigit()}
        not_eligible = selected - set(ids)
        now = job_states(not_eligible, using)
        outcome.changed.update(now)
        outcome.missing.extend(sorted(not_eligible - set(now)))
    report(modeladmin, request, action, outcome)
    return None


#: The POST field that carries the ids a confirmation page showed.
CONFIRMED_IDS = "jq_confirmed_ids"


def _confirmed_ids(request: Any) -> list[int] | None:
    """Return the ids the confirmation page showed, or None for a form without them.

    Raises:
        ValueError: a part is not a job id (a tampered form): naming it.
    """
    raw = request.POST.get(CONFIRMED_IDS)
    if raw is None:
        return None
    parts = [part for part in raw.split(",") if part]
    bad = bad_ids(Job, parts)
    if bad:
        raise ValueError(f"not a job id: {bad[0]!r:.60}.")
    return [int(part) for part in parts]


def confirmation_page(
    modeladmin: Any,
    request: Any,
    queryset: QuerySet,
    eligible: QuerySet,
    action: BulkAction,
    select_across: bool,
) -> TemplateResponse:
    """Render "are you sure?" with what the action would change, like ``delete_selected``."""
    opts = modeladmin.model._meta
    by_type = list(eligible.values("type").annotate(n=Count("id")).order_by("-n", "type")[:20])
    total = sum(row["n"] for row in by_type)
    if len(by_type) == 20:
        total = eligible.count()
    selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Are you sure you want to {action.verb} these jobs?",
        "opts": opts,
        "action": action,
        "count": total,
        "by_type": by_type,
        "selected": selected,
        "not_eligible": 0 if select_across else max(len(selected) - total, 0),
        "select_across": select_across,
        "confirmed_ids": ",".join(map(str, eligible.order_by("id").values_list("id", flat=True))),
        "confirmed_ids_name": CONFIRMED_IDS,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "changelist_url": request.get_full_path(),
        "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        [
            f"admin/{opts.app_label}/{opts.model_name}/bulk_action_confirmation.html",
            "admin/jobqueue/bulk_action_confirmation.html",
        ],
        context,
    )
