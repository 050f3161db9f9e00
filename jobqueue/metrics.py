"""Prometheus metrics: a Django view in the text exposition format, mounted by the site.

Mount it yourself; it refuses anonymous requests (401) unless ``JOBQUEUE["METRICS_TOKEN"]`` is
sent as a bearer token or ``JOBQUEUE["METRICS_PUBLIC"]`` is True; a staff session may read it::

    # urls.py
    import jobqueue.metrics

    urlpatterns = [path("metrics/", jobqueue.metrics.view), ...]

The cluster-wide gauges are one shared reading (a row of ``jobqueue_gaugesnapshot``), recomputed
by one process once it is older than ``METRICS_INTERVAL_SECONDS`` (default 5 s) and served to
every scrape of every process meanwhile: a scrape costs one primary-key read, and the gauges are
computed once per interval for the whole cluster (FIELD-CASES 30). ``cached_view(15)`` also
keeps the text in Django's cache for 15 s.

Computing them reads ``jobqueue_job`` only through bounded walks of its partial indexes (the
store's ``queue_gauges``, ``dead_gauges``, ``waiting_gauges``, ``running_gauges``,
``prunable_by_state``; counts exact up to 10,000 and 10,000 past it), and the small worker,
pause, breaker, budget and cron tables, so its cost does not grow with the millions of finished
rows a site keeps: succeeded and cancelled totals, which only grow until pruned, are
deliberately not counted;
``jobqueue_rows_awaiting_prune`` says how many of them are past retention.
The outcome and lease-expiration counters (``_total``) and the pickup/run histograms come from
the per-minute rollup the workers write, carried forward in a checkpoint so they never fall when
the pruner deletes old minutes (``jobqueue/ops/rates.py``). Label values are masked as every
output is (``jobqueue.masking``); no label names a process (a pid, a worker id), so a recycle
makes no new series. With queues on several databases (``JOBQUEUE["QUEUE_DATABASES"]``)
each keeps its own reading and every sample carries a ``database`` label
(``jobqueue/ops/exposition.py``).
"""

from __future__ import annotations

import hmac
import platform
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from importlib import metadata

import django
from django.core.cache import caches
from django.db import DatabaseError
from django.db.models import DurationField, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse

from jobqueue.limits.fairness import rate_limits
from jobqueue.models import CronEntry, GaugeSnapshot, Pause, RetryBudget
from jobqueue.models.metrics import (
    DEATHS_PREFIX,
    LAST_PRUNE,
    LOOP_STALL_MS_PREFIX,
    LOOP_STALLS_PREFIX,
    RECYCLE_REASONS,
    RECYCLES,
)
from jobqueue.ops import queues as _queues
from jobqueue.ops.clock import db_now
from jobqueue.ops.exposition import DATABASE_LABEL, family, histogram, merge
from jobqueue.ops.outbox import families as outbox_families
from jobqueue.ops.queues import (
    OTHER_QUEUES_LABEL,
    declared_queues,
    live_workers,
    open_breakers,
    served_queues,
    top_queues,
)
from jobqueue.ops.rates import families as rollup_families
from jobqueue.ops.rates import totals as rollup_totals
from jobqueue.routing import all_queue_aliases
from jobqueue.settings.conf import get_settings
from jobqueue.store import Store, get_store
from jobqueue.store.failures import KINDS, Failure, classify
from jobqueue.store.interface import COUNT_CAP
from jobqueue.store.plan import ConcurrencyLimits

#: The exposition format's media type.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Tenants listed in ``jobqueue_running_jobs_by_tenant`` (the most running first).
TOP_TENANTS = 20
#: Rate limiters listed (by key): each tenant under a default has its own.
MAX_LIMITERS = 200
#: The name of the shared reading's row.
SNAPSHOT = "metrics"
#: How long a process may take to recompute the reading before another may take over, seconds.
COMPUTE_HOLD_S = 60.0

_PYTHON = platform.python_version()


