"""Internal: the queue dashboard: per-queue counts, lag, recent throughput, dead letters, workers.

Every figure comes from a small aggregate that an index serves: live jobs through the claim and
lease partial indexes, jobs waiting for parent jobs through ``jobqueue_job_waiting`` (queue),
finished ones through ``jobqueue_job_finished`` (state, finished_at) and dead letters through
``jobqueue_job_dead`` (type, queue), index-only where the columns allow.
"Ready" counts the jobs claimable now (ready, or scheduled with run_at come) and "scheduled" those
waiting for their run_at, which the claim index answers alone. The succeeded and cancelled
totals, which grow without bound until pruned, are the planner's estimate on PostgreSQL once a
state holds 10,000 rows or more (marked "≈"); everything else is exact.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Min, Q
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.http import urlencode

from jobqueue.admin.charts import DEFAULT_SPAN, SPANS, charts
from jobqueue.admin.cron import local
from jobqueue.admin.databases import DB_PARAM, selected_alias, with_db
from jobqueue.admin.display import breakable, duration_text, escaped_page, format_time
from jobqueue.admin.filters import known_queues
from jobqueue.admin.paginator import EXACT_COUNT_BELOW, planner_rows
from jobqueue.errors import InvalidJobOption
from jobqueue.limits import pauses as pausing
from jobqueue.models import CronEntry, DependencyBreaker, Job, Pause, RetryBudget, Worker
from jobqueue.ops import queues as queue_ops
from jobqueue.ops.clock import db_now, humanize_seconds
from jobqueue.ops.queues import concurrency_rows, rate_limit_rows, served_queues, top_queues
from jobqueue.ops.rollup import type_table
from jobqueue.routing import all_queue_aliases
from jobqueue.states import CLAIMABLE, JobState

#: Seconds between the page's refreshes of its figures (``?refresh=0`` turns them off): the
#: page fetches its figures (``?fragment=1``) and swaps them in, without reloading.
REFRESH_SECONDS = 5
#: The GET parameter that asks for the figures alone (``_dashboard_live.html``).
FRAGMENT_PARAM = "fragment"
#: ... with more queues than the page lists one by one (``ops.queues.TOP_QUEUES``): each reload
#: reads every queue's counts, so a site with thousands reloads less often (issue 33).
REFRESH_MANY_QUEUES_SECONDS = 60
#: The GET parameter of the queue search (a name substring, case-insensitive).
SEARCH_PARAM = "q"
#: Most rows in "dead letters by type".
DEAD_BY_TYPE_ROWS = 50
#: Most rows of the per-type table (the most failures, then the most runs, first).
TYPE_ROWS = 50
#: Concurrency keys shown: the ones running the most (the metrics show as many).
CONCURRENCY_ROWS = 20
STATES = [state.value for state in JobState]


@dataclass
class QueueStats:
    """One queue's row on the dashboard."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    #: States whose count is the planner's estimate.
    estimated: set[str] = field(default_factory=set)
    #: Ready, or scheduled and due: claimable now (the "ready" count).
    due: int = 0
    oldest_due: datetime | None = None
    lag_s: float | None = None
    succeeded_5m: int = 0
    succeeded_1h: int = 0
    dead_5m: int = 0
    dead_1h: int = 0
    #: Ready jobs wait and no live worker serves this queue (set by :func:`render`).
    unserved: bool = False
    #: The queue's pause (who, since when), None when it is not paused (set by :func:`render`).
    paused: Pause | None = None
    #: The queue databases this row's jobs were counted on (set by :func:`render`).
    databases: list[str] = field(default_factory=list)
    #: Live workers (a per-database row's; set by :func:`render`).
    workers_alive: int = 0

    @property
    def db_param(self) -> str:
        """Return the ``?db=`` a link to this queue's jobs needs: its one database, else ""."""
        return self.databases[0] if len(self.databases) == 1 else ""

    @property
    def lag(self) -> str:
        """Return the age of the oldest due job, for people."""
        return humanize_seconds(self.lag_s)

    @property
    def live(self) -> int:
        """Return how many jobs are ready, scheduled or leased."""
        return sum(self.counts[s] for s in (JobState.READY, JobState.SCHEDULED, JobState.LEASED))

    def add(self, other: QueueStats) -> None:
        """Add ``other``'s counts into this row (totals; one queue on several databases)."""
        for state in STATES:
            self.counts[state] += other.counts[state]
        self.estimated |= other.estimated
        self.due += other.due
        for name in ("succeeded_5m", "succeeded_1h", "dead_5m", "dead_1h"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.lag_s is not None and (self.lag_s is None or other.lag_s > self.lag_s):
            self.lag_s = other.lag_s

    def cells(self) -> list[tuple[str, int, bool]]:
        """Return ``(state, count, estimated)`` in lifecycle order, for the template."""
        return [(s, self.counts[s], s in self.estimated) for s in STATES]


@dataclass(frozen=True, slots=True, kw_only=True)
class CronRow:
    """One cron entry as the dashboard shows it."""

    name: str
    cron_expr: str
    timezone: str
    queue: str
    job_type: str
    enabled: bool
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    url: str | None = None

    @property
    def job_type_label(self) -> str:
        """Return the job type, wrapping at its dots only."""
        return breakable(self.job_type)

    @property
    def next_fire(self) -> str:
        """Return the next fire time in the entry's zone (:func:`.cron.local`)."""
        return local(self.next_fire_at, self.timezone)

    @property
    def last_fired(self) -> str:
        """Return the last fire time like :attr:`next_fire`."""
        return local(self.last_fired_at, self.timezone)


def cron_entries(using: str = "default") -> list[CronRow]:
    """Return the cron entries with their next fire time, soonest first (disabled ones last)."""
    rows = []
    entries = CronEntry.objects.using(using).order_by("-enabled", "next_fire_at", "name")
    for entry in entries[:100]:
        try:
            url = with_db(reverse("admin:jobqueue_cronentry_change", args=[entry.pk]), using)
        except NoReverseMatch:
            url = None
        rows.append(
            CronRow(
                name=entry.name,
                cron_expr=entry.cron_expr,
                timezone=entry.timezone,
                queue=entry.queue,
                job_type=entry.job_type,
                enabled=entry.enabled,
                next_fire_at=entry.next_fire_at,
                last_fired_at=entry.last_fired_at,
                url=url,
            )
        )
    return rows


def breaker_rows(using: str = "default") -> list[DependencyBreaker]:
    """Return every dependency's breaker, open and half-open first, then by name.

    Each row's ``jq_database`` is ``using`` (templates cannot read ``_state.db``).
    """
    order = {"open": 0, "half_open": 1, "closed": 2}
    rows = list(DependencyBreaker.objects.using(using).order_by("name")[:200])
    for row in rows:
        setattr(row, "jq_database", using)  # noqa: B010 (not a model field: mypy)
        setattr(row, "jq_open_until", format_time(row.open_until))  # noqa: B010
    return sorted(rows, key=lambda b: order.get(b.state, 3))


def budget_rows(using: str = "default") -> list[RetryBudget]:
    """Return the retry buckets, emptiest first (negative: retries are being delayed)."""
    rows = list(RetryBudget.objects.using(using).order_by("tokens", "queue")[:200])
    for row in rows:
        setattr(row, "jq_updated_at", format_time(row.updated_at))  # noqa: B010 (mypy)
    return rows


def queue_stats(
    using: str = "default",
    now: datetime | None = None,
    dead_by_queue_and_type: list[Mapping[str, Any]] | None = None,
) -> list[QueueStats]:
    """Return one :class:`QueueStats` per queue that has jobs or is known to this site.

    Args:
        using: database alias of the queue.
        now: the time lag and "last 5 minutes" are measured from (default: the database's
            time now).
        dead_by_queue_and_type: :func:`dead_letters` output, if the caller already has it.
    """
    now = now or db_now(using)
    if dead_by_queue_and_type is None:
        dead_by_queue_and_type = dead_letters(using)
    jobs = Job.objects.using(using)
    queues: dict[str, QueueStats] = {}

    def row(name: str) -> QueueStats:
        if name not in queues:
            queues[name] = QueueStats(name=name)
        return queues[name]

    # Ready and scheduled, split by run_at as DESIGN's lifecycle does (a scheduled job whose
    # run_at has come is ready; storage skips that promotion, decisions.md): every column read
    # here is in the claim index, so this is an index-only scan of the live rows. Splitting by
    # the stored state instead would visit the heap row of every live job.
    due = Q(run_at__lte=now)
    r: Mapping[str, Any]  # one row of values(), its keys differ per query below
    for r in (
        jobs.filter(state__in=sorted(CLAIMABLE))
        .values("queue")
        .annotate(n=Count("id"), due=Count("id", filter=due), oldest=Min("run_at", filter=due))
        .order_by()
    ):
        stats = row(r["queue"])
        stats.counts[JobState.READY] = r["due"]
        stats.counts[JobState.SCHEDULED] = r["n"] - r["due"]
        stats.due = r["due"]
        stats.oldest_due = r["oldest"]
    # Leased: the lease index's predicate.
    for r in jobs.filter(state=JobState.LEASED).values("queue").annotate(n=Count("id")).order_by():
        row(r["queue"]).counts[JobState.LEASED] = r["n"]
    # Waiting for parent jobs: the waiting index (queue), index-only.
    for r in jobs.filter(state=JobState.WAITING).values("queue").annotate(n=Count("*")).order_by():
        row(r["queue"]).counts[JobState.WAITING] = r["n"]
    # Finished in the last hour: a range of the finished index per state.
    hour, five = now - timedelta(hours=1), now - timedelta(minutes=5)
    for r in (
        jobs.filter(state__in=[JobState.SUCCEEDED, JobState.DEAD], finished_at__gte=hour)
        .values("queue", "state")
        .annotate(h1=Count("id"), m5=Count("id", filter=Q(finished_at__gte=five)))
        .order_by()
    ):
        stats = row(r["queue"])
        if r["state"] == JobState.SUCCEEDED:
            stats.succeeded_1h, stats.succeeded_5m = r["h1"], r["m5"]
        else:
            stats.dead_1h, stats.dead_5m = r["h1"], r["m5"]
    # Dead: exact (operators act on these), from the finished index, by queue and job type.
    for r in dead_by_queue_and_type:
        row(r["queue"]).counts[JobState.DEAD] += r["n"]
    for name in known_queues(using):
        row(name)
    # Succeeded and cancelled grow until pruned: estimate them when they are big.
    for state in (JobState.SUCCEEDED, JobState.CANCELLED):
        in_state = jobs.filter(state=state)
        estimate = planner_rows(in_state)
        if estimate is not None and estimate >= EXACT_COUNT_BELOW:
            for stats in queues.values():
                stats.counts[state] = planner_rows(in_state.filter(queue=stats.name)) or 0
                stats.estimated.add(state)
        else:
            for r in in_state.values("queue").annotate(n=Count("id")).order_by():
                row(r["queue"]).counts[state] = r["n"]
    for stats in queues.values():
        if stats.oldest_due is not None:
            stats.lag_s = max((now - stats.oldest_due).total_seconds(), 0.0)
    return sorted(queues.values(), key=lambda s: s.name)


def dead_letters(using: str = "default") -> list[Mapping[str, Any]]:
    """Return ``{"type", "queue", "n"}`` per job type and queue with dead letters, most first."""
    rows: list[Mapping[str, Any]] = list(
        Job.objects.using(using)
        .filter(state=JobState.DEAD)
        .values("type", "queue")
        .annotate(n=Count("*"))  # not Count("id"): id is not in the dead index
        .order_by()
    )
    return sorted(rows, key=lambda r: (-r["n"], r["type"], r["queue"]))


def merged_dead_letters(lists: Iterable[list[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """Sum :func:`dead_letters` of several databases per (type, queue), most first."""
    n: dict[tuple[str, str], int] = {}
    for rows in lists:
        for r in rows:
            n[r["type"], r["queue"]] = n.get((r["type"], r["queue"]), 0) + r["n"]
    merged = [{"type": t, "queue": q, "n": count} for (t, q), count in n.items()]
    return sorted(merged, key=lambda r: (-r["n"], r["type"], r["queue"]))


def workers(using: str = "default") -> list[Worker]:
    """Return every worker row, with ``is_alive`` to tell the running from the vanished.

    Each row's ``jq_last_seen`` says how long ago it heartbeated ("4.2 s ago"), measured on the
    database clock that wrote ``last_seen_at`` (``with_clock``), not this host's (issue 32).
    """
    rows = list(Worker.objects.using(using).with_clock().order_by("host", "pid"))
    for row in rows:
        clock: datetime = row.db_now  # with_clock() annotates it
        silent_s = max((clock - row.last_seen_at).total_seconds(), 0.0)
        setattr(row, "jq_started_at", format_time(row.started_at))  # noqa: B010 (mypy)
        setattr(row, "jq_last_seen", f"{humanize_seconds(silent_s)} ago")  # noqa: B010 (mypy)
    return rows


def render(modeladmin: Any, request: HttpRequest) -> TemplateResponse:
    """Render the dashboard for ``modeladmin`` (the jobs admin); needs the view permission.

    With ``?fragment=1``, only its figures (``admin/jobqueue/_dashboard_live.html``): what
    the page fetches every :data:`REFRESH_SECONDS` to refresh without reloading.
    """
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    started = time.perf_counter()
    # Every queue database, summed (JOBQUEUE["QUEUE_DATABASES"]), with a row per database; the
    # charts read one, ``?db=`` (the first by default): each database keeps its own rollup,
    # and pickup percentiles of two databases do not add up.
    aliases = all_queue_aliases()
    chart_alias = selected_alias(request)
    now = db_now(aliases[0])  # the database clock, as everywhere (issue 32)
    dead_per_alias = {alias: dead_letters(alias) for alias in aliases}
    dead = merged_dead_letters(dead_per_alias.values())
    by_name: dict[str, QueueStats] = {}
    per_database = {alias: QueueStats(name=alias, databases=[alias]) for alias in aliases}
    for alias, alias_dead in dead_per_alias.items():
        for stats in queue_stats(alias, now, alias_dead):
            merged = by_name.setdefault(stats.name, QueueStats(name=stats.name))
            merged.add(stats)
            per_database[alias].add(stats)
            if any(stats.counts.values()):
                merged.databases.append(alias)
    queues = sorted(by_name.values(), key=lambda s: s.name)
    totals = QueueStats(name="all queues")
    for stats in queues:
        totals.add(stats)
    worker_rows = []
    for alias in aliases:
        rows = workers(alias)
        per_database[alias].workers_alive = sum(1 for w in rows if w.is_alive)
        worker_rows += rows
    served = served_queues([w for w in worker_rows if w.is_alive], [s.name for s in queues])
    pauses = [p for alias in aliases for p in Pause.objects.using(alias).order_by("kind", "name")]
    for p in pauses:
        setattr(p, "jq_paused_at", format_time(p.paused_at))  # noqa: B010 (mypy)
    paused_queues = {p.name: p for p in pauses if p.kind == "queue"}
    for stats in queues:
        stats.paused = paused_queues.get(stats.name)
        # A paused queue's ready jobs wait on purpose: "paused" says so, not "unserved".
        stats.unserved = stats.due > 0 and stats.name not in served and stats.paused is None
    # Past TOP_QUEUES queues the table lists the deepest and the oldest and sums the rest in
    # one row (issue 33: 10,000 queues made a 17 MB page); a search lists the matching ones.
    search = request.GET.get(SEARCH_PARAM, "").strip()
    if search:
        queues = [s for s in queues if search.lower() in s.name.lower()]
    shown, rest = top_queues(
        [s.name for s in queues],
        {s.name: s.live for s in queues},
        {s.name: s.lag_s for s in queues if s.lag_s is not None},
    )
    other: QueueStats | None = None
    if rest:
        listed = set(shown)
        other = QueueStats(name=f"{len(rest)} other queues")
        for stats in queues:
            if stats.name not in listed:
                other.add(stats)
                other.unserved = other.unserved or stats.unserved
        queues = [s for s in queues if s.name in listed]
    many = other is not None or search != ""
    period = REFRESH_MANY_QUEUES_SECONDS if len(by_name) > queue_ops.TOP_QUEUES else REFRESH_SECONDS
    refresh = period if request.GET.get("refresh") != "0" else 0
    user = request.user
    drawn = charts(request.GET.get("span", DEFAULT_SPAN), using=chart_alias)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Queue dashboard",
        "opts": modeladmin.model._meta,
        "states": STATES,
        "queues": queues,
        "other_queues": other,
        "queue_search": search,
        "search_param": SEARCH_PARAM,
        "summarised": many,
        "totals": totals,
        "dead_by_type": [
            {**r, "type_label": breakable(r["type"])} for r in dead[:DEAD_BY_TYPE_ROWS]
        ],
        "dead_by_type_more": max(len(dead) - DEAD_BY_TYPE_ROWS, 0),
        "workers": worker_rows,
        "alive_workers": sum(1 for w in worker_rows if w.is_alive),
        "cron_entries": [e for alias in aliases for e in cron_entries(alias)],
        "breakers": [b for alias in aliases for b in breaker_rows(alias)],
        "several_databases": len(aliases) > 1,
        "budgets": [b for alias in aliases for b in budget_rows(alias)],
        "rate_limits": [r for alias in aliases for r in rate_limit_rows(alias)][:200],
        "concurrency": [c for alias in aliases for c in concurrency_rows(alias, CONCURRENCY_ROWS)],
        "pauses": pauses,
        "can_pause": user.has_perm("jobqueue.add_pause"),
        "can_resume": user.has_perm("jobqueue.delete_pause"),
        "databases": list(per_database.values()) if len(aliases) > 1 else [],
        "charts": drawn,
        "type_rows": type_rows(now, str(drawn["span"]), chart_alias),
        "chart_databases": chart_selector(aliases, chart_alias, request),
        "refresh_seconds": refresh,
        "fragment_url": "?" + urlencode({**request.GET.dict(), FRAGMENT_PARAM: "1"}),
        "generated_at": now,
        "generated_at_label": format_time(now),
        "elapsed_ms": (time.perf_counter() - started) * 1000,
    }
    request.current_app = modeladmin.admin_site.name
    template = "admin/jobqueue/dashboard.html"
    if request.GET.get(FRAGMENT_PARAM) == "1":
        # The figures alone, for the page's refresh (static/jobqueue/dashboard.js).
        template = "admin/jobqueue/_dashboard_live.html"
    return escaped_page(TemplateResponse(request, template, context))


def type_rows(now: datetime, span: str, using: str) -> list[dict[str, Any]]:
    """Return the per-type table's rows over the charts' span (``"1h"`` or ``"24h"``).

    Each row: ``type`` (wrapping at its dots), ``name``, ``runs``, ``failures``, ``dead``,
    ``failure_pct`` ("12.5%", "-" without runs), ``p50``, ``p95`` and ``mean`` (durations in
    words, :func:`~jobqueue.admin.display.duration_text`), from the rollup
    (:func:`jobqueue.ops.rollup.type_table`).
    """
    rows = []
    for r in type_table(now, SPANS[span][1], using)[:TYPE_ROWS]:
        rows.append(
            {
                "name": r.type,
                "type": breakable(r.type),
                "runs": r.runs,
                "failures": r.failures,
                "dead": r.dead,
                "failure_pct": "-" if r.failure_rate is None else f"{r.failure_rate:.1%}",
                "p50": duration_text(r.p50_s),
                "p95": duration_text(r.p95_s),
                "mean": duration_text(r.mean_s),
            }
        )
    return rows


def chart_selector(
    aliases: tuple[str, ...], selected: str, request: HttpRequest
) -> list[dict[str, Any]]:
    """Return the charts' database links (``alias``, ``url``, ``selected``); none with one.

    Each link keeps the page's span and paused refresh.
    """
    if len(aliases) < 2:
        return []
    keep = {k: request.GET[k] for k in ("span", "refresh") if k in request.GET}
    return [
        {"alias": a, "url": "?" + urlencode({**keep, DB_PARAM: a}), "selected": a == selected}
        for a in aliases
    ]


def pause_or_resume(modeladmin: Any, request: HttpRequest) -> HttpResponse:
    """Pause or resume one queue from the dashboard's queue table (POST, CSRF-checked).

    ``queue`` names it and ``op`` is ``pause`` (needs ``jobqueue.add_pause``) or ``resume``
    (``jobqueue.delete_pause``), the permissions of the Pauses page. Goes through
    ``jobqueue.pause``/``resume`` with the signed-in user as ``by``: the pause records who,
    and Django's ``LogEntry`` the action (``jobqueue.ops.audit``). Back to the dashboard with a
    message; a bad queue name is an error message, nothing written.
    """
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    op, queue = request.POST.get("op"), request.POST.get("queue", "")
    needed = {"pause": "jobqueue.add_pause", "resume": "jobqueue.delete_pause"}.get(op or "")
    if needed is None:
        return HttpResponseBadRequest("op must be pause or resume")
    if not request.user.has_perm(needed):
        raise PermissionDenied
    try:
        if op == "pause":
            done = pausing.pause(queue, by=request.user, reason="paused from the dashboard")
            said = f"Paused queue {queue}." if done else f"Queue {queue} was already paused."
        else:
            done = pausing.resume(queue, by=request.user)
            said = f"Resumed queue {queue}." if done else f"Queue {queue} was not paused."
    except InvalidJobOption as exc:
        modeladmin.message_user(request, f"Nothing was changed: {exc}", messages.ERROR)
    else:
        modeladmin.message_user(request, said, messages.SUCCESS if done else messages.WARNING)
    return HttpResponseRedirect(reverse(f"{modeladmin.admin_site.name}:jobqueue_dashboard"))
