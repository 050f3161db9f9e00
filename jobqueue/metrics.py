"""Prometheus metrics: a Django view in the text exposition format, mounted by the site.

Mount it yourself, protected as your site chooses (an internal-only URL, a reverse-proxy rule,
or a decorator)::

    # urls.py
    import jobqueue.metrics

    urlpatterns = [path("metrics/", jobqueue.metrics.view), ...]

Or ``jobqueue.metrics.cached_view(15)`` to compute the gauges once per 15 s for every process
that shares your cache (FIELD-CASES 30: one reading per interval for the cluster).

Every value is a gauge read from the database at scrape time through an index (the claim,
running, lease, finished and dead partial indexes of ``jobqueue_job``) or from the small worker,
breaker, budget and cron tables, so a scrape stays cheap with millions of finished rows
(FIELD-CASES 30): succeeded and cancelled totals, which only grow until pruned, are deliberately
not counted; ``jobqueue_rows_awaiting_prune`` says how many of them are past retention.
Outcome rates and the pickup/run histograms come from the per-minute rollup the workers write
(``jobqueue/ops/rates.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from django.core.cache import caches
from django.db.models import Count
from django.http import HttpRequest, HttpResponse

from .conf import get_settings
from .models import CronEntry, Job, RetryBudget
from .ops.clock import db_now
from .ops.prunable import EXACT_UP_TO, awaiting_prune
from .ops.queues import live_workers, open_breakers, queue_status
from .ops.rates import families as rollup_families
from .states import JobState

#: The exposition format's media type.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Tenants listed in ``jobqueue_running_jobs_by_tenant`` (the most running first).
TOP_TENANTS = 20

Sample = tuple[dict[str, str], float]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def family(name: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    """Return the lines of one gauge family: HELP, TYPE and a line per sample.

    Args:
        name: the metric name.
        help_text: one line saying what it measures, with its unit.
        samples: ``(labels, value)`` pairs; label values are escaped here.
    """
    lines = [f"# HELP {name} {_escape(help_text)}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")
    return lines


def collect(using: str = "default") -> str:
    """Return every metric in the Prometheus text format (version 0.0.4).

    Args:
        using: database alias of the queue.

    Raises:
        django.db.Error: the database cannot be reached (the view answers 500, and Prometheus
            records the scrape as failed: ``up == 0``).
    """
    started = time.perf_counter()
    now = db_now(using)
    workers = live_workers(now, using)
    queues = queue_status(now, using, workers)
    jobs = Job.objects.using(using)
    out: list[str] = []
    by_state = [
        ({"queue": q.name, "state": state}, float(getattr(q, state)))
        for q in queues
        for state in ("ready", "scheduled", "leased", "dead")
    ]
    out += family(
        "jobqueue_jobs",
        "Jobs by queue and lifecycle state (ready = claimable now; succeeded and cancelled "
        "are not counted).",
        by_state,
    )
    out += family(
        "jobqueue_oldest_claimable_age_seconds",
        "Age of the oldest job claimable now, by its run_at (0 when none), seconds.",
        [({"queue": q.name}, q.lag_s or 0.0) for q in queues],
    )
    out += family(
        "jobqueue_queue_unserved",
        "1 if the queue has ready jobs and no live worker serves it.",
        [({"queue": q.name}, float(q.unserved)) for q in queues],
    )
    out += family(
        "jobqueue_running_jobs",
        "Leased (running) jobs by queue.",
        [({"queue": q.name}, float(q.leased)) for q in queues],
    )
    tenants = (
        jobs.filter(state=JobState.LEASED)
        .values("tenant_id")
        .annotate(n=Count("*"))
        .order_by("-n", "tenant_id")[:TOP_TENANTS]
    )
    out += family(
        "jobqueue_running_jobs_by_tenant",
        f"Leased (running) jobs of the {TOP_TENANTS} tenants running the most.",
        [({"tenant": r["tenant_id"]}, float(r["n"])) for r in tenants],
    )
    out += family(
        "jobqueue_workers_alive",
        "Worker processes that heartbeated within three heartbeat intervals.",
        [({}, float(len(workers)))],
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
    entries = (
        CronEntry.objects.using(using)
        .filter(last_fired_at__isnull=False)
        .values_list("name", "last_fired_at")
        .order_by("name")[:1000]
    )
    out += family(
        "jobqueue_cron_last_fire_age_seconds",
        "Seconds since each cron entry's latest fire time (entries that never fired: absent).",
        [
            ({"entry": name}, max((now - fired).total_seconds(), 0.0))
            for name, fired in entries
            if fired is not None
        ],
    )
    prunable = awaiting_prune(get_settings().retention_seconds, now, using)
    out += family(
        "jobqueue_rows_awaiting_prune",
        "Finished jobs past their state's RETENTION, not yet deleted (exact up to "
        f"{EXACT_UP_TO}, PostgreSQL's estimate above).",
        [({"state": state}, float(n)) for state, n in prunable.items()],
    )
    for name, help_text, samples in rollup_families(now, using):
        out += family(name, help_text, samples)
    out += family(
        "jobqueue_scrape_duration_seconds",
        "Time this scrape spent reading the database, seconds.",
        [({}, time.perf_counter() - started)],
    )
    return "\n".join(out) + "\n"


def cached_view(
    seconds: float = 5.0, *, cache: str = "default", using: str = "default"
) -> Callable[[HttpRequest], HttpResponse]:
    """Return a view that serves :func:`collect`'s text from Django's cache for ``seconds``.

    With a cache every process shares (Redis, Memcached, the database cache), the gauges are
    computed at most once per ``seconds`` for the whole cluster, however many processes are
    scraped (FIELD-CASES 30); with the per-process local-memory cache, once per process.

    Args:
        seconds: how long one reading is served, 0.1 to 3600 (your scrape interval suits).
        cache: alias of ``CACHES``.
        using: database alias of the queue.

    Raises:
        ValueError: ``seconds`` is out of range.
    """
    if not 0.1 <= seconds <= 3600:
        raise ValueError(f"seconds must be from 0.1 to 3600, got {seconds!r}")
    key = f"jobqueue:metrics:{using}"

    def cached(request: HttpRequest) -> HttpResponse:
        shared = caches[cache]
        text = shared.get(key)
        if text is None:
            text = collect(using)
            shared.set(key, text, seconds)
        return HttpResponse(text, content_type=CONTENT_TYPE)

    return cached


def view(request: HttpRequest) -> HttpResponse:
    """Answer a Prometheus scrape with :func:`collect` of the ``default`` database.

    The view does no access control of its own: mount it where only your scraper reaches it,
    or wrap it (``staff_member_required(jobqueue.metrics.view)``).
    """
    return HttpResponse(collect(), content_type=CONTENT_TYPE)


__all__ = ["CONTENT_TYPE", "cached_view", "collect", "family", "view"]