def _version() -> str:
    try:
        return metadata.version("django-jobqueue")
    except metadata.PackageNotFoundError:  # run from a source tree: the package's own
        return str(getattr(sys.modules.get("jobqueue"), "__version__", "unknown"))


def collect(using: str | None = None, max_age_s: float | None = None) -> str:
    """Return every metric in the Prometheus text format (version 0.0.4).

    Every queue database is read (``JOBQUEUE["QUEUE_DATABASES"]``), each from its own shared
    reading; with more than one, every sample of theirs carries a ``database`` label (the
    alias). With one, the series are as they always were, without it.

    The cluster-wide gauges come from one shared reading (:class:`~jobqueue.models.GaugeSnapshot`)
    at most ``max_age_s`` old: a scrape reads that row (one primary-key read); when it is older,
    one process (a compare-and-set) recomputes it with :func:`compute` while the others serve
    the previous reading. So the gauges are computed once per interval for the cluster, however
    many processes are scraped (FIELD-CASES 30).

    Args:
        using: one database alias (default: every queue database).
        max_age_s: oldest reading served, seconds (default ``METRICS_INTERVAL_SECONDS``;
            0: compute now, share nothing).

    Raises:
        django.db.Error: the database cannot be reached (the view answers 500, and Prometheus
            records the scrape as failed: ``up == 0``).
    """
    started = time.perf_counter()
    if max_age_s is None:
        max_age_s = get_settings().metrics_interval_seconds
    aliases = (using,) if using is not None else all_queue_aliases()
    failures: dict[str, Failure | None] = {}
    readings = []
    for alias in aliases:
        body, age_s, failures[alias] = _failing_reading(alias, max_age_s)
        readings.append((alias, body, age_s))
    age_help = (
        "Age of the cluster-wide reading this scrape served (recomputed once per "
        "METRICS_INTERVAL_SECONDS for the whole cluster), seconds."
    )
    if len(readings) == 1:
        [(_, body, age_s)] = readings
        out = [body.rstrip("\n")]
        out += family("jobqueue_gauges_age_seconds", age_help, [({}, age_s)])
    else:
        out = [merge([(alias, body) for alias, body, _ in readings]).rstrip("\n")]
        out += family(
            "jobqueue_gauges_age_seconds",
            age_help,
            [({DATABASE_LABEL: alias}, age_s) for alias, _, age_s in readings],
        )
    several = len(readings) > 1
    out += family(
        "jobqueue_database_failure",
        "1 while the queue database fails jobqueue's statements in this way (read_only: a "
        "failover?; not_migrated; permission_denied...), else 0 (jobqueue/store/failures.py).",
        [
            (
                {**({DATABASE_LABEL: alias} if several else {}), "kind": kind},
                float(failure is not None and failure.kind == kind),
            )
            for alias, failure in failures.items()
            for kind in KINDS
            if kind not in ("connection_lost", "other")
        ],
    )
    out += family(
        "jobqueue_build_info",
        "Always 1; the versions of jobqueue, Django and Python this process runs.",
        [({"version": _version(), "django": django.get_version(), "python": _PYTHON}, 1.0)],
    )
    out += family(
        "jobqueue_scrape_duration_seconds",
        "Time this scrape spent reading the database, seconds.",
        [({}, time.perf_counter() - started)],
    )
    return "\n".join(out) + "\n"


def _failing_reading(using: str, max_age_s: float) -> tuple[str, float, Failure | None]:
    """Return :func:`_reading`'s, and how the database fails us (None: it does not).

    A read-only database (a failover) still answers reads: once the shared reading is stale
    its write fails, and the gauges are computed afresh without it. A database that fails
    otherwise (not migrated, a privilege revoked) gives no gauges, only its failure. A fresh
    shared reading costs no statement more: the failure shows within one interval.

    Raises:
        django.db.Error: the database cannot be reached (the scrape fails: ``up == 0``).
    """
    try:
        return *_reading(using, max_age_s), None
    except DatabaseError as exc:
        failure = classify(exc, using)
        if failure.kind in ("connection_lost", "other"):
            raise
    if failure.kind == "read_only":
        return compute(using), 0.0, failure
    return "", 0.0, failure


