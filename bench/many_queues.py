"""Ten thousand queues (issue 33 item 2): dashboard, metrics, and a ``*`` worker's drain.

    .venv/bin/python bench/many_queues.py [--queues 10000] [--no-drain]
    BENCH_JOBQUEUE_ROOT=/path/to/before .venv/bin/python bench/many_queues.py   # the "before"

Recreates BENCH_DATABASE_URL (default .../jobqueue_bench), inserts one ready no-op job in each
of --queues queues, and prints: one ``*`` claim of 10 (ms, median of 5), the dashboard's bytes
and render time (Django's test client, a superuser), the metrics' sample count and bytes; then
the time ``runworkers --queues '*' --burst`` takes to drain them, beside one queue of as many
jobs (jobs/s, process start included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)


def fill(queues: int) -> None:
    """One ready no-op job in each of ``queues`` queues (q00000, q00001, ...)."""
    import core

    core.truncate()
    core.sql(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
        " SELECT 'q' || lpad(i::text, 5, '0'), %s, '{}', 0, '', 'ready', now(), 0, 8, 30, '',"
        " '[]', '', now() FROM generate_series(0, %s - 1) AS i",
        [core.NOOP, queues],
    )
    core.sql("ANALYZE jobqueue_job")


def claim_ms() -> float:
    """Median time of one ``*`` claim of 10, ms (the claimed jobs are put back)."""
    from django.db import connection

    from jobqueue.limits.fairness import QueueSelector
    from jobqueue.store import get_store

    store, selector, times = get_store("default"), QueueSelector(["*"]), []
    for _ in range(5):
        start = time.perf_counter()
        jobs = store.claim(selector.queues, "bench", 10, 30.0, plan=selector.plan())
        times.append((time.perf_counter() - start) * 1000)
        selector.claimed(jobs)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobqueue_job SET state = 'ready', attempts = 0 WHERE state = 'leased'"
        )
    return statistics.median(times)


def dashboard() -> tuple[int, float]:
    """Return the dashboard's bytes and render time (s)."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # ALLOWED_HOSTS accepts the test client's "testserver"
    from django.urls import reverse

    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_superuser": True, "is_staff": True}
    )
    client = Client()
    client.force_login(user)
    start = time.perf_counter()
    response = client.get(reverse("admin:jobqueue_dashboard"), HTTP_HOST="testserver")
    assert response.status_code == 200, response.status_code
    return len(response.content), time.perf_counter() - start


def scrape() -> tuple[int, int]:
    """Return the metrics' sample count and bytes (computed now, not the shared reading)."""
    from jobqueue import metrics

    text = metrics.compute()
    return sum(1 for line in text.splitlines() if not line.startswith("#")), len(text.encode())


def drain(queues: int, spread: bool) -> float:
    """Drain ``queues`` jobs (one per queue, or all in one queue) with one ``*`` worker: jobs/s."""
    import core

    if spread:
        fill(queues)
    else:
        core.truncate()
        core.bulk_ready(queues, queue="q00000")
    start = time.perf_counter()
    proc = core.runworkers("--queues", "*", "--burst")
    proc.wait(timeout=3600)
    core.wait_until_done(queues, 10)
    return queues / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--no-drain", action="store_true", help="skip the runworkers drains")
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    fill(args.queues)
    print(f"jobqueue at {ROOT}, {args.queues} queues of one job")
    print(f"'*' claim of 10          {claim_ms():10.1f} ms")
    size, took = dashboard()
    print(f"dashboard                {size / 1000:10.0f} kB {took:8.2f} s")
    samples, size = scrape()
    print(f"metrics                  {samples:10d} samples {size / 1000:8.0f} kB")
    if not args.no_drain:
        print(f"'*' drain, 1 job/queue   {drain(args.queues, True):10.0f} jobs/s")
        print(f"'*' drain, one queue     {drain(args.queues, False):10.0f} jobs/s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
