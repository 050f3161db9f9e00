"""Admin render times on a big jobs table, and bulk retry of dead letters, on PostgreSQL.

    .venv/bin/python bench/admin.py [--finished 1000000] [--live 100000] [--runs 7]

Recreates the database named by BENCH_ADMIN_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench_admin), migrates it, and fills it with
INSERT … SELECT generate_series: --finished finished jobs (94 % succeeded, 3 % dead with three
error entries and tracebacks, 3 % cancelled, finished over the last 30 days) and --live live jobs
(60 % ready over the last ten minutes, 35 % scheduled, 5 % leased), five queues, twelve job types,
200 tenants, 20 worker rows; then VACUUM ANALYZE, as autovacuum would have done.

Then it renders each admin page through Django's test client as a superuser, one warm-up and
--runs timed requests each, and prints the median and the slowest; and it retries 5,000 dead
letters from the dead-letter page ("select all", confirmation page, then the retry) in one
request, --runs times (setting them dead again between runs, untimed), beside 5,000 calls of
jobqueue.retry() for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _common import bench_env, recreate_database

URL = os.environ.get(
    "BENCH_ADMIN_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench_admin"
)
ENV = bench_env(URL)

QUEUES = ["emails", "payments", "reports", "webhooks", "default"]
TYPES = [
    "shop.jobs." + name
    for name in (
        "send_receipt",
        "charge_card",
        "refund",
        "nightly_report",
        "export_csv",
        "sync_inventory",
        "notify_partner",
        "resize_image",
        "webhook_delivery",
        "reindex_search",
        "expire_carts",
        "welcome_email",
    )
]
BULK_TYPE = "bench.bulk_retry"
BULK = 5000


def setup_database() -> None:
    recreate_database(URL, ENV)


COLUMNS = (
    "queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,"
    " leased_by, errors, dead_reason, created_at, started_at, finished_at, lease_token,"
    " lease_until"
)
ERRORS = """jsonb_build_array(
    jsonb_build_object('kind', 'error', 'attempt', 1, 'at', ts, 'worker', 'web-1:4242:a1b2c3',
        'type', 'ConnectionError', 'message', 'partner API unavailable (503)',
        'traceback', repeat('  File "shop/jobs.py", line 42, in charge_card\\n', 12)),
    jsonb_build_object('kind', 'error', 'attempt', 2, 'at', ts, 'worker', 'web-2:977:d4e5f6',
        'type', 'ConnectionError', 'message', 'partner API unavailable (503)',
        'traceback', repeat('  File "shop/jobs.py", line 42, in charge_card\\n', 12)),
    jsonb_build_object('kind', 'error', 'attempt', 3, 'at', ts, 'worker', 'web-1:4242:a1b2c3',
        'type', 'ConnectionError', 'message', 'partner API unavailable (503)',
        'traceback', repeat('  File "shop/jobs.py", line 42, in charge_card\\n', 12)))"""


def fill(finished: int, live: int) -> float:
    from django.db import connection

    started = time.perf_counter()
    queues = "ARRAY[" + ",".join(f"'{q}'" for q in QUEUES) + "]"
    types = "ARRAY[" + ",".join(f"'{t}'" for t in TYPES) + "]"
    payload = (
        "jsonb_build_object('order_id', g, 'email', 'customer' || g || '@example.com', "
        "'card_token', md5(g::text), 'items', jsonb_build_array(g %% 7, g %% 11))"
    )
    with connection.cursor() as cur:
        # Finished: 94 % succeeded, 3 % dead, 3 % cancelled, over the last 30 days (oldest first).
        cur.execute(
            f"""
            INSERT INTO jobqueue_job ({COLUMNS})
            SELECT ({queues})[1 + g %% 5],
                   CASE WHEN s = 'dead' AND g %% 6 = 0 THEN '{BULK_TYPE}'
                        ELSE ({types})[1 + g %% 12] END,
                   {payload}, 0, 'tenant-' || (g %% 200), s, ts, 1, 3, 30, '',
                   CASE WHEN s = 'dead' THEN {ERRORS} ELSE '[]'::jsonb END,
                   CASE WHEN s = 'dead' THEN 'attempts_exhausted' ELSE '' END,
                   ts, ts, ts + interval '1 second', NULL, NULL
            FROM generate_series(1, %(n)s) AS g,
                 LATERAL (SELECT now() - interval '30 days' * (1 - g::float8 / %(n)s) AS ts,
                                 CASE WHEN g %% 100 < 94 THEN 'succeeded'
                                      WHEN g %% 100 < 97 THEN 'dead'
                                      ELSE 'cancelled' END AS s) AS x
            """,
            {"n": finished},
        )
        # Live: 60 % ready (waiting up to ten minutes), 35 % scheduled, 5 % leased.
        cur.execute(
            f"""
            INSERT INTO jobqueue_job ({COLUMNS})
            SELECT ({queues})[1 + g %% 5], ({types})[1 + g %% 12], {payload}, 0,
                   'tenant-' || (g %% 200), s,
                   CASE WHEN s = 'scheduled' THEN now() + (g %% 3600) * interval '1 second'
                        ELSE now() - (g %% 600) * interval '1 second' END,
                   CASE WHEN s = 'ready' THEN 0 ELSE g %% 2 + (s = 'leased')::int END, 8, 30,
                   CASE WHEN s = 'leased' THEN 'web-' || (g %% 20) ELSE '' END,
                   '[]'::jsonb, '', now() - interval '10 minutes', NULL, NULL,
                   CASE WHEN s = 'leased' THEN gen_random_uuid() END,
                   CASE WHEN s = 'leased' THEN now() + interval '30 seconds' END
            FROM generate_series(1, %(n)s) AS g,
                 LATERAL (SELECT CASE WHEN g %% 100 < 60 THEN 'ready'
                                      WHEN g %% 100 < 95 THEN 'scheduled'
                                      ELSE 'leased' END AS s) AS x
            """,
            {"n": live},
        )
        cur.execute(
            """
            INSERT INTO jobqueue_worker (worker_id, host, pid, queues, concurrency, started_at,
                                         last_seen_at, heartbeat_interval_s, running_jobs, status)
            SELECT 'web-' || g || ':' || (1000 + g) || ':bench', 'web-' || g, 1000 + g,
                   '["emails", "payments", "default"]'::jsonb, 10, now() - interval '1 hour',
                   now() - CASE WHEN g > 17 THEN interval '1 hour' ELSE interval '1 second' END,
                   10, 10, 'running'
            FROM generate_series(1, 20) AS g
            """
        )
        cur.execute("VACUUM ANALYZE jobqueue_job")
        cur.execute("SELECT pg_size_pretty(pg_total_relation_size('jobqueue_job'))")
        print(f"jobs table with indexes: {cur.fetchone()[0]}")
    return time.perf_counter() - started


def timed(fn, runs: int) -> tuple[float, float]:
    fn()  # warm-up: connection, template loading, plan caches
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), max(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="reuse the filled database")
    args = parser.parse_args()

    if not args.keep:
        setup_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection, transaction
    from django.test import Client, override_settings

    import jobqueue
    from jobqueue.models import Job

    if not args.keep:
        seconds = fill(args.finished, args.live)
        print(f"filled {args.finished:,} finished + {args.live:,} live jobs in {seconds:.0f} s")
    user, _ = User.objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    dead_id = Job.objects.filter(state="dead").values_list("id", flat=True).first()
    newest = Job.objects.order_by("-id").values_list("id", flat=True).first()

    def page(url: str):
        def get() -> None:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return get

    pages = [
        ("dashboard", "/admin/jobqueue/job/dashboard/"),
        ("job list, first page", "/admin/jobqueue/job/"),
        ("job list, page 200", "/admin/jobqueue/job/?p=200"),
        ("job list, state=dead", "/admin/jobqueue/job/?state=dead"),
        ("job list, state=ready, queue=emails", "/admin/jobqueue/job/?state=ready&queue=emails"),
        ("job list, retrying", "/admin/jobqueue/job/?state=retrying"),
        ("job list, tenant=tenant-7", "/admin/jobqueue/job/?tenant=tenant-7"),
        ("job list, search by id", f"/admin/jobqueue/job/?q={newest}"),
        ("dead letters, first page", "/admin/jobqueue/deadletter/"),
        ("dead letters, reason filter", "/admin/jobqueue/deadletter/?reason=attempts_exhausted"),
        ("job detail (dead, 3 tracebacks)", f"/admin/jobqueue/job/{dead_id}/change/"),
    ]
    print(f"\n{'page (Django test client, ms)':<40} {'median':>8} {'max':>8}")
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        for label, url in pages:
            median, worst = timed(page(url), args.runs)
            print(f"{label:<40} {median:>8.0f} {worst:>8.0f}")

        bulk_ids = list(Job.objects.filter(type=BULK_TYPE).values_list("id", flat=True)[:BULK])
        if len(bulk_ids) < BULK:
            print(f"(only {len(bulk_ids)} dead letters of {BULK_TYPE}: use --finished 1000000)")
        others = Job.objects.filter(type=BULK_TYPE).exclude(id__in=bulk_ids)
        others.update(type=TYPES[0])
        url = f"/admin/jobqueue/deadletter/?type={BULK_TYPE}"
        first_page = [str(i) for i in bulk_ids[:50]]

        def reset() -> None:
            with connection.cursor() as cur:
                cur.execute(
                    "UPDATE jobqueue_job SET state = 'dead', attempts = 3, run_at = now(),"
                    " finished_at = now(), dead_reason = 'attempts_exhausted',"
                    " errors = errors - (jsonb_array_length(errors) - 1)"
                    " WHERE id = ANY(%s)",
                    [bulk_ids],
                )

        confirm_ms, retry_ms, per_row_ms = [], [], []
        for _ in range(args.runs):
            reset()
            started = time.perf_counter()
            response = client.post(
                url,
                {
                    "action": "retry_jobs",
                    "select_across": "1",
                    "index": "0",
                    "_selected_action": first_page,
                },
            )
            confirm_ms.append((time.perf_counter() - started) * 1000)
            assert f"retry {len(bulk_ids)} jobs".encode() in response.content
            started = time.perf_counter()
            response = client.post(
                url,
                {
                    "action": "retry_jobs",
                    "select_across": "1",
                    "post": "yes",
                    "_selected_action": first_page,
                },
            )
            retry_ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 302
            assert Job.objects.filter(id__in=bulk_ids, state="ready").count() == len(bulk_ids)
        for _ in range(min(args.runs, 3)):
            reset()
            started = time.perf_counter()
            for job_id in bulk_ids:
                jobqueue.retry(job_id)
            per_row_ms.append((time.perf_counter() - started) * 1000)
            reset()
            started = time.perf_counter()
            with transaction.atomic():
                for job_id in bulk_ids:
                    jobqueue.retry(job_id)
            per_row_ms.append(-(time.perf_counter() - started) * 1000)
        autocommit = [m for m in per_row_ms if m > 0]
        one_tx = [-m for m in per_row_ms if m < 0]
        print(
            f"\n{f'bulk retry of {len(bulk_ids):,} dead letters (ms)':<40} {'median':>8} {'max':>8}"
        )
        for label, samples in (
            ("confirmation page (select all)", confirm_ms),
            ("admin retry request (retry_many)", retry_ms),
            ("jobqueue.retry() per row, autocommit", autocommit),
            ("jobqueue.retry() per row, one tx", one_tx),
        ):
            print(f"{label:<40} {statistics.median(samples):>8.0f} {max(samples):>8.0f}")


if __name__ == "__main__":
    main()