def _reading(using: str, max_age_s: float) -> tuple[str, float]:
    """Return ``(gauge text, its age in seconds)``: the shared reading, or a fresh one."""
    if max_age_s <= 0:
        return compute(using), 0.0
    rows = GaugeSnapshot.objects.using(using).filter(name=SNAPSHOT)
    age = ExpressionWrapper(Now() - F("computed_at"), output_field=DurationField())
    snap = rows.annotate(age=age).values_list("body", "computed_at", "age").first()
    if snap is not None and snap[1] is not None and snap[2].total_seconds() <= max_age_s:
        return snap[0], max(snap[2].total_seconds(), 0.0)
    if snap is None:
        GaugeSnapshot.objects.using(using).bulk_create(
            [GaugeSnapshot(name=SNAPSHOT)], ignore_conflicts=True
        )
    # One process recomputes: the one whose update finds the reading stale and nobody on it.
    stale = Q(computed_at__isnull=True) | Q(computed_at__lt=Now() - timedelta(seconds=max_age_s))
    free = Q(computing_until__isnull=True) | Q(computing_until__lt=Now())
    hold = Now() + timedelta(seconds=COMPUTE_HOLD_S)
    if rows.filter(stale, free).update(computing_until=hold):
        body = compute(using)
        rows.update(body=body, computed_at=Now(), computing_until=None)
        return body, 0.0
    if snap is not None and snap[1] is not None:
        return snap[0], max(snap[2].total_seconds(), 0.0)  # another process is on it
    return compute(using), 0.0  # the very first reading is being made elsewhere


def compute(using: str = "default") -> str:
    """Return the cluster-wide gauges in the text format, read from the database now.

    Every statement on ``jobqueue_job`` is a bounded walk of a partial index (the store's
    ``queue_gauges``, ``dead_gauges``, ``waiting_gauges``, ``running_gauges``,
    ``prunable_by_state``); the rest reads the small worker, pause, breaker, budget and cron
    tables.

    Args:
        using: database alias of the queue.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    store = get_store(using)
    now = db_now(using)
    workers = live_workers(now, using)
    gauges = {g.queue: g for g in store.queue_gauges(COUNT_CAP)}
    dead = store.dead_gauges(COUNT_CAP)
    waiting = store.waiting_gauges(COUNT_CAP)
    running = store.running_gauges(TOP_TENANTS)
    pauses = list(Pause.objects.using(using).values_list("kind", "name")[:1000])
    paused = {name for kind, name in pauses if kind == "queue"}
    paused_types = sorted(name for kind, name in pauses if kind != "queue")
    counted = rollup_totals(now, using)
    # A queue gone idle keeps its series at 0 (they vanished: alerts on them went stale and
    # graphs had gaps): the queues that ran jobs (the counters'), and the declared ones.
    names = set(gauges) | set(dead) | set(waiting) | set(running.by_queue) | paused
    names |= {row["queue"] for row in counted} | declared_queues(using)
    served = served_queues(workers, sorted(names))
    names |= set(served)
    queues = sorted(names)
    now_age = {
        name: max((now - g.oldest_due).total_seconds(), 0.0)
        for name, g in gauges.items()
        if g.oldest_due is not None
    }

    def counts(name: str) -> dict[str, int]:
        g = gauges.get(name)
        return {
            "ready": g.ready if g else 0,
            "scheduled": g.scheduled if g else 0,
            "leased": running.by_queue.get(name, 0),
            "dead": dead.get(name, 0),
            "waiting": waiting.get(name, 0),
        }

    def unserved(name: str) -> bool:
        ready = gauges[name].ready if name in gauges else 0
        return ready > 0 and not served.get(name) and name not in paused

    # Past TOP_QUEUES queues the rest are one series, queue="_other" (issue 33: 10,000 queues
    # were 90,019 samples): sums of their jobs, running jobs, unserved and paused queues, and
    # their oldest job's age.
    depth = {name: sum(counts(name).values()) for name in queues}
    queues, rest = top_queues(queues, depth, now_age)
    per_queue: list[tuple[str, dict[str, int], float, float, float]] = [
        (name, counts(name), now_age.get(name, 0.0), float(unserved(name)), float(name in paused))
        for name in queues
    ]
    if rest:
        summed = dict.fromkeys(("ready", "scheduled", "leased", "dead", "waiting"), 0)
        for name in rest:
            for state, n in counts(name).items():
                summed[state] += n
        per_queue.append(
            (
                OTHER_QUEUES_LABEL,
                summed,
                max((now_age.get(name, 0.0) for name in rest), default=0.0),
                float(sum(unserved(name) for name in rest)),
                float(sum(name in paused for name in rest)),
            )
        )
    other_note = (
        f" Past {_queues.TOP_QUEUES} queues, the deepest and the oldest are listed and the rest"
        f' summed as queue="{OTHER_QUEUES_LABEL}".'
    )
    out: list[str] = []
    by_state = [
        ({"queue": name, "state": k}, float(v))
        for name, state_counts, *_ in per_queue
        for k, v in state_counts.items()
    ]
    out += family(
        "jobqueue_jobs",
        "Jobs by queue and lifecycle state (ready = claimable now; waiting = for parent jobs; "
        "succeeded and cancelled are not counted). "
        f"Exact up to {COUNT_CAP}; {COUNT_CAP} means that many or more." + other_note,
        by_state,
    )
    out += family(
        "jobqueue_oldest_claimable_age_seconds",
        "Age of the oldest job claimable now, by its run_at (future run_at ignored; 0 when "
        "none), seconds." + other_note,
        [({"queue": name}, age) for name, _, age, _, _ in per_queue],
    )
    out += family(
        "jobqueue_queue_unserved",
        "1 if the queue has ready jobs and no live worker serves it (for "
        f'queue="{OTHER_QUEUES_LABEL}": how many of those queues are).',
        [({"queue": name}, flag) for name, _, _, flag, _ in per_queue],
    )
    out += family(
        "jobqueue_queue_paused",
        "1 if the queue is paused (jobqueue.pause): its lag then grows by intent; alert rules on "
        "jobqueue_oldest_claimable_age_seconds can be silenced with `unless` on this (for "
        f'queue="{OTHER_QUEUES_LABEL}": how many of those queues are).',
        [({"queue": name}, flag) for name, _, _, _, flag in per_queue],
    )
    out += family(
        "jobqueue_job_type_paused",
        "1 per paused job type (jobqueue.pause_type).",
        [({"type": name}, 1.0) for name in paused_types],
    )
    out += family(
        "jobqueue_running_jobs",
        "Leased (running) jobs by queue." + other_note,
        [({"queue": name}, float(c["leased"])) for name, c, *_ in per_queue],
    )
    out += family(
        "jobqueue_running_jobs_by_tenant",
        f"Leased (running) jobs of the {TOP_TENANTS} tenants running the most.",
        [({"tenant": tenant}, float(n)) for tenant, n in running.top_tenants],
    )
    limits = ConcurrencyLimits(overrides=get_settings().concurrency_limits)
    out += family(
        "jobqueue_concurrency_running",
        f"Leased (running) jobs of the {TOP_TENANTS} concurrency keys running the most.",
        [({"key": key}, float(n)) for key, n, _ in running.top_keys],
    )
    out += family(
        "jobqueue_concurrency_limit",
        "The concurrency limit of each key in jobqueue_concurrency_running (the setting's, "
        "else the one its jobs were enqueued with).",
        [
            ({"key": key}, float(limit))
            for key, _, stored in running.top_keys
            if (limit := limits.limit_of(key, stored)) is not None
        ],
    )
    out += family(
        "jobqueue_workers_alive",
        "Worker processes that heartbeated within three heartbeat intervals.",
        [({}, float(len(workers)))],
    )
    listening = [w.listener_up for w in workers if w.listener_up is not None]
    # Counts, not a series per process: worker ids and pids change at every recycle (issue 31).
    out += family(
        "jobqueue_worker_listeners",
        "Live worker processes by the state of their LISTEN connection (down: the worker polls "
        "every second until it is back); workers that poll without LISTEN are not counted.",
        [
            ({"state": "up"}, float(sum(1 for up in listening if up))),
            ({"state": "down"}, float(sum(1 for up in listening if not up))),
        ],
    )
    breakers = open_breakers(using)
    out += family(
        "jobqueue_breakers_open",
        "Dependency circuit breakers that are open or half-open.",
        [({}, float(len(breakers)))],
    )
    out += family(
        "jobqueue_breaker_open",
        "1 per dependency whose breaker is open or half-open (with its state).",
        [({"dependency": b.name, "state": b.state}, 1.0) for b in breakers],
    )
    out += family(
        "jobqueue_retry_budget_tokens",
        "Retry tokens left per queue (negative: retries are being delayed).",
        [({"queue": b.queue}, b.tokens) for b in RetryBudget.objects.using(using)[:200]],
    )
    out += _rate_limit_families(store)
    entries = list(
        CronEntry.objects.using(using)
        .values_list("name", "enabled", "last_fired_at", "next_fire_at")
        .order_by("name")[:1000]
    )
    # Every entry has a sample, fired or not (issue 31: one that never fired had none).
    out += family(
        "jobqueue_cron_last_fire_timestamp_seconds",
        "Each cron entry's latest fire time, Unix time (database clock); 0 if it never fired. "
        "time() - this is its age.",
        [({"entry": name}, fired.timestamp() if fired else 0.0) for name, _, fired, _ in entries],
    )
    out += family(
        "jobqueue_cron_overdue_seconds",
        "How long past its next fire time each enabled cron entry is (0 while on time), seconds: "
        "grows when no leader fires it.",
        [
            ({"entry": name}, max((now - due).total_seconds(), 0.0) if due else 0.0)
            for name, enabled, _, due in entries
            if enabled
        ],
    )
    out += family(
        "jobqueue_cron_enabled",
        "1 per cron entry that is enabled, 0 per disabled one.",
        [({"entry": name}, float(enabled)) for name, enabled, _, _ in entries],
    )
    prunable = awaiting_prune(get_settings().retention_seconds, now, using)
    out += family(
        "jobqueue_rows_awaiting_prune",
        "Finished jobs past their state's RETENTION, not yet deleted (exact up to "
        f"{EXACT_UP_TO}, PostgreSQL's estimate above).",
        [({"state": state}, float(n)) for state, n in prunable.items()],
    )
    pruned = (
        GaugeSnapshot.objects.using(using)
        .filter(name=LAST_PRUNE, computed_at__isnull=False)
        .values_list("body", "computed_at")
        .first()
    )
    recycled = dict(
        GaugeSnapshot.objects.using(using)
        .filter(name__in=[f"{RECYCLES}:{reason}" for reason in RECYCLE_REASONS])
        .values_list("name", "body")
    )
    out += family(
        "jobqueue_worker_recycles_total",
        "Worker processes that ended to be replaced, by reason: overrun (handlers ran past their "
        "timeout and kept their threads: a job type that does not stop), max_tasks, or memory "
        "(resident memory past --max-memory-per-child).",
        [
            ({"reason": reason}, float(recycled.get(f"{RECYCLES}:{reason}") or 0))
            for reason in RECYCLE_REASONS
        ],
        "counter",
    )
    stalls = dict(
        GaugeSnapshot.objects.using(using)
        .filter(Q(name__startswith=LOOP_STALLS_PREFIX) | Q(name__startswith=LOOP_STALL_MS_PREFIX))
        .values_list("name", "body")[:2000]
    )
    stalled_types = sorted(
        name.removeprefix(LOOP_STALLS_PREFIX)
        for name in stalls
        if name.startswith(LOOP_STALLS_PREFIX)
    )
    out += family(
        "jobqueue_event_loop_stalls_total",
        "Steps of async def handlers that held their worker's event loop for 100 ms or more (a "
        "blocking call in async code: every async job of that process waited), by job type.",
        [({"job_type": t}, float(stalls[f"{LOOP_STALLS_PREFIX}{t}"])) for t in stalled_types],
        "counter",
    )
    out += family(
        "jobqueue_event_loop_stalled_seconds_total",
        "How long those stalls held the event loop, seconds, by job type: its rate is the share "
        "of time a worker's async jobs could not run (the loop's lag).",
        [
            ({"job_type": t}, float(stalls.get(f"{LOOP_STALL_MS_PREFIX}{t}") or 0) / 1000)
            for t in stalled_types
        ],
        "counter",
    )
    # Absent until a pruner (the worker's or prunejobs) has run once.
    out += family(
        "jobqueue_last_prune_duration_seconds",
        "How long the last prune (worker pruner or prunejobs) took, seconds.",
        [({}, float(pruned[0]))] if pruned else [],
    )
    out += family(
        "jobqueue_last_prune_timestamp_seconds",
        "When the last prune ended, Unix time (database clock).",
        [({}, pruned[1].timestamp())] if pruned and pruned[1] else [],
    )
    deaths = (
        GaugeSnapshot.objects.using(using)
        .filter(name__startswith=DEATHS_PREFIX)
        .values_list("name", "body")[:100]
    )
    out += family(
        "jobqueue_worker_process_deaths_total",
        "Supervised worker processes that died, by cause (a signal, OOM when the kernel said "
        "so, or an exit status), counted by their supervisors for the whole cluster.",
        [({"cause": name[len(DEATHS_PREFIX) :]}, float(body or 0)) for name, body in deaths],
        "counter",
    )
    for rolled in rollup_families(now, using, counted):
        if rolled.kind == "histogram":
            out += histogram(rolled.name, rolled.help, rolled.series)
        else:
            out += family(rolled.name, rolled.help, rolled.samples, rolled.kind)
    for name, help_text, samples in outbox_families(using):
        out += family(name, help_text, samples)
    return "\n".join(out) + "\n"


def _rate_limit_families(store: Store) -> list[str]:
    """Return the rate limiters' gauges: rate, tokens now, held jobs (``RATE_LIMITS``)."""
    rows = store.rate_limit_rows(rate_limits(), COUNT_CAP)[:MAX_LIMITERS]
    out = family(
        "jobqueue_rate_limit_rate",
        "Each rate limiter's declared rate (RATE_LIMITS), jobs per second.",
        [({"limiter": r.key}, r.rate) for r in rows],
    )
    out += family(
        "jobqueue_rate_limit_tokens",
        "Tokens in each rate limiter's bucket now (below 1: it holds its jobs back).",
        [({"limiter": r.key}, r.tokens) for r in rows],
    )
    out += family(
        "jobqueue_rate_limit_held_jobs",
        "Due jobs each rate limiter holds back now (0 while it has a token). Exact up to "
        f"{COUNT_CAP}; {COUNT_CAP} means that many or more.",
        [({"limiter": r.key}, float(r.held)) for r in rows],
    )
    return out


def cached_view(
    seconds: float = 5.0, *, cache: str = "default", using: str | None = None
) -> Callable[[HttpRequest], HttpResponse]:
    """Return a view that serves :func:`collect`'s text from Django's cache for ``seconds``.

    The gauges are computed at most once per ``seconds`` for the whole cluster either way
    (the shared reading, :func:`collect`); the cache also saves the one read of that row.

    Args:
        seconds: how long one reading is served, 0.1 to 3600 (your scrape interval suits).
        cache: alias of ``CACHES``.
        using: one database alias (default: every queue database, :func:`collect`).

    Raises:
        ValueError: ``seconds`` is out of range.
    """
    if not 0.1 <= seconds <= 3600:
        raise ValueError(f"seconds must be from 0.1 to 3600, got {seconds!r}")
    key = f"jobqueue:metrics:{using or '*'}"

    def cached(request: HttpRequest) -> HttpResponse:
        refused = refusal(request)
        if refused is not None:
            return refused
        shared = caches[cache]
        text = shared.get(key)
        if text is None:
            text = collect(using, max_age_s=seconds)
            shared.set(key, text, seconds)
        return HttpResponse(text, content_type=CONTENT_TYPE)

    cached.jobqueue_metrics = True  # type: ignore[attr-defined]  # found by the system check
    return cached


def allowed(request: HttpRequest) -> bool:
    """Return whether ``request`` may read the metrics.

    Allowed: anyone when ``JOBQUEUE["METRICS_PUBLIC"]`` is True (a private network's opt-in);
    a request with ``Authorization: Bearer <JOBQUEUE["METRICS_TOKEN"]>`` (what Prometheus's
    ``authorization`` scrape option sends; compared in constant time); a signed-in staff user.
    Everyone else is refused: the metrics name queues, job types and tenants.
    """
    conf = get_settings()
    if conf.metrics_public:
        return True
    if conf.metrics_token is not None:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), conf.metrics_token.encode()
        ):
            return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff)


def refusal(request: HttpRequest) -> HttpResponse | None:
    """Return the 401 answer for a request :func:`allowed` refuses, or None if it may read."""
    if allowed(request):
        return None
    response = HttpResponse(
        "The jobqueue metrics need a bearer token (JOBQUEUE['METRICS_TOKEN'], sent as "
        "'Authorization: Bearer <token>'), a staff session, or JOBQUEUE['METRICS_PUBLIC'] = True "
        "on a private network.\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="jobqueue metrics"'
    return response


def view(request: HttpRequest) -> HttpResponse:
    """Answer a Prometheus scrape with :func:`collect` of every queue database.

    The gauges are the shared reading, at most ``METRICS_INTERVAL_SECONDS`` old.

    Anonymous requests are refused (401) unless a setting says otherwise (:func:`allowed`):
    ``JOBQUEUE["METRICS_TOKEN"]`` for Prometheus's bearer token, ``METRICS_PUBLIC`` to opt in
    on a private network; a staff session may always read them.
    """
    return refusal(request) or HttpResponse(collect(), content_type=CONTENT_TYPE)


view.jobqueue_metrics = True  # type: ignore[attr-defined]  # found by the system check


__all__ = [
    "CONTENT_TYPE",
    "allowed",
    "cached_view",
    "collect",
    "compute",
    "refusal",
    "view",
]


#: Rows counted exactly per state in one scrape; past this, the planner's estimate.
EXACT_UP_TO = 10_000


def awaiting_prune(
    retention: Mapping[str, float | None],
    now: datetime,
    using: str = "default",
    exact_up_to: int = EXACT_UP_TO,
) -> dict[str, int]:
    """Return finished state -> jobs past its retention (FIELD-CASES 31's gauge), bounded.

    ``prunejobs --dry-run`` counts exactly; a scrape every few seconds must not walk a backlog of
    millions. So this counts at most :data:`EXACT_UP_TO` rows per state (the store's
    ``prunable_by_state``: a range of the finished index (state, finished_at) read in its own
    order, never the table), and past that gives PostgreSQL's estimate of the whole range (one
    EXPLAIN, no rows read). Elsewhere (SQLite, no estimate) it reads as the cap.

    Args:
        retention: state -> seconds kept (None: kept forever, left out of the result).
        now: the instant retention is measured from (the database clock).
        using: database alias of the queue.
        exact_up_to: most rows counted per state; a bigger backlog is the planner's estimate
            on PostgreSQL (never less than this).
    """
    kept = {state: float(s) for state, s in retention.items() if s is not None}
    if not kept:
        return {}
    store = get_store(using)
    counts = store.prunable_by_state(kept, exact_up_to, now)
    for state, n in counts.items():
        if n >= exact_up_to:
            estimate = store.estimate_prunable(state, kept[state], now)
            counts[state] = max(estimate or 0, exact_up_to)
    return counts
